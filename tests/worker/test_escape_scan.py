"""Which processes a kill names as escaped (``capture.worker.procs``): only those that
left every process group of the worker (a ``setsid`` or ``setpgid`` away), never one of
the worker's own (its keeper's or resident's group, the warm worker's capture child and
its group, a zombie, a process whose state can no longer be read).

The flaky failure these reproduce deterministically (a warm capture under load): "1
process(es) it started outside its process group were killed: 5530 (?)". The resident's
keeper, killed with its group, died before the resident did; the resident, still
exiting (its command line already gone: "?"), was re-parented to the capture's parent
(a child subreaper), whose chase of adopted orphans named every one alive, whatever
its group. Here the scan of /proc is made to miss the orphan (as it did: the orphan was
adopted after the scan), so the chase alone decides, every time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from capture.worker import procs
from processes import exited

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and child subreapers are Linux's")

# A keeper: forks the "resident" (which may move to a group or session of its own, then
# sleeps), says its pid, and exits, so that the resident is orphaned (and adopted by
# this process, a child subreaper).
KEEPER = textwrap.dedent("""
    import os, sys, time
    move = sys.argv[1]
    pid = os.fork()
    if pid == 0:
        if move == "setsid":
            os.setsid()
        elif move == "setpgid":
            os.setpgid(0, 0)
        time.sleep(60)
        os._exit(0)
    print(pid, flush=True)
    time.sleep(0.2)  # the child has moved (or not) before the keeper goes
    os._exit(0)
""")


def _ppid(pid: int) -> int | None:
    st = procs._stat(pid)
    return st[0] if st else None


def _orphan(move: str, marker: str) -> tuple[subprocess.Popen[bytes], int]:
    """A registered keeper (its own session, as the warm worker's) that left its child
    (moved by ``move``) to this process; returns the keeper and the orphan's pid."""
    keeper = subprocess.Popen([sys.executable, "-I", "-S", "-c", KEEPER, move], stdout=subprocess.PIPE,
                              env={**os.environ, procs.MARKER_ENV: marker}, start_new_session=True)
    procs.register_child(keeper.pid)
    assert keeper.stdout is not None
    orphan = int(keeper.stdout.readline())
    end = time.monotonic() + 10
    while _ppid(orphan) != os.getpid():
        assert time.monotonic() < end, f"the orphan {orphan} was not adopted"
        time.sleep(0.01)
    return keeper, orphan


@pytest.mark.parametrize("move, named", [("stays", False), ("setpgid", True), ("setsid", True)],
                         ids=["own-group", "setpgid-away", "setsid-away"])
def test_an_adopted_orphan_is_named_only_when_it_left_the_workers_groups(monkeypatch, move, named):
    marker = procs.new_marker()
    keeper, orphan = _orphan(move, marker)
    try:
        # The scan missed the orphan (it was adopted after it): the chase alone sees it.
        monkeypatch.setattr(procs, "worker_processes", lambda *a, **k: {})
        escaped = procs.kill_worker_tree(keeper.pid, marker, scan_seconds=2.0)
        assert exited(orphan, 5), "the orphan survived the kill"
        assert [e["pid"] for e in escaped] == ([orphan] if named else []), escaped
    finally:
        for pid in (orphan,):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        keeper.wait(5)
        procs.forget_child(keeper.pid)


def test_a_child_whose_state_cannot_be_read_is_not_named(monkeypatch):
    # A chased child that became a zombie (or was reaped) between the wait and the read
    # of its state: nothing says where it was, and it holds nothing: never named.
    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        monkeypatch.setattr(procs, "_stat", lambda pid: None)
        escaped: dict[int, procs.EscapedProcess] = {}
        seen = procs._chase(lambda: [child.pid] if child.poll() is None else [], escaped, time.monotonic() + 5)
        assert child.pid in seen
        assert escaped == {}
    finally:
        child.kill()
        child.wait(5)


# ``fork(setup)``: a child that runs ``setup`` (a move to a group or session of its own),
# says so and sleeps; returns once it has moved. Both scripts below start with it.
FORK = textwrap.dedent("""
    import os, sys, time

    def fork(setup=lambda: None):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            setup()
            os.write(w, b"x")
            time.sleep(60)
            os._exit(0)
        os.close(w)
        os.read(r, 1)
        os.close(r)
        return pid
""")

# The warm resident's sweep after a capture (``kill_descendants(exclude=child)``), run in
# a process of its own (it kills every descendant of the process that runs it): a fork of
# the resident in the resident's own group, the capture child (its own group, the one
# excluded), a process of the capture child's group, and one that did setsid.
RESIDENT = FORK + textwrap.dedent("""
    import json
    sys.path.insert(0, sys.argv[1])
    from capture.worker import procs
    procs.become_subreaper()

    own_fork = fork()
    child = fork(lambda: os.setpgid(0, 0))
    fork(lambda: os.setpgid(0, child))  # a member of the capture child's group (not its child)
    escapee = fork(os.setsid)
    os.kill(child, 9)
    escaped = procs.kill_descendants(exclude=child)
    print(json.dumps({"escaped": [e["pid"] for e in escaped], "escapee": escapee, "own_fork": own_fork}))
""")


def test_the_residents_sweep_names_only_what_left_its_groups():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(procs.__file__))))
    out = subprocess.run([sys.executable, "-I", "-S", "-c", RESIDENT, repo],
                         capture_output=True, text=True, timeout=60, start_new_session=True)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert found["escaped"] == [found["escapee"]], found


# The warm worker's capture child leads a group of its own; when the capture is killed
# before its parent read the child's "forked" message, the group is not known yet: it is
# read from the resident (its oldest child leading a group of its own, in its session).
RESIDENT_WITH_CHILD = FORK + textwrap.dedent("""
    def capture_child():
        os.setpgid(0, 0)
        fork(os.setsid)  # what the capture started: a session of its own

    resident = os.fork()
    if resident == 0:
        child = fork(capture_child)
        fork(lambda: os.setpgid(0, 0))  # a younger child leading a group: not the capture child
        print(os.getpid(), child, flush=True)
        time.sleep(60)
        os._exit(0)
    time.sleep(60)
""")


def test_the_capture_child_is_found_when_its_pid_was_not_read_yet():
    marker = procs.new_marker()
    keeper = subprocess.Popen([sys.executable, "-I", "-S", "-c", RESIDENT_WITH_CHILD], stdout=subprocess.PIPE,
                              env={**os.environ, procs.MARKER_ENV: marker}, start_new_session=True)
    procs.register_child(keeper.pid)
    try:
        assert keeper.stdout is not None
        resident, child = map(int, keeper.stdout.readline().split())
        assert procs.capture_child(resident) == child
        assert procs.capture_child(child) is None  # its child did setsid: not in its session
        escaped = procs.kill_worker_tree(keeper.pid, marker, own_groups=(child,), scan_seconds=2.0)
        # The escapee (setsid) and the younger group leader are named; the child is not.
        assert child not in [e["pid"] for e in escaped]
        assert len(escaped) == 2, escaped
        assert exited(resident, 5) and exited(child, 5)
    finally:
        try:
            os.killpg(keeper.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        keeper.wait(5)
        procs.forget_child(keeper.pid)
