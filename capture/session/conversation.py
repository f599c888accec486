"""The parent's side of one worker conversation: send the request, read framed messages
(progress, then one result or one failure) under the deadline and the cancel flag, and
turn whatever happens (a result, a failure, a crash, garbage, a deadline) into a
:class:`~capture.graph.model.Capture`.

The same code talks to a one-shot worker (:class:`OneShotWorker`) and to a capture child
of the warm worker (:class:`capture.session.warm.Lease`): both are a
:class:`WorkerChannel`.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import threading
import time
from typing import Protocol, cast

from ..graph import graphfile, later_compiled, later_stats
from ..graph.model import Capture, Frame, Source, failure_from_json
from ..worker.procs import LogPump, describe_escaped, kill_worker_tree, not_started, release_worker
from ..worker.protocol import (
    EXIT_SHARED_MEMORY,
    FINAL_KINDS,
    MAX_CONTROL_FRAME,
    CrashDetails,
    DeadlineDetails,
    DeviceOkMessage,
    EscapedProcess,
    FailureMessage,
    FrameReader,
    InterpreterDetails,
    LimitDetails,
    ProtocolError,
    ResultMessage,
    WorkerRequest,
    check_message,
    encode_frame,
)
from ..worker.workspace_files import WorkspaceFiles
from .job import CaptureJob, Log
from .model_dependencies import disown

# After the final message the worker exits at once; allow it this long before the
# process group is killed anyway.
EXIT_GRACE_S = 2.0
# A worker's failure message longer than this is cut (any file TensorViz writes stays
# readable by it: the graph file reader refuses strings over 16 MiB).
_MAX_MESSAGE_CHARS = 64 * 1024


class WorkerChannel(Protocol):
    """A running capture: where its request goes and its messages come from, and how it
    is stopped. Nothing here may block on a pipe past the deadline."""

    #: Processes the capture started outside its group, found and killed (for the failure).
    escaped: list[EscapedProcess]

    def send_request(self, data: bytes) -> None: ...

    def read(self, timeout: float) -> bytes | None:
        """Bytes of framed messages; ``b""`` at the end; None when nothing came in ``timeout``."""

    def exited(self) -> bool:
        """Whether the capture's process has terminated."""

    def kill_group(self) -> None: ...

    def finish(self) -> None:
        """After the final message: let the capture's process exit, then clear what it left."""

    def wait_exit(self, timeout: float) -> int | None:
        """The exit status (negative: a signal), None when it did not exit in ``timeout``."""

    def log_tail(self) -> str: ...


#: The message that ends a conversation.
_FinalMessage = ResultMessage | FailureMessage | DeviceOkMessage


def converse(job: CaptureJob, channel: WorkerChannel, request: WorkerRequest) -> Capture | None:
    """Run ``request`` on ``channel``: the capture (or its failure capture); None when a
    ``probe_device`` request found the device fine."""
    deadline = job.started + job.limits.max_seconds
    request["seconds_left"] = deadline - time.monotonic()
    channel.send_request(encode_frame(request))
    reader = FrameReader(max(job.limits.max_result_bytes + (1 << 20), MAX_CONTROL_FRAME))
    final: _FinalMessage | None = None
    exited_since: float | None = None
    while final is None:
        if job.cancel.is_set():
            channel.kill_group()
            return job.fail("cancelled", "Cancelled", f"the capture was cancelled after {job.elapsed()}")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return _past_deadline(job, channel)
        chunk = channel.read(min(remaining, 0.05))
        if chunk is None:
            if exited_since is None and channel.exited():
                exited_since = time.monotonic()
            elif exited_since is not None and time.monotonic() - exited_since > 0.5:
                break  # the worker is gone; a process it left holds the result pipe
            continue
        if chunk == b"":
            break
        try:
            final = _take_messages(job, reader, chunk)
        except ProtocolError as exc:
            channel.kill_group()
            return job.fail("crash", "ProtocolError", f"the worker sent an invalid message: {exc}")

    if final is None:
        return _crashed(job, channel)
    if final["kind"] == "result":
        capture = _worker_result(job, final)
        if capture.failure is None and _follows(capture):
            job.graph_ready(capture)  # the graph first: its statistics, its compiled program follow
            capture = _later_parts(job, channel, reader, capture, deadline)
        channel.finish()
        if capture.failure is not None:
            disown(job, capture.failure)  # a graph file's failure from the worker: the offer is the parent's
        return capture
    channel.finish()
    if final["kind"] == "device_ok":
        return None
    assert final["kind"] == "failure"
    capture = _worker_failure(job, final)
    if capture.failure is not None:
        disown(job, capture.failure)  # the install offer is the parent's (issue 52)
    return capture


def _follows(capture: Capture) -> bool:
    """Whether parts of ``capture`` follow it: parameter statistics
    (:mod:`~capture.graph.later_stats`), the compiled program (:mod:`~capture.graph.later_compiled`)."""
    return bool(later_stats.pending(capture)) or later_compiled.pending(capture)


def _missing(capture: Capture, why: str, compile_status: str = "failed") -> Capture:
    """``capture`` saying that what it still waited for will not come (``why``)."""
    capture = later_stats.missing(capture, why)
    return later_compiled.missing(capture, why, compile_status)


def _take_later(job: CaptureJob, reader: FrameReader, chunk: bytes, capture: Capture) -> Capture:
    """``capture`` with the parts the frames of ``chunk`` complete merged in (progress
    reported). Raises ProtocolError or ValueError for a bad message."""
    for raw in reader.feed(chunk):
        msg = check_message(raw)
        if msg is None:
            continue
        if msg["kind"] == "statistics" and later_stats.pending(capture):
            capture = later_stats.complete(capture, msg["values"], msg["skipped"], msg.get("error"))
        elif msg["kind"] == "compiled" and later_compiled.pending(capture):
            capture = later_compiled.complete(capture, msg["compiled"], msg.get("meta"))
        elif msg["kind"] == "progress":
            job.progress(msg["message"], msg["fraction"])
    return capture


def _later_parts(job: CaptureJob, channel: WorkerChannel, reader: FrameReader, capture: Capture,
                 deadline: float) -> Capture:
    """``capture`` with what the worker sends after it (one
    :class:`~capture.worker.protocol.StatisticsMessage` when its statistics follow, one
    :class:`~capture.worker.protocol.CompiledMessage` when its compiled program does), read
    under the same deadline and cancel flag; without them (cancelled, past the deadline,
    the worker gone, a bad message) the graph stands and says why they are missing."""
    chunk: bytes | None = b""  # first: the frames read with the result
    exited_since: float | None = None
    while True:
        if chunk is not None:
            try:
                capture = _take_later(job, reader, chunk, capture)
            except (ProtocolError, ValueError) as exc:
                channel.kill_group()
                return _missing(capture, f"the worker sent an invalid message: {exc}")
            if not _follows(capture):
                return capture
        if job.cancel.is_set():
            channel.kill_group()
            return _missing(capture, "the capture was cancelled before they arrived")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            channel.kill_group()
            return _missing(capture, f"the capture's {job.limits.max_seconds:g} s deadline (--timeout) passed before they arrived",
                            "timeout")
        chunk = channel.read(min(remaining, 0.05))
        if chunk is None:
            if exited_since is None and channel.exited():
                exited_since = time.monotonic()
            elif exited_since is not None and time.monotonic() - exited_since > 0.5:
                return _missing(capture, _ended(job, channel))
        elif not chunk:
            return _missing(capture, _ended(job, channel))


def _ended(job: CaptureJob, channel: WorkerChannel) -> str:
    """Why what followed the graph never came: the worker ended, and how (a signal: a
    compile that ran out of memory is killed, not raised)."""
    code = channel.wait_exit(0.5)
    how = ""
    if code is not None and code < 0:
        sig = _signal_name(-code)
        hint = {"SIGKILL": " (possibly out of memory)", "SIGSEGV": " (segmentation fault)",
                "SIGABRT": " (aborted)"}.get(sig, "")
        how = f", killed by {sig}{hint}"
        memory = job.limits.max_memory_bytes
        if memory:
            how += f" (the capture memory limit was {memory / (1 << 20):g} MiB)"
    elif code:
        how = f", exit status {code}"
    return f"the worker ended before sending them{how}"


def _take_messages(job: CaptureJob, reader: FrameReader, chunk: bytes) -> _FinalMessage | None:
    """Feed ``chunk`` to ``reader``: report the progress messages it completes; the final
    message when it completes one (what follows it is ignored). Raises ProtocolError."""
    for raw in reader.feed(chunk):
        msg = check_message(raw)
        if msg is None:
            continue  # a kind this side does not know (the warm worker's own)
        if msg["kind"] == "progress":
            job.progress(msg["message"], msg["fraction"])
        elif msg["kind"] in FINAL_KINDS:
            return cast("_FinalMessage", msg)
    return None


def _past_deadline(job: CaptureJob, channel: WorkerChannel, died_by: str | None = None) -> Capture:
    """The capture ran out of time: its process group is killed; the failure says what
    the worker last logged and which processes escaped the group. ``died_by``: the signal
    that ended the worker while it wrote its stacks for this report (see
    :func:`_died_dumping_at_deadline`)."""
    channel.kill_group()
    escaped = list(channel.escaped)
    details = DeadlineDetails(limit="max_seconds", maximum=job.limits.max_seconds, elapsed_s=job.elapsed_s())
    if escaped:
        details["escaped_processes"] = escaped
    how = (f"the worker was killed by {died_by} while it wrote its stacks for this report, after {job.elapsed()}"
           if died_by else f"the worker process group was killed after {job.elapsed()}")
    return job.fail(
        "deadline", "DeadlineExceeded",
        f"the capture did not finish within its {job.limits.max_seconds:g} s deadline; " + how
        + describe_escaped(escaped),
        details,
        frames=crash_frames(channel.log_tail(), WorkspaceFiles(job.workspace)),
    )


def _worker_result(job: CaptureJob, msg: ResultMessage) -> Capture:
    """The capture the worker's result message carries, decoded and checked like a graph
    file; a graph that does not decode is a crash."""
    try:
        capture = graphfile.decode(msg["graph"], name="worker result", max_bytes=job.limits.max_result_bytes + (1 << 20))
    except graphfile.GraphFileError as exc:
        return job.fail("crash", "InvalidResult", f"the worker's graph is invalid: {exc.problem}")
    if capture.backend != "jaxpr":
        # A traced program carries no runtime timings (spec); eager captures may.
        capture.meta.setdefault("elapsed_s", job.elapsed_s())
    return capture


def _worker_failure(job: CaptureJob, msg: FailureMessage) -> Capture:
    try:
        failure = failure_from_json(dict(msg["failure"]))
        sources = [Source(str(p), str(h)) for p, h in msg["sources"]]
    except (TypeError, ValueError):
        return job.fail("crash", "ProtocolError", "the worker sent a malformed failure")
    if len(failure.message) > _MAX_MESSAGE_CHARS:
        # An exception's message may be any size; the failure file must stay readable.
        cut = len(failure.message) - _MAX_MESSAGE_CHARS
        failure.message = failure.message[:_MAX_MESSAGE_CHARS] + f" … [{cut:,} more characters cut]"
    return Capture.failed_capture(
        failure,
        framework=msg["framework"] or job.framework,
        framework_version=msg["framework_version"],
        recipe=job.recipe.as_dict,
        sources=sources or job.named_sources(),
        meta={"elapsed_s": job.elapsed_s()},
    )


#: ``faulthandler``'s heading for the stacks the worker writes shortly before its deadline
#: (:func:`capture.worker.request.run_request`: ``dump_traceback_later``).
_DEADLINE_DUMP = re.compile(r"^Timeout \(\d+:\d\d:\d\d(?:\.\d+)?\)!$", re.MULTILINE)
#: How close to its deadline a worker that died writing those stacks must be (it starts
#: 0.3 s before; the parent sees the death within a read or two).
DEADLINE_DUMP_WINDOW_S = 1.5


def _died_dumping_at_deadline(job: CaptureJob, code: int | None, tail: str) -> str | None:
    """The signal that killed a worker while it wrote its stacks for the deadline report,
    None when that is not what happened. ``faulthandler``'s watchdog thread reads every
    thread's frames without the interpreter's lock; a worker busy in Torch's fake-tensor
    dispatch can crash under it (SIGSEGV), a few tenths of a second before the deadline.
    That capture ran out of time, and is reported so, not as a crash of the model
    (issue 52 item 6)."""
    if code is None or code >= 0 or not _DEADLINE_DUMP.search(tail):
        return None
    if job.elapsed_s() < job.limits.max_seconds - DEADLINE_DUMP_WINDOW_S:
        return None
    return _signal_name(-code)


def _crashed(job: CaptureJob, channel: WorkerChannel) -> Capture:
    code = channel.wait_exit(EXIT_GRACE_S)
    tail = channel.log_tail()
    died_by = _died_dumping_at_deadline(job, code, tail)
    if died_by is not None:
        return _past_deadline(job, channel, died_by)
    reason = not_started(code, tail) if code is not None else None
    if reason is not None:  # the keeper could not start the interpreter (launcher.kept)
        channel.kill_group()
        return job.fail("interpreter", "InterpreterNotRunnable", f"cannot start {job.python}: {reason}",
                        InterpreterDetails(python=job.python))
    channel.kill_group()  # what it left behind (also in sessions of their own)
    memory = job.limits.max_memory_bytes
    if code == EXIT_SHARED_MEMORY and memory:
        return _over_shared_memory(job, memory)
    frames = crash_frames(tail, WorkspaceFiles(job.workspace))
    details = CrashDetails()
    if code is None:
        how = "closed its result pipe without a result and did not exit"
    elif code < 0:
        sig = _signal_name(-code)
        hint = {"SIGSEGV": " (segmentation fault)", "SIGKILL": " (possibly out of memory)",
                "SIGABRT": " (aborted)", "SIGBUS": " (bus error)"}.get(sig, "")
        how = f"was killed by signal {sig}{hint}"
        details["signal"] = sig
        details["exit_code"] = code
    else:
        how = f"exited with status {code} without reporting a result"
        details["exit_code"] = code
    last = _last_error_line(tail)
    details["log_tail"] = _bounded_tail(tail)
    memory = job.limits.max_memory_bytes
    if memory and (code is None or code != 0):
        # Native code that cannot allocate under the limit aborts rather than raising.
        details["memory_limit"] = memory
        how += f" (the capture memory limit was {memory / (1 << 20):g} MiB)"
    escaped = list(channel.escaped)
    if escaped:
        details["escaped_processes"] = escaped
    return job.fail(
        "crash", "WorkerCrashed",
        f"the capture worker {how} after {job.elapsed()}" + (f": {last}" if last else "") + describe_escaped(escaped),
        details, frames=frames,
    )


class OneShotWorker:
    """A worker process started for one capture: its result pipe, a thread collecting
    its log (bounded), and the kill (its group and every process that came from it, see
    :mod:`capture.worker.procs`). Nothing here blocks on a pipe that a process the
    worker left behind may hold."""

    def __init__(self, proc: subprocess.Popen[bytes], read_fd: int, log_fd: int, log: Log, marker: str | None = None) -> None:
        self.proc = proc
        self.read_fd = read_fd
        self.marker = marker
        self._pump = LogPump(log_fd, log)
        self._killed = False
        self.escaped: list[EscapedProcess] = []

    def send_request(self, data: bytes) -> None:
        stdin = self.proc.stdin

        def write() -> None:
            try:
                assert stdin is not None
                stdin.write(data)
                stdin.close()
            except (OSError, ValueError):
                pass  # the worker died first; its exit is reported instead

        threading.Thread(target=write, name="tensorviz-worker-request", daemon=True).start()

    def read(self, timeout: float) -> bytes | None:
        ready, _, _ = select.select([self.read_fd], [], [], max(0.0, timeout))
        if not ready:
            return None
        try:
            return os.read(self.read_fd, 1 << 20)
        except OSError:
            return b""

    def exited(self) -> bool:
        """Whether the worker process has terminated (it is not reaped)."""
        try:
            return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except (ChildProcessError, AttributeError, OSError):
            return self.proc.returncode is not None

    def log_tail(self) -> str:
        return self._pump.text(wait=0.5)

    def wait_exit(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_group()
            return None

    def finish(self) -> None:
        _wait_unreaped(self.proc.pid, EXIT_GRACE_S)
        self.kill_group()

    def kill_group(self) -> None:
        # The group is killed while its leader is unreaped (alive or a zombie), so its
        # id cannot have been reused by an unrelated group.
        if not self._killed:
            self._killed = True
            try:
                self.escaped = kill_worker_tree(self.proc.pid, self.marker)
            except Exception:  # never let the search stop the kill
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def close(self) -> None:
        self.kill_group()
        release_worker(self.proc, self._pump, self.read_fd)


def _over_shared_memory(job: CaptureJob, memory: int) -> Capture:
    """The keeper (or the warm worker) stopped the capture: its processes had mapped more
    shared memory than the memory limit allows."""
    details = LimitDetails(limit="max_memory_bytes", maximum=memory, memory_limit_bytes=memory, phase="capture",
                           requested=None)
    return job.fail(
        "limit", "MemoryError",
        f"the capture's processes mapped more than {memory / (1 << 20):g} MiB of shared memory (mmap MAP_SHARED, "
        f"/dev/shm or memfd files, System V segments), over the capture memory limit of {memory / (1 << 20):g} MiB "
        "(tensorviz.captureMemoryMB, --memory, which counts each process's private memory and their shared "
        f"memory together); the capture was stopped after {job.elapsed()}",
        details,
    )


def _bounded_tail(tail: str, lines: int = 40, chars: int = 64 * 1024) -> str:
    """The last ``lines`` lines of a log tail, at most ``chars`` characters (each line is
    already cut by :class:`capture.worker.procs.LogPump`): a failure file stays small."""
    text = "\n".join(tail.splitlines()[-lines:])
    return text if len(text) <= chars else "… " + text[-chars:]


def _wait_unreaped(pid: int, timeout: float) -> None:
    """Wait for ``pid`` to exit without reaping it (so its group id stays reserved)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except ChildProcessError:
            return
        time.sleep(0.005)


_FAULT_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) in (?P<func>.+?)\s*$')


def crash_frames(log_tail: str, files: WorkspaceFiles) -> list[Frame]:
    """Workspace frames from the last ``faulthandler`` dump of a crashed worker,
    outermost first (faulthandler prints the innermost first)."""
    lines = log_tail.splitlines()
    start = None
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith(("Fatal Python error", "Current thread", "Thread 0x")):
            start = i
            if lines[i].startswith("Current thread") or lines[i].startswith("Fatal Python error"):
                break
    if start is None:
        return []
    frames = []
    for line in lines[start:]:
        m = _FAULT_FRAME.match(line)
        if m:
            rel = files.relative(m.group("file"))
            if rel is not None:
                frames.append(Frame(rel, int(m.group("line")), 0, m.group("func")))
        elif frames and not line.strip():
            break
    frames.reverse()
    return frames


def _last_error_line(tail: str) -> str:
    for line in reversed(tail.splitlines()):
        s = line.strip()
        if s.startswith("Fatal Python error") or re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b", s):
            return s[:500]
    return ""


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"
