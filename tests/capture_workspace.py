"""Helpers shared by the JAX and Torch capture tests (``tests/jax/jax_workspace.py``,
``tests/torch/torch_workspace.py``): recipe tables, a throwaway workspace, and an
in-process capture that follows the worker's order (probe the device, then capture)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

from capture.graph import later_stats
from capture.graph.invariants import check_producers
from capture.graph.model import Capture
from capture.recipe import parse_profile
from capture.worker.context import CaptureContext
from capture.worker.limits import Limits


def tensor(shape, dtype="float32", **extra) -> dict[str, Any]:
    return {"kind": "tensor", "shape": list(shape), "dtype": dtype, **extra}


def profile_table(model: str, *, args=None, kwargs=None, init=None, inputs=None, **fields) -> dict[str, Any]:
    """A ``[profiles.p]`` table with the spec's defaults; ``fields`` add or replace keys
    (``framework`` among them: omitted means Torch)."""
    table = {
        "kind": "model",
        "model": model,
        "mode": "eval",
        "device": "cpu",
        "grad_enabled": False,
        "seed": 0,
        "init": init if init is not None else {"args": [], "kwargs": {}},
        "inputs": inputs if inputs is not None else {"args": list(args or []), "kwargs": dict(kwargs or {})},
    }
    table.update(fields)
    return table


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


def run_framework(fw: ModuleType, root: Path, table: dict[str, Any], limits: Limits | None) -> tuple[Capture, CaptureContext]:
    """``(capture, ctx)`` for ``table`` captured by framework module ``fw`` in this
    process, in the worker's order; CaptureError propagates."""
    _forget_other_workspaces(root)
    ctx = CaptureContext(parse_profile("p", table), root, limits)
    fw.probe_device(ctx)
    cap = fw.capture(ctx)
    check_producers(cap)  # as the worker does before it writes the graph file
    if ctx.after_result is not None:  # statistics after the graph: the worker's message, merged as the parent does
        rows, skipped = ctx.after_result()
        cap = later_stats.complete(cap, rows, skipped)
    return cap, ctx


def _forget_other_workspaces(root: Path) -> None:
    """Drop modules named like a file of ``root`` that another test's workspace left in
    this process (a test that did not forget its ``models``: the next in-process capture
    of ``models:Net`` found the old module without ``Net``)."""
    here = os.path.realpath(root) + os.sep
    for path in Path(root).iterdir():
        name = path.stem if path.suffix == ".py" else path.name if path.is_dir() else None
        mod = sys.modules.get(name) if name else None
        f = getattr(mod, "__file__", None)
        if isinstance(f, str) and not os.path.realpath(f).startswith(here) and _in_tmp(f):
            for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
                del sys.modules[key]


def _in_tmp(file: str) -> bool:
    """Whether ``file`` lives under the temporary folder (a test's workspace, never an installed package)."""
    import tempfile

    return os.path.realpath(file).startswith(os.path.realpath(tempfile.gettempdir()) + os.sep)


def forget_workspace_modules(root: Path) -> None:
    """Drop modules imported from ``root`` (each test's workspace reuses module names)."""
    prefix = os.path.realpath(root) + os.sep
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if isinstance(f, str) and os.path.realpath(f).startswith(prefix):
            del sys.modules[name]
    sys.path[:] = [p for p in sys.path if not os.path.realpath(p or ".").startswith(prefix.rstrip(os.sep))]
