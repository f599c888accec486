"""``tensorviz capture … --mesh data=4,model=2`` (issue 34), through the real command: the
mesh is saved in the profile, the worker simulates its devices, and ``inspect`` says so;
a mistake in ``--mesh`` is a usage error before anything is saved or run."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HAS_JAX = importlib.util.find_spec("jax") is not None

MODEL = """\
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


@jax.jit
def net(x, w):
    h = jax.lax.with_sharding_constraint(x @ w, P("data", "model"))
    return jax.nn.relu(h)
"""


def tensorviz(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DISPLAY": "", "WAYLAND_DISPLAY": "", "BROWSER": ""}
    return subprocess.run([sys.executable, "-m", "tensorviz_lsp", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.jax
@pytest.mark.skipif(not HAS_JAX, reason="needs jax and flax")
def test_capture_with_a_mesh_and_inspect(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    out = tmp_path / "net.tvg"
    proc = tensorviz("capture", "model.py:net", "--input", "x=float32[8,16]", "--input", "w=float32[16,32]",
                     "--mesh", "data=4:auto,model=2:auto", "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    saved = tomllib.loads((tmp_path / ".tensorviz" / "recipes.toml").read_text())["profiles"]["net"]
    assert saved["mesh"] == {"data": {"size": 4, "type": "auto"}, "model": {"size": 2, "type": "auto"}}
    summary = tensorviz("inspect", str(out), cwd=tmp_path, timeout=60)
    assert summary.returncode == 0, summary.stderr
    text = summary.stdout
    assert "mesh 0:     data=4 × model=2, 8 devices (Mesh, from the recipe)" in text
    assert "devices:    8 cpu devices, simulated" in text
    assert "per device: params 0 B · inputs 2.5 KiB" in text  # x and w are not split
    # the program as XLA compiles it for the 8 devices: its collectives, FLOPs and memory per device
    assert "compiled:    by XLA for 8 devices in" in text and "XLA memory:  peak" in text


EXPLICIT = """import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def step(x, w):
    h = jax.sharding.reshard(x, P("batch", None)) @ w
    return jnp.sum(jax.sharding.reshard(h, P()))
"""


@pytest.mark.slow
@pytest.mark.jax
@pytest.mark.skipif(not HAS_JAX, reason="needs jax and flax")
def test_an_axis_given_by_its_size_is_explicit_as_jax_make_mesh_makes_it(tmp_path):
    # A program written for jax.make_mesh's default (Explicit) axes runs as written.
    (tmp_path / "model.py").write_text(EXPLICIT)
    out = tmp_path / "step.tvg"
    proc = tensorviz("capture", "model.py:step", "--input", "x=float32[16,8]", "--input", "w=float32[8,4]",
                     "--mesh", "batch=8", "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = tensorviz("inspect", str(out), cwd=tmp_path, timeout=60).stdout
    assert "mesh 0:     batch=8 (explicit), 8 devices (Mesh, from the recipe)" in text
    assert "collectives: none written by the program" in text
    assert "compiler collectives: " in text and "all-gather(batch)" in text


def test_a_mesh_mistake_is_a_usage_error(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    proc = tensorviz("capture", "model.py:net", "--input", "x=float32[8,16]", "--input", "w=float32[16,32]",
                     "--framework", "jax", "--mesh", "data=four", cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert "--mesh 'data=four': expected AXIS=SIZE" in proc.stderr
    assert not (tmp_path / ".tensorviz" / "recipes.toml").exists()
