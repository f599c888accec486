"""The worker's environment (docs/worker-environment.md, issue 47): what it keeps from the
process that starts it (``PYTHONPATH`` among them), what it drops, and the JAX platforms a
capture may start: a ``cpu`` capture runs JAX with ``JAX_PLATFORMS=cpu`` (so it never
opens an accelerator it does not use, as on a TPU VM where another program holds the
chip), in the one-shot worker and in the warm worker's child alike, unless the person
set ``JAX_PLATFORMS`` themselves."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from capture.recipe import parse_profile
from capture.session.launcher import DROPPED, worker_env
from capture.session.runner import run_capture
from capture.session.warm import WarmPool

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from capture_workspace import profile_table, tensor, write  # noqa: E402

MODEL = """
import os

import jax
import jax.numpy as jnp


def net(x):
    return jnp.tanh(x * 2).sum()


def from_path(x):
    import onpath_helper  # a module only PYTHONPATH names

    return onpath_helper.double(x).sum()
"""


@pytest.mark.parametrize(
    "name, kept",
    [
        ("PYTHONPATH", True),  # a person's JAX may live there (Cloud TPU images)
        ("JAX_PLATFORMS", True),  # the person's own choice wins over the worker's
        ("TPU_NAME", True),  # the TPU_ variables reach JAX
        ("PYTHONWARNINGS", True),
        ("PYTHONHOME", False),  # another Python's standard library
        ("PYTHONSAFEPATH", False),  # would keep the launcher's capture package off the path
        ("PYTHONSTARTUP", False),
        ("PYTHONINSPECT", False),  # would leave the worker at an interactive prompt
    ],
)
def test_worker_env_keeps_and_drops(monkeypatch, name, kept):
    monkeypatch.setenv(name, "/somewhere" if name.startswith("PYTHON") else "value")
    env = worker_env({"EXTRA": "1"})
    assert (name in env) is kept
    assert (name not in DROPPED) is kept
    assert env["EXTRA"] == "1" and env["PYTHONUNBUFFERED"] == "1"


def _capture(ws: Path, model: str, *, env=None, warm=None, device="cpu"):
    table = profile_table(model, args=[tensor([2, 3])], framework="jax", device=device)
    return run_capture(ws, parse_profile("p", table), timeout=180, env=env, warm=warm)


@pytest.mark.slow
def test_a_cpu_capture_starts_the_cpu_backend_alone(tmp_path):
    pytest.importorskip("jax")
    ws = write(tmp_path / "ws", {"m.py": MODEL})
    c = _capture(ws, "m:net")
    assert c.failure is None, c.failure
    assert c.meta["jax_platforms"] == {"value": "cpu", "set_by": "tensorviz", "started": ["cpu"]}
    # the person's own setting is kept as it is
    c = _capture(ws, "m:net", env={"JAX_PLATFORMS": "cpu"})
    assert c.failure is None, c.failure
    assert c.meta["jax_platforms"]["value"] == "cpu"
    assert c.meta["jax_platforms"]["set_by"] == "environment"


@pytest.mark.slow
def test_the_warm_workers_child_sets_the_platforms_too(tmp_path):
    pytest.importorskip("jax")
    ws = write(tmp_path / "ws", {"m.py": MODEL})
    pool = WarmPool(idle_seconds=600)
    try:
        for _ in range(2):  # the second runs on a resident that has imported JAX already
            c = _capture(ws, "m:net", warm=pool)
            assert c.failure is None, c.failure
            assert c.meta["jax_platforms"] == {"value": "cpu", "set_by": "tensorviz", "started": ["cpu"]}
        assert next(iter(pool.workers().values()))["captures"] == 2
    finally:
        pool.close()


@pytest.mark.slow
def test_pythonpath_reaches_the_worker(tmp_path, monkeypatch):
    pytest.importorskip("jax")
    ws = write(tmp_path / "ws", {"m.py": MODEL})
    lib = write(tmp_path / "lib", {"onpath_helper.py": "def double(x):\n    return x * 2\n"})
    # Before what was there: where JAX itself comes from PYTHONPATH (a TPU VM's image), it stays.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(lib), os.environ.get("PYTHONPATH")) if p))
    c = _capture(ws, "m:from_path")
    assert c.failure is None, c.failure
    assert any(n.op == "mul" for n in c.nodes)


@pytest.mark.slow
@pytest.mark.parametrize("device, words", [
    ("tpu", "has no tpu platform (its platforms: cpu"),
    ("tpu:1", "has no tpu platform (its platforms: cpu"),
])
def test_a_tpu_device_without_a_tpu_names_the_platforms_jax_has(tmp_path, device, words):
    pytest.importorskip("jax")
    from capture.jax.platforms import installed_platforms

    # Read without starting a backend: this process may run with JAX_PLATFORMS=cpu.
    if "tpu" in installed_platforms():
        pytest.skip("this machine has a TPU")
    ws = write(tmp_path / "ws", {"m.py": MODEL})
    c = _capture(ws, "m:net", device=device)
    assert c.failure is not None and c.failure.stage == "device"
    assert words in c.failure.message, c.failure.message
    assert "CUDA" not in c.failure.message
    assert c.failure.details["installed_platforms"] == ["cpu"]


def test_the_written_policy_names_what_is_dropped_and_kept():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "worker-environment.md").read_text()
    dropped = doc[doc.index("## Dropped"):doc.index("## Added")]
    for name in DROPPED:
        assert f"`{name}`" in dropped, name
    kept = doc[doc.index("## Kept"):doc.index("## Dropped")]
    assert "`PYTHONPATH`" in kept and "`JAX_PLATFORMS`" in kept
    from capture.jax.platforms import FOR_DEVICE

    for value in FOR_DEVICE.values():
        assert f"| `{value}` |" in doc
