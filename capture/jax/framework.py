"""JAX and Flax capture: a traced program from ``jax.make_jaxpr``, for the saved input
shapes, dtypes and static Python values (see ``spec/jax-and-flax-graphs.txt``).

What is opened (``recipe.model``):

* a plain JAX function (``@jax.jit`` or not) with an empty ``init``; an ``init.factory``
  may return a configured callable instead (``functools.partial``, an NNX bound method…);
* a Flax Linen class: fields from ``init`` (``args``/``kwargs``), initialised with
  ``jax.random.key(seed)`` and the saved inputs (fresh state, never trained weights;
  ``jax.eval_shape`` gives the variables abstractly, each initializer running once, and
  abstractly), then ``__call__`` traced through ``apply`` (with ``mutable=`` the
  collections besides ``params``, updated ones among the outputs:
  ``capture.jax.linen``); or an ``init.factory`` returning the exact
  selected class bound with ``model.bind(variables)`` (saved weights). The RNG streams a
  factory bound (``model.bind(variables, rngs={"lstm": key})``) are kept; a stream the
  module asks for that nothing gave (dropout, custom names) gets a key derived from the
  seed per stream name; ``meta["rng_streams"]`` says which and where from (``jax_rngs``);
* a Flax NNX class, built by an ``init.factory`` (explicit ``nnx.Rngs``, layers,
  state) or from literal ``init``: a constructor parameter named ``rngs`` or annotated
  ``nnx.Rngs`` that the init leaves unset (discovery marks it ``supplied_by:
  "tensorviz"``, so the setup form omits it) receives ``nnx.Rngs(seed)`` (fresh state).

Every NNX graph node the callable carries (itself, a bound method's ``self``, a
partial's arguments: modules, an ``nnx.Optimizer``, Variables, PyTrees holding them) and
every one among the inputs (``forward(model, x)``) is split (``nnx.split``) outside the
trace and merged inside it, so their state wrappers are cloned in the trace context
(``nnx.jit`` may update temporary state without crossing trace levels); the arrays are
shared, not copied (``capture.jax.nnx_state``).

While ``jax.make_jaxpr`` traces, Flax module calls (NNX methods of the modules among
those nodes, every Linen method call) are recorded as ``module`` groups
(``jax_modules``); the recording only adds name scopes, never equations. The output
structure is read inside the trace, and a collective over an axis nothing binds is
traced with the axis at size 1 (``capture.jax.tracing``).

Inputs: array leaves of registered PyTrees are traced; every other leaf (Python
scalars, strings…) stays static, closed over, so a configured boolean can select
Python control flow. Containers are rebuilt only by JAX's own unflattening, with its
tracers; the capture's structure comes from JAX's key paths. ``meta["input_names"]``
names each traced leaf as a person wrote it: positional arguments after the parameter
of the callable they bind to (``x``, ``w1``), keyword arguments after their key, Linen
variables from their collection (``params.Dense_0.kernel``), NNX state by attribute path
(``lin.kernel``), each continued by its PyTree path.

Setup runs under the profile's device: ``jax.default_device`` scopes the model import,
initialisation, input factories and tracing. Before JAX starts, the worker limits the
platforms it may start to the ones the device needs (``JAX_PLATFORMS=cpu`` for a ``cpu``
capture, unless the person set it: ``capture.jax.platforms``), so a capture never opens
an accelerator it does not use; ``meta["jax_platforms"]`` says what was in force. An
unavailable backend or index fails in :func:`probe_device`, before any workspace code is
imported, without CPU fallback, naming the platforms this JAX has.
"""

from __future__ import annotations

import math
import sys
import warnings
from contextlib import nullcontext
from typing import Any, Callable, cast

from .convert import convert
from .cost import load_rules
from .structures import is_array_leaf, structure_of
from .tracer_errors import plain_sharding_errors
from ..graph.meta import CaptureMeta, JaxPlatforms
from ..graph.model import Capture
from ..recipe import SIXTY_FOUR_BIT_DTYPES, TensorLeaf, leaf_seed
from ..worker.context import CaptureContext, import_framework, parse_device, positional_names
from ..worker.errors import CaptureError
from ..worker.targets import PartialOfClass, partial_of_class
from . import modules as jax_modules
from .names import input_names
from .linen import UPDATED_NOTE, mutable_collections, trusted_params, updated_outputs
from .nnx_state import NnxLift
from .platforms import device_unavailable, select_platforms, started_backends
from .rngs import LinenStreams, bound_streams, init_rngs, input_streams, nnx_streams, supply_rngs
from . import compiled, per_device
from .shardings import JaxShardings, devices_record, recipe_mesh, simulate_devices, traced_input_shardings
from .tracing import trace
from ..worker.plugin_helpers import describe_type, require_model_factory

NO_REQUIRES_GRAD = "JAX has no per-array requires_grad; express grad in the callable (jax.grad, jax.value_and_grad)"
# meta["state"] labels and what each means (meta["state_note"]).
STATE_NOTES = {
    "fresh_init": "freshly initialized state, not trained weights: the Linen module's init with "
    "jax.random.key(seed) and the saved inputs",
    "constructed": "built by the NNX constructor from the literal init: freshly initialised, not trained weights",
    "factory_variables": "the variables the init factory bound with model.bind(variables)",
    "factory_state": "the state of the module the init factory built",
    "callable_state": "the state of the NNX modules the configured callable carries",
    "input_state": "the state of the NNX objects (modules, optimizers, variables) among the inputs",
}
# The state a factory (or the callable, or the inputs) brought is abstract: every array of
# it a jax.ShapeDtypeStruct (nnx.eval_shape, jax.eval_shape). TensorViz's own fresh Linen
# init is abstract too, but it stands for values the init would compute: not said here.
ABSTRACT_STATE_NOTE = (
    "abstract: no weights; {origin} holds shapes and dtypes only (jax.ShapeDtypeStruct, as "
    "nnx.eval_shape or jax.eval_shape builds them): nothing was computed"
)
_ABSTRACT_ORIGINS = {
    "factory_variables": "the variables the init factory returned",
    "factory_state": "the module the init factory built",
    "callable_state": "the NNX modules the configured callable carries",
    "input_state": "the NNX objects among the inputs",
}
# An NNX module built from the literal init with the rngs TensorViz supplied.
NNX_FRESH_NOTE = (
    "freshly initialized state, not trained weights: the NNX constructor ran on the literal init "
    "with rngs=nnx.Rngs(seed)"
)
# The same, built abstractly: shapes and dtypes only, as Linen's fresh init (no initializer
# is compiled and run: XLA compiled each of them, 3.7 s of CPU for a 12-layer transformer).
NNX_ABSTRACT_NOTE = NNX_FRESH_NOTE + ", abstractly (nnx.eval_shape: shapes and dtypes, no weights computed)"

_NARROWING_WARNING = "Explicitly requested dtype"


# --------------------------------------------------------------------------- device


# JAX is imported by the device check; the capture records ``jax.__version__``.
VERSION = ""


def imported_version() -> str:
    """Nothing imported here (the device check imports JAX): keeps ``VERSION``."""
    return ""


def check_supported(version: str) -> None:
    """No run-time floor check for JAX (the dependency probe finds it installed)."""


def probe_device(ctx: CaptureContext) -> None:
    """Check ``ctx.recipe.device`` (and the devices its mesh needs) before anything of the
    workspace is imported."""
    jax = _import_jax(ctx.recipe.device)
    simulate_devices(jax, ctx.recipe)
    _device(jax, ctx.recipe.device)
    if ctx.recipe.mesh is not None:
        recipe_mesh(jax, ctx.recipe)


# What ``JAX_PLATFORMS`` was in force in this worker, and who set it (``select_platforms``).
_platforms = JaxPlatforms()


def _import_jax(device: str | None = None) -> Any:
    """JAX, imported after the platforms it may start are set for ``device`` (the first
    call of a capture names it; later calls only fetch the module)."""
    if device is not None and not _platforms:
        _platforms.update(select_platforms(device))
    return import_framework("jax", "JAX")


def _device(jax: Any, spec: str) -> Any:
    platform, index = parse_device(spec)
    try:
        devices = jax.devices(platform)
    except RuntimeError as exc:
        raise device_unavailable(jax, spec, platform, exc) from exc
    if index >= len(devices):
        valid = f"indices 0-{len(devices) - 1}" if devices else "no valid index"
        raise CaptureError(
            "device",
            f"device {spec} is unavailable: index {index} is out of range, JAX sees {len(devices)} {platform} "
            f"device(s) ({', '.join(str(d) for d in devices) or 'none'}; {valid}); TensorViz does not fall "
            "back to another device.",
            {"device": spec, "index": index, "count": len(devices), "available": [str(d) for d in devices]},
            error_type="DeviceUnavailable",
        )
    return devices[index]


# --------------------------------------------------------------------------- recipe checks


def _check_recipe(ctx: CaptureContext, jax: Any) -> None:
    """Refusals that need no workspace code: run before the model import."""
    recipe = ctx.recipe
    base = f"profiles.{recipe.name}"
    if recipe.kind != "model":
        raise CaptureError(
            "recipe",
            f'kind = "{recipe.kind}" is unavailable for JAX (Jaxpr) captures: express a training step '
            "(jax.grad, an optimizer update) in the selected callable and open it as a model",
            {"key_path": f"{base}.kind"},
        )
    if recipe.mode != "eval" or recipe.grad_enabled:
        raise CaptureError(
            "recipe",
            'JAX captures use mode = "eval" and grad_enabled = false: JAX has no global train mode or '
            "grad switch; pass training flags as explicit inputs and express grad in the callable",
            {"key_path": f"{base}.mode" if recipe.mode != "eval" else f"{base}.grad_enabled"},
        )
    leaves = recipe.tensors()
    grads = [leaf.path for leaf in leaves if leaf.desc.requires_grad]
    if grads:
        raise CaptureError("recipe", f"{grads[0]}: requires_grad = true: {NO_REQUIRES_GRAD}", {"paths": grads})
    needed = recipe.unknown_dims()
    if needed:
        first = needed[0]
        raise CaptureError(
            "recipe",
            f"{len(needed)} input dimension(s) unknown, first {first.section} {first.input} axis {first.axis}"
            f"{' (' + first.name + ')' if first.name else ''}: give them a size to capture; TensorViz does not guess",
            {"needs": [n.to_dict() for n in needed]},
            error_type="InputsNeeded",
        )
    if not _x64_enabled(jax):
        wide = [leaf for leaf in leaves if leaf.desc.dtype in SIXTY_FOUR_BIT_DTYPES]
        if wide:
            raise _x64_refusal(wide[0].desc.dtype, wide[0].path, [leaf.path for leaf in wide])


def _x64_enabled(jax: Any) -> bool:
    try:
        return bool(jax.config.read("jax_enable_x64"))
    except Exception:
        return bool(getattr(jax.config, "jax_enable_x64", False))


def _x64_refusal(dtype: str, where: str, paths: list[str]) -> CaptureError:
    return CaptureError(
        "recipe",
        f"{where}: {dtype} needs JAX_ENABLE_X64=1 in the capture environment; without it JAX would "
        "narrow it to 32 bits silently, and TensorViz refuses silent dtype narrowing",
        {"paths": paths, "dtype": dtype, "environment": {"JAX_ENABLE_X64": "1"}},
    )


# --------------------------------------------------------------------------- inputs


def _tensor_maker(ctx: CaptureContext) -> Callable[[TensorLeaf], Any]:
    """Arrays from tensor descriptions, deterministic per leaf (``leaf_seed``), made with
    NumPy and placed by ``jnp.asarray`` on the default device in force."""
    import jax.numpy as jnp
    import numpy as np

    seed = ctx.recipe.seed

    def make(leaf: TensorLeaf) -> Any:
        desc = leaf.desc
        shape = desc.dims
        dtype = jnp.dtype(desc.dtype)
        g = desc.generator
        rng = np.random.default_rng(leaf_seed(seed, leaf.index))
        n = math.prod(shape)
        if g.kind == "zeros":
            data = np.zeros(shape, dtype)
        elif g.kind == "ones":
            data = np.ones(shape, dtype)
        elif g.kind == "full":
            data = np.full(shape, g.value, dtype)
        elif g.kind == "arange":
            data = np.arange(n).reshape(shape).astype(dtype)
        elif g.kind == "normal":
            data = _real_or_complex(lambda: rng.standard_normal(shape) * g.std + g.mean, dtype)
        elif g.kind == "uniform":
            data = _real_or_complex(lambda: rng.uniform(g.low, g.high, shape), dtype)
        elif g.kind == "randint":
            if desc.dtype == "bool":
                data = rng.integers(g.low, g.high, shape).astype(bool)
            else:
                data = rng.integers(g.low, g.high, shape, dtype=np.dtype(desc.dtype))
        else:  # the recipe layer admits no other generator
            raise CaptureError("recipe", f"{leaf.path}: unknown generator {g.kind!r}")
        return jnp.asarray(data, dtype=dtype)

    return make


def _real_or_complex(draw: Callable[[], Any], dtype: Any) -> Any:
    if dtype.kind == "c":
        return (draw() + 1j * draw()).astype(dtype)
    return draw().astype(dtype)


def _check_factory_leaves(jax: Any, tree: Any, what: str) -> None:
    """A factory's NumPy 64-bit arrays would be narrowed silently when x64 is off."""
    if _x64_enabled(jax):
        return

    def wide(leaf: Any) -> bool:
        dtype = getattr(leaf, "dtype", None)
        return dtype is not None and getattr(dtype, "name", "") in SIXTY_FOUR_BIT_DTYPES and is_array_leaf(leaf)

    if not any(map(wide, jax.tree_util.tree_leaves(tree))):  # (paths only to name one)
        return
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if wide(leaf):
            where = what + jax.tree_util.keystr(path)
            raise _x64_refusal(leaf.dtype.name, where, [where])


class _NarrowingWatch:
    """Turns JAX's "Explicitly requested dtype float64 … is not available" warning, raised
    while workspace code runs with x64 off, into an explicit refusal; other warnings are
    shown as usual."""

    def __init__(self, what: str, files: Any = None) -> None:
        self.what = what
        self.files = files  # to name the workspace line that asked for 64 bits, when the warning says it

    def __enter__(self) -> "_NarrowingWatch":
        self._cm = warnings.catch_warnings(record=True)
        self.records = self._cm.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._cm.__exit__(exc_type, exc, tb)
        narrowed = None
        where = self.what
        for w in self.records:
            text = str(w.message)
            if narrowed is None and _NARROWING_WARNING in text:
                narrowed = text
                rel = self.files.relative(w.filename) if self.files is not None else None
                if rel is not None:
                    where = f"{self.what} ({rel}:{w.lineno})"
            elif _NARROWING_WARNING not in text:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        if narrowed is not None and exc_type is None:
            dtype = next((d for d in SIXTY_FOUR_BIT_DTYPES if d in narrowed), "a 64-bit dtype")
            raise _x64_refusal(dtype, where, [self.what])


# --------------------------------------------------------------------------- the callable


class _Plan:
    """How to call the selected object. ``state`` is a PyTree traced as jaxpr arguments
    before the inputs (Linen variables, NNX state); :meth:`invoke` calls the object on it
    and on the inputs. ``callee`` receives the inputs (the function, the Linen or NNX
    module whose ``__call__`` runs): its signature names them. ``lift``: the NNX graph
    nodes split out of the callable and the inputs (``capture.jax.nnx_state``), whose
    labels name each top-level key of an NNX state. ``mutable``: the Linen collections
    ``apply`` may update (``capture.jax.linen``)."""

    def __init__(self, kind: str, call: Callable[..., Any], state: Any = (), state_key: str | None = None,
                 state_label: str | None = None, fresh_linen: Any = None, state_note: str | None = None,
                 *, callee: Any = None, lift: NnxLift | None = None,
                 rebuild: Callable[[tuple], Any] | None = None) -> None:
        self.kind = kind
        self.call = call
        self.callee = callee
        self.lift = lift
        self.rebuild = rebuild  # NNX: the callable around merged nodes
        self.state = state
        self.state_key = state_key
        self.state_label = state_label
        self.state_note = state_note or (STATE_NOTES[state_label] if state_label else None)
        self.fresh_linen = fresh_linen  # an unbound Linen module to initialise abstractly
        self.mutable: list[str] = []
        self.rng_streams: LinenStreams | None = None  # Linen: where each RNG stream's key came from

    @property
    def module_labels(self) -> list[str]:
        return self.lift.labels if self.lift is not None else []

    @property
    def node_from_inputs(self) -> list[bool]:
        return self.lift.from_inputs if self.lift is not None else []

    def lift_inputs(self, leaves: list, paths: list, n_args: int) -> list[tuple[int, int]]:
        """Lift the NNX graph nodes among the inputs' leaves into the state (split again with
        the callable's own); ``(leaf position, node index)`` per node lifted."""
        if self.lift is None:
            return []
        slots = self.lift.lift_inputs(leaves, paths, self.callee, n_args)
        if slots:
            self.lift.split()
            self.state = self.lift.state
            if self.state_key is None:
                self.state_key, self.state_label = "state", "input_state"
                self.state_note = STATE_NOTES["input_state"]
        return slots

    def invoke(self, state: Any, make_inputs: Callable[[tuple], tuple[tuple, dict]]) -> Any:
        """Inside the trace: the object called on ``state`` and on the inputs
        ``make_inputs(merged NNX nodes)`` builds."""
        if self.lift is not None and self.lift.nodes:
            merged = self.lift.merge(state)
            args, kwargs = make_inputs(merged)
            fn = self.rebuild(merged) if self.rebuild is not None else self.callee
            return fn(*args, **kwargs)
        args, kwargs = make_inputs(())
        return self.call(state, *args, **kwargs)


def _plan(ctx: CaptureContext, target: Any, make_tensor: Callable[[TensorLeaf], Any]) -> _Plan:
    linen = sys.modules.get("flax.linen")
    nnx = sys.modules.get("flax.nnx")
    if ctx.recipe.model_factory:
        return _model_factory_plan(ctx, linen, nnx, target, make_tensor)
    # A partial of a module class with a literal init is built as the class, the partial's
    # arguments first; with an init factory the factory's result is the model, as for any
    # callable (a partial of anything else is a function).
    partial = partial_of_class(target) if ctx.recipe.init.factory is None else None
    module_bases = tuple(m.Module for m in (linen, nnx) if m is not None)
    if partial is not None and module_bases and issubclass(partial.cls, module_bases):
        target = partial.cls
    else:
        partial = None
    if isinstance(target, type):
        if linen is not None and issubclass(target, linen.Module):
            return _linen_class_plan(ctx, target, partial, make_tensor)
        if nnx is not None and issubclass(target, nnx.Module):
            return _nnx_class_plan(ctx, nnx, target, partial, make_tensor)
        raise CaptureError(
            "recipe",
            f"{ctx.recipe.model} is a class but not a flax.linen.Module or flax.nnx.Module subclass; JAX captures "
            "open functions, Linen modules and NNX modules",
        )
    if linen is not None and isinstance(target, linen.Module):
        _require_empty_init(ctx, f"{ctx.recipe.model} is a Linen module instance")
        ctx.after_construction(target, make_tensor)
        if target.scope is not None:
            return _bound_linen(type(target), target, ctx.recipe.model)
        return _fresh_linen(target)
    return _callable_plan(ctx, linen, nnx, target, make_tensor)


def _init_arguments(ctx: CaptureContext, partial: PartialOfClass | None,
                    make_tensor: Callable[[TensorLeaf], Any]) -> tuple[tuple, dict]:
    """The literal init's arguments, after those of the partial the class came in (if any)."""
    args, kwargs = ctx.materialize("init", make_tensor)
    return partial.arguments(args, kwargs) if partial is not None else (args, kwargs)


def _linen_class_plan(ctx: CaptureContext, target: type, partial: PartialOfClass | None,
                      make_tensor: Callable[[TensorLeaf], Any]) -> _Plan:
    """A Linen module class: bound as the init factory returns it, or built from the literal
    init and initialised abstractly."""
    factory = ctx.recipe.init.factory
    if factory is not None:
        with _NarrowingWatch(f"profiles.{ctx.recipe.name}.init.factory"):
            obj = ctx.call_factory(factory)
        ctx.after_construction(obj, make_tensor)
        return _bound_linen(target, obj, factory)
    args, kwargs = _init_arguments(ctx, partial, make_tensor)
    module = target(*args, **kwargs)
    ctx.after_construction(module, make_tensor)
    return _fresh_linen(module)


def _nnx_class_plan(ctx: CaptureContext, nnx: Any, target: type, partial: PartialOfClass | None,
                    make_tensor: Callable[[TensorLeaf], Any]) -> _Plan:
    """An NNX module class: the instance the init factory returns, or one built from the
    literal init with ``nnx.Rngs(seed)`` supplied where the init leaves its rngs unset."""
    recipe = ctx.recipe
    factory = recipe.init.factory
    if factory is not None:
        with _NarrowingWatch(f"profiles.{recipe.name}.init.factory"):
            obj = ctx.call_factory(factory)
        if type(obj) is not target:
            raise CaptureError(
                "recipe",
                f"init factory {factory} returned {describe_type(obj)}; expected an instance of the "
                f"selected NNX class {target.__qualname__}",
                {"expected": target.__qualname__, "found": type(obj).__qualname__},
            )
        ctx.after_construction(obj, make_tensor)
        return _nnx_plan(nnx, obj, "nnx", "factory_state")
    saved_args, saved_kwargs = _init_arguments(ctx, partial, make_tensor)
    args, kwargs, supplied = supply_rngs(nnx, target, saved_args, saved_kwargs, recipe.seed)
    abstract = False
    try:
        with _NarrowingWatch(f"profiles.{recipe.name}.init"):
            # Built abstractly where nothing after the constructor reads its arrays: the
            # fresh weights are never shown, only their shapes and dtypes.
            obj, abstract = _construct_nnx(nnx, target, args, kwargs, bool(supplied) and not recipe.init.then)
    except TypeError as exc:
        if "rngs" not in str(exc).lower():
            raise
        example = _call_example(target.__qualname__, saved_args, saved_kwargs, f"rngs=nnx.Rngs({recipe.seed})")
        raise CaptureError(
            "recipe",
            f"{target.__qualname__} could not be built from the literal init ({exc}). TensorViz passes "
            "rngs=nnx.Rngs(seed) only to a constructor parameter named rngs or annotated nnx.Rngs that "
            f"the init leaves unset; build the module in an init factory instead, e.g. return {example}",
            {"key_path": f"profiles.{recipe.name}.init"},
        ) from exc
    ctx.after_construction(obj, make_tensor)
    if supplied:
        return _nnx_plan(nnx, obj, "nnx", "fresh_init", NNX_ABSTRACT_NOTE if abstract else NNX_FRESH_NOTE)
    return _nnx_plan(nnx, obj, "nnx", "constructed")


def _construct_nnx(nnx: Any, target: type, args: tuple, kwargs: dict, abstract: bool) -> tuple[Any, bool]:
    """``(target(*args, **kwargs), whether it was built abstractly)``. Abstractly
    (``nnx.eval_shape``, the supplied ``nnx.Rngs`` its one traced argument, the literal
    init's values closed over as they are) when asked, unless the constructor needs
    concrete values (it converts an array to a Python number or to NumPy) or touches
    other NNX objects from outside: then it runs again, eagerly."""
    rngs = next((a for a in (*args, *kwargs.values()) if isinstance(a, nnx.Rngs)), None)
    if abstract and rngs is not None:
        def build(inner: Any) -> Any:
            a = tuple(inner if x is rngs else x for x in args)
            k = {name: inner if x is rngs else x for name, x in kwargs.items()}
            return target(*a, **k)

        try:
            with plain_sharding_errors():  # Flax asks each traced RNG count for it: see the module
                return nnx.eval_shape(build, rngs), True
        except _concrete_needed():
            pass
    return target(*args, **kwargs), False


def _concrete_needed() -> tuple[type[BaseException], ...]:
    jax = _import_jax()
    found = [getattr(jax.errors, n, None) for n in _CONCRETE_ERRORS]
    flax_errors = sys.modules.get("flax.errors")
    found.append(getattr(flax_errors, "TraceContextError", None))
    return tuple(t for t in found if isinstance(t, type) and issubclass(t, BaseException))


# JAX's errors for a traced value used where a concrete one is needed.
_CONCRETE_ERRORS = ("ConcretizationTypeError", "TracerArrayConversionError", "TracerBoolConversionError",
                    "TracerIntegerConversionError")


def _model_factory_plan(ctx: CaptureContext, linen: Any, nnx: Any, target: Any,
                        make_tensor: Callable[[TensorLeaf], Any]) -> _Plan:
    """``model_factory = true``: ``model`` names a function (big_vision's ``Model(num_classes,
    variant=…)``) called with the literal init; the Linen module, NNX module or callable it
    returns is planned as one."""
    ref = ctx.recipe.model
    require_model_factory(ctx, target)
    args, kwargs = ctx.materialize("init", make_tensor)
    with _NarrowingWatch(f"profiles.{ctx.recipe.name}.init"):
        obj = target(*args, **kwargs)
    if not callable(obj):
        raise CaptureError("recipe", f"{ref} (model_factory = true) returned {describe_type(obj)}; expected a Flax "
                                     "module or a callable to capture with the inputs")
    ctx.after_construction(obj, make_tensor)
    if linen is not None and isinstance(obj, linen.Module):
        return _bound_linen(type(obj), obj, ref) if obj.scope is not None else _fresh_linen(obj)
    if nnx is not None and isinstance(obj, nnx.Module):
        return _nnx_plan(nnx, obj, "nnx", "constructed")
    if nnx is not None:
        return _nnx_plan(nnx, obj, "function", "callable_state")
    return _Plan("function", lambda state, *a, **k: obj(*a, **k), callee=obj)


def _callable_plan(ctx: CaptureContext, linen: Any, nnx: Any, target: Any,
                   make_tensor: Callable[[TensorLeaf], Any]) -> _Plan:
    """A function (or any callable): the init factory's result, or the target itself with
    an empty init. A Linen module the factory returns is planned as one."""
    ref = ctx.recipe.model
    factory = ctx.recipe.init.factory
    if factory is not None:
        with _NarrowingWatch(f"profiles.{ctx.recipe.name}.init.factory"):
            fn = ctx.call_factory(factory)
        if not callable(fn):
            raise CaptureError("recipe", f"init factory {factory} returned {describe_type(fn)}, which is not callable")
        ctx.after_construction(fn, make_tensor)
        if linen is not None and isinstance(fn, linen.Module):
            # a Linen module as the configured callable: bound ones keep their variables
            # as traced arguments (not closed-over constants), unbound ones start fresh
            return _bound_linen(type(fn), fn, factory) if fn.scope is not None else _fresh_linen(fn)
    else:
        _require_empty_init(ctx, f"{ref} is a plain JAX function: it takes its arguments from inputs, with an empty init",
                            steps=False)
        if not callable(target):
            raise CaptureError("recipe", f"{ref} is {describe_type(target)}, not a function or a Flax module")
        fn = target
    if nnx is not None:
        return _nnx_plan(nnx, fn, "function", "callable_state")
    return _Plan("function", lambda state, *a, **k: fn(*a, **k), callee=fn)


def _call_example(name: str, args: tuple, kwargs: dict, extra: str) -> str:
    """``name(...)`` with the init's values where they read as literals, ``...`` elsewhere."""

    def show(v: Any) -> str:
        if v is None or isinstance(v, (bool, int, float, str)):
            text = repr(v)
            return text if len(text) <= 40 else "..."
        return "..."

    parts = [show(a) for a in args]
    parts += [f"{k}={show(v)}" for k, v in kwargs.items() if k != "rngs"]
    parts.append(extra)
    return f"{name}({', '.join(parts)})"


def _require_empty_init(ctx: CaptureContext, why: str, *, steps: bool = True) -> None:
    """Refuse constructor arguments (and, unless ``steps``, steps after construction:
    a plain function is not built, so ``init.then`` has nothing to act on)."""
    if not ctx.recipe.init.is_empty:
        raise CaptureError(
            "recipe", f"{why}; use init.factory to return a configured callable",
            {"key_path": f"profiles.{ctx.recipe.name}.init"},
        )
    if ctx.recipe.init.then and not steps:
        raise CaptureError(
            "recipe", f"{why}: nothing is built, so init.then has nothing to act on; use init.factory to return "
                      f"a configured callable",
            {"key_path": f"profiles.{ctx.recipe.name}.init.then"},
        )


def _fresh_linen(module: Any) -> _Plan:
    # Streams other than "params" (dropout, custom names) get keys derived from the seed
    # as the module asks for them (capture.jax.rngs).
    streams = LinenStreams()
    plan = _Plan("linen", _linen_call(module, streams, lambda: plan.mutable), state_key="variables",
                 state_label="fresh_init", fresh_linen=module, callee=module)
    plan.rng_streams = streams
    return plan


def _bound_linen(target: type, obj: Any, factory: str) -> _Plan:
    if type(obj) is not target:
        raise CaptureError(
            "recipe",
            f"init factory {factory} returned {describe_type(obj)}; expected the selected Linen class "
            f"{target.__qualname__} bound with model.bind(variables)",
            {"expected": target.__qualname__, "found": type(obj).__qualname__},
        )
    if getattr(obj, "scope", None) is None:
        raise CaptureError(
            "recipe",
            f"init factory {factory} returned an unbound {target.__qualname__}; return "
            "model.bind(variables) with the saved variables (or use a literal init for fresh state)",
        )
    # unbind() drops the RNG streams bind(variables, rngs=...) gave: keep them for apply
    streams = LinenStreams(bound_streams(obj), factory)
    module, variables = cast(Any, obj).unbind()  # a bound instance of the Linen class
    plan = _Plan("linen", _linen_call(module, streams, lambda: plan.mutable), variables, "variables",
                 "factory_variables", callee=module)
    plan.rng_streams = streams
    plan.mutable = mutable_collections(variables)
    return plan


def _linen_call(module: Any, streams: LinenStreams, mutable: Callable[[], list[str]]) -> Callable[..., Any]:
    """``module.apply`` on the variables; with ``mutable=`` the collections besides
    ``params`` (``capture.jax.linen``), returning ``(output, updated)`` then."""

    def call(variables: Any, *args: Any, **kwargs: Any) -> Any:
        collections = mutable()
        if collections:
            kwargs["mutable"] = collections
        return module.apply(variables, *args, rngs=streams.apply_rngs(kwargs), **kwargs)

    return call


def _nnx_plan(nnx: Any, fn: Any, kind: str, label: str, note: str | None = None) -> _Plan:
    """Lift the NNX graph nodes a callable carries (the callable itself, a bound method's
    ``self``, a partial's function and arguments, PyTrees among them) out as one split
    state (``capture.jax.nnx_state``); nodes among the inputs join it later
    (:meth:`_Plan.lift_inputs`)."""
    lift = NnxLift(_import_jax(), nnx)
    rebuild = lift.lift_callable(fn)
    if not lift.nodes:
        return _Plan(kind, lambda state, *a, **k: fn(*a, **k), callee=fn, lift=lift)
    lift.split()
    return _Plan("nnx", lambda state, *a, **k: fn(*a, **k), lift.state, "state", label, state_note=note,
                 callee=fn, lift=lift, rebuild=rebuild)


# --------------------------------------------------------------------------- capture


def capture(ctx: CaptureContext) -> Capture:
    recipe = ctx.recipe
    jax = _import_jax(recipe.device)
    load_rules()  # the cost rules the conversion counts with load with JAX, not while converting
    simulate_devices(jax, recipe)
    _check_recipe(ctx, jax)
    device = _device(jax, recipe.device)
    make_tensor = _tensor_maker(ctx)
    shardings = JaxShardings()
    mesh = None
    if recipe.mesh is not None:
        # Setup, factories and the trace run under the mesh (jax.set_mesh): NNX partitioning
        # annotations and shardings written as bare PartitionSpecs resolve against it.
        mesh = recipe_mesh(jax, recipe)
        shardings.mesh_index(mesh, origin="recipe")
    with jax.default_device(device), (jax.set_mesh(mesh) if mesh is not None else nullcontext()):
        ctx.progress("importing the model", 0.1)
        target = ctx.import_object(recipe.model)
        ctx.before_construction(make_tensor)  # init.before: library state the build reads
        ctx.progress("building the callable", 0.2)
        plan = _plan(ctx, target, make_tensor)
        args, kwargs = _call_inputs(ctx, jax, plan, make_tensor)

        # NNX graph nodes among the inputs (forward(model, x)) join the split state; the
        # other leaves are traced arrays or static values.
        is_node = plan.lift.is_node if plan.lift is not None else None
        flat, treedef = jax.tree_util.tree_flatten_with_path((args, kwargs), is_leaf=is_node)
        leaves = [leaf for _, leaf in flat]
        node_slots = plan.lift_inputs(leaves, [path for path, _ in flat], len(args))
        dynamic = [i for i, leaf in enumerate(leaves) if is_array_leaf(leaf)]

        def make_inputs(dyn: list, merged: tuple) -> tuple[tuple, dict]:
            full = list(leaves)
            for i, v in zip(dynamic, dyn):
                full[i] = v
            for i, node in node_slots:
                full[i] = merged[node]
            return jax.tree_util.tree_unflatten(treedef, full)

        dyn = [leaves[i] for i in dynamic]
        if plan.fresh_linen is not None:
            ctx.progress("initialising the Linen module abstractly (jax.eval_shape)", 0.4)
            module = plan.fresh_linen

            def init(key: Any, dyn: list) -> Any:
                a, k = make_inputs(dyn, ())
                return module.init(init_rngs(key, k), *a, **k)

            # Linen's param_dtype=jnp.float64 asks for 64 bits here (refused, never narrowed).
            with _NarrowingWatch("the Linen module's initialisation", ctx.files):
                plan.state = jax.eval_shape(init, jax.random.key(recipe.seed), dyn)
            plan.mutable = mutable_collections(plan.state)

        def traced(state: Any, dyn: list) -> Any:
            return plan.invoke(state, lambda merged: make_inputs(dyn, merged))

        ctx.progress("tracing with jax.make_jaxpr", 0.5)
        roots = plan.lift.roots() if plan.lift is not None else []
        with jax_modules.intercept(jax, roots) as module_calls, \
                (trusted_params() if plan.fresh_linen is not None else nullcontext()), \
                _NarrowingWatch("the traced program", ctx.files):
            result = trace(jax, traced, plan, recipe.seed, plan.state, dyn)
        input_shardings = traced_input_shardings(jax, shardings, plan.state, dyn,
                                                 shardings.mesh_index(mesh) if mesh is not None else None)
    closed = result.closed
    # XLA compiles the program for the devices while the graph is converted (capture.jax.compiled)
    compiling = compiled.start(jax, recipe, ctx.limits, closed, jax.tree_util.tree_leaves((plan.state, dyn)),
                               input_shardings, mesh, result.axis_env)

    ctx.progress(f"converting {len(closed.jaxpr.eqns):,} top-level equations", 0.8)
    counter = [0]
    state_tree = structure_of(plan.state, counter, static_leaves=False)
    args_tree = structure_of(args, counter, lifted=is_node)
    kwargs_tree = structure_of(kwargs, counter, lifted=is_node)
    if counter[0] != len(closed.jaxpr.invars):
        raise CaptureError(
            "trace",
            f"the traced program has {len(closed.jaxpr.invars)} array arguments but the inputs hold "
            f"{counter[0]} array leaves; TensorViz cannot label them",
        )
    pairs = [["args", args_tree], ["kwargs", kwargs_tree]]
    if plan.state_key is not None:
        pairs.append([plan.state_key, state_tree])
    meta = _meta(jax, recipe, plan, args, kwargs)
    eqns: list = []
    meta["input_names"] = input_names(jax, plan, args_tree, kwargs_tree, state_tree)
    outputs = _outputs(result, plan, state_tree, meta)
    capture = convert(
        closed,
        inputs={"dict": pairs},
        outputs=outputs,
        workspace=ctx.workspace,
        limits=ctx.limits,
        meta=meta,
        module_calls=module_calls.records,
        shardings=shardings,
        input_shardings=input_shardings,
        axis_sizes=dict(result.axis_env),
        eqns_out=eqns,
    )
    capture.devices = devices_record(jax, recipe)
    capture.compiled = _compiled_record(ctx, capture, compiling, eqns)
    # each node's per-device figures, from the splits XLA gave the values where it compiled them
    # (TensorViz's unfused estimate meanwhile when the compiled program follows the graph)
    mesh_index = shardings.mesh_index(mesh) if mesh is not None else None
    stated = [v.sharding for v in capture.values]  # the splits the program states, before any estimate
    per_device.annotate(capture, eqns, getattr(compiling, "instructions", None), mesh_index,
                        (capture.frames, str(ctx.workspace)), getattr(compiling, "xla_flops", None))
    if ctx.after_compile is not None:
        ctx.after_compile = per_device.later(ctx.after_compile, capture, eqns, compiling, mesh_index, stated,
                                             (capture.frames, str(ctx.workspace)))
    if not capture.nodes:
        raise CaptureError(
            "trace",
            f"tracing {recipe.model} recorded no operations (its outputs are its inputs or constants); "
            "nothing to show as a graph",
        )
    ctx.progress("converted", 0.95)
    return capture


def _compiled_record(ctx: CaptureContext, capture: Capture, compiling: Any, eqns: list) -> dict[str, Any] | None:
    """``Capture.compiled``: the program as XLA runs it on the devices, read now when the
    compile has ended (or the caller waits: in-process captures); else, in the worker, a
    pending record, the graph sent first and the compile finished after it
    (``ctx.after_compile``, :mod:`capture.graph.later_compiled`)."""
    if not isinstance(compiling, compiled.Compilation):
        return compiling
    nodes, groups, sources = capture.nodes, capture.groups, (capture.frames, str(ctx.workspace))
    if ctx.graph_first and not compiling.done():
        n = compiling.devices

        def after() -> tuple[dict[str, Any], dict[str, Any]]:
            ctx.progress(f"compiling for {n} device{'' if n == 1 else 's'} (XLA; the graph is shown)", 0.99)
            return compiling.finish(nodes, eqns, groups, sources, deadline=ctx.deadline - 1.0), {}

        ctx.after_compile = after
        return compiling.pending()
    ctx.progress("reading the compiled program (XLA)", 0.9)
    return compiling.finish(nodes, eqns, groups, sources, deadline=ctx.deadline - 1.0)


def _call_inputs(ctx: CaptureContext, jax: Any, plan: _Plan, make_tensor: Any) -> tuple[Any, Any]:
    """``(args, kwargs)`` of the call, built by the recipe; the arrays a factory made (the
    call's, the init's) checked to be arrays."""
    recipe = ctx.recipe
    ctx.progress("building the inputs", 0.3)
    where = f"profiles.{recipe.name}.inputs"
    with _NarrowingWatch(where + (".factory" if recipe.inputs.factory else "")):
        args, kwargs = ctx.inputs_call(make_tensor)
    if recipe.inputs.factory is not None:
        _check_factory_leaves(jax, (args, kwargs), where + ".factory")
    if plan.state_key is not None and plan.fresh_linen is None:
        where = f"profiles.{recipe.name}.init" + (".factory" if recipe.init.factory else "")
        _check_factory_leaves(jax, plan.state, where)
    return args, kwargs


def _outputs(result: Any, plan: _Plan, state_tree: Any, meta: CaptureMeta) -> Any:
    """The capture's output structure (with the state collections the program updates, when
    it may update some); what they are, and the traced axis environment, go to ``meta``."""
    outputs = result.outputs
    if plan.mutable and plan.state_key is not None:
        outputs, updated = updated_outputs(outputs, state_tree, result.closed, plan.state_key)
        if updated:
            meta["updated_collections"] = updated
            meta["updated_note"] = UPDATED_NOTE
    if result.axis_env:
        meta["axis_env"] = result.axis_meta()
    return outputs


def _all_abstract(jax: Any, state: Any) -> bool:
    """Every array of ``state`` a shape-and-dtype placeholder, and at least one."""
    arrays = [leaf for leaf in jax.tree_util.tree_leaves(state) if is_array_leaf(leaf)]
    return bool(arrays) and all(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in arrays)


def _meta(jax: Any, recipe: Any, plan: _Plan, args: tuple = (), kwargs: dict | None = None) -> CaptureMeta:
    meta: CaptureMeta = {
        "model_kind": plan.kind,
        "device": recipe.device,
        "jax_enable_x64": _x64_enabled(jax),
    }
    if _platforms:  # what JAX_PLATFORMS was, who set it, and the backends the capture started
        meta["jax_platforms"] = {**_platforms, "started": started_backends()}
    flax = sys.modules.get("flax")
    if flax is not None and getattr(flax, "__version__", None):
        meta["flax_version"] = flax.__version__
    # Which top-level key of ``capture.inputs`` (beside args/kwargs) holds the model's
    # state ("variables": Linen, "state": NNX; None: a function): the viewer's value roles.
    meta["state_key"] = plan.state_key
    if plan.state_label is not None:
        meta["state"] = plan.state_label
        if plan.state_note is not None:
            meta["state_note"] = plan.state_note
        if plan.state_label in _ABSTRACT_ORIGINS and _all_abstract(jax, plan.state):
            meta["state_abstract"] = True
            meta["state_note"] = ABSTRACT_STATE_NOTE.format(origin=_ABSTRACT_ORIGINS[plan.state_label])
    # The RNG streams the program draws from and where each came from (jax_rngs).
    linen_streams = getattr(plan, "rng_streams", None)
    if linen_streams is not None:
        streams = linen_streams.meta()
    else:
        streams = nnx_streams(jax, plan, recipe.seed, recipe.init.factory, recipe.model)
    # (a Linen apply's rngs keyword among the inputs is counted by its plan already)
    kw = {k: v for k, v in (kwargs or {}).items() if not (linen_streams is not None and k == "rngs")}
    streams += input_streams(jax, tuple(args), kw, positional_names(plan.callee, len(args)))
    if streams:
        meta["rng_streams"] = streams
    return meta
