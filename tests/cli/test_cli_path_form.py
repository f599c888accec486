"""The CLI shorthand on files no dotted module can name: ``tensorviz capture|open
06_scan_over_layers.py:ScanMLP`` saves the path form (docs/setups.md) and
captures through it; a file in a package keeps the dotted form."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import urllib.request

import pytest

from test_cli_framework_and_env import HAS_JAX, HAS_TORCH, ROOT, TORCH_NET, graph, profiles, tensorviz

from capture.recipe import Recipe  # noqa: E402
from tensorviz_lsp.setup.shorthand import build_recipe, default_profile_name, parse_target  # noqa: E402

SCAN_MLP = textwrap.dedent("""
    import jax
    from flax import nnx


    class Block(nnx.Module):
        def __init__(self, dim: int, *, rngs: nnx.Rngs):
            self.linear = nnx.Linear(dim, dim, rngs=rngs)

        def __call__(self, x):
            return nnx.relu(self.linear(x))


    class ScanMLP(nnx.Module):
        def __init__(self, dim: int, *, n_layers: int, rngs: nnx.Rngs):
            @nnx.split_rngs(splits=n_layers)
            @nnx.vmap(in_axes=(0,), out_axes=0)
            def create_block(rngs: nnx.Rngs):
                return Block(dim, rngs=rngs)

            self.layers = create_block(rngs)

        def __call__(self, x: jax.Array) -> jax.Array:
            @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
            def forward(x, block):
                return block(x)

            return forward(x, self.layers)
""").lstrip()


def test_the_shorthand_writes_the_path_form_only_where_needed(tmp_path, monkeypatch):
    for name in ("06_scan_over_layers.py", "scripts/train-model.py", "scripts/model.py", "pkg/__init__.py",
                 "pkg/model.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    monkeypatch.chdir(tmp_path)
    t = parse_target("06_scan_over_layers.py:ScanMLP")
    assert (t.module, t.ref) == ("06_scan_over_layers.py", "06_scan_over_layers.py:ScanMLP")
    assert default_profile_name(t) == "ScanMLP"
    r = build_recipe(t, inputs=["x=float32[2,8]"], framework="jax")
    assert r.model == "06_scan_over_layers.py:ScanMLP" and Recipe.from_dict(r.to_dict()) == r
    assert parse_target("scripts/train-model.py:Net").ref == "scripts/train-model.py:Net"
    assert parse_target("scripts/model.py:Net").ref == "scripts/model.py:Net"  # a script folder
    assert parse_target("pkg/model.py:Net").ref == "pkg.model:Net"  # a package: dotted, as before
    (tmp_path / "my.model.py").write_text("")
    with pytest.raises(ValueError, match="holds a '.' before .py"):
        parse_target("my.model.py:Net")


@pytest.mark.slow
@pytest.mark.jax
@pytest.mark.skipif(not HAS_JAX, reason="needs jax and flax")
def test_capture_and_open_a_digit_named_file(tmp_path):
    (tmp_path / "06_scan_over_layers.py").write_text(SCAN_MLP)
    proc = tensorviz("capture", "06_scan_over_layers.py:ScanMLP", "--input", "x=float32[2,8]",
                     "--init", "dim=8", "--init", "n_layers=3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    saved = profiles(tmp_path)["ScanMLP"]
    assert saved["model"] == "06_scan_over_layers.py:ScanMLP" and saved["framework"] == "jax"
    c = graph(proc.stdout)
    assert c.failure is None, c.failure
    assert "scan" in {n.op for n in c.nodes} and [s.path for s in c.sources] == ["06_scan_over_layers.py"]

    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    env.update(PYTHONPATH=str(ROOT), DISPLAY="", WAYLAND_DISPLAY="", BROWSER="")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tensorviz_lsp", "open", "06_scan_over_layers.py:ScanMLP", "--no-browser"],
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
    assert capture["failure"] is None and capture["recipe"]["model"] == "06_scan_over_layers.py:ScanMLP"


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_capture_a_dashed_torch_file(tmp_path):
    (tmp_path / "train-model.py").write_text(TORCH_NET)
    proc = tensorviz("capture", "train-model.py:Net", "--input", "float32[2,3]", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    saved = profiles(tmp_path)["Net"]
    assert saved["model"] == "train-model.py:Net" and "framework" not in saved
    c = graph(proc.stdout)
    assert c.failure is None and c.framework == "torch" and c.nodes
