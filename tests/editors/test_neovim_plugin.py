"""The Neovim plugin (editors/nvim) in headless Neovim 0.11 against the real server:
setup() starts it, the :TensorViz* commands, the statusline, :checkhealth tensorviz,
:TensorVizDiff, and :TensorVizCancel ending a hanging capture within a second."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path


from tensorviz_lsp.commands.demo import MODEL_PY as SPEC_NET
from tensorviz_lsp.commands.demo import RECIPES_TOML as SPEC_RECIPE

from test_neovim import ROOT, nvim_argv, nvim_env, pytestmark  # noqa: F401 (the same marks)

PLUGIN = ROOT / "editors" / "nvim"
LUA = Path(__file__).with_name("neovim_plugin.lua")

# A JAX function whose trace hangs: what :TensorVizCancel is for.
SLOW = '''\
import time

import jax.numpy as jnp


def slow(x):
    time.sleep(120)
    return jnp.tanh(x) * 2
'''
SLOW_RECIPE = '''
[profiles.slow]
kind = "model"
framework = "jax"
model = "slow:slow"
inputs = { args = [{ kind = "tensor", shape = [2], dtype = "float32" }], kwargs = {} }
'''


def test_the_plugin_drives_the_editor_loop(tmp_path):
    ws = tmp_path / "ws"
    (ws / ".tensorviz").mkdir(parents=True)
    (ws / "model.py").write_text(SPEC_NET)
    (ws / "slow.py").write_text(SLOW)
    (ws / ".tensorviz" / "recipes.toml").write_text(SPEC_RECIPE + SLOW_RECIPE)
    out = tmp_path / "result.json"
    env = nvim_env(tmp_path, ws, TV_OUT=str(out), TV_PLUGIN=str(PLUGIN))
    proc = subprocess.run(nvim_argv(LUA, 280), cwd=ws, env=env, capture_output=True, text=True)
    assert out.exists(), f"Neovim wrote no result (exit {proc.returncode}): {proc.stderr[-2000:]}"
    result = json.loads(out.read_text())
    assert result.get("error") is None, result
    assert result["server"]["name"] == "tensorviz"
    assert result["commands"] == ["TensorVizCancel", "TensorVizDiff", "TensorVizOpen", "TensorVizShowInGraph",
                                  "TensorVizTrust"]
    assert result["url"].startswith("http://127.0.0.1:") and "?capture=" in result["url"]
    # The statusline named the capture and its stage, with the seconds it has run.
    lines = result["statuslines"]
    assert any(s.startswith("TensorViz: capturing net · ") for s in lines), lines
    assert any(re.search(r"^TensorViz: capturing slow · tracing with jax\.make_jaxpr \(\d+ s\)$", s) for s in lines), lines
    health = "\n".join(result["health"])
    assert "tensorviz: server" in health and "tensorviz 0.1" in health and "running (client" in health, health
    assert "tensorviz: capture interpreter" in health and f"Python {sys.version.split()[0]}" in health, health
    assert "frameworks: " in health and "jax" in health, health
    assert "the viewer answers at http://127.0.0.1:" in health and "<token>" in health, health
    assert "ERROR" not in health, health
    diff = result["diff"]
    assert diff["profile"] == "jax_example" and diff["code"] == 0, diff
    assert result["diff_buffer"] == "tensorviz-diff://jax_example"
    cancelled = result["cancelled"]
    assert "capture of slow cancelled (cancelled by the user (tensorviz.cancelCapture))" in cancelled["message"]
    assert cancelled["seconds"] < 1.0, cancelled

