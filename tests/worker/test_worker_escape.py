"""Processes that model code starts cannot hold a capture past its deadline or outlive
it, and a worker's output cannot grow the parent without bound (issue 17 items 5, 7).

Both paths: the one-shot worker (CLI) and the warm worker's forked child (language
server)."""

from __future__ import annotations

import os
import shutil
import signal
import textwrap
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from capture.graph import graphfile
from capture.graph.model import Capture
from capture.worker.procs import MAX_LINE_CHARS, TAIL_LINES
from capture.session.runner import run_capture
from capture.session.warm import WarmPool
from fake_workspace import fake_recipe, tensor
from processes import exited

ESCAPE = '''
import os
import subprocess
import sys
import time


def _note(pid):
    with open(os.environ["TV_ESCAPED_PID"], "w") as fh:
        fh.write(str(pid))


# What an escaped process does when nobody kills it: lives 120 s, then says so in a file
# (TV_ESCAPED_PID + ".lived"). A capture that waited for it (blocked on a pipe it holds)
# returns after that file appears; one that killed it returns before, and it never does.
LIVE_OUT = "import os, time; time.sleep(120); open(os.environ['TV_ESCAPED_PID'] + '.lived', 'w').close()"


def _live_out():
    time.sleep(120)
    open(os.environ["TV_ESCAPED_PID"] + ".lived", "w").close()


def _detached():
    # Inherits the worker's stdout and stderr (the parent's log pipe), in its own session.
    child = subprocess.Popen([sys.executable, "-c", LIVE_OUT], start_new_session=True)
    _note(child.pid)


def _double_fork():
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            _note(os.getpid())
            _live_out()
            os._exit(0)
        os._exit(0)
    os.waitpid(pid, 0)
    while not os.path.exists(os.environ["TV_ESCAPED_PID"]) or not open(os.environ["TV_ESCAPED_PID"]).read():
        time.sleep(0.01)


# It ends by itself after 90 s (beyond any capture of the test), and the fixture below
# kills what is left of it, so that a kill that misses it cannot leave a machine forking
# forever (one did: 70 hoppers from earlier runs, load 72 on 2 cores).
HOPPER = (
    "import os, sys, time\\n"
    "with open(sys.argv[1], 'w') as fh:\\n"
    "    fh.write(str(os.getsid(0)))\\n"
    "end = time.monotonic() + 90\\n"
    "while time.monotonic() < end:\\n"
    "    if os.fork():\\n"
    "        os._exit(0)\\n"
    "    time.sleep(0.002)\\n"
)


# The same, but each new process also starts a session of its own (and so a new
# process group): neither its session nor its group says where it came from.
# It touches its heartbeat file (argv[2]) at every hop: a scan of /proc cannot see a
# process that takes a new pid every 2 ms, but a file whose time moves says it runs.
SESSION_HOPPER = (
    "import os, sys, time\\n"
    "open(sys.argv[2], 'w').close()\\n"
    "with open(sys.argv[1], 'w') as fh:\\n"
    "    fh.write(str(os.getsid(0)))\\n"
    "end = time.monotonic() + 90\\n"
    "while time.monotonic() < end:\\n"
    "    if os.fork():\\n"
    "        os._exit(0)\\n"
    "    os.setsid()\\n"
    "    os.utime(sys.argv[2])\\n"
    "    time.sleep(0.002)\\n"
)


def _fork_hopper(script=HOPPER):
    # No marker (env={}), a session of its own, and a new pid every 2 ms: the parent
    # link is gone as soon as the worker dies.
    subprocess.Popen([sys.executable, "-c", script, os.environ["TV_ESCAPED_PID"], os.environ["TV_ESCAPED_PID"] + ".beat"],
                     env={}, start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not open(os.environ["TV_ESCAPED_PID"]).read():
        time.sleep(0.01)


def session_hopper_hang(x):
    _fork_hopper(SESSION_HOPPER)
    while True:
        time.sleep(0.05)


def session_hopper_ok(x):
    _fork_hopper(SESSION_HOPPER)
    time.sleep(0.3)
    return x.relu()


def session_hopper_then_crash(x):
    # The worker goes first: whatever it orphans has no worker to be re-parented to.
    _fork_hopper(SESSION_HOPPER)
    time.sleep(0.1)
    os._exit(3)


def fork_hopper_hang(x):
    _fork_hopper()
    while True:
        time.sleep(0.05)


def fork_hopper_ok(x):
    _fork_hopper()
    time.sleep(0.3)  # hopping for a while before the result
    return x.relu()


def detached_hang(x):
    _detached()
    while True:
        time.sleep(0.05)


def double_fork_hang(x):
    _double_fork()
    while True:
        time.sleep(0.05)


def detached_ok(x):
    _detached()
    return x.relu()


def double_fork_ok(x):
    _double_fork()
    return x.relu()


def fork_then_exit(x):
    # A plain forked child holds every descriptor of the worker, the result pipe too.
    if os.fork() == 0:
        os.setsid()
        _note(os.getpid())
        _live_out()
        os._exit(0)
    while not open(os.environ["TV_ESCAPED_PID"]).read():
        time.sleep(0.01)
    os._exit(3)


def huge_message(x):
    raise ValueError("m" * (20 << 20))


def huge_line_then_crash(x):
    sys.stdout.write("x" * (50 << 20) + "\\n")
    sys.stdout.flush()
    for i in range(300):
        print(f"line {i}: " + "y" * (1 << 16), flush=True)
    print("RuntimeError: the last words", flush=True)
    os._exit(3)
'''


@pytest.fixture
def ws(workspace):
    (workspace / "escape.py").write_text(textwrap.dedent(ESCAPE), encoding="utf-8")
    return workspace


@pytest.fixture(params=["one-shot", "warm"])
def pool(request):
    if request.param == "one-shot":
        yield None
        return
    p = WarmPool(idle_seconds=600)
    yield p
    p.close()


def capture(ws, pool, model, tmp_path, **kw) -> tuple[Capture, bool, int | None]:
    """The capture, whether its escaped process had lived out its 120 s by the time the
    capture returned (``LIVE_OUT``: a capture that waited for it, instead of killing it),
    and the escaped process's pid (or session, for the hoppers)."""
    pid_file = tmp_path / "escaped.pid"
    pid_file.write_text("")
    lived = Path(str(pid_file) + ".lived")
    lived.unlink(missing_ok=True)
    c = run_capture(ws, fake_recipe(model, tensor(2, 3)), warm=pool,
                    env={"TV_ESCAPED_PID": str(pid_file)}, **kw)
    text = pid_file.read_text()
    return c, lived.exists(), int(text) if text else None


@pytest.mark.slow
@pytest.mark.parametrize("model", ["escape:detached_hang", "escape:double_fork_hang"])
def test_a_detached_process_does_not_hold_the_deadline(ws, pool, tmp_path, model):
    c, lived_out, escaped = capture(ws, pool, model, tmp_path, timeout=3)
    if escaped is None:
        # The worker's start outlasted the short deadline (a loaded machine: the full
        # suite at load 6.7 on 2 cores once): again, with room to reach the model.
        c, lived_out, escaped = capture(ws, pool, model, tmp_path, timeout=12)
    assert (c.failure.stage, c.failure.type) == ("deadline", "DeadlineExceeded")
    # Before the fix: blocked on the log pipe until the 120 s child died. (How long from
    # the deadline to the failure: benchmarks/bench_hostile.py.)
    assert not lived_out, "the capture waited for the detached process to end by itself"
    assert escaped is not None
    assert exited(escaped, 5), f"the detached process {escaped} survived the deadline"
    listed = [e["pid"] for e in c.failure.details.get("escaped_processes", [])]
    assert escaped in listed, c.failure.details
    assert "outside its process group were killed" in c.failure.message


@pytest.mark.parametrize("model", ["escape:detached_ok", "escape:double_fork_ok"])
def test_a_detached_process_is_killed_after_a_result(ws, pool, tmp_path, model):
    c, lived_out, escaped = capture(ws, pool, model, tmp_path, timeout=60)
    assert c.failure is None, c.failure
    assert not lived_out, "the result waited for the detached process to end by itself"
    assert escaped is not None and exited(escaped, 5), f"the detached process {escaped} outlived the capture"


def group_alive(pgid: int, settle_s: float = 2.0) -> bool:
    """Whether process group ``pgid`` still has a live member ``settle_s`` after the
    capture: asked of the kernel (kill(-pgid, 0)), because a scan of /proc misses a
    process that takes a new pid every 2 ms (pids grow past the listing)."""
    end = time.monotonic() + settle_s
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        if time.monotonic() > end:
            # Zombies count for kill(); a group of zombies only is not alive.
            return any(_state(pid) not in (None, "Z") for pid in _group_pids(pgid))
        time.sleep(0.05)


def _group_pids(pgid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            if int(data[data.rindex(b")") + 2:].split()[2]) == pgid:
                out.append(int(name))
    return out


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    return data[data.rindex(b")") + 2:].split()[0].decode()


def session_members(sid: int) -> list[int]:
    """Live (not zombie) processes of session ``sid``."""
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2:].split()
        if fields[0] != b"Z" and int(fields[3]) == sid:
            members.append(int(name))
    return members


@pytest.fixture
def no_hopper_left():
    """After the test, whatever of a hopper is still forking is killed (the newest pids,
    scanned for a second: the chain takes a new one every 2 ms). A safety net for the
    machine, not part of what the test checks."""
    yield
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        with open("/proc/loadavg") as fh:
            last = int(fh.read().split()[4])
        for pid in range(max(last - 400, 2), last + 50):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if b"fh.write(str(os.getsid(0)))" not in fh.read():
                        continue
                os.kill(pid, signal.SIGKILL)  # a session hopper's group is its own pid
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except OSError:
                pass


@pytest.mark.slow
@pytest.mark.usefixtures("no_hopper_left")
@pytest.mark.parametrize("model, timeout, rounds", [("escape:fork_hopper_hang", 6, 2), ("escape:fork_hopper_ok", 60, 3)],
                         ids=["deadline", "result"])
def test_a_fork_hopping_process_in_its_own_session_is_killed(ws, pool, tmp_path, model, timeout, rounds):
    # The probe's escape (1 run in 19): a marker-less child in a session of its own
    # that forks and exits every 2 ms. Several captures, each must leave none. (The
    # deadline, 6 s, leaves time to start the worker and the hopper on a loaded machine.)
    for _ in range(rounds):
        c, _, session = capture(ws, pool, model, tmp_path, timeout=timeout)
        assert session is not None, c.failure
        if model.endswith("_ok"):
            assert c.failure is None, c.failure
        else:
            assert c.failure.stage == "deadline"
        assert not group_alive(session), f"the fork-hopper's group {session} survived"


def test_a_forked_process_holding_the_result_pipe_does_not_hide_a_crash(ws, pool, tmp_path):
    c, lived_out, escaped = capture(ws, pool, "escape:fork_then_exit", tmp_path, timeout=60)
    # A crash, not the 60 s deadline, and not the end of the child that held the pipe.
    assert (c.failure.stage, c.failure.type) == ("crash", "WorkerCrashed")
    assert "status 3" in c.failure.message
    assert not lived_out, "the capture waited for the forked child to end by itself"
    assert escaped is not None and exited(escaped, 5)


@pytest.mark.slow
def test_a_huge_output_line_is_cut_and_the_failure_file_reads_back(ws, pool, tmp_path):
    lines: list[str] = []
    tracemalloc.start()
    try:
        c, _, _ = capture(ws, pool, "escape:huge_line_then_crash", tmp_path, timeout=120, log=lines.append)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (c.failure.stage, c.failure.type) == ("crash", "WorkerCrashed")
    assert c.failure.message.endswith("RuntimeError: the last words")
    # The 50 MiB line reached the log cut, with its length said.
    first = lines[0]
    assert first.startswith("x" * 100) and len(first) < MAX_LINE_CHARS + 100
    assert f"{(50 << 20) + 0:,} bytes in all" in first
    assert all(len(line) < MAX_LINE_CHARS + 100 for line in lines)
    assert len(lines) == 302
    tail = c.failure.details["log_tail"]
    assert tail.endswith("RuntimeError: the last words")
    assert len(tail) <= 64 * 1024 + 2
    # The parent never held the line (Python-level allocations while capturing).
    assert peak < 16 << 20, peak
    out = tmp_path / "failed.tvg"
    graphfile.write(c, out)
    assert out.stat().st_size < 1 << 20
    back = graphfile.read(out)
    assert back.failure.details["log_tail"] == tail
    assert TAIL_LINES * (MAX_LINE_CHARS + 100) < 16 << 20  # any tail fits the reader's string limit


def test_a_huge_exception_message_is_cut_and_the_failure_file_reads_back(ws, pool, tmp_path):
    c, _, _ = capture(ws, pool, "escape:huge_message", tmp_path, timeout=120)
    f = c.failure
    assert (f.stage, f.type) == ("trace", "ValueError")
    assert f.message.startswith("m" * 1000) and len(f.message) < 70_000
    out = tmp_path / "failed.tvg"
    graphfile.write(c, out)
    assert graphfile.read(out).failure.message == f.message


def hopper_beats(beat: Path, settle_s: float = 1.0) -> bool:
    """Whether the hopper still touches its heartbeat file, ``settle_s`` after the capture."""
    first = beat.stat().st_mtime_ns
    time.sleep(settle_s)
    return beat.stat().st_mtime_ns != first


@pytest.fixture
def crowded_parent():
    """The capture's parent holds hundreds of idle threads and thousands of children
    nobody reaped, as a language server or the whole suite's run does (the suite's had
    them: reading each thread's children list, and each child's stat at every turn, made
    the chase slower than a hop, and every hopper survived)."""
    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait, daemon=True) for _ in range(400)]
    for t in threads:
        t.start()
    # posix_spawn (vfork and exec of `true`), not os.fork: forking the suite's process, which
    # holds Torch and JAX, copies its page tables 2,000 times (about 115 s per test).
    true = shutil.which("true") or "/bin/true"
    zombies = [os.posix_spawn(true, [true], {}) for _ in range(2000)]
    yield
    stop.set()
    for t in threads:
        t.join(timeout=5)
    for pid in zombies:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


@pytest.mark.slow
@pytest.mark.usefixtures("no_hopper_left", "crowded_parent")
@pytest.mark.parametrize("model, timeout", [("escape:session_hopper_hang", 6), ("escape:session_hopper_ok", 60),
                                            ("escape:session_hopper_then_crash", 60)],
                         ids=["deadline", "result", "worker-crashed"])
def test_a_fork_hopper_that_changes_session_every_hop_is_killed(ws, pool, tmp_path, model, timeout):
    # Neither marker, nor parent link, nor session, nor group leads to it once the worker
    # is gone: the capture's parent adopts it (a child subreaper) and kills it; the warm
    # worker's resident, a subreaper too, adopts its capture child's orphans and kills them.
    assert threading.active_count() > 400
    for _ in range(2):
        c, _, session = capture(ws, pool, model, tmp_path, timeout=timeout)
        if session is None and model.endswith("_hang"):
            # The worker's imports outlasted the short deadline (a loaded machine): again,
            # with room to reach the hopper.
            c, _, session = capture(ws, pool, model, tmp_path, timeout=timeout * 4)
        assert session is not None, c.failure
        if model.endswith("_ok"):
            assert c.failure is None, c.failure
        elif model.endswith("_crash"):
            assert (c.failure.stage, c.failure.type) == ("crash", "WorkerCrashed"), c.failure
        else:
            assert c.failure.stage == "deadline"
        beat = tmp_path / "escaped.pid.beat"
        assert beat.exists()
        assert not hopper_beats(beat), "a session-hopping process survived the capture"
