"""The warm worker shares no framework state between captures: Torch RNG, default
device, default dtype and grad mode; JAX config (x64). Each capture's model records what
it found when imported, then changes that state; the next capture must find defaults."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from capture.recipe import parse_profile
from capture.session.runner import run_capture
from capture.session.warm import WarmPool

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from capture_workspace import profile_table, tensor, write  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture
def pool():
    p = WarmPool(idle_seconds=600)
    yield p
    p.close()


TORCH_MODEL = """
import json
import torch

SEEN = {
    "grad": torch.is_grad_enabled(),
    "dtype": str(torch.get_default_dtype()),
    "device": str(torch.get_default_device()),
    "rand": torch.rand(1).item(),
    "patched": hasattr(torch, "tv_patched"),
    "threads": torch.get_num_threads(),
}
with open(RECORD, "a") as fh:
    fh.write(json.dumps(SEEN) + "\\n")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        y = self.fc(x).relu()
        # Change every kind of global state on the way out.
        torch.manual_seed(999)
        torch.rand(5)
        torch.set_default_dtype(torch.float64)
        torch.set_grad_enabled(True)
        torch.set_default_device("meta")
        torch.tv_patched = True
        torch.set_num_threads(1)
        return y
"""


def test_torch_state_does_not_leak_between_captures(tmp_path, pool):
    pytest.importorskip("torch")
    record = tmp_path / "seen.jsonl"
    ws = write(tmp_path / "ws", {"tmodel.py": f"RECORD = {str(record)!r}\n" + TORCH_MODEL})
    table = profile_table("tmodel:Net", args=[tensor([2, 4])])
    pids = []
    for _ in range(3):
        c = run_capture(ws, parse_profile("p", table), timeout=120, warm=pool)
        assert c.failure is None, c.failure
        assert [n.op for n in c.nodes][-1:] and c.nodes
        pids.append(next(iter(pool.workers().values()))["pid"])
    assert pids[0] == pids[1] == pids[2]  # warm: the same resident process each time
    seen = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(seen) == 3  # the workspace module was imported (run) fresh every time
    first = seen[0]
    assert first["dtype"] == "torch.float32" and first["device"] == "cpu" and first["patched"] is False
    for later in seen[1:]:
        assert later == first  # same RNG draw, dtype, device, grad mode, threads; no patch


JAX_MODEL = """
import json
import jax
import jax.numpy as jnp

SEEN = {
    "x64": bool(jax.config.jax_enable_x64),
    "dtype": str(jnp.zeros(1).dtype),
    "patched": hasattr(jnp, "tv_patched"),
    "matmul_precision": str(jax.config.jax_default_matmul_precision),
}
with open(RECORD, "a") as fh:
    fh.write(json.dumps(SEEN) + "\\n")
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_default_matmul_precision", "highest")
jnp.tv_patched = True


def net(x):
    return jnp.tanh(x @ x.T)
"""


def test_jax_config_does_not_leak_between_captures(tmp_path, pool):
    pytest.importorskip("jax")
    record = tmp_path / "seen.jsonl"
    ws = write(tmp_path / "ws", {"jmodel.py": f"RECORD = {str(record)!r}\n" + JAX_MODEL})
    table = profile_table("jmodel:net", args=[tensor([2, 3])], framework="jax")
    for _ in range(2):
        c = run_capture(ws, parse_profile("p", table), timeout=120, warm=pool)
        assert c.failure is None, c.failure
        assert "tanh" in [n.op for n in c.nodes]
    assert next(iter(pool.workers().values()))["captures"] == 2
    first, second = (json.loads(line) for line in record.read_text().splitlines())
    assert first == second == {"x64": False, "dtype": "float32", "patched": False, "matmul_precision": "None"}


def test_jax_is_preloaded_without_a_backend_so_forking_stays_safe(tmp_path, pool):
    """After a JAX capture the resident process holds jax (and the capture's libraries),
    imported but with no backend initialised (JAX's own condition for a safe fork)."""
    pytest.importorskip("jax")
    ws = write(tmp_path / "ws", {"jm.py": "import jax.numpy as jnp\n\ndef net(x):\n    return jnp.sin(x)\n"})
    table = profile_table("jm:net", args=[tensor([3])], framework="jax")
    assert run_capture(ws, parse_profile("p", table), timeout=120, warm=pool).failure is None
    c = run_capture(ws, parse_profile("p", table), timeout=120, warm=pool)
    assert c.failure is None
    info = next(iter(pool.workers().values()))
    assert info["captures"] == 2 and info["preloaded"] > 100  # jax's modules are loaded there
    resident = next(iter(pool._workers.values()))
    assert resident.fork_safe, resident.unsafe_reason
    loaded = {Path(p).name for p, _ in resident.files}
    assert "jm.py" not in loaded  # never the workspace's own module
