"""The Neovim plugin when no browser opens (issue 49, item 6): :checkhealth tensorviz says
every open failed (an ERROR, not OK), and :TensorVizShow opens the last graph again. Headless
Neovim with the plugin's own handler; no server or capture is needed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from test_neovim import ROOT, nvim_argv, nvim_env, pytestmark  # noqa: F401 (the same marks)

LUA = Path(__file__).with_name("neovim_browser_opens.lua")


def test_failed_browser_opens_are_reported_and_the_graph_can_be_shown_again(tmp_path):
    out = tmp_path / "result.json"
    env = nvim_env(tmp_path, tmp_path, TV_OUT=str(out), TV_PLUGIN=str(ROOT / "editors" / "nvim"))
    proc = subprocess.run(nvim_argv(LUA, 60), cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.exists(), f"Neovim wrote no result (exit {proc.returncode}): {proc.stderr[-2000:]}"
    result = json.loads(out.read_text())
    assert result.get("error") is None, result
    assert "TensorVizShow" in result["commands"]
    assert result["handler_success"] is False
    failed = "\n".join(result["health_failed"])
    assert "ERROR every browser open failed this session (2 of 2): vim.ui.open: no handler found" in failed, failed
    assert ":TensorVizShow to try again" in failed
    mixed = "\n".join(result["health_mixed"])
    assert "WARNING 2 of 3 browser opens failed this session" in mixed, mixed
    # :TensorVizShow before any graph says so; after, it opens the last URL again.
    assert any("no graph opened yet" in n for n in result["notes"]), result["notes"]
    assert result["opened"].count("http://127.0.0.1:1/tok/?capture=1") == 4, result["opened"]
