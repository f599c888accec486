"""The browser app's pure modules (no DOM, no canvas) tested by ``node --test`` under
``tests/viewer/unit/``, in Node, without Chromium: run here so that the suite (and CI)
runs them. Node is the one ``.ci/run`` installs for the VS Code extension's harness."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parent / "unit"
ROOT = UNIT.parents[2]


def test_the_pure_modules_pass_their_node_tests():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (.ci/run installs it)")
    files = sorted(str(p.relative_to(ROOT)) for p in UNIT.glob("*.test.mjs"))
    assert files, "no node tests found"
    # The app's modules are ES modules without a package.json "type": Node detects it.
    done = subprocess.run([node, "--experimental-detect-module", "--test", *files], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    passed = re.search(r"^# pass (\d+)$", done.stdout, re.M)
    failed = re.search(r"^# fail (\d+)$", done.stdout, re.M)
    assert done.returncode == 0 and failed and failed.group(1) == "0", done.stdout[-4000:] + done.stderr[-2000:]
    assert passed and int(passed.group(1)) >= 20, done.stdout[-2000:]
