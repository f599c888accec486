"""The native recorder's build, as a person gets it through the worker: the worker never
builds (its process tree is swept when the capture ends), the session does, with the
capture's interpreter, after the capture; the next capture records natively, and the
graph is the same (``capture.session.native_build``)."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from capture.graph.meta import RECORDER_NOT_BUILT  # noqa: E402
from capture.recipe import parse_profile  # noqa: E402
from capture.session import native_build  # noqa: E402
from capture.session.runner import run_capture  # noqa: E402
from capture.torch import native as native_pkg  # noqa: E402
from capture.worker.procs import MARKER_ENV, PARENT_ENV  # noqa: E402

from torch_workspace import profile, tensor  # noqa: E402


def _nodes(c) -> list:
    return [(n.op, [(o.position, o.value) for o in n.inputs], n.outputs, n.group, n.frame, n.params) for n in c.nodes]


@pytest.mark.slow
def test_the_session_builds_the_recorder_after_a_capture_and_the_next_one_records_natively(ws, tmp_path, monkeypatch):
    missing = native_pkg.missing_tools()
    if missing is not None:
        pytest.skip(f"the native recorder needs a C++ toolchain: {missing}")
    monkeypatch.delenv(native_pkg.ENV, raising=False)
    # A cache of its own, with no build in it: the session's build compiles there (~40-80 s
    # of one core).
    cache = tmp_path / "cache"
    monkeypatch.setenv("TENSORVIZ_NATIVE_CACHE", str(cache))
    folder = native_pkg.cache_dir()
    env = {"TENSORVIZ_NATIVE_CACHE": str(cache)}
    table = profile("models:Block", args=[tensor([2, 5, 16])])

    first = run_capture(ws, parse_profile("p", table), timeout=120, env=env)
    assert first.failure is None, first.failure
    assert first.meta["recorder"].startswith(RECORDER_NOT_BUILT), first.meta["recorder"]
    assert not first.meta.get("escaped_processes")
    deadline = time.monotonic() + 600  # a compile on a loaded machine (three test workers)
    while not (folder / "ready").is_file() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (folder / "ready").is_file(), (folder / "build.log").read_text() if (folder / "build.log").is_file() else ""

    second = run_capture(ws, parse_profile("p", table), timeout=120, env=env)
    assert second.failure is None, second.failure
    assert second.meta["recorder"] == "native"
    assert _nodes(second) == _nodes(first)
    assert [(v.shape, v.dtype) for v in second.values] == [(v.shape, v.dtype) for v in first.values]


def test_only_a_note_saying_the_recorder_is_not_built_asks_for_a_build():
    assert native_build.wanted({"recorder": RECORDER_NOT_BUILT + "; TensorViz builds it in the background"})
    for meta in ({"recorder": "native"}, {"recorder": "python (TENSORVIZ_TORCH_RECORDER=python)"},
                 {"recorder": "python: the native recorder did not build: CompileError"}, {}, None):
        assert not native_build.wanted(meta)


def test_the_build_runs_the_captures_interpreter_outside_any_worker(tmp_path, monkeypatch):
    """A stand-in interpreter records how it was started: the build module on a path of
    links to this capture package alone, its own session, no worker marker, the capture's
    variables; its folder is gone when it ends; one build per interpreter at a time."""
    out = tmp_path / "seen"
    fake = tmp_path / "python"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "folder = sys.argv[-1]\n"
        f"json.dump({{'argv': sys.argv[1:], 'sid': os.getsid(0), 'pgid': os.getpgrp(), 'pid': os.getpid(),\n"
        "           'links': sorted(os.listdir(folder)), 'env': dict(os.environ)},\n"
        f"          open({str(out)!r}, 'w'))\n"
        "import shutil; shutil.rmtree(folder)\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv(MARKER_ENV, "parent-marker")
    monkeypatch.setenv(PARENT_ENV, "1")
    proc = native_build.start(str(fake), {"TENSORVIZ_NATIVE_CACHE": "/somewhere"})
    assert proc is not None
    assert proc.wait(timeout=30) == 0
    import json

    seen = json.loads(out.read_text())
    assert "from capture.torch.native import build_main" in seen["argv"][1]
    assert set(seen["links"]) - {"owner"} == {"capture", "safe_read"}
    assert seen["sid"] == seen["pid"] != os.getsid(0)
    assert MARKER_ENV not in seen["env"] and PARENT_ENV not in seen["env"]
    assert seen["env"]["TENSORVIZ_NATIVE_CACHE"] == "/somewhere"
    assert not Path(seen["argv"][-1]).exists()


def test_one_build_per_interpreter_at_a_time(tmp_path):
    slow = tmp_path / "python"
    slow.write_text(f"#!{sys.executable}\nimport time; time.sleep(30)\n")
    slow.chmod(0o755)
    first = native_build.start(str(slow))
    try:
        assert first is not None
        assert native_build.start(str(slow)) is None
    finally:
        if first is not None:
            first.kill()
            first.wait()
            shutil.rmtree(first.args[-1], ignore_errors=True)
