"""Helpers for JAX capture tests: a throwaway workspace and an in-process capture that
follows the worker's order (probe the device, then capture, then encode)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from capture.graph import graphfile
from capture.graph.model import Capture
from capture.worker.context import CaptureContext
from capture.worker.limits import Limits

from capture_workspace import forget_workspace_modules, profile_table, run_framework, tensor, write  # noqa: F401

SPEC_INPUT = {
    "kind": "tensor",
    "shape": [2, 3],
    "dtype": "float32",
    "requires_grad": False,
    "generator": {"kind": "full", "value": 1},
}


def profile(model: str, **fields) -> dict[str, Any]:
    """A ``[profiles.p]`` table for ``framework = "jax"``, the spec's defaults."""
    return profile_table(model, **{"framework": "jax", **fields})


def capture_in_process(root: Path, table: dict[str, Any], *, limits: Limits | None = None) -> tuple[Capture, CaptureContext]:
    """``(capture, ctx)`` for ``table`` run in this process; CaptureError propagates."""
    from capture.jax import framework as fw

    cap, ctx = run_framework(fw, root, table, limits)
    graphfile.decode(graphfile.encode(cap))  # what the worker sends must be a valid file
    return cap, ctx


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
