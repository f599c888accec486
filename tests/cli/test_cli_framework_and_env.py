"""The CLI shorthand takes the framework from discovery, and ``--env`` gives the capture
worker its environment (``JAX_ENABLE_X64=1`` for 64-bit JAX inputs); through the real
command (subprocess), on the specification's own examples."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

import pytest

from interpreters import make_venv
from spec_examples import SPEC_MLP, SPEC_NET

ROOT = Path(__file__).resolve().parents[2]
HAS_JAX = importlib.util.find_spec("jax") is not None and importlib.util.find_spec("flax") is not None
HAS_TORCH = importlib.util.find_spec("torch") is not None


def needs_jax(test):
    return pytest.mark.jax(pytest.mark.skipif(not HAS_JAX, reason="needs jax and flax")(test))

TORCH_NET = """\
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)

    def forward(self, x):
        return self.fc(x)
"""


def tensorviz(*args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    env.update(PYTHONPATH=str(ROOT), DISPLAY="", WAYLAND_DISPLAY="", BROWSER="")
    return subprocess.run([sys.executable, "-m", "tensorviz_lsp", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def profiles(ws: Path) -> dict:
    return tomllib.loads((ws / ".tensorviz" / "recipes.toml").read_text())["profiles"]


def graph(path: str):
    from capture.graph import graphfile

    return graphfile.read(path.strip())


@pytest.mark.slow
@needs_jax
def test_spec_net_is_saved_as_jax_without_framework(tmp_path):
    (tmp_path / "model.py").write_text(SPEC_NET)
    proc = tensorviz("capture", "model.py:net", "--input", "x=float32[2,3]", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert profiles(tmp_path)["net"]["framework"] == "jax"
    assert 'framework = "jax"' in (tmp_path / ".tensorviz" / "recipes.toml").read_text()
    c = graph(proc.stdout)
    assert c.failure is None and c.backend == "jaxpr" and c.framework == "jax" and c.nodes


PARTIAL_LINEN = """
from functools import partial

import flax.linen as nn


class Block(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        return nn.relu(nn.Dense(self.features)(x))


class Net(nn.Module):
    depth: int
    block_cls: type
    outputs: int

    @nn.compact
    def __call__(self, x, train: bool = True):
        for _ in range(self.depth):
            x = self.block_cls(8)(x)
        return nn.Dense(self.outputs)(x)


Net2 = partial(Net, depth=2, block_cls=Block)
"""


@pytest.mark.slow
@needs_jax
def test_a_partial_of_a_linen_class_is_captured_by_its_name(tmp_path):
    # Flax's examples name their models so (ResNet18 = partial(ResNet, ...)); only the
    # field the partial leaves is given
    (tmp_path / "models.py").write_text(PARTIAL_LINEN)
    proc = tensorviz("capture", "models.py:Net2", "--input", "x=float32[2,3]", "--input", "train=False",
                     "--init", "outputs=4", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    saved = profiles(tmp_path)["Net2"]
    assert (saved["model"], saved["framework"], saved["init"]["kwargs"]) == ("models:Net2", "jax", {"outputs": 4})
    c = graph(proc.stdout)
    assert c.failure is None and [g.attrs["class"] for g in c.groups if g.kind == "module"].count("Block") == 2


@pytest.mark.slow
@needs_jax
def test_a_class_given_to_a_field_is_a_ref(tmp_path):
    # Flax's ResNet(block_cls=ResNetBlock): the bare name is the class, passed uncalled
    (tmp_path / "models.py").write_text(PARTIAL_LINEN)
    proc = tensorviz("capture", "models.py:Net", "--input", "x=float32[2,3]", "--input", "train=False",
                     "--init", "depth=3", "--init", "block_cls=Block", "--init", "outputs=4", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert profiles(tmp_path)["Net"]["init"]["kwargs"]["block_cls"] == {"kind": "ref", "target": "models:Block"}
    c = graph(proc.stdout)
    assert c.failure is None and [g.attrs["class"] for g in c.groups if g.kind == "module"].count("Block") == 3
    proc = tensorviz("capture", "models.py:Net", "--input", "x=float32[2,3]", "--init", "depth=3",
                     "--init", "block_cls=Blok", "--init", "outputs=4", cwd=tmp_path)
    assert proc.returncode == 2 and "Blok is not defined or imported in models.py (it has: Block, Net" in proc.stderr


@pytest.mark.slow
@needs_jax
def test_spec_mlp_is_saved_as_jax_with_its_init(tmp_path):
    (tmp_path / "model.py").write_text(SPEC_MLP)
    proc = tensorviz("capture", "model.py:MLP", "--input", "x=float32[2,3]", "--init", "width=8", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    saved = profiles(tmp_path)["MLP"]
    assert saved["framework"] == "jax" and saved["init"]["kwargs"] == {"width": 8}
    c = graph(proc.stdout)
    assert c.failure is None and c.framework == "jax" and c.nodes


@pytest.mark.slow
def test_unknown_symbol_is_a_usage_error_listing_the_candidates(tmp_path):
    (tmp_path / "model.py").write_text(SPEC_NET + "\n\n" + SPEC_MLP)
    proc = tensorviz("capture", "model.py:nett", "--input", "x=float32[2,3]", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("tensorviz capture: model.py:nett: ")
    assert "no model or function named 'nett' in model.py" in proc.stderr
    assert "net (jax_function), MLP (linen_module)" in proc.stderr and "--framework" in proc.stderr
    assert not (tmp_path / ".tensorviz").exists(), "nothing saved"
    proc = tensorviz("open", "model.py:nett", "--input", "x=float32[2,3]", "--no-browser", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("tensorviz open: model.py:nett: ")


def test_a_file_without_candidates_says_so(tmp_path):
    (tmp_path / "util.py").write_text("def helper(x):\n    return x\n")
    proc = tensorviz("capture", "util.py:helper", "--input", "x=float32[2,3]", cwd=tmp_path)
    assert proc.returncode == 2 and "finds no candidates in that file" in proc.stderr


@pytest.mark.slow
@needs_jax
def test_explicit_framework_skips_discovery(tmp_path):
    """Discovery finds nothing in a file that never imports JAX; --framework captures anyway."""
    (tmp_path / "util.py").write_text("def helper(x):\n    return x * 2\n")
    proc = tensorviz("capture", "util.py:helper", "--input", "x=float32[2,3]", "--framework", "jax", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert profiles(tmp_path)["helper"]["framework"] == "jax"
    c = graph(proc.stdout)
    assert c.failure is None and c.framework == "jax" and [n.op for n in c.nodes] == ["mul"]


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_torch_module_keeps_the_omitted_default(tmp_path):
    (tmp_path / "model.py").write_text(TORCH_NET)
    proc = tensorviz("capture", "model.py:Net", "--input", "float32[2,3]", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    saved = profiles(tmp_path)["Net"]
    assert "framework" not in saved and saved["model"] == "model:Net"
    c = graph(proc.stdout)
    assert c.failure is None and c.framework == "torch" and c.nodes
    assert c.recipe["model"] == "model:Net"


@pytest.mark.slow
def test_a_missing_framework_is_a_dependencies_failure_not_a_usage_error(tmp_path):
    """The capture runs, in an interpreter without torch: exit 1 naming what to install."""
    (tmp_path / "model.py").write_text(TORCH_NET)
    bare = make_venv(tmp_path / "bare", see_running_packages=False)
    proc = tensorviz("capture", "model.py:Net", "--input", "float32[2,3]", "--python", str(bare), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "torch" in proc.stderr and f"{bare} -m pip install" in proc.stderr
    assert graph(proc.stdout).failure.stage == "dependencies"


@pytest.mark.slow
@needs_jax
def test_x64_input_needs_env_flag(tmp_path):
    (tmp_path / "model.py").write_text(SPEC_NET)
    args = ("capture", "model.py:net", "--input", "x=float64[2,3]")
    proc = tensorviz(*args, cwd=tmp_path)
    assert proc.returncode == 1
    assert "JAX_ENABLE_X64=1" in proc.stderr and "hint: capture again with --env JAX_ENABLE_X64=1" in proc.stderr
    assert graph(proc.stdout).failure is not None
    proc = tensorviz(*args, "--env", "JAX_ENABLE_X64=1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    c = graph(proc.stdout)
    assert c.failure is None and "float64" in {v.dtype for v in c.values}
    assert "JAX_ENABLE_X64" not in (tmp_path / ".tensorviz" / "recipes.toml").read_text(), "not saved"
    # The saved-profile form takes it too.
    proc = tensorviz("capture", "--profile", "net", "--env", "JAX_ENABLE_X64=1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
@needs_jax
def test_open_discovers_the_framework_and_takes_env(tmp_path):
    (tmp_path / "model.py").write_text(SPEC_NET)
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    env.update(PYTHONPATH=str(ROOT), DISPLAY="", WAYLAND_DISPLAY="", BROWSER="")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tensorviz_lsp", "open", "model.py:net", "--input", "x=float64[2,3]",
         "--env", "JAX_ENABLE_X64=1", "--no-browser"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.poll() is not None else url
        with urllib.request.urlopen(url + "api/capture", timeout=10) as res:
            capture = json.load(res)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert capture["failure"] is None and capture["framework"] == "jax"
    assert profiles(tmp_path)["net"]["framework"] == "jax"


@pytest.mark.parametrize("command", ["capture", "open"])
@pytest.mark.parametrize("bad", ["JAX_ENABLE_X64", "=1", "1X=1", "A B=1"])
def test_bad_env_is_a_usage_error(tmp_path, command, bad):
    proc = tensorviz(command, "--profile", "p", "--env", bad, "--no-browser" if command == "open" else "-v", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith(f"tensorviz {command}: --env ")
