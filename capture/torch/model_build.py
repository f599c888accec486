"""Building the model a Torch capture runs: Python's, NumPy's and Torch's seeds, the
recipe's input tensors, the model's construction (a class, a factory or an instance),
its checkpoint, and the memory guard around an eager build (:mod:`capture.torch.memory`).
Called by :mod:`capture.torch.framework`, which holds torch's module (``torch`` here is
that module, passed in)."""

from __future__ import annotations

import math
import os
import random
from typing import Any, Callable

from ..graph.meta import CaptureMeta, MemoryEstimate
from ..recipe import TensorLeaf, leaf_seed
from ..worker.context import CaptureContext
from ..worker.errors import CaptureError
from ..worker.targets import partial_of_class
from ..worker.plugin_helpers import describe_type, require_model_factory


def _seed_everything(torch: Any, seed: int) -> None:
    random.seed(seed)
    try:
        import numpy
    except Exception:  # NumPy is optional in the selected interpreter
        numpy = None
    if numpy is not None:
        numpy.random.seed(seed % (1 << 32))
    torch.manual_seed(seed)  # every device's generator


def _tensor_maker(torch: Any, seed: int, device: Any) -> Callable[[TensorLeaf], Any]:
    """Tensors from descriptions: generated on the CPU from a generator seeded per leaf
    (so a leaf is the same on every device), then moved to ``device``."""

    def make(leaf: TensorLeaf) -> Any:
        desc = leaf.desc
        shape = desc.dims
        dtype = getattr(torch, desc.dtype)
        g = desc.generator
        gen = torch.Generator().manual_seed(leaf_seed(seed, leaf.index))
        floating = dtype.is_floating_point or dtype.is_complex
        # Draw in a precise dtype, then cast: bfloat16/float16 draws go through float32.
        wide = dtype if dtype in (torch.float32, torch.float64, torch.complex64, torch.complex128) else torch.float32
        if g.kind == "zeros":
            t = torch.zeros(shape, dtype=dtype)
        elif g.kind == "ones":
            t = torch.ones(shape, dtype=dtype)
        elif g.kind == "full":
            t = torch.full(shape, g.value, dtype=dtype)
        elif g.kind == "arange":
            t = torch.arange(math.prod(shape), dtype=torch.float64 if floating else torch.int64).reshape(shape).to(dtype)
        elif g.kind == "normal":
            t = (torch.randn(shape, generator=gen, dtype=wide) * g.std + g.mean).to(dtype)
        elif g.kind == "uniform":
            low, high = g.bounds
            t = (torch.rand(shape, generator=gen, dtype=wide) * (high - low) + low).to(dtype)
        elif g.kind == "randint":
            low, high = g.bounds
            if high - 1 > (1 << 63) - 1:
                raise CaptureError("recipe", f"{leaf.path}: randint above 2**63 is not supported by the Torch capture")
            t = torch.randint(low, high, shape, generator=gen, dtype=torch.int64).to(dtype)
        else:  # the recipe layer admits no other generator
            raise CaptureError("recipe", f"{leaf.path}: unknown generator {g.kind!r}")
        t = t.to(device)
        if desc.requires_grad:
            t.requires_grad_(True)
        return t

    return make


def _require_empty_init(ctx: CaptureContext, why: str, *, steps: bool = True) -> None:
    """Refuse constructor arguments (and, unless ``steps``, steps after construction:
    a plain function is not built, so ``init.then`` has nothing to act on)."""
    if not ctx.recipe.init.is_empty:
        raise CaptureError(
            "recipe", f"{why}; use init.factory to return a configured module or callable",
            {"key_path": f"profiles.{ctx.recipe.name}.init"},
        )
    if ctx.recipe.init.then and not steps:
        raise CaptureError(
            "recipe", f"{why}: nothing is built, so init.then has nothing to act on; use init.factory to return "
                      f"a configured module or callable",
            {"key_path": f"profiles.{ctx.recipe.name}.init.then"},
        )


def _build_model(ctx: CaptureContext, torch: Any, target: Any, make_tensor: Callable,
                 built: CaptureMeta | None = None) -> tuple[Any, str]:
    """The object to call and its kind (``module`` or ``function``), built as its library
    builds it (:mod:`capture.torch.library_models`: a ``transformers`` subclass as its
    library class, in the model's own dtype or the recipe's); what that adopted is
    added to ``built`` (the capture's meta)."""
    from .library_models import building

    with building(torch, ctx.recipe.dtype) as record:
        got = _construct(ctx, torch, target, make_tensor)
    if built is not None:
        built.update(record.meta())
    return got


def _construct(ctx: CaptureContext, torch: Any, target: Any, make_tensor: Callable) -> tuple[Any, str]:
    recipe = ctx.recipe
    ref = recipe.model
    factory = recipe.init.factory
    Module = torch.nn.Module
    if recipe.model_factory:
        return _from_model_factory(ctx, Module, target, make_tensor)
    # A partial of a module class with a literal init is built as the class, the partial's
    # arguments first; with an init factory the factory's result is the model, as for any
    # callable (a partial of anything else is a function).
    partial = partial_of_class(target) if factory is None else None
    if partial is not None and issubclass(partial.cls, Module):
        target = partial.cls
    else:
        partial = None
    if isinstance(target, type):
        if not issubclass(target, Module):
            raise CaptureError(
                "recipe",
                f"{ref} is a class but not a torch.nn.Module subclass; PyTorch captures open modules and functions",
            )
        if factory is not None:
            model = ctx.call_factory(factory)
            if not isinstance(model, target):
                raise CaptureError(
                    "recipe",
                    f"init factory {factory} returned {describe_type(model)}; expected an instance of the selected "
                    f"module class {target.__qualname__}",
                    {"expected": target.__qualname__, "found": type(model).__qualname__},
                )
        else:
            args, kwargs = ctx.materialize("init", make_tensor)
            if partial is not None:
                args, kwargs = partial.arguments(args, kwargs)
            model = target(*args, **kwargs)
        return model, "module"
    if isinstance(target, Module):
        _require_empty_init(ctx, f"{ref} is a module instance")
        return target, "module"
    if factory is not None:
        obj = ctx.call_factory(factory)
        if not callable(obj):
            raise CaptureError("recipe", f"init factory {factory} returned {describe_type(obj)}, which is not callable")
        return obj, "module" if isinstance(obj, Module) else "function"
    _require_empty_init(ctx, f"{ref} is a plain function: it takes its arguments from inputs, with an empty init",
                        steps=False)
    if not callable(target):
        raise CaptureError("recipe", f"{ref} is {describe_type(target)}, not a torch.nn.Module or a function")
    return target, "function"


def _from_model_factory(ctx: CaptureContext, Module: type, target: Any, make_tensor: Callable) -> tuple[Any, str]:
    """``model_factory = true``: ``model`` names a function (``build_model(...) ->
    nn.Module``) called with the literal init; what it returns is the model."""
    ref = ctx.recipe.model
    require_model_factory(ctx, target)
    args, kwargs = ctx.materialize("init", make_tensor)
    model = target(*args, **kwargs)
    if isinstance(model, Module):
        return model, "module"
    if callable(model):
        return model, "function"
    raise CaptureError("recipe", f"{ref} (model_factory = true) returned {describe_type(model)}; expected a "
                                 "torch.nn.Module (or a callable) to capture with the inputs",
                       {"found": type(model).__qualname__})


# meta["state"] labels of a Torch module's weights and what each means (meta["state_note"]).
STATE_NOTES = {
    "fresh_init": "freshly initialized by the module's constructor after torch.manual_seed(seed), not trained weights",
    "factory_state": "the state of the module the init factory built",
    "module_instance": "the state of the module-level instance as its module's import left it",
    "abstract": "abstract: no weights; the module was built on fake tensors (its parameters have shapes, dtypes "
                "and strides, and no storage)",
}


def _weights(ctx: CaptureContext, torch: Any, target: Any, model: Any, kind: str, device: Any,
             abstract: bool = False) -> CaptureMeta:
    """Load ``init.checkpoint`` when there is one (check it, for abstract evidence); the
    meta saying where the weights came from."""
    recipe = ctx.recipe
    if recipe.init.checkpoint is not None:
        if kind != "module":
            raise CaptureError(
                "recipe",
                f"init.checkpoint loads a state dict into a torch.nn.Module; {recipe.model} is "
                f"{describe_type(model)}, which has none",
                {"key_path": f"profiles.{recipe.name}.init.checkpoint"},
            )
        if abstract:
            from .saved import check_checkpoint

            ctx.progress(f"checking the checkpoint {recipe.init.checkpoint} (names and shapes)", 0.25)
            return check_checkpoint(ctx, torch, model)
        from .saved import load_checkpoint

        ctx.progress(f"loading the checkpoint {recipe.init.checkpoint}", 0.25)
        return load_checkpoint(ctx, torch, model, device)
    if kind != "module":
        return CaptureMeta()
    label = "abstract" if abstract else "module_instance" if isinstance(target, torch.nn.Module) else (
        "factory_state" if recipe.init.factory is not None else "fresh_init")
    return {"state": label, "state_note": STATE_NOTES[label]}


def _guarded_build(ctx: CaptureContext, torch: Any, target: Any, make_tensor: Callable,
                   built: CaptureMeta) -> tuple[Any, str, MemoryEstimate]:
    """The eager build under a :class:`~capture.torch.memory.BuildGuard`: a model that
    allocates over 1 GiB (or half of the memory it may use) is estimated abstractly (in
    a forked child) and the capture fails when it cannot fit. ``(model, kind, memory meta)``."""
    from .memory import (CHECK_BYTES, CHECK_FRACTION, ESTIMATE_SECONDS, BuildGuard, check_fits,
                         estimate_model_bytes, memory_budget, model_bytes)

    recipe = ctx.recipe
    limit = ctx.limits.max_memory_bytes
    budget, _ = memory_budget(limit)
    if budget is None or isinstance(target, torch.nn.Module):
        model, kind = _build_model(ctx, torch, target, make_tensor, built)
        return model, kind, {"status": "unchecked", "reason": "a module-level instance, built by its import"
                             if budget is not None else "the memory available is unknown here"}
    checkpoint_bytes = 0
    if recipe.init.checkpoint is not None:
        path = os.path.join(str(ctx.workspace), *recipe.init.checkpoint.split("/"))
        checkpoint_bytes = os.path.getsize(path) if os.path.isfile(path) else 0
    report: MemoryEstimate = {"status": "not_needed", "budget_bytes": budget}

    def build_abstractly() -> dict[str, int] | None:
        with torch.device("meta"):
            model, kind = _build_model(ctx, torch, target, make_tensor)
        return model_bytes(model) if kind == "module" else None

    def estimate(allocated: int) -> None:
        ctx.progress("estimating the model's memory (an abstract build)", 0.2)
        result = estimate_model_bytes(build_abstractly, min(ESTIMATE_SECONDS, max(ctx.time_left(), 0.0) / 4))
        nonlocal report
        report = result.copy()
        report["budget_bytes"] = budget
        report["allocated_before_check"] = allocated
        if result.get("status") == "ok":
            check_fits(result, checkpoint_bytes=checkpoint_bytes, memory_limit=limit,
                       evidence_key_path=f"profiles.{recipe.name}.evidence", offer_abstract=recipe.kind == "model")

    threshold = min(CHECK_BYTES, int(budget * CHECK_FRACTION))
    if 2 * checkpoint_bytes > threshold:
        estimate(0)
        threshold = 1 << 62  # checked already
    guard = BuildGuard(threshold, estimate)
    with guard:
        model, kind = _build_model(ctx, torch, target, make_tensor, built)
    report["allocated_bytes"] = guard.allocated
    return model, kind, report
