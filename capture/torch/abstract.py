"""Abstract evidence for Torch (``evidence = "abstract"``): a model built and run with
no parameter storage, nothing computed.

An :class:`AbstractEvidence` holds one ``FakeTensorMode``. The capture builds the model
inside :meth:`~AbstractEvidence.building` (the constructor or the init factory, its
``torch.empty`` and init functions included: every parameter and buffer is a fake
tensor with a shape, a dtype, strides and a device, and no storage), converts anything
still real (a module-level instance, a tensor built at import) with
:meth:`~AbstractEvidence.fake_module` / :meth:`~AbstractEvidence.fake_tree`, and runs
the forward inside :meth:`~AbstractEvidence.running` under the trace's dispatch mode,
which sits above the fake mode and records the same ops an eager run records.

* **Initialisers are skipped.** ``nn.init.*`` and ``Tensor.normal_``-style value writers
  called on a fake tensor return it untouched (there are no values to write; the time
  of each fake dispatch is saved), also through ``nn.init``'s own helpers
  (``trunc_normal_`` redraws until no value is out of bounds: a loop on the data).
* **Small constants while building.** A constructor may compute Python numbers from
  tensors it creates (``[x.item() for x in torch.linspace(0, p, depth)]``,
  ``torch.round(...).int().tolist()`` for stage widths). While building, an op whose
  tensor inputs are all real runs for real when its inputs and outputs hold at most
  :data:`SMALL_CONSTANT_ELEMENTS` elements each (its output size is found by the fake
  mode first, so a large tensor is never allocated). After the build every parameter
  and buffer is fake, so the forward reads no values a checkpoint could have changed.
* **A size that depends on data is a symbol** (as ``torch.export`` does): the fake mode
  has a ``ShapeEnv``, so ``nonzero``, a boolean mask, ``unique``, ``.item()`` give an
  *unbacked* size ``u0`` (bounds where PyTorch knows them: ``nonzero`` of 16 elements
  has 0 ≤ u0 ≤ 16), and the ops after it carry that symbol in their shapes (``[u0, 64]``,
  ``2*u0``). The graph file keeps such a dimension as its text and lists every symbol
  with its bounds and the op that introduced it (:func:`symbol_table`, ``meta["symbols"]``).
* **Only Python control flow that needs a value stops the capture**
  (:func:`data_dependent_failure`): ``if u0 > 0``, ``for e in t.nonzero()`` (a loop over
  a data-dependent count), ``bool(t)``, ``torch.equal``: the model's own Python asks for
  a value nothing computed; the failure names the line, and the way out. So does an op
  with no shape rule; no kernel ever runs on made-up data (``allow_fallback_kernels=False``).
* **A loop over the hit set** (``for expert_idx in expert_hit``, where ``expert_hit`` is a
  ``nonzero`` result): run once per index, every one hit, with the rows routed in it spread
  evenly (:mod:`capture.torch.hit_loops`); the choice is stated in ``meta["assumptions"]``.
* **CPU kernels PyTorch's shape rules are stricter than** (:class:`_ForwardLoops`):
  ``_grouped_mm``'s shape rule checks CUDA's bfloat16-only condition, while the CPU
  kernel also takes float32/float16 (``transformers``' default experts path for a
  float32 model on the CPU); on a CPU device its output is shaped by the same rule with
  the dtype the CPU kernel gives.
* **Libraries that branch on fake tensors** (:class:`LibraryBranches`): a library that
  asks whether a tensor is fake may take another path than in an eager run. The known
  checks are watched during the forward and each one that answered "fake" is listed in
  ``meta["abstract_differences"]`` with its call sites and what it changes.

Torch is imported at module level: one of the worker's framework modules, imported only
by ``capture.torch.framework`` for an abstract capture.
"""

from __future__ import annotations

import importlib
import re
import sys
import traceback
import types
from contextlib import contextmanager, nullcontext
from types import FrameType
from typing import Any, Callable, Iterator

import torch
from torch._subclasses import fake_tensor as _fake
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, ShapeEnv
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_leaves

from ..graph.meta import AbstractDifference, Symbol
from .hit_loops import HitLoops
from ..graph.model import Frame
from ..worker.errors import CaptureError
from ..worker.plugin_helpers import innermost_frame

# While building, real ops on tensors of at most this many elements run for real.
SMALL_CONSTANT_ELEMENTS = 4096

EVIDENCE_NOTE = ("abstract: shapes only, nothing was computed; the model was built and run under FakeTensorMode "
                 "with no parameter storage, so there are no weights, no statistics and no bytes measured")

# What reading values means, by the fake mode's exception.
_WHY = {
    "DataDependentOutputException": "it reads a tensor's values into Python (.item(), int(t), float(t), bool(t), "
                                    "'if t:', .tolist(), torch.equal)",
    "DynamicOutputShapeException": "its output shape depends on the tensor's values (nonzero, a boolean mask, "
                                   "unique, masked_select, routing tokens by value)",
    "UnsupportedOperatorException": "PyTorch has no shape rule (meta or fake kernel) for it",
    "GuardOnDataDependentSymNode": "it needs to know whether {expr}, which depends on the data (an 'if', a loop "
                                   "over a tensor, bool(), int() of a size or value no op computed)",
}


# The fake mode's exceptions that mean "this needs values" (or a kernel it lacks), and the
# shape environment's: Python asked a data-dependent symbol for a concrete answer.
NEEDS_DATA = (_fake.DataDependentOutputException, _fake.DynamicOutputShapeException,
              _fake.UnsupportedOperatorException, GuardOnDataDependentSymNode)


def op_name(func: Any) -> str:
    """``aten.nonzero.default`` -> ``aten::nonzero`` (the trace's spelling)."""
    try:
        name = func.name()
    except Exception:
        name = str(func)
    return name.removesuffix(".default")


def data_dependent_failure(exc: BaseException, op: str | None, frame: Frame | None, phase: str,
                           origins: list[str] | None = None) -> CaptureError:
    """The failure for a fake-mode exception ``exc`` raised while ``phase`` ran (``"forward"``
    or ``"build"``), at op ``op`` (the op the model called; the fake mode may name an op
    inside it) and source ``frame`` (the innermost workspace or library frame). ``origins``:
    for a data-dependent condition, where each of its symbols was made (``u0: the size
    aten::nonzero made at …``)."""
    inner = getattr(exc, "func", None)
    inner_name = op_name(inner) if inner is not None else None
    shown = op or inner_name or "an op"
    kind = type(exc).__name__
    why = _WHY.get(kind, "it needs the tensor's values")
    if kind == "GuardOnDataDependentSymNode":
        expr = getattr(exc, "cond", None)
        why = why.format(expr=str(expr) if expr is not None else "a data-dependent expression")
        if op is None and inner_name is None:
            shown = "the model's Python"
    where = f" at {frame.file}:{frame.line} ({frame.function})" if frame is not None else ""
    inside = f" (through {inner_name})" if inner_name and inner_name != shown else ""
    what = {"build": "building the model", "inputs": "making the inputs"}.get(phase, "the forward")
    if origins:
        why += "; " + "; ".join(origins)
    message = (
        f"the abstract capture stopped in {what}: {shown}{inside}{where} cannot run without data, because {why}. "
        "An abstract capture computes nothing, so it cannot know that result; it never guesses one. "
        "Ways out: capture a smaller concrete configuration of the model with evidence = \"eager\" "
        "(fewer layers, a narrower width: the same ops and modules), or capture this one eagerly "
        "if its weights fit in memory."
    )
    details: dict[str, Any] = {
        "evidence": "abstract",
        "phase": phase,
        "op": shown,
        "reason": kind,
        "ways_out": ["eager_smaller_config", "eager"],
    }
    if inner_name and inner_name != shown:
        details["inner_op"] = inner_name
    cond = getattr(exc, "cond", None)
    if kind == "GuardOnDataDependentSymNode" and cond is not None:
        details["condition"] = str(cond)
        if origins:
            details["symbols"] = origins
    if frame is not None:
        details["frame"] = {"file": frame.file, "line": frame.line, "column": frame.column,
                            "function": frame.function, "library": frame.library}
    return CaptureError("trace", message, details, error_type="DataDependentOp" if kind != "UnsupportedOperatorException"
                        else "NoShapeRule")


class AbstractEvidence:
    """One fake mode for a capture's build, inputs and forward (see the module docstring)."""

    def __init__(self) -> None:
        # Real tensors met on the way (globals, constants) are converted, never refused;
        # an op without a shape rule fails instead of running on zero-filled data. The
        # shape environment makes data-dependent sizes and scalars unbacked symbols; the
        # tensors converted from real ones keep their sizes (static shapes: no s0, s1).
        self.shape_env = _WatchedShapeEnv()
        self.mode = _FakeMode(allow_non_fake_inputs=True, allow_fallback_kernels=False,
                              shape_env=self.shape_env, static_shapes=True)
        # A loop over a data-dependent hit set: its stated choice; and the CPU shape rules.
        self.loops = _ForwardLoops(self.shape_env, self.mode)

    @contextmanager
    def building(self, files: Any) -> Iterator[None]:
        """Build the model with fake tensors, small constants real, and
        ``Module.to``/``half``/``cuda`` able to convert fake parameters (see
        :func:`_apply_to_fake`)."""
        original = torch.nn.Module._apply
        torch.nn.Module._apply = _apply_to_fake(original)
        try:
            with self.mode, self.mode.small_constants(), _skipping_value_writes():
                yield
        except NEEDS_DATA as exc:
            raise data_dependent_failure(exc, None, _innermost_frame(files, exc), "build") from None
        finally:
            torch.nn.Module._apply = original

    @contextmanager
    def inputs(self, files: Any) -> Iterator[None]:
        """Make the inputs (literal descriptions or the inputs factory) as fake tensors."""
        try:
            with self.mode:
                yield
        except NEEDS_DATA as exc:
            raise data_dependent_failure(exc, None, _innermost_frame(files, exc), "inputs") from None

    @contextmanager
    def running(self, trace: Any = None) -> Iterator[None]:
        """Run the forward with fake tensors (the trace records inside, above these modes).
        Given the ``trace``, it runs each op through the hit loops' bookkeeping itself
        (``trace.run_op``) instead of one more dispatch mode between it and the fake mode:
        the same ops and results, one Python dispatch less per op."""
        if trace is None:
            with self.mode, self.loops.active():
                yield
            return
        trace.run_op = self.loops.dispatch
        try:
            with self.mode, self.loops.active(mode=False):
                yield
        finally:
            trace.run_op = None

    def guard_failure(self, files: Any, origin: Callable[[str], str | None]) -> CaptureError | None:
        """The failure for the first data-dependent condition Python asked about during
        the run, even one the model's code caught and went past (``try: int(t) except``:
        what followed is another path than the data would take). ``origin(symbol)``
        says where a symbol was made. ``None`` when there was none."""
        got = self.shape_env.first_guard
        if got is None:
            return None
        exc, stack = got
        frame = innermost_frame(files, stack)
        names = sorted({str(s) for s in getattr(getattr(exc, "cond", None), "free_symbols", ())}, key=_symbol_order)
        origins = [text for text in (origin(n) for n in names) if text]
        return data_dependent_failure(exc, None, frame, "forward", origins)

    def symbol_bounds(self) -> dict[str, tuple[int | None, int | None]]:
        """Every unbacked symbol the run made: name -> (lower, upper) bounds as PyTorch
        knows them (``None``: unbounded on that side)."""
        out: dict[str, tuple[int | None, int | None]] = {}
        for sym, vr in getattr(self.shape_env, "var_to_range", {}).items():
            name = str(sym)
            if not _SYMBOL.fullmatch(name):
                continue
            out[name] = (_bound(vr.lower), _bound(vr.upper))
        return out

    @staticmethod
    def is_fake(t: Any) -> bool:
        return _fake.is_fake(t)

    def fake_module(self, model: Any, device: Any) -> int:
        """Make every parameter and buffer of ``model`` a fake tensor on ``device``: real
        ones converted (same shape, dtype and strides), fake ones elsewhere moved; ties
        kept. (``Module.to`` cannot move fake parameters: it swaps tensors, which the
        fake mode's own references forbid.) Returns how many were replaced."""
        replaced: dict[int, Any] = {}

        def fake(t: Any) -> Any:
            new = replaced.get(id(t))
            if new is None:
                data = t.detach() if isinstance(t, torch.nn.Parameter) else t
                if not self.is_fake(data):
                    data = self.mode.from_tensor(data)
                if data.device != device:
                    with self.mode:
                        data = data.to(device)
                new = _as_parameter(data, t) if isinstance(t, torch.nn.Parameter) else data
                replaced[id(t)] = new
            return new

        for mod in model.modules():
            for table in (mod._parameters, mod._buffers):
                for name, t in list(table.items()):
                    if t is not None and (not self.is_fake(t) or t.device != device):
                        table[name] = fake(t)
        return len(replaced)

    def fake_tree(self, obj: Any) -> Any:
        """``obj`` (nested lists/tuples/dicts) with its real tensors converted to fake."""
        if isinstance(obj, torch.Tensor):
            return obj if self.is_fake(obj) else self.mode.from_tensor(obj)
        if isinstance(obj, list):
            return [self.fake_tree(x) for x in obj]
        if isinstance(obj, tuple) and not hasattr(type(obj), "_fields"):
            return tuple(self.fake_tree(x) for x in obj)
        if isinstance(obj, dict):
            return {k: self.fake_tree(v) for k, v in obj.items()}
        return obj


def _apply_to_fake(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Module._apply`` (what ``.to(dtype)``, ``.half()``, ``.cuda()`` call) for a module
    holding fake tensors. PyTorch converts a fake parameter by swapping tensors in place,
    which fails once the fake mode holds a reference to it; this converts each tensor once
    (ties stay ties) and puts the result in its place. Modules with no fake tensor keep
    PyTorch's own conversion. A conversion of PyTorch's own (:func:`_pure_conversion`)
    runs once per kind of tensor (:class:`_Conversions`)."""

    def apply(module: Any, fn: Callable[[Any], Any], recurse: bool = True) -> Any:
        mods = list(module.modules()) if recurse else [module]
        tables = [t for m in mods for t in (m._parameters, m._buffers)]
        if not any(_fake.is_fake(t) for table in tables for t in table.values() if t is not None):
            return original(module, fn, recurse)
        done: dict[int, Any] = {}
        conversions = _Conversions(fn) if _pure_conversion(fn) else None
        for table in tables:
            for name, t in list(table.items()):
                if t is None:
                    continue
                new = done.get(id(t))
                if new is None:
                    applied = conversions.convert(t) if conversions is not None else None
                    if applied is None:
                        with torch.no_grad():
                            applied = fn(t)
                        if conversions is not None:
                            conversions.remember(t, applied)
                    new = done[id(t)] = _as_parameter(applied, t) if isinstance(t, torch.nn.Parameter) else applied
                table[name] = new
        return module

    return apply


_MODULE_FILE = torch.nn.modules.module.__file__


def _pure_conversion(fn: Any) -> bool:
    """Whether ``fn`` is one of ``torch.nn.Module``'s own conversions (``to``'s
    ``convert``, ``half``, ``float``, ``bfloat16``, ``cpu``, ``cuda``, ``type``,
    ``to_empty`` …): its result for a fake tensor depends on the tensor's metadata alone."""
    code = getattr(fn, "__code__", None)
    return code is not None and code.co_filename == _MODULE_FILE


class _Conversions:
    """One of ``Module``'s own conversions (:func:`_pure_conversion`) over a fake module:
    the first tensor of each kind (class, shape, strides, offset, dtype, device, grad,
    view or not) is converted by ``fn`` through the fake mode; when that gave a new fake
    tensor of its own (no view, no grad), the others of its kind get one alike, made
    directly (a meta tensor of the result's shape, strides and dtype in a ``FakeTensor``
    on its device): no dispatch through the modes for each (a 7B model's
    ``.to(bfloat16)`` was 14 % of its abstract capture; 291 parameters, 2 kinds)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn
        self._made: dict[tuple, tuple | None] = {}

    @staticmethod
    def _kind(t: Any) -> tuple | None:
        if not _fake.is_fake(t) or type(t) is not _fake.FakeTensor:
            return None
        return (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.device, t.requires_grad, t._is_view(),
                id(t.fake_mode))

    def convert(self, t: Any) -> Any:
        """``fn(t)`` made directly, or None (convert it through ``fn``)."""
        kind = self._kind(t)
        made = self._made.get(kind) if kind is not None else None
        if made is None:
            return None
        shape, stride, dtype, device = made
        with torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch():
            elem = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
        return _fake.FakeTensor(t.fake_mode, elem, device)

    def remember(self, t: Any, applied: Any) -> None:
        """What ``fn`` gave for ``t``: the recipe for its kind, when a new plain fake tensor."""
        kind = self._kind(t)
        if kind is None or kind in self._made:
            return
        fresh = (applied is not t and type(applied) is _fake.FakeTensor and applied.fake_mode is t.fake_mode
                 and not applied.requires_grad and not applied._is_view() and applied.storage_offset() == 0
                 and all(type(d) is int for d in applied.shape))
        self._made[kind] = (tuple(applied.shape), applied.stride(), applied.dtype, applied.device) if fresh else None


def _as_parameter(applied: Any, t: Any) -> Any:
    """``applied`` (``fn`` of parameter ``t``, made under no_grad) as a parameter. A new
    fake tensor that is no view becomes one as ``nn.Parameter`` makes a tensor subclass
    one (``requires_grad``, ``_is_param``), without its ``detach()``: one dispatch through
    the fake mode less per parameter (a 7B model's ``.to(bfloat16)`` was 14 % of its
    abstract capture)."""
    if applied is not t and _fake.is_fake(applied) and applied.grad_fn is None and not applied._is_view():
        applied.requires_grad_(t.requires_grad)
        applied._is_param = True
        return applied
    return torch.nn.Parameter(applied, requires_grad=t.requires_grad)


def _innermost_frame(files: Any, exc: BaseException) -> Frame | None:
    """The innermost workspace frame of ``exc``'s traceback (the line that needed data;
    a comprehension's line as its caller's), else the innermost library frame
    (``transformers``' own line, ``library: true``)."""
    frames = files.traceback_frames(exc.__traceback__) if files is not None else []
    return frames[-1] if frames else innermost_frame(None, traceback.extract_tb(exc.__traceback__))


def _symbol_order(name: str) -> tuple[str, int]:
    head = name.rstrip("0123456789")
    return (head, int(name[len(head):]) if name[len(head):] else 0)


class _WatchedShapeEnv(ShapeEnv):
    """A shape environment that remembers the first data-dependent condition Python
    asked about (the error and the stack that asked), whether or not the model's code
    lets the error reach the capture."""

    def __init__(self) -> None:
        super().__init__()
        self.first_guard: tuple[BaseException, list[Any]] | None = None
        if not self.should_record_events:
            # The guard suppression the fake mode enters and leaves around every output it
            # makes: PyTorch's event-recording wrapper, with no events recorded, only logs
            # at debug level and calls through (a ShapeEnv made the forward 18-30 % slower
            # than a bare fake mode's, measured on plain-7b; these two were most of it).
            for name in ("_suppress_guards_enter", "_suppress_guards_exit"):
                method = getattr(ShapeEnv, name)
                setattr(self, name, types.MethodType(getattr(method, "__wrapped__", method), self))

    def suppress_guards(self) -> Any:
        """PyTorch's context manager, as a class (entered around every output the fake mode
        makes: a generator-based one costs more to make and enter); nothing to enter while
        the run has made no symbol (no size or value depends on one, so nothing can
        guard)."""
        if not self.var_to_range:
            return _NO_GUARDS
        return _SuppressGuards(self)

    def _make_data_dependent_error(self, expr: Any, unhinted_expr: Any, **kwargs: Any) -> Any:
        err = super()._make_data_dependent_error(expr, unhinted_expr, **kwargs)
        if self.first_guard is None:
            self.first_guard = (err, traceback.extract_stack(sys._getframe(1)))
        return err


_NO_GUARDS = nullcontext()


class _SuppressGuards:
    """``ShapeEnv.suppress_guards()``: what PyTorch's generator does (enter, then exit
    however the block ends)."""

    __slots__ = ("env",)

    def __init__(self, env: ShapeEnv) -> None:
        self.env = env

    def __enter__(self) -> None:
        self.env._suppress_guards_enter()

    def __exit__(self, *exc: Any) -> None:
        self.env._suppress_guards_exit()


# Functions that only write values into their first argument (initialisers): on a fake
# tensor there are no values, so skipping them changes nothing but the time they take.
# While building, each is replaced where it is looked up at call time (torch.nn.init's
# attributes, torch.Tensor's methods): no mode sees every other call of the build.
_INITIALISERS = ("uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_",
                 "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
                 "sparse_")
_TENSOR_WRITERS = ("normal_", "uniform_", "zero_", "bernoulli_", "exponential_", "random_", "cauchy_",
                   "log_normal_", "geometric_")


# torch.nn.init's helpers behind its initialisers, looked up at call time. An initialiser
# someone holds a reference to (transformers' TORCH_INIT_FUNCTIONS, a ``from
# torch.nn.init import ...``) reaches them (or a torch.Tensor writer above) too, and is
# skipped there for a fake tensor (trunc_normal_ in Torch 2.13 redraws until no value is
# out of bounds: a loop on the data).
_INIT_HELPERS = ("_no_grad_uniform_", "_no_grad_normal_", "_no_grad_trunc_normal_", "_no_grad_fill_",
                 "_no_grad_zero_")


def _skip_on_fake(fn: Callable[..., Any]) -> Callable[..., Any]:
    def helper(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        return tensor if _fake.is_fake(tensor) else fn(tensor, *args, **kwargs)

    return helper


@contextmanager
def _skipping_value_writes() -> Iterator[None]:
    """While building: an initialiser or value writer called on a fake tensor returns it
    untouched; on a real one it runs."""
    init = torch.nn.init
    patched: list[tuple[Any, str, Any, bool]] = []  # (owner, name, original, the owner's own attribute)
    for owner, names in ((init, _INITIALISERS + _INIT_HELPERS), (torch.Tensor, _TENSOR_WRITERS)):
        for name in names:
            original = getattr(owner, name, None)
            if original is None:
                continue
            patched.append((owner, name, original, name in vars(owner)))
            setattr(owner, name, _skip_on_fake(original))
    try:
        yield
    finally:
        for owner, name, original, own in reversed(patched):
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)


# Ops whose output holds exactly as many elements as their first tensor argument.
_SAME_SIZE = frozenset((torch.ops.aten._to_copy.default, torch.ops.aten.clone.default))


def _writes_its_first(func: Any) -> bool:
    """Whether an op writes its first argument in place and gives it back, its size
    unchanged (``fill_``, ``mul_``, ``copy_``: not ``resize_`` or ``set_``)."""
    got = _IN_PLACE.get(func)
    if got is None:
        try:
            first = func._schema.arguments[0]
            name = func._schema.name
            got = (first.alias_info is not None and first.alias_info.is_write and not first.kwarg_only
                   and "resize" not in name and not name.split("::")[-1].lstrip("_").startswith("set_"))
        except Exception:
            got = False
        _IN_PLACE[func] = got
    return got


_IN_PLACE: dict[Any, bool] = {}


def _tensor_arguments(args: tuple, kwargs: dict) -> list[Any]:
    """The tensors among an ATen op's arguments (a schema's argument is a tensor, a list
    of tensors or of optional tensors, or no tensor)."""
    out = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif type(a) in (list, tuple):
            out += [x for x in a if isinstance(x, torch.Tensor)]
    return out


class _FakeMode(_fake.FakeTensorMode):
    """The capture's fake mode. While building (:meth:`small_constants`) it also runs a
    real op on small real tensors for real (see the module docstring) and gives every
    other op to the fake mode proper: in the fake mode's own dispatch, not in one more
    dispatch mode above it (each op of the build one Python dispatch less)."""

    _small_constants = False

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Not wrapped in torch._disable_dynamo a second time: FakeTensorMode's own
        # __torch_dispatch__, which this one calls, is (each wrapper costs every op).
        return False

    @contextmanager
    def small_constants(self) -> Iterator[None]:
        self._small_constants = True
        try:
            yield
        finally:
            self._small_constants = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self._small_constants:
            return super().__torch_dispatch__(func, types, args, kwargs or {})
        kwargs = kwargs or {}
        inputs = _tensor_arguments(args, kwargs)
        if any(_fake.is_fake(t) or t.numel() > SMALL_CONSTANT_ELEMENTS for t in inputs):
            return super().__torch_dispatch__(func, types, args, kwargs)
        if inputs and (func in _SAME_SIZE or _writes_its_first(func)):
            # Its output holds as many elements as its first input (a conversion or a
            # copy of a small real tensor, or an op writing it in place): small too, no
            # need to ask the fake mode.
            with _disable_current_modes():
                return func(*args, **kwargs)
        try:
            shaped = super().__torch_dispatch__(func, types, args, kwargs)  # the output's size, allocating nothing
        except NEEDS_DATA:
            shaped = None  # it reads values: of small real inputs, which exist
        if shaped is not None:
            leaves = tree_leaves(shaped)
            if any(isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)) for x in leaves) or any(
                    isinstance(t, torch.Tensor) and not _static(t) for t in leaves):
                shaped = None  # a value or size of small real inputs: they exist, so compute it
        if shaped is not None:
            outputs = [t for t in tree_leaves(shaped) if isinstance(t, torch.Tensor)]
            if any(t.numel() > SMALL_CONSTANT_ELEMENTS for t in outputs) or not outputs:
                return shaped
        with _disable_current_modes():
            return func(*args, **kwargs)


def _static(t: Any) -> bool:
    return all(type(d) is int for d in t.shape)


def _bound(x: Any) -> int | None:
    """A ShapeEnv bound as an int; ``None`` for an infinite one."""
    try:
        if getattr(x, "is_finite", True) is False or str(x) in ("oo", "-oo", "int_oo", "-int_oo"):
            return None
        return int(x)
    except (TypeError, ValueError, OverflowError):
        return None


# Unbacked symbols: a data-dependent int (u0) or float (zuf0).
_SYMBOL = re.compile(r"\b(?:u|zuf)\d+\b")


def symbol_table(values: list, producers: list[int], bounds: dict[str, tuple[int | None, int | None]],
                 nodes: list) -> list[Symbol]:
    """``meta["symbols"]``: one entry per data-dependent symbol that appears in a recorded
    shape (``u0``) or scalar result (``.item()``: ``u1``, a float ``zuf0``): its ``name``,
    ``min`` / ``max`` (absent when unbounded), the node that first produced a value
    shaped by it or returned it (``node``, ``op``) and how many values carry it
    (``values``)."""
    first: dict[str, int] = {}
    count: dict[str, int] = {}
    made_by: dict[str, int] = {}  # a scalar symbol -> the node that returned it
    for nid, node in enumerate(nodes):
        result = node.params.get("result") if node.params else None
        if type(result) is str:
            for name in _SYMBOL.findall(result):
                made_by.setdefault(name, nid)
    for vid, v in enumerate(values):
        shape = v.shape
        if all(type(d) is int for d in shape):
            continue
        seen = set()
        for d in shape:
            if type(d) is str:
                seen.update(_SYMBOL.findall(d))
        for name in seen:
            count[name] = count.get(name, 0) + 1
            if name not in first:
                first[name] = vid
    out = []
    for name in sorted(set(first) | set(made_by), key=_symbol_order):
        entry: Symbol = {"name": name, "values": count.get(name, 0)}
        lo, hi = bounds.get(name, (None, None))
        if lo is not None:
            entry["min"] = lo
        if hi is not None:
            entry["max"] = hi
        p = made_by.get(name, producers[first[name]] if name in first else -1)
        if name in first and producers[first[name]] >= 0:
            p = min(p, producers[first[name]]) if name in made_by else producers[first[name]]
        if p >= 0:
            entry["node"] = p
            entry["op"] = nodes[p].op
        out.append(entry)
    return out


# The CPU kernels whose shape rule (written for CUDA) refuses dtypes they accept.
_GROUPED_MM: Any = torch.ops.aten._grouped_mm.default if hasattr(torch.ops.aten, "_grouped_mm") else None
_STAND_IN = torch.bfloat16


class _ForwardLoops(HitLoops):
    """The mode below the trace, above the fake mode, during an abstract forward: the
    hit-set loops (:class:`~capture.torch.hit_loops.HitLoops`), and ``aten._grouped_mm``
    on the CPU with float32/float16 operands shaped by PyTorch's own rule on bfloat16
    stand-ins and given the dtype the CPU kernel returns (``out_dtype``, else its
    operands'). Every other op goes straight to the fake mode's own dispatch
    (:meth:`fake_dispatch`)."""

    def __init__(self, shape_env: Any, fake_mode: Any) -> None:
        super().__init__(shape_env)
        self.fake_mode = fake_mode

    def dispatch(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """The hit loops' bookkeeping for the ops it watches and ``_grouped_mm``'s rule;
        any other op straight to the fake mode (:meth:`fake_dispatch`)."""
        watched = _WATCHED.get(func)
        if watched is None:
            watched = _WATCHED[func] = func is _GROUPED_MM or getattr(func, "overloadpacket", None) in (
                torch.ops.aten.nonzero, torch.ops.aten.topk)
        if watched:
            return HitLoops.dispatch(self, func, args, kwargs)
        return self.fake_dispatch(func, args, kwargs)

    def run(self, func: Any, args: tuple, kwargs: dict) -> Any:
        if func is _GROUPED_MM and len(args) >= 2:
            a, b = args[0], args[1]
            if (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.device.type == "cpu"
                    and a.dtype == b.dtype and a.dtype in (torch.float32, torch.float16)):
                out_dtype = kwargs.get("out_dtype") or a.dtype
                stand = func(a.to(_STAND_IN), b.to(_STAND_IN), *args[2:], **{**kwargs, "out_dtype": None})
                return stand.to(out_dtype)
        return self.fake_dispatch(func, args, kwargs)

    def fake_dispatch(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """``func(*args, **kwargs)`` from inside a dispatch mode whose only mode below is
        this capture's fake mode: the fake mode's ``dispatch`` called as PyTorch's
        dispatcher would call it (the fake mode off the mode stack meanwhile), without
        the dispatcher's round trip (the arguments parsed by the op's schema into C++
        values and made Python objects again, the mode stack popped and pushed):
        below autograd already, the same op, arguments and result. Anything else (another
        mode between, an argument the fake mode does not recognise) goes through
        ``func``."""
        if _stack_depth() != 1:
            return func(*args, **kwargs)
        mode = _unset_mode(_FAKE_KEY)
        if mode is not self.fake_mode:
            if mode is not None:
                _set_mode(mode)
            return func(*args, **kwargs)
        try:
            out = mode.dispatch(func, _FAKE_TYPES, args, kwargs)
        finally:
            _set_mode(mode)
        if out is NotImplemented:
            return func(*args, **kwargs)
        # What the dispatcher makes of the result: several returns a plain tuple (not a
        # torch.return_types one), one list return a list.
        kind = _RETURNS.get(func)
        if kind is None:
            kind = _RETURNS[func] = _returns_kind(func)
        if kind is tuple or kind is list:
            return out if type(out) is kind else kind(out)
        return out


def _returns_kind(func: Any) -> type:
    """``tuple`` for an op with several returns, ``list`` for one list return, else
    ``object`` (one value, as the op gives it)."""
    try:
        returns = func._schema.returns
    except Exception:
        return object
    if len(returns) > 1:
        return tuple
    if len(returns) == 1 and isinstance(returns[0].type, torch.ListType):
        return list
    return object


_RETURNS: dict[Any, type] = {}
_WATCHED: dict[Any, bool] = {}


_FAKE_KEY = torch._C._TorchDispatchModeKey.FAKE
_FAKE_TYPES = (_fake.FakeTensor,)
_stack_depth = torch._C._len_torch_dispatch_stack
_unset_mode = torch._C._unset_dispatch_mode
_set_mode = torch._C._set_dispatch_mode


# --------------------------------------------------------------------------- libraries


# (library, module, function, effect, files): checks a library makes to see whether a
# tensor is fake, what it does differently then, and the files (below the library's
# folder) whose ops differ from an eager run. Each is watched during an abstract forward.
KNOWN_FAKE_CHECKS: tuple[tuple[str, str, str, str, tuple[str, ...]], ...] = (
    (
        "transformers", "transformers.utils.import_utils", "is_fake_tensor",
        "transformers' is_tracing() is true for a fake tensor, so it cannot read an attention mask's values to "
        "skip it: masking_utils builds the mask explicitly (arange, comparisons, expand) and each attention layer "
        "passes it to scaled_dot_product_attention (repeating the key/value heads and converting the mask in "
        "integrations/sdpa_attention.py), where an eager run with an all-ones mask skips it (is_causal=True); "
        "without an attention_mask both runs agree",
        ("masking_utils.py", "integrations/sdpa_attention.py"),
    ),
)


class LibraryBranches:
    """Watch the known fake-tensor checks of the libraries already imported, while an
    abstract forward runs (``with branches.watching(): ...``); :meth:`differences` lists
    each check that answered "fake", with its call sites."""

    def __init__(self) -> None:
        self._sites: dict[tuple[str, str, str], dict[tuple[str, int, str], int]] = {}

    @contextmanager
    def watching(self) -> Iterator[None]:
        restore: list[tuple[Any, str, Any]] = []
        for library, module_name, attr, _, _ in KNOWN_FAKE_CHECKS:
            if module_name not in sys.modules:
                continue  # not imported: the model cannot be using it
            try:
                module = importlib.import_module(module_name)
            except Exception:
                continue
            original = getattr(module, attr, None)
            if not callable(original):
                continue
            setattr(module, attr, self._watch(original, (library, module_name, attr)))
            restore.append((module, attr, original))
        try:
            yield
        finally:
            for module, attr, original in restore:
                setattr(module, attr, original)

    def _watch(self, original: Callable[..., Any], key: tuple[str, str, str]) -> Callable[..., Any]:
        sites = self._sites.setdefault(key, {})

        def watched(*args: Any, **kwargs: Any) -> Any:
            answer = original(*args, **kwargs)
            if answer:
                # The caller of the library's own helper (is_tracing) is the branch.
                f: FrameType | None = sys._getframe(1)
                while f is not None and f.f_code.co_filename == original.__code__.co_filename:
                    f = f.f_back
                if f is not None:
                    site = (f.f_code.co_filename, f.f_lineno, f.f_code.co_qualname)
                    sites[site] = sites.get(site, 0) + 1
            return answer

        return watched

    def differences(self, frames: list[Frame], node_frames: list[int | None]) -> list[AbstractDifference]:
        """One entry per check that answered "fake": ``library``, ``check``, ``effect``,
        ``sites`` (file, line, function, calls), ``files`` (the library files whose ops
        differ from an eager run, as recorded frames name them) and ``ops``: how many
        recorded ops have their source frame in those files."""
        known = {(lib, mod, attr): (effect, files) for lib, mod, attr, effect, files in KNOWN_FAKE_CHECKS}
        out: list[AbstractDifference] = []
        for key, sites in self._sites.items():
            if not sites:
                continue
            effect, suffixes = known[key]
            package = f"/{key[0]}/"
            files = sorted({f.file for f in frames if package in f.file
                            and any(f.file.endswith(package + s) for s in suffixes)})
            in_files = {i for i, f in enumerate(frames) if f.file in files}
            out.append({
                "library": key[0],
                "check": f"{key[1]}.{key[2]}",
                "effect": effect,
                "sites": [{"file": file, "line": line, "function": fn, "calls": n}
                          for (file, line, fn), n in sorted(sites.items())],
                "files": files,
                "ops": sum(1 for fid in node_frames if fid in in_files),
            })
        return out
