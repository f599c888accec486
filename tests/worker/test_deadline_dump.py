"""A worker that dies while it writes its stacks for the deadline report (issue 52 item
6): ``faulthandler``'s watchdog, armed 0.3 s before the deadline, reads every thread's
frames without the interpreter's lock, and a worker busy in Torch's fake-tensor dispatch
(an abstract capture) crashed under it with SIGSEGV. That capture ran out of time: it is
reported as ``[deadline] DeadlineExceeded``, not ``[crash] WorkerCrashed: SIGSEGV``.

The model here makes the crash certain: it puts a pipe in front of its stderr and kills
itself with SIGSEGV as soon as the watchdog's heading ("Timeout (…)!") comes through.
It also arms the watchdog a second earlier than the worker does (the test tells it when
the deadline is), so that the crash always comes before the parent's own deadline, as it
did on a loaded machine."""

from __future__ import annotations

import sys
import time

import pytest

from capture.session.runner import run_capture
from fake_workspace import fake_recipe, tensor

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals and pipes")

CRASHES_DUMPING = '''
import os
import signal
import threading
import time


def _watch(read_fd, stderr_fd):
    while True:
        chunk = os.read(read_fd, 65536)
        if not chunk:
            return
        os.write(stderr_fd, chunk)
        if b"Timeout (" in chunk:
            os.kill(os.getpid(), signal.SIGSEGV)


def hang(x):
    import faulthandler
    import sys

    faulthandler.dump_traceback_later(float(os.environ["TV_DEADLINE_AT"]) - 1.0 - time.time(), exit=False,
                                      file=sys.stderr)
    stderr_fd = os.dup(2)
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)
    threading.Thread(target=_watch, args=(read_fd, stderr_fd), daemon=True).start()
    while True:
        time.sleep(0.01)


def crash_early(x):
    print("Timeout (0:00:01)!", flush=True)  # a model's own words: no deadline near
    os.kill(os.getpid(), signal.SIGSEGV)
'''


@pytest.mark.slow  # waits out a deadline
def test_a_worker_that_dies_dumping_its_stacks_at_the_deadline_reports_the_deadline(workspace):
    (workspace / "dumpcrash.py").write_text(CRASHES_DUMPING)
    c = run_capture(workspace, fake_recipe("dumpcrash:hang", tensor(2, 3)), timeout=3,
                    env={"TV_DEADLINE_AT": str(time.time() + 3)})
    f = c.failure
    assert (f.stage, f.type) == ("deadline", "DeadlineExceeded"), f.message
    assert "within its 3 s deadline" in f.message
    assert "killed by SIGSEGV while it wrote its stacks" in f.message
    assert f.details["limit"] == "max_seconds"


def test_a_crash_long_before_the_deadline_stays_a_crash(workspace):
    (workspace / "dumpcrash.py").write_text(CRASHES_DUMPING)
    c = run_capture(workspace, fake_recipe("dumpcrash:crash_early", tensor(2, 3)), timeout=60)
    assert (c.failure.stage, c.failure.type) == ("crash", "WorkerCrashed"), c.failure.message
    assert "SIGSEGV" in c.failure.message
