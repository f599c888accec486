"""The warm worker (capture.session.warm): one resident process per folder that forks a child
per capture. Fake framework here (fast); the framework state kinds (Torch RNG, default
device, grad mode, JAX x64) are in tests/worker/test_warm_isolation.py."""

from __future__ import annotations

import os
import threading
import time

import pytest

from capture.graph.model import Capture
from capture.session.runner import run_capture
from capture.session.warm import WarmPool
from fake_workspace import fake_recipe, tensor
from processes import exited


@pytest.fixture
def pool():
    p = WarmPool(idle_seconds=600)
    yield p
    p.close()


def capture(workspace, pool, model, *args, **kw) -> Capture:
    options = {k: kw.pop(k) for k in list(kw) if k in ("timeout", "limits", "cancel", "env", "log", "progress", "python", "unsaved", "trusted")}
    return run_capture(workspace, fake_recipe(model, *args or (tensor(2, 3), tensor(3, 4)), **kw), warm=pool, **options)


def resident_pid(pool, workspace) -> int:
    (info,) = pool.workers().values()
    return info["pid"]


def test_the_resident_process_is_kept_and_each_capture_is_a_new_child(workspace, pool):
    c1 = capture(workspace, pool, "models:net")
    assert c1.failure is None and [n.op for n in c1.nodes] == ["matmul", "relu", "mul", "reduce_sum"]
    pid = resident_pid(pool, workspace)
    c2 = capture(workspace, pool, "models:net")
    assert c2.failure is None and len(c2.nodes) == 4
    assert resident_pid(pool, workspace) == pid
    assert pool.workers()[str(workspace.resolve())]["captures"] == 2


def test_workspace_modules_are_loaded_fresh_from_the_saved_file(workspace, pool):
    c1 = capture(workspace, pool, "models:net")
    assert [n.op for n in c1.nodes][:2] == ["matmul", "relu"]
    models = workspace / "models.py"
    models.write_text(models.read_text().replace("h = block(x, w)", "h = block(x, w) * 3.0"))
    helpers = workspace / "helpers.py"
    helpers.write_text(helpers.read_text().replace(".relu()", ".relu().relu()"))
    c2 = capture(workspace, pool, "models:net")
    assert c2.failure is None
    assert [n.op for n in c2.nodes] == ["matmul", "relu", "relu", "mul", "mul", "reduce_sum"]
    # The graph's sources are the hashes of the files as saved now.
    import hashlib

    assert {s.path: s.sha256 for s in c2.sources}["helpers.py"] == hashlib.sha256(helpers.read_bytes()).hexdigest()


def test_module_state_and_monkey_patches_do_not_reach_the_next_capture(workspace, pool, tmp_path):
    record = tmp_path / "seen.txt"
    (workspace / "leaky.py").write_text(
        "import json, os, sys, random\n"
        "seen = [hasattr(json, 'tv_leak'), 'leaky' in sys.modules and False, os.environ.get('TV_LEAK'), random.random()]\n"
        f"open({str(record)!r}, 'a').write(repr(seen) + '\\n')\n"
        "json.tv_leak = True\n"
        "os.environ['TV_LEAK'] = '1'\n"
        "sys.modules['json'].dumps = None\n"
        "def net(x, w):\n"
        "    return (x @ w).relu()\n"
    )
    for _ in range(2):
        c = capture(workspace, pool, "leaky:net")
        assert c.failure is None, c.failure
    lines = record.read_text().splitlines()
    assert len(lines) == 2  # the module ran again: imported fresh
    first, second = (eval(line) for line in lines)
    assert first[:3] == second[:3] == [False, False, None]
    assert first[3] != second[3]  # Python's random is reseeded in each child


@pytest.mark.slow
def test_an_error_raised_in_the_child_keeps_the_resident_process(workspace, pool):
    """The model raising is the child's own failure: it reported it and exited, and the
    resident process, which ran none of it, stays warm (issue 30 item 2). A failure the
    child did not report cleanly (a crash, the deadline, a cancel) still discards it."""
    assert capture(workspace, pool, "models:net").failure is None
    pid = resident_pid(pool, workspace)
    c = capture(workspace, pool, "crashy:raises", tensor(2, 3))
    assert (c.failure.stage, c.failure.type) == ("trace", "ValueError")
    assert c.failure.frames and c.failure.frames[-1].function == "helper"
    assert resident_pid(pool, workspace) == pid and not pool.discarded
    # The next capture forks from the same resident, and runs as before.
    c = capture(workspace, pool, "models:net")
    assert c.failure is None and [n.op for n in c.nodes] == ["matmul", "relu", "mul", "reduce_sum"]
    assert resident_pid(pool, workspace) == pid
    assert pool.workers()[str(workspace.resolve())]["captures"] == 3
    # A workspace module that does not import (a syntax error) is the child's too.
    (workspace / "broken.py").write_text("def net(x, w):\n    return (x @ w\n")
    c = capture(workspace, pool, "broken:net")
    assert c.failure.stage == "import" and resident_pid(pool, workspace) == pid
    # A crash is not: the resident is discarded, and the next capture starts a new one.
    c = capture(workspace, pool, "crashy:segfault", tensor(2, 3))
    assert c.failure.stage == "crash" and exited(pid, 10) and "failed" in pool.discarded[-1][1]
    assert capture(workspace, pool, "models:net").failure is None
    assert resident_pid(pool, workspace) != pid


def test_a_crash_is_reported_and_discards(workspace, pool):
    assert capture(workspace, pool, "models:net").failure is None
    pid = resident_pid(pool, workspace)
    c = capture(workspace, pool, "crashy:segfault", tensor(2, 3))
    f = c.failure
    assert (f.stage, f.type) == ("crash", "WorkerCrashed")
    assert "SIGSEGV" in f.message
    assert [fr.file for fr in f.frames][-1:] == ["crashy.py"]
    assert pool.workers() == {} and exited(pid, 10)


@pytest.mark.slow
def test_the_deadline_kills_a_runaway_capture_and_the_resident(workspace, pool, tmp_path):
    assert capture(workspace, pool, "models:net").failure is None
    pid = resident_pid(pool, workspace)
    child_pid = tmp_path / "child.pid"
    # (How long from the deadline to the failure: benchmarks/bench_hostile.py.)
    c = capture(workspace, pool, "crashy:hang", tensor(2, 3), timeout=3, env={"TV_WORKER_PID": str(child_pid)})
    assert (c.failure.stage, c.failure.type) == ("deadline", "DeadlineExceeded")
    assert exited(int(child_pid.read_text()), 10)
    assert exited(pid, 10)
    assert pool.workers() == {}


def test_cancel_kills_and_discards(workspace, pool, tmp_path):
    assert capture(workspace, pool, "models:net").failure is None
    pid = resident_pid(pool, workspace)
    cancel = threading.Event()
    child_pid = tmp_path / "child.pid"

    def cancel_once_it_hangs() -> None:
        # (A cancel while the resident still imports what the first capture loaded ends
        # the wait at once: the child would never have run.)
        deadline = time.monotonic() + 60
        while not (child_pid.exists() and child_pid.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        cancel.set()

    threading.Thread(target=cancel_once_it_hangs, daemon=True).start()
    c = capture(workspace, pool, "crashy:hang", tensor(2, 3), timeout=60, cancel=cancel, env={"TV_WORKER_PID": str(child_pid)})
    assert c.failure.stage == "cancelled"
    assert exited(pid, 10) and exited(int(child_pid.read_text()), 10)


@pytest.mark.slow
def test_another_environment_or_interpreter_replaces_the_resident(workspace, pool, tmp_path):
    from interpreters import make_venv

    assert capture(workspace, pool, "models:net").failure is None
    pid = resident_pid(pool, workspace)
    assert capture(workspace, pool, "models:net", env={"SOME_SETTING": "1"}).failure is None
    assert exited(pid, 10) and "environment" in pool.discarded[-1][1]
    pid = resident_pid(pool, workspace)
    # Another interpreter with the same packages (a bare symlink to a venv's python
    # would lose the venv: it finds pyvenv.cfg beside the link, not the target).
    other = make_venv(tmp_path / "other-venv", see_running_packages=True)
    assert capture(workspace, pool, "models:net", env={"SOME_SETTING": "1"}, python=str(other)).failure is None
    assert exited(pid, 10) and "interpreter" in pool.discarded[-1][1]
    assert len(pool.workers()) == 1


def test_a_changed_dependency_discards_the_resident(workspace, pool, tmp_path):
    # A library outside the workspace, on the interpreter's path: edited after it was
    # preloaded, the resident process holding the old one is replaced.
    lib = tmp_path / "libs"
    lib.mkdir()
    (lib / "tvdep.py").write_text("SCALE = 2.0\n")
    (workspace / "usesdep.py").write_text(
        "import tvdep\n\ndef net(x, w):\n    return (x @ w) * tvdep.SCALE\n"
    )
    env = {"PYTHONPATH": str(lib)}
    assert capture(workspace, pool, "usesdep:net", env=env).failure is None
    pid = resident_pid(pool, workspace)
    assert capture(workspace, pool, "usesdep:net", env=env).failure is None  # tvdep preloaded now
    assert resident_pid(pool, workspace) == pid
    time.sleep(0.01)
    (lib / "tvdep.py").write_text("SCALE = 3.0\n")
    os.utime(lib / "tvdep.py", ns=(time.time_ns(), time.time_ns() + 10**9))
    assert capture(workspace, pool, "usesdep:net", env=env).failure is None
    assert exited(pid, 10), (pool.discarded, pool.workers(), [f for f in next(iter(pool._workers.values())).files if "tvdep" in f[0]])
    assert "tvdep.py" in pool.discarded[-1][1] or "dependency" in pool.discarded[-1][1]


def test_an_idle_resident_is_shut_down(workspace):
    pool = WarmPool(idle_seconds=0.5)
    try:
        assert capture(workspace, pool, "models:net").failure is None
        pid = resident_pid(pool, workspace)
        deadline = time.monotonic() + 10
        while pool.workers() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pool.workers() == {}
        assert exited(pid, 10)
        assert "idle" in pool.discarded[-1][1]
    finally:
        pool.close()


def test_close_stops_every_resident(workspace, pool):
    assert capture(workspace, pool, "models:net").failure is None
    pid = resident_pid(pool, workspace)
    pool.close()
    assert exited(pid, 10)
    # A closed pool runs captures one-shot.
    assert capture(workspace, pool, "models:net").failure is None
    assert pool.workers() == {}


def test_the_checks_stay_as_strict(workspace, pool, tmp_path):
    assert capture(workspace, pool, "models:net").failure is None
    c = capture(workspace, pool, "models:net", trusted=False)
    assert c.failure.stage == "trust"
    c = capture(workspace, pool, "models:net", unsaved=[str(workspace / "helpers.py")])
    assert c.failure.stage == "source"
    c = capture(workspace, pool, "models:net", python=str(tmp_path / "nope" / "python"))
    assert c.failure.stage == "interpreter"


def test_a_capture_does_not_outlive_the_parent(workspace, pool, tmp_path):
    """The resident process watches its parent's end of the pipe while a child runs:
    when it closes (the language server died), the child's group is killed and the
    resident exits."""
    child_pid = tmp_path / "child.pid"
    done = threading.Event()

    def run() -> None:
        capture(workspace, pool, "crashy:hang", tensor(2, 3), timeout=60, env={"TV_WORKER_PID": str(child_pid)})
        done.set()

    threading.Thread(target=run, daemon=True).start()
    deadline = time.monotonic() + 30
    while not child_pid.exists() or not child_pid.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int(child_pid.read_text())
    resident = next(iter(pool._workers.values()))
    resident.proc.stdin.close()  # as when the parent process dies
    assert exited(child, 10), "the child was killed"
    assert exited(resident.proc.pid, 10), "the resident exited"
    assert done.wait(20)  # and the parent's capture ended (a crash report)


def test_retain_discards_when_the_folders_settings_no_longer_match(workspace, pool):
    import sys

    assert capture(workspace, pool, "models:net", env={"A": "1"}).failure is None
    pid = resident_pid(pool, workspace)
    assert pool.retain(workspace, sys.executable, {"A": "1"}) is False  # still matches
    assert resident_pid(pool, workspace) == pid
    assert pool.retain(workspace, sys.executable, {"A": "2"}) is True
    assert exited(pid, 10) and "environment" in pool.discarded[-1][1]
    assert capture(workspace, pool, "models:net").failure is None
    pid = resident_pid(pool, workspace)
    assert pool.retain(workspace, "/other/python", {}) is True
    assert exited(pid, 10) and "interpreter" in pool.discarded[-1][1]
