"""Discovery reads workspace files before trust (issue 29 item 2): a FIFO ``.py`` (or a
link to one), a link to a device, and a link out of the workspace are reported as
unreadable at once, never waited on or read; ``tensorviz discover`` on a FIFO returns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from discovery import WorkspaceIndex
from discovery.reading import read_source

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs POSIX special files")


def test_a_fifo_source_is_unreadable_at_once(tmp_path):
    os.mkfifo(tmp_path / "model.py")
    err = read_source(str(tmp_path / "model.py"))
    assert err.code == "unreadable"
    assert "is a pipe (FIFO), not a regular file" in err.message


def test_a_link_to_a_device_is_unreadable(tmp_path):
    os.symlink("/dev/zero", tmp_path / "model.py")
    err = read_source(str(tmp_path / "model.py"))
    assert err.code == "unreadable" and "is a device" in err.message


def test_a_link_out_of_the_workspace_is_not_read(tmp_path):
    secret = tmp_path / "elsewhere.py"
    secret.write_text("import torch\nclass Net(torch.nn.Module):\n    pass\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink(secret, ws / "model.py")
    result = WorkspaceIndex(ws).discover(str(ws / "model.py"))
    assert not result.candidates
    assert [e.code for e in result.errors] == ["unreadable"]
    assert "outside the workspace" in result.errors[0].message


def test_an_oversized_source_is_too_large_without_reading_it_all(tmp_path):
    (tmp_path / "big.py").write_bytes(b"#" * (8_000_001))
    err = read_source(str(tmp_path / "big.py"))
    assert err.code == "too_large"


@pytest.mark.parametrize("linked", [False, True], ids=["fifo", "link-to-fifo"])
def test_discover_on_a_fifo_returns(tmp_path, linked):
    os.mkfifo(tmp_path / "pipe.py")
    name = "pipe.py"
    if linked:
        os.symlink("pipe.py", tmp_path / "model.py")
        name = "model.py"
    proc = subprocess.run([sys.executable, "-m", "tensorviz_lsp", "discover", name, "--json"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60)
    (entry,) = json.loads(proc.stdout)["files"]
    assert entry["errors"][0]["code"] == "unreadable"
