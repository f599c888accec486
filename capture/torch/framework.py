"""PyTorch capture: run the model eagerly and record what really happened.

What is opened (``recipe.model``):

* an ``nn.Module`` subclass, constructed from the literal ``init`` (``args``/``kwargs``),
  or by an ``init.factory`` returning a ready instance of that class (the user's own
  code may load weights there);
* an ``nn.Module`` instance defined at module level (empty ``init``);
* a plain callable taking tensors (empty ``init``, or a factory returning a callable).

Setup: Python's ``random``, NumPy (when importable) and Torch are seeded with the
profile's ``seed`` before the model module is imported; the module is moved to
``device`` and put in ``mode`` (``eval``/``train``); ``grad_enabled`` is honoured for the
whole capture. Literal inputs are generated on the CPU from a per-leaf
``torch.Generator`` seeded with ``leaf_seed(seed, index)`` (deterministic whatever the
device), moved to the device, and made leaves that require grad when the description
says ``requires_grad = true``. An inputs factory's tensors are used as returned.

Saved files (:mod:`capture.torch.saved`): ``init.checkpoint`` is a state dict loaded
weights-only into the module once it is built and on its device (``meta["state"] =
"checkpoint"``; otherwise ``meta["state"]`` says the weights are a fresh initialisation,
a factory's or a module instance's); ``inputs.fixture`` is a saved batch bound to
``forward``'s parameters. Their files join the capture's sources.

Input tensors are labelled (``measured["input"]``, also the ``grads`` key of a training
step) after the ``forward`` parameter a positional argument binds to (``input_ids``;
``args[i]`` for ``*args``), keyword arguments after their key, nested ones by their path
below it (``batch[0]``).

``kind = "model"`` records the forward (``coverage.scope = "eager_forward"``).
``kind = "training_step"`` (needs ``grad_enabled = true``) records the forward, a
``loss`` group (``step.loss``: ``"sum"``/``"mean"`` of the output's floating tensors, or
a workspace function called as ``fn(output, *args, **kwargs)``; a function taking no
arguments is a factory that returns that loss function), a ``backward`` group (autograd's
ops, nested in mirrors of the forward's module groups) and, when ``step.optimizer``
names a factory (``fn(model.parameters()) -> torch.optim.Optimizer``), one
``optimizer`` group for ``optimizer.step()`` (``coverage.scope = "training_step"``).

Activation statistics are on by default; the worker environment variable
``TENSORVIZ_TORCH_STATS=0`` turns them off (``run_capture(env=...)``).

Every capture records function groups (:mod:`capture.torch.functions`): the
``torch.*`` / ``torch.nn.functional`` call each kernel ran under.

``evidence = "abstract"`` (:mod:`capture.torch.abstract`): the model is built and run
on fake tensors, with no parameter storage and nothing computed
(``coverage.scope = "abstract_forward"``, backend ``torch_abstract``, ``meta["evidence"]
= "abstract"``): the same ops, module and function groups, shapes, dtypes, strides,
parameters and frames as an eager capture, without statistics or bytes. A checkpoint's
names and shapes are checked, not loaded (``meta["state"] = "checkpoint_checked"``);
a fixture is loaded and made fake. An op that needs values fails the capture
(``DataDependentOp``); ``meta["abstract_differences"]`` lists where a library took
another path because it saw fake tensors.

An eager build runs under the memory guard of :mod:`capture.torch.memory`: a model that
allocates over half the memory available or allowed has its parameter bytes estimated
from an abstract build (meta device, forked child), and the capture fails with a
``MemoryError`` (stage ``limit``) when it cannot fit (``meta["memory_estimate"]``).

A model that raises ends the capture with a failure carrying the workspace frames of
the exception (the worker reports it); a limit reached mid-forward ends it with a
``limit`` failure. A partial graph is never returned as complete.
"""

from __future__ import annotations

import inspect
import os
import sys
import time
from contextlib import nullcontext
from typing import Any, Callable

from ..graph.meta import CaptureMeta, MemoryEstimate
from ..graph.model import Capture
from ..worker.context import CaptureContext, import_framework, parse_device, positional_names
from ..worker.errors import CaptureError, own_step
from ..worker.plugin_helpers import describe_type
from ..worker.values import binding_problem
from .model_build import _build_model, _guarded_build, _seed_everything, _tensor_maker, _weights
from .cuda_calls import cuda_calls_kept_on_cpu
from .grad_modes import inference_mode_as_grad_mode
from .version_check import check_torch


def _distribution_version() -> str:
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:
        return ""


# Reported on failures before torch is imported; the capture records torch.__version__.
VERSION = _distribution_version()
STATS_ENV = "TENSORVIZ_TORCH_STATS"


# --------------------------------------------------------------------------- device


def _import_torch() -> Any:
    return import_framework("torch", "PyTorch")


def imported_version() -> str:
    """Import Torch; its ``__version__`` (the build that runs: ``2.13.0+cpu``)."""
    return str(getattr(_import_torch(), "__version__", "") or "")


def check_supported(version: str) -> None:
    """The person's own Torch, refused when older than the tested floor."""
    check_torch(version)


def probe_device(ctx: CaptureContext) -> None:
    """Check ``ctx.recipe.device`` (and the devices its mesh needs) before anything of the
    workspace is imported."""
    torch = _import_torch()
    device = _device(torch, ctx.recipe.device)
    if ctx.recipe.mesh is not None:
        from .dtensors import require_mesh_devices

        require_mesh_devices(ctx.recipe.mesh, device.type)


def _device(torch: Any, spec: str) -> Any:
    platform, index = parse_device(spec)
    if platform == "cpu":
        return torch.device("cpu")
    if platform == "tpu":
        raise CaptureError("device", f'device {spec} is for JAX captures; a Torch capture runs on "cpu" or "cuda:N"',
                           {"device": spec, "available": ["cpu"]})
    details: dict[str, Any] = {
        "device": spec,
        "torch_version": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "python": sys.executable,
    }
    if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
        raise CaptureError(
            "device",
            f"device {spec} is unavailable: PyTorch {torch.__version__} in {sys.executable} was built without "
            'CUDA. Install a CUDA build of PyTorch in the selected interpreter, or save device = "cpu"; '
            "TensorViz does not fall back to the CPU.",
            {**details, "available": ["cpu"]},
        )
    try:
        available = torch.cuda.is_available()
        count = torch.cuda.device_count() if available else 0
    except Exception as exc:  # a broken driver raises here
        raise CaptureError(
            "device",
            f"device {spec} is unavailable: CUDA initialisation failed ({exc}); TensorViz does not fall back to the CPU.",
            {**details, "available": ["cpu"]},
        ) from exc
    if index >= count:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise CaptureError(
            "device",
            f"device {spec} is unavailable: PyTorch sees {count} CUDA device(s)"
            + (f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else "")
            + "; TensorViz does not fall back to another device.",
            {**details, "available": ["cpu"] + [f"cuda:{i}" for i in range(count)]},
        )
    return torch.device(spec)


# --------------------------------------------------------------------------- setup


def _stats_enabled() -> bool:
    return os.environ.get(STATS_ENV, "1").strip().lower() not in ("0", "false", "off", "no")




# --------------------------------------------------------------------------- training step


def _loss_fn(ctx: CaptureContext, torch: Any) -> tuple[Callable[..., Any], str]:
    step = ctx.recipe.step
    assert step is not None
    if step.loss_factory is None:
        reduce = step.loss

        def reduce_output(output: Any, *args: Any, **kwargs: Any) -> Any:
            from .tensors import tensors_of

            parts = [t for t in tensors_of(output) if t.is_floating_point() or t.is_complex()]
            if not parts:
                raise CaptureError(
                    "trace", f'step.loss = "{reduce}" needs a floating-point tensor in the output; the model returned none'
                )
            total = None
            for t in parts:
                r = t.sum() if reduce == "sum" else t.mean()
                total = r if total is None else total + r
            return total

        return reduce_output, reduce
    fn = ctx.import_object(step.loss_factory)
    if not callable(fn):
        raise CaptureError("recipe", f"loss factory {step.loss_factory} is {describe_type(fn)}, not callable")
    if _takes_no_arguments(fn):
        fn = fn()
        if not callable(fn):
            raise CaptureError("recipe", f"loss factory {step.loss_factory}() returned {describe_type(fn)}, not a loss function")
    return fn, step.loss_factory


def _takes_no_arguments(fn: Any) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return not any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in sig.parameters.values()
    )


def _optimizer(ctx: CaptureContext, torch: Any, model: Any, kind: str) -> Any:
    step = ctx.recipe.step
    if step is None or step.optimizer_factory is None:
        return None
    if kind != "module":
        raise CaptureError("recipe", "step.optimizer needs a torch.nn.Module (its parameters); the model is a function")
    fn = ctx.import_object(step.optimizer_factory)
    if not callable(fn):
        raise CaptureError("recipe", f"optimizer factory {step.optimizer_factory} is {describe_type(fn)}, not callable")
    opt = fn(model.parameters())
    if not isinstance(opt, torch.optim.Optimizer):
        raise CaptureError(
            "recipe",
            f"optimizer factory {step.optimizer_factory} returned {describe_type(opt)}; expected a torch.optim.Optimizer",
        )
    return opt


# --------------------------------------------------------------------------- capture


def capture(ctx: CaptureContext) -> Capture:  # noqa: C901
    torch = _import_torch()
    recipe = ctx.recipe
    training = recipe.kind == "training_step"
    if recipe.framework not in ("torch",):
        raise CaptureError("recipe", f"the Torch capture cannot open framework = {recipe.framework!r}")
    if training and not recipe.grad_enabled:
        raise CaptureError(
            "recipe",
            'kind = "training_step" needs grad_enabled = true (the backward pass is part of the capture)',
            {"key_path": f"profiles.{recipe.name}.grad_enabled"},
        )
    needed = recipe.unknown_dims()
    if needed:
        raise CaptureError(
            "recipe",
            f"{len(needed)} input dimension(s) unknown; give them a size to capture (TensorViz does not guess)",
            {"needs": [n.to_dict() for n in needed]},
            error_type="InputsNeeded",
        )
    device = _device(torch, recipe.device)
    group = None
    if recipe.mesh is not None:
        from .dtensors import SimulatedGroup

        # The fake process group and the mesh exist before the model's module is imported;
        # factories and the forward run with the mesh current (``with mesh:``).
        group = SimulatedGroup(recipe, device)
    modes = CaptureMeta()
    try:
        with (group.mesh if group is not None else nullcontext()), cuda_calls_kept_on_cpu(torch, device, modes):
            result = _capture(ctx, torch, device, group, modes)
        result.meta.update(modes)
        return result
    finally:
        if group is not None:
            group.close()


def _capture(ctx: CaptureContext, torch: Any, device: Any, group: Any, modes: CaptureMeta) -> Capture:
    """The capture proper; ``group``: the recipe mesh's simulated process group, or None."""
    from ..graph.model import ABSTRACT_FORWARD_SCOPE
    from .trace import TorchTrace

    recipe = ctx.recipe
    training = recipe.kind == "training_step"
    abstract = recipe.evidence == "abstract"
    # Under a simulated group no collective moves data: what a rank holds after one is not
    # what a run would hold, so nothing is measured about values.
    stats = _stats_enabled() and not abstract and group is None
    _seed_everything(torch, recipe.seed)
    make_tensor = _tensor_maker(torch, recipe.seed, device)

    ctx.progress("importing the model", 0.1)
    target = ctx.import_object(recipe.model)
    if recipe.init.before:  # library state the constructor reads (model-parallel groups)
        ctx.progress("running the steps before construction", 0.15)
        ctx.before_construction(make_tensor)
    built = CaptureMeta()  # what building the model as its library does adopted (meta)
    model, kind, evidence, memory_estimate = _built_model(ctx, torch, target, make_tensor, device, abstract, built)
    saved_meta = _weights(ctx, torch, target, model, kind, device, abstract)
    if recipe.init.then:
        _after_construction(ctx, model, kind, evidence, make_tensor, device)
    loss_fn, loss_name = _loss_fn(ctx, torch) if training else (None, None)
    optimizer = _optimizer(ctx, torch, model, kind) if training else None
    args, kwargs = _call_inputs(ctx, torch, model, kind, make_tensor, device, evidence, saved_meta)

    trace = TorchTrace(
        ctx.files, limits=ctx.limits, stats=stats, abstract=abstract,
        progress=lambda n: ctx.progress(f"recorded {n:,} operations", None),
        parameters="later",  # the graph first: parameters are measured after it is sent
    )
    if group is not None:
        trace.dist.mesh_index(group.mesh, origin="recipe")
    if kind == "module":
        trace.label_module(model)
    labels = _arg_labels(model, kind, args)
    inputs = {"dict": [
        ["args", {"tuple": [trace.structure(a, label=label) for a, label in zip(args, labels)]}],
        ["kwargs", {"dict": [[k, trace.structure(v, label=k)] for k, v in kwargs.items()]}],
    ]}
    saved_meta.update(built)
    meta = _run_meta(recipe, model, kind, saved_meta, memory_estimate)
    branches = None
    if abstract:
        from .abstract import EVIDENCE_NOTE, LibraryBranches

        meta["evidence"] = "abstract"
        meta["evidence_note"] = EVIDENCE_NOTE
        branches = LibraryBranches()

    def step(output: Any) -> tuple[Any, Any]:
        return _training_step(torch, trace, model, kind, output, args, kwargs, loss_fn, loss_name, optimizer,
                              meta, labels)

    with own_step("copying the model's buffers before the forward (to tell whether it changes them)"):
        buffers_before = _buffer_snapshot(torch, model) if kind == "module" and not abstract else {}
        versions_before = _state_versions(torch, model) if kind == "module" else {}
    ctx.progress("running the forward" + (" and the training step" if training else ""), 0.4)
    started = time.perf_counter()
    # Only the forward: torch's own code (FSDP2's fully_shard, fake tensors) enters
    # inference mode while a model is built, and must get the real thing.
    with inference_mode_as_grad_mode(torch, modes):
        output, stepped = _forward(torch, recipe, trace, model, kind, (args, kwargs), optimizer,
                                   (evidence, branches), step if training else None)
    elapsed = time.perf_counter() - started
    output_tree, grads = stepped if stepped is not None else (trace.structure(output), None)
    if not trace.b.nodes:
        raise CaptureError(
            "trace",
            f"running {recipe.model} executed no PyTorch operations (its outputs are its inputs or constants); "
            "nothing to show as a graph",
        )
    ctx.progress(f"recorded {len(trace.b.nodes):,} operations; measuring", 0.9)
    with own_step("measuring the recorded values"):
        trace.finish()
    meta["capture_s"] = round(elapsed, 4)
    if training:
        _training_meta(meta, loss_name, optimizer, grads)
    reasons: list[str] = []
    writes = _writes_after(torch, model, buffers_before, versions_before, meta, reasons) if kind == "module" else []
    _abstract_meta(meta, trace, branches, evidence)
    if group is not None:
        _wait_collectives(output_tree if training else output)
        meta["stats_off"] = ("a simulated process group moves no data in collectives: what a rank holds after one "
                             "is not what a run would hold, so no statistics are measured")
    ctx.progress("counting FLOPs and bytes", 0.95)
    with own_step("building the graph from the recorded operations"):
        result = trace.build(
            scope=ABSTRACT_FORWARD_SCOPE if abstract else "training_step" if training else "eager_forward",
            inputs=inputs,
            outputs=output_tree,
            reasons=reasons,
            meta=meta,
            effects="writes_state" if writes else "none",
        )
    if group is not None:
        result.devices = group.devices_record()
    _count_costs(result)
    if result.meta.get("stats_pending"):
        ctx.after_result = trace.measure_later
    return result


def _built_model(ctx: CaptureContext, torch: Any, target: Any, make_tensor: Callable, device: Any,
                 abstract: bool, built: CaptureMeta) -> tuple[Any, str, Any, MemoryEstimate | None]:
    """``(model, kind, the abstract evidence or None, the memory estimate or None)``: the
    model built (abstractly: no parameter storage, every tensor fake on the device), on the
    device and in the recipe's mode; what building it as its library does adopted is added
    to ``built``."""
    recipe = ctx.recipe
    if abstract:
        from .abstract import AbstractEvidence

        evidence = AbstractEvidence()
        ctx.progress("building the model abstractly (no parameter storage)", 0.2)
        with evidence.building(ctx.files):
            model, kind = _build_model(ctx, torch, target, make_tensor, built)
        if kind == "module":
            # On the device, every tensor fake (a module-level instance, a tensor a factory loaded).
            evidence.fake_module(model, device)
            model.train(recipe.mode == "train")
        return model, kind, evidence, None
    ctx.progress("building the model", 0.2)
    model, kind, memory_estimate = _guarded_build(ctx, torch, target, make_tensor, built)
    if kind == "module":
        model.to(device)
        model.train(recipe.mode == "train")
    return model, kind, None, memory_estimate


def _call_inputs(ctx: CaptureContext, torch: Any, model: Any, kind: str, make_tensor: Callable, device: Any,
                 evidence: Any, saved_meta: CaptureMeta) -> tuple[Any, Any]:
    """``(args, kwargs)`` of the call: the recipe's inputs or its fixture (whose record goes
    to ``saved_meta``), faked under abstract evidence."""
    ctx.progress("building the inputs", 0.3)
    if ctx.recipe.inputs.fixture is not None:
        from .saved import load_fixture

        ctx.progress(f"loading the fixture {ctx.recipe.inputs.fixture}", 0.3)
        _, literal_kwargs = ctx.materialize("inputs", make_tensor)
        fn = getattr(model, "forward", model) if kind == "module" else model
        args, kwargs, fixture_meta = load_fixture(ctx, torch, fn, literal_kwargs, device)
        saved_meta.update(fixture_meta)
        if evidence is not None:
            args, kwargs = evidence.fake_tree(args), evidence.fake_tree(kwargs)
    elif evidence is not None:
        with evidence.inputs(ctx.files):
            args, kwargs = ctx.inputs_call(make_tensor)
        args, kwargs = evidence.fake_tree(args), evidence.fake_tree(kwargs)
    else:
        args, kwargs = ctx.inputs_call(make_tensor)
    return args, kwargs


def _run_meta(recipe: Any, model: Any, kind: str, saved_meta: CaptureMeta,
              memory_estimate: MemoryEstimate | None) -> CaptureMeta:
    """The capture's ``meta`` as the run starts: the recipe's settings, the module's class,
    what the weights and fixture recorded, the memory estimate."""
    meta: CaptureMeta = {
        "model_kind": kind,
        "device": recipe.device,
        "mode": recipe.mode,
        "grad_enabled": recipe.grad_enabled,
        "seed": recipe.seed,
    }
    if kind == "module":
        meta["module_class"] = f"{type(model).__module__}.{type(model).__qualname__}"
    meta.update(saved_meta)
    if memory_estimate is not None:
        meta["memory_estimate"] = memory_estimate
    return meta


def _check_call(model: Any, kind: str, args: tuple, kwargs: dict) -> None:
    """Inputs the model's call cannot take are the recipe's to fix, said before the call
    (a TypeError raised at the call itself has no frame of the model's code, and read as
    TensorViz's own failure): the same check as an init call's (:func:`binding_problem`)."""
    fn = getattr(model, "forward", None) if kind == "module" else model
    if fn is None:
        return
    problem = binding_problem(fn, args, kwargs)
    if problem is not None:
        name = getattr(model, "__qualname__", None) or type(model).__qualname__
        call = f"{name}.forward" if kind == "module" else name
        raise CaptureError("recipe", f"inputs: {call} does not take these inputs: {problem}",
                           {"key_path": "inputs"}, error_type="TypeError")


def _forward(torch: Any, recipe: Any, trace: Any, model: Any, kind: str, call: tuple[Any, Any], optimizer: Any,
             watchers: tuple[Any, Any], step: Callable[[Any], tuple[Any, Any]] | None) -> tuple[Any, Any]:
    """Run the forward (and ``step``, the training step, on its output) under the
    recording: ``(output, what step returned or None)``. A limit or a needed-data error the
    trace met is raised, whatever user code made of it. ``watchers``: the abstract evidence
    and the library-branch watcher, or None each."""
    args, kwargs = call
    evidence, branches = watchers
    stepped = None
    with torch.set_grad_enabled(recipe.grad_enabled):
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
        elif step is not None and kind == "module":
            model.zero_grad(set_to_none=True)
        _check_call(model, kind, args, kwargs)
        # set before recording: whether autograd is tracked decides which recorder records
        trace.track_autograd = step is not None
        try:
            with (evidence.running(trace) if evidence is not None else nullcontext()), \
                    (branches.watching() if branches is not None else nullcontext()), trace.recording():
                if kind == "module":
                    output = model(*args, **kwargs)
                else:
                    name = getattr(model, "__qualname__", None) or type(model).__name__
                    with trace.scope("function", name, {"function": name}):
                        output = model(*args, **kwargs)
                if step is not None:
                    stepped = step(output)
        except Exception:
            pending = _pending_error(trace, evidence)
            if pending is not None:  # user code turned the limit (or the data error) into another error
                raise pending from None
            raise
        finally:
            trace.track_autograd = False
    pending = _pending_error(trace, evidence)
    if pending is not None:  # reached, then swallowed by user code: the rest is another path
        raise pending
    return output, stepped


def _pending_error(trace: Any, evidence: Any) -> Exception | None:
    """The error the trace met that must end the capture: a limit reached, else an op or
    a condition that needed data (:func:`_data_failure`)."""
    if trace.limit_error is not None:
        error: Exception = trace.limit_error
        return error
    return _data_failure(trace, evidence, trace.files)


def _training_meta(meta: CaptureMeta, loss_name: str | None, optimizer: Any, grads: Any) -> None:
    meta["loss"] = loss_name
    if optimizer is not None:
        meta["optimizer"] = type(optimizer).__name__
    if grads:
        meta["grads"] = len(grads)


def _after_construction(ctx: CaptureContext, model: Any, kind: str, evidence: Any, make_tensor: Any,
                        device: Any) -> None:
    """Steps after construction (gpt-fast's setup_caches), on the model as built and
    loaded; what they create is made fake too (abstract), or moved to the device."""
    ctx.progress("running the steps after construction", 0.25)
    if evidence is not None:
        with evidence.building(ctx.files):
            ctx.after_construction(model, make_tensor)
        if kind == "module":
            evidence.fake_module(model, device)
        return
    ctx.after_construction(model, make_tensor)
    if kind == "module":
        model.to(device)


def _writes_after(torch: Any, model: Any, buffers_before: dict[str, tuple[Any, int, Any]],
                  versions_before: dict[str, tuple[Any, int]], meta: CaptureMeta, reasons: list[str]) -> list[str]:
    """The module's parameters and buffers the forward wrote (``meta["state_writes"]``),
    writes no recorded op shows among them (``meta["untracked_buffer_updates"]``, a reason)."""
    with own_step("comparing the model's buffers after the forward"):
        unseen = _untracked_buffer_writes(torch, model, buffers_before)
    if unseen:
        # e.g. BatchNorm's running statistics in train mode: the kernel writes them in
        # place without a version bump, so no recorded op shows the write.
        reasons.append("untracked_buffer_update")
        meta["untracked_buffer_updates"] = unseen
    with own_step("comparing the model's parameters and buffers after the forward"):
        writes = _state_writes(torch, model, versions_before)
    writes += [name for name in unseen if name not in writes]
    if writes:
        # A forward that writes the model's own state (a KV cache, running statistics)
        # has effects: the capture says which, never "effects none".
        meta["state_writes"] = writes
    return writes


def _count_costs(result: Capture) -> None:
    """What each op costs (:mod:`capture.torch.cost`). A counter that fails leaves the
    capture without costs and says why (``meta["cost_failed"]``), never fails the capture."""
    from .cost import count

    try:
        result.cost = count(result)
    except Exception as exc:
        result.meta["cost_failed"] = f"{type(exc).__name__}: {exc}"[:500]


def _abstract_meta(meta: CaptureMeta, trace: Any, branches: Any, evidence: Any) -> None:
    """What an abstract capture adds to ``meta``: the library branches that went another
    way than data would take them (``abstract_differences``) and the data-dependent
    symbols, with their bounds and the ops that made them (``symbols``)."""
    if branches is not None:
        differences = branches.differences(trace.b.frames, [n.frame for n in trace.b.nodes])
        if differences:
            meta["abstract_differences"] = differences
    if evidence is not None:
        from .abstract import symbol_table

        symbols = symbol_table(trace.b.values, trace.producers, evidence.symbol_bounds(), trace.b.nodes)
        if symbols:
            meta["symbols"] = symbols
        if evidence.loops.choices:  # data-dependent loops run by a stated choice (capture.torch.hit_loops)
            meta["assumptions"] = [{"text": c["text"], "loop": c["loop"], "iterations": c["iterations"]}
                                   for c in evidence.loops.choices]


def _data_failure(trace: Any, evidence: Any, files: Any) -> CaptureError | None:
    """The first thing the run could not do without data: an op (``trace.data_error``),
    or Python asking a data-dependent symbol for a value (an ``if``, a loop over a
    tensor whose length is data-dependent), said with where its symbols came from."""
    err = trace.data_error
    if evidence is not None and (err is None or err.details.get("reason") == "GuardOnDataDependentSymNode"):
        got = evidence.guard_failure(files, _symbol_origin(trace))
        if got is not None:
            return got
    return err


def _symbol_origin(trace: Any) -> Callable[[str], str | None]:
    """For a data-dependent symbol (``u0``): where it was made, in words, from the values
    recorded so far (``u0: a size aten::nonzero made at modeling_mixtral.py:79``)."""
    from .abstract import symbol_table

    def origin(name: str) -> str | None:
        table = {e["name"]: e for e in symbol_table(trace.b.values, trace.producers, {}, trace.b.nodes)}
        entry = table.get(name)
        if entry is None or "node" not in entry:
            return None
        node = trace.b.nodes[entry["node"]]
        frame = trace.b.frames[node.frame] if node.frame is not None else None
        where = f" at {frame.file.rsplit('/', 1)[-1]}:{frame.line}" if frame is not None else ""
        what = "a size" if entry["values"] else "a value"
        return f"{name}: {what} {entry['op']} made{where}, known only from the data"

    return origin


def _wait_collectives(output: Any) -> None:
    """Wait on the collectives whose results the forward handed out unwaited (a module's
    ``use_local_output`` leaves an ``AsyncCollectiveTensor``), after the recording: the
    process group is then closed with nothing in flight."""
    from .tensors import tensors_in

    for t in tensors_in(output):
        wait = getattr(t, "wait", None)
        if type(t).__name__ == "AsyncCollectiveTensor" and callable(wait):
            try:
                wait()
            except Exception:
                pass


# Buffers up to this many bytes in all are copied before the forward to tell whether
# the forward changed them; larger models skip the check (and say nothing).
_BUFFER_CHECK_BYTES = 64 << 20


def _buffer_snapshot(torch: Any, model: Any) -> dict[str, tuple[Any, int, Any]]:
    """name -> (tensor, version, copy) for every dense buffer, when small. A buffer of
    another layout (Whisper's sparse ``alignment_heads``, a quantized or nested tensor)
    is left out: ``torch.equal`` has no kernel for most of them, and the check is only a
    fallback for kernels that write without a version bump, which are dense."""
    buffers = [(n, b) for n, b in model.named_buffers()
               if isinstance(b, torch.Tensor) and b.layout == torch.strided and not b.is_quantized
               and not b.is_nested]
    if sum(b.numel() * b.element_size() for _, b in buffers) > _BUFFER_CHECK_BYTES:
        return {}
    with torch.no_grad():
        return {n: (b, b._version, b.detach().clone()) for n, b in buffers}


def _state_versions(torch: Any, model: Any) -> dict[str, tuple[Any, int]]:
    """name -> (tensor, version counter) of every parameter and buffer: an in-place write
    bumps the counter (cheap to read, whatever the size)."""
    out: dict[str, tuple[Any, int]] = {}
    for name, t in [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]:
        if isinstance(t, torch.Tensor):
            out[name] = (t, t._version)
    return out


def _state_writes(torch: Any, model: Any, before: dict[str, tuple[Any, int]]) -> list[str]:
    """Parameters and buffers the forward wrote in place (their version counter moved),
    by name, in the model's order; a tensor replaced by another is a write too (but not
    FSDP2's gathered form of a parameter it shards: ``dtensors.fsdp_forms``)."""
    from .dtensors import fsdp_forms

    now = {name: t for name, t in [*model.named_parameters(remove_duplicate=False),
                                   *model.named_buffers(remove_duplicate=False)]}
    forms = fsdp_forms(model)
    writes = []
    for name, (t, version) in before.items():
        current = now.get(name)
        replaced = current is not t and (current is None or id(current) not in forms.get(id(t), ()))
        if replaced or t._version != version:
            writes.append(name)
    return writes


def _untracked_buffer_writes(torch: Any, model: Any, before: dict[str, tuple[Any, int, Any]]) -> list[str]:
    """Buffers whose contents changed although their version counter did not: writes
    that no recorded op shows."""
    unseen = []
    with torch.no_grad():
        for name, (tensor, version, copy) in before.items():
            if tensor._version == version and not torch.equal(tensor, copy):
                unseen.append(name)
    return unseen


def _training_step(torch, trace, model, kind, output, args, kwargs, loss_fn, loss_name, optimizer, meta, labels):
    """Loss, backward and (optionally) one optimizer step, each in its own group.
    Returns the capture's output structure and the parameter gradients' value ids."""
    trace.note_grad_fns(output)
    with trace.scope("loss", "loss", {"loss": loss_name}):
        loss = loss_fn(output, *args, **kwargs)
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise CaptureError(
            "trace",
            f"the loss ({loss_name}) returned {describe_type(loss) if not isinstance(loss, torch.Tensor) else 'a tensor of shape ' + str(list(loss.shape))}; "
            "a training step needs a scalar tensor",
        )
    if not loss.requires_grad:
        raise CaptureError(
            "trace",
            "the loss does not require grad: no parameter or input of the forward requires grad "
            "(check grad_enabled, requires_grad on inputs, and frozen parameters)",
        )
    trace.note_grad_fns(loss)
    loss_tree = trace.structure(loss)
    with trace.backward_scope():
        loss.backward()
    grads: list[list[Any]] = []
    if kind == "module":
        for name, p in model.named_parameters():
            if p.grad is not None:
                vid = trace.value_of(p.grad)
                trace.b.values[vid].measured.setdefault("grad_of", name)
                grads.append([name, {"value": vid}])
    for label, t in _labelled_inputs(torch, args, kwargs, labels):
        if t.requires_grad and t.grad is not None:
            vid = trace.value_of(t.grad)
            trace.b.values[vid].measured.setdefault("grad_of", label)
            grads.append([label, {"value": vid}])
    if optimizer is not None:
        with trace.scope("optimizer", type(optimizer).__name__, {"class": type(optimizer).__name__}):
            optimizer.step()
    tree = {"dict": [["output", trace.structure(output)], ["loss", loss_tree], ["grads", {"dict": grads}]]}
    return tree, grads


def _arg_labels(model: Any, kind: str, args: tuple) -> list[str]:
    """The measured ``input`` label of each positional argument: the parameter of
    ``forward`` (of the function, for a function) it binds to (``input_ids``), or
    ``args[i]`` where it lands in ``*args`` or there is no signature."""
    fn = getattr(model, "forward", model) if kind == "module" else model
    return [name or f"args[{i}]" for i, name in enumerate(positional_names(fn, len(args)))]


def _labelled_inputs(torch: Any, args: tuple, kwargs: dict, labels: list[str]) -> list[tuple[str, Any]]:
    out = []
    for a, label in zip(args, labels):
        if isinstance(a, torch.Tensor):
            out.append((label, a))
    for k, v in kwargs.items():
        if isinstance(v, torch.Tensor):
            out.append((k, v))
    return out
