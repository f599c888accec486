"""Helpers for JAX capture tests: a throwaway workspace and an in-process capture that
follows the worker's order (probe the device, then capture, then encode)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from typing import Any

from capture import graphfile
from capture.recipe import parse_profile
from capture.worker.context import CaptureContext
from capture.worker.limits import Limits

SPEC_INPUT = {
    "kind": "tensor",
    "shape": [2, 3],
    "dtype": "float32",
    "requires_grad": False,
    "generator": {"kind": "full", "value": 1},
}


def tensor(shape, dtype="float32", **extra) -> dict[str, Any]:
    return {"kind": "tensor", "shape": list(shape), "dtype": dtype, **extra}


def profile(model: str, *, args=None, kwargs=None, init=None, inputs=None, **fields) -> dict[str, Any]:
    """A ``[profiles.p]`` table for ``framework = "jax"``, the spec's defaults."""
    table = {
        "kind": "model",
        "framework": "jax",
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


def capture_in_process(root: Path, table: dict[str, Any], *, limits: Limits | None = None):
    """``(capture, ctx)`` for ``table`` run in this process; CaptureError propagates."""
    from capture.frameworks import jax as fw

    ctx = CaptureContext(parse_profile("p", table), root, limits)
    fw.probe_device(ctx)
    cap = fw.capture(ctx)
    graphfile.decode(graphfile.encode(cap))  # what the worker sends must be a valid file
    return cap, ctx


def forget_workspace_modules(root: Path) -> None:
    """Drop modules imported from ``root`` (each test's workspace reuses module names)."""
    prefix = os.path.realpath(root) + os.sep
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if isinstance(f, str) and os.path.realpath(f).startswith(prefix):
            del sys.modules[name]
    sys.path[:] = [p for p in sys.path if not os.path.realpath(p or ".").startswith(prefix.rstrip(os.sep))]


def cuda_device_count() -> int:
    """How many CUDA devices JAX sees in this interpreter (0 without a working CUDA backend)."""
    import jax

    try:
        return len(jax.devices("cuda"))
    except RuntimeError:
        return 0


def skip_if_cuda(why: str) -> None:
    """Skip a test that needs ``cuda:0`` to be absent, on a machine where JAX sees a GPU.
    The reason names a machine fact the strict-skip mode of ``tests/conftest.py`` allows."""
    import pytest

    n = cuda_device_count()
    if n:
        pytest.skip(f"this machine has CUDA (JAX sees {n} cuda device(s)): {why}")
