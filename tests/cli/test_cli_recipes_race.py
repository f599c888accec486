"""Two ``tensorviz capture … --profile a`` / ``--profile b`` started together (issue 29
item 4): both exit 0 and both profiles are saved, every round. (Without the lock beside
``recipes.toml`` one was lost in 9 of 15 rounds.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import fake_framework
from capture.frameworks import TEST_PLUGINS_ENV
from tensorviz_lsp.recipes_store import list_profiles

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_two_captures_started_together_keep_both_profiles(tmp_path):
    env = {**os.environ, TEST_PLUGINS_ENV: fake_framework.PLUGIN, "PYTHONPATH": str(ROOT)}
    (tmp_path / "model.py").write_text("def net(x):\n    return (x * 2.0).relu()\n")
    (tmp_path / "other.py").write_text("def net(x):\n    return (x + 1.0).relu()\n")
    expected: list[str] = []
    for round_ in range(5):
        procs = [
            subprocess.Popen([sys.executable, "-m", "tensorviz_lsp", "capture", f"{module}.py:net", "--framework",
                              "fake", "--input", "x=float32[2,3]", "--profile", f"{letter}{round_}"],
                             cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for module, letter in (("model", "a"), ("other", "b"))
        ]
        for p in procs:
            _, err = p.communicate(timeout=180)
            assert p.returncode == 0, err
        expected += [f"a{round_}", f"b{round_}"]
        assert sorted(list_profiles(tmp_path)) == sorted(expected), f"round {round_}"
    assert not [n for n in os.listdir(tmp_path / ".tensorviz") if n.endswith(".tmp")]
