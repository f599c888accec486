"""The Neovim plugin (editors/nvim) in headless Neovim 0.11 against the real server:
setup() starts it, the :TensorViz* commands, the statusline, :checkhealth tensorviz,
:TensorVizDiff, :TensorVizCancel ending a hanging capture within a second; a failed
recapture on the line that raised, and the save that fixes it recapturing."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tensorviz_lsp.cli.commands.demo import MODEL_PY as SPEC_NET
from tensorviz_lsp.cli.commands.demo import RECIPES_TOML as SPEC_RECIPE

from test_neovim import ROOT, nvim_argv, nvim_env, pytestmark  # noqa: F401 (the same marks)

pytestmark = pytest.mark.slow

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
    assert result["commands"] == ["TensorVizCancel", "TensorVizDiff", "TensorVizOpen", "TensorVizShow",
                                  "TensorVizShowInGraph", "TensorVizTrust"]
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
    # Within a second: the script's wait for the cancelled capture is 1 s long.
    assert "capture of slow cancelled (cancelled by the user (tensorviz.cancelCapture))" in cancelled["message"]



# A Torch model whose blocks' forward is where a failure will happen.
STACK = '''\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        h = self.fc(x)
        return torch.relu(h) + x


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
'''
STACK_RECIPE = '''\
version = 1

[profiles.stack]
kind = "model"
model = "stack:Stack"
inputs = { args = [{ kind = "tensor", shape = [2, 8], dtype = "float32" }], kwargs = {} }
'''


@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch in the capture interpreter")
def test_the_plugin_shows_a_failed_recapture_on_the_raising_line_and_the_fixing_save_recaptures(tmp_path):
    """Issue 30, "Done when": with the plugin and recaptureOnSave, a forward that raises
    has its error on the line that raised (a hint on the model's class points there), and
    the save that fixes it recaptures, back to the text last captured."""
    ws = tmp_path / "ws"
    (ws / ".tensorviz").mkdir(parents=True)
    (ws / "stack.py").write_text(STACK)
    (ws / ".tensorviz" / "recipes.toml").write_text(STACK_RECIPE)
    out = tmp_path / "result.json"
    env = nvim_env(tmp_path, ws, TV_OUT=str(out), TV_PLUGIN=str(PLUGIN))
    proc = subprocess.run(nvim_argv(Path(__file__).with_name("neovim_plugin_failures.lua"), 400),
                          cwd=ws, env=env, capture_output=True, text=True)
    assert out.exists(), f"Neovim wrote no result (exit {proc.returncode}): {proc.stderr[-2000:]}"
    result = json.loads(out.read_text())
    assert result.get("error") is None, result
    raising = result["raising_line"]  # 0-based: `h = self.fc(x) @ torch.ones(5, 2)` in Block.forward
    assert STACK.splitlines()[raising].strip() == "h = self.fc(x)"
    class_line = STACK.splitlines().index("class Stack(nn.Module):")
    failed = [d for d in result["failed"] if d["code"] == "capture-trace"]
    error, hint = sorted(failed, key=lambda d: d["severity"])
    # (The graph on screen is the first capture's, and says it is stale.)
    assert [d["code"] for d in result["failed"] if d not in failed] == ["stale-graph"], result["failed"]
    assert error["severity"] == 1 and error["line"] == raising, result["failed"]
    assert error["message"].startswith("Capture of Stack (profile stack) failed at trace: RuntimeError: "), error
    assert f"stack.py:{raising + 1} in Block.forward" in error["related"], error
    assert hint["severity"] == 4 and hint["line"] == class_line, hint
    assert hint["message"] == f"capture of stack failed, see line {raising + 1} (RuntimeError)", hint
    # The failing save and the fixing save each recaptured (the fix's text is the
    # first capture's: no "unchanged" shortcut), and the fix's capture succeeded.
    assert result["recaptures"] == 2, result["logs"]
    assert proc.returncode == 0, proc.stderr[-3000:]
