"""The CLI and the editor run one capture session (``capture/session/``): for one recipe
they write the same graph file, in the same place, byte for byte, and keep it in the same
history. Real pieces: the ``tensorviz`` CLI and the language server over stdio, each with
its own worker (the CLI a one-shot one, the server its folder's warm one).

Nothing is normalised: the spec's JAX ``net`` is a traced program, so its graph file
carries no per-run timings (``meta.elapsed_s`` is set only for eager captures), and every
other field is the same in both runs.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from capture.graph import graphfile
from capture.session import CAPTURES_DIR, CaptureHistory

from .conftest import REAL_SERVER, ROOT, start_session, stop_session

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.jax,
    pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax"),
              pytest.mark.slow]

PROFILE = "jax_example"  # the spec recipe's profile of model.py:net


def cli_capture(workspace: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "tensorviz_lsp", "capture", "--workspace", str(workspace), "--profile", PROFILE],
        capture_output=True, text=True, env=env, cwd=workspace, timeout=300,
    )


async def test_the_cli_and_the_editor_write_the_same_graph_file_in_the_same_place(spec_workspace, config_dir):
    target = spec_workspace / CAPTURES_DIR / f"{PROFILE}.tvg"
    done = cli_capture(spec_workspace)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == target
    from_cli = target.read_bytes()
    target.unlink()

    session = await start_session(spec_workspace, config_dir, server=REAL_SERVER)
    try:
        await session.execute("tensorviz.trustWorkspace")
        result = await session.execute("tensorviz.captureProfile", {"profile": PROFILE}, timeout=300)
        assert result["ok"] is True, result
        assert Path(result["file"]) == target
    finally:
        await stop_session(session)
    from_editor = target.read_bytes()

    assert graphfile.decode(from_editor).nodes, "a real graph, not a failure record"
    assert from_editor == from_cli
    # One history, written by the same function: both captures are in it, as captured.
    kept = CaptureHistory(spec_workspace).entries(PROFILE)
    assert [e.seq for e in kept] == [2, 1]
    assert {e.path.read_bytes() for e in kept} == {from_cli}
