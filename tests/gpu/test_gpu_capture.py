"""The success path on a GPU: a PyTorch module and a JAX function captured on ``cuda:0``
through the real worker (refusals of ``cuda:N`` are tested in tests/worker, tests/jax
and tests/torch).

Skipped, with a reason the strict-skip guard (tests/conftest.py) accepts, only where
the machine has no NVIDIA GPU. A GPU with a framework built without CUDA support is an
install problem, and its skip reason says so (a failure under strict skips)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from capture.recipe import Recipe
from capture.session.runner import run_capture

pytestmark = pytest.mark.gpu

NO_GPU = "this machine has no CUDA GPU"

TORCH_MODEL = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))
"""

# The device scopes the module's import (the spec): the array made there says where.
JAX_MODEL = """\
import os

import jax
import jax.numpy as jnp

with open(os.environ["TV_DEVICE_FILE"], "w") as fh:
    fh.write(" ".join(str(d) for d in jnp.zeros(1).devices()))


@jax.jit
def net(x):
    return jax.nn.relu(x @ jnp.ones((3, 4)))
"""


def machine_has_nvidia_gpu() -> bool:
    return any(Path("/dev").glob("nvidia[0-9]*"))


def needs_cuda(framework: str) -> None:
    """Skip unless ``framework`` in this interpreter can use cuda:0."""
    if importlib.util.find_spec(framework) is None:
        pytest.skip(f"needs {framework}")
    if framework == "torch":
        import torch

        if torch.cuda.is_available():
            return
        build = f"torch {torch.__version__} (CUDA build: {torch.version.cuda})"
    else:
        import jax

        try:
            if jax.devices("cuda"):
                return
        except RuntimeError:
            pass
        build = f"jax {jax.__version__} (backends: {', '.join(sorted({d.platform for d in jax.devices()}))})"
    if not machine_has_nvidia_gpu():
        pytest.skip(f"{NO_GPU} (no /dev/nvidia*; {build})")
    pytest.skip(f"this machine has a GPU, but {build} cannot use it: install the framework's CUDA build")


def workspace(tmp_path: Path, model: str) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "model.py").write_text(model)
    return root


def tensor(*shape: int) -> dict:
    return {"kind": "tensor", "shape": list(shape), "dtype": "float32", "generator": {"kind": "full", "value": 1}}


def test_torch_module_captured_on_cuda_0(tmp_path):
    needs_cuda("torch")
    recipe = Recipe.from_dict({"name": "gpu", "model": "model:Net", "device": "cuda:0",
                               "inputs": {"args": [tensor(2, 3)], "kwargs": {}}})
    c = run_capture(workspace(tmp_path, TORCH_MODEL), recipe, timeout=300)
    assert c.failure is None, c.failure
    assert c.framework == "torch" and c.coverage.scope == "eager_forward" and c.recipe["device"] == "cuda:0"
    assert [n.op for n in c.nodes][-1] == "aten::relu"
    # Measured on the GPU: every value the forward made lives on cuda:0.
    assert {v.measured["device"] for v in c.values if v.measured} == {"cuda:0"}


def test_jax_function_captured_on_cuda_0(tmp_path):
    needs_cuda("jax")
    device_file = tmp_path / "device.txt"
    recipe = Recipe.from_dict({"name": "gpu", "framework": "jax", "model": "model:net", "device": "cuda:0",
                               "inputs": {"args": [tensor(2, 3)], "kwargs": {}}})
    c = run_capture(workspace(tmp_path, JAX_MODEL), recipe, timeout=300, env={"TV_DEVICE_FILE": str(device_file)})
    assert c.failure is None, c.failure
    assert c.backend == "jaxpr" and c.coverage.scope == "traced_program" and c.meta["device"] == "cuda:0"
    assert {n.op for n in c.nodes} >= {"dot_general"}
    assert device_file.read_text().startswith("cuda:0"), device_file.read_text()
