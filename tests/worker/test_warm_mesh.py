"""A mesh on the warm worker (issue 34): the resident process has imported JAX and Torch
but started no backend and no process group, so each forked capture simulates exactly
the devices its own mesh needs (JAX's CPU device count is set in the child before its
backend starts; Torch's fake group lives and dies with the child). Captures with
different meshes, and without one, follow each other on one resident."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from capture.recipe import parse_profile
from capture.session.runner import run_capture
from capture.session.warm import WarmPool

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from capture_workspace import profile_table, tensor, write  # noqa: E402

pytestmark = pytest.mark.slow

JAX_MODEL = """
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def net(x):
    return jnp.sum(jax.lax.with_sharding_constraint(x * 2, P("data")))


def plain(x):
    return jnp.sum(x * 2) + len(jax.devices())
"""

TORCH_MODEL = """
import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module


def tp():
    mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("tp",))
    return parallelize_module(torch.nn.Linear(4, 8, bias=False), mesh, ColwiseParallel())
"""


@pytest.fixture
def pool():
    p = WarmPool(idle_seconds=600)
    yield p
    p.close()


def test_meshes_of_different_sizes_on_one_resident(tmp_path, pool):
    pytest.importorskip("jax")
    ws = write(tmp_path / "ws", {"jm.py": JAX_MODEL, "tm.py": TORCH_MODEL})
    seen = []
    for size in (8, 4, None):
        mesh = {"data": {"size": size, "type": "auto"}} if size else None  # a constraint: an automatic axis
        table = profile_table("jm:net" if mesh else "jm:plain", args=[tensor([8, 2])], framework="jax",
                              **({"mesh": mesh} if mesh else {}))
        c = run_capture(ws, parse_profile("p", table), timeout=180, warm=pool)
        assert c.failure is None, c.failure
        seen.append(c.devices["count"] if c.devices else 1)
        if mesh:
            (constraint,) = [n for n in c.nodes if n.op == "sharding_constraint"]
            assert c.values[constraint.outputs[0]].sharding["per_device_shape"] == [8 // size, 2]
    assert seen == [8, 4, 1]
    for _ in range(2):  # a Torch group per child: the second starts from nothing again
        table = profile_table("tm:tp", args=[tensor([2, 4])], init={"factory": "tm:tp"}, mesh={"tp": 2})
        c = run_capture(ws, parse_profile("p", table), timeout=180, warm=pool)
        assert c.failure is None, c.failure
        assert c.meta["per_device_memory"]["param_bytes"] == 4 * 8 * 4 // 2
    info = next(iter(pool.workers().values()))
    assert info["captures"] == 5  # one resident throughout
    resident = next(iter(pool._workers.values()))
    assert resident.fork_safe, resident.unsafe_reason
