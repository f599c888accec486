"""The framework plug-in contract: :class:`FrameworkPlugin`, and :func:`load_plugin`.

A framework capture is a module in a folder of its own (``capture/torch/framework.py``,
``capture/jax/framework.py``; TensorViz's own tests add ``tests/fake_framework.py``),
registered in :mod:`capture.frameworks` with one line. The module itself is the plug-in:
its module-level names implement :class:`FrameworkPlugin` (a typed ``Protocol``; a
module satisfies it as an object with those attributes would). Everything runs inside
the worker process, in the selected interpreter, with the workspace root as the working
directory, in this order:

``VERSION: str``
    The framework's version as far as it is known before the framework is imported
    (``""`` when unknown): what a failure before :meth:`~FrameworkPlugin.imported_version`
    reports.

``imported_version() -> str``
    Import the framework (lazily, here; ``import_framework`` of
    :mod:`capture.worker.context` says clearly what is missing) and return its version
    as it reports it, or ``""`` to keep ``VERSION`` (a framework imported only by the
    device check).

``check_supported(version: str) -> None``
    Refuse a version TensorViz does not support: ``CaptureError("dependencies", …)``
    naming the version found and the one needed. Nothing to check: return.

``probe_device(ctx: CaptureContext) -> None``
    Called BEFORE the model or any factory is imported. Import the framework (lazily,
    here) and check that ``ctx.recipe.device`` (``"cpu"``, ``"cuda:N"``, or for JAX ``"tpu"`` / ``"tpu:N"``) is available.
    Raise ``CaptureError("device", message, details)`` when the backend or the index is
    not; never fall back to CPU.

``capture(ctx: CaptureContext) -> capture.graph.model.Capture``
    Import the model (``ctx.import_object(ctx.recipe.model)``), build it (literal
    ``init`` through :meth:`CaptureContext.materialize`, ``call`` descriptions included,
    or ``ctx.call_factory(ref)``), build the inputs (:meth:`CaptureContext.inputs_call`),
    trace, and return the canonical capture, ideally built with
    :meth:`CaptureContext.new_builder` (which enforces ``max_ops``/``max_values``/
    ``max_groups`` as nodes are added).

    The worker fills in ``recipe`` (``ctx.recipe.to_dict()``) and ``sources`` (every
    workspace file imported, with the sha256 of the text it was imported from, taken at
    import time by :meth:`WorkspaceFiles.watch_imports`), checks the op/value/call counts
    and the encoded size against ``ctx.limits``, and sends it. Return a capture with
    nodes; a trace that produced nothing should raise, never return an empty success.

    Errors: raise :class:`CaptureError` (or :class:`LimitExceeded`) for a known failure;
    any other exception (from user code, MemoryError …) becomes ``stage = "trace"`` with
    its type, message and the workspace frames of its traceback. Chain user-code
    exceptions (``raise CaptureError(...) from exc``) so their frames are kept.

Seeding: the n-th array leaf of the literal descriptions (``ctx.recipe.tensors()``, init
before inputs) is generated from ``capture.recipe.leaf_seed(recipe.seed, n)``;
:meth:`CaptureContext.materialize` passes each leaf with its index to ``make_tensor``.
"""

from __future__ import annotations

import inspect
from typing import Protocol, cast, runtime_checkable

from ..frameworks import framework_info, load_framework
from ..graph.model import Capture
from .context import CaptureContext


@runtime_checkable
class FrameworkPlugin(Protocol):
    """What a registered framework's module provides (see the module docstring)."""

    VERSION: str

    def imported_version(self) -> str:
        """Import the framework; its version ("" keeps ``VERSION``)."""
        ...

    def check_supported(self, version: str) -> None:
        """Refuse an unsupported ``version`` (``CaptureError("dependencies")``)."""
        ...

    def probe_device(self, ctx: CaptureContext) -> None:
        """Check the recipe's device before any workspace code is imported."""
        ...

    def capture(self, ctx: CaptureContext) -> Capture:
        """Build the model and its inputs, trace, return the canonical capture."""
        ...


#: The contract's members, each with the parameters a module's function takes (no self).
CONTRACT: dict[str, tuple[str, ...] | None] = {
    "VERSION": None,
    "imported_version": (),
    "check_supported": ("version",),
    "probe_device": ("ctx",),
    "capture": ("ctx",),
}


def contract_problems(plugin: object) -> list[str]:
    """How ``plugin`` (a module) breaks :class:`FrameworkPlugin`: one phrase per member
    missing or taking other parameters; empty when it keeps the contract."""
    problems = []
    for name, params in CONTRACT.items():
        if not hasattr(plugin, name):
            problems.append(f"no {name}")
            continue
        member = getattr(plugin, name)
        if params is None:
            if not isinstance(member, str):
                problems.append(f"{name} is a {type(member).__name__}, not a str")
            continue
        if not callable(member):
            problems.append(f"{name} is not callable")
            continue
        try:
            got = tuple(inspect.signature(member).parameters)
        except (TypeError, ValueError):
            continue  # a builtin: nothing to compare
        if got != params:
            problems.append(f"{name}({', '.join(got)}) instead of {name}({', '.join(params)})")
    return problems


def load_plugin(name: str) -> FrameworkPlugin:
    """The registered framework ``name``'s plug-in, imported and checked against the
    contract (``ImportError`` naming the module and what it lacks)."""
    module = load_framework(name)
    problems = contract_problems(module)
    if problems:
        info = framework_info(name)
        where = info.path or info.module
        raise ImportError(f"the {name} capture ({where}) does not implement the framework plug-in contract "
                          f"(capture.worker.plugin.FrameworkPlugin): {'; '.join(problems)}")
    return cast(FrameworkPlugin, module)
