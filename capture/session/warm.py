"""The warm worker: one resident capture process per workspace folder, kept between
captures by the language server, so that a recapture does not import the frameworks
and heavy libraries again. The resident side is :mod:`capture.worker.zygote`.

Isolation (chosen by measurement, see README "Warm worker"): the resident process is a
*pre-imported parent* that never runs workspace code or a framework operation; each
capture runs in a child forked from it, in its own process group, and exits after
its result. So:

- every workspace module is imported fresh, from the saved file, in the child (the
  resident process never imports one: libraries that resolve into the workspace are
  refused);
- no state of one capture reaches the next (RNG, default device and dtype, Torch grad
  mode, JAX config such as x64, monkey-patches): each child starts from the same
  untouched resident state, and its own changes die with it;
- the parent's deadline kills the child's group and the resident process; the
  resident process is discarded after a crash, deadline or cancellation, after a
  failure other than one the child reported itself and then exited cleanly from
  (:data:`CHILD_FAILURES`: an exception in the model's import or trace touched only
  the child), when the interpreter (path or file), the capture environment or a
  dependency (an entry of the interpreter's ``sys.path``, or any loaded library file)
  changes, when forking stops being safe (a JAX backend or CUDA initialised in it),
  after ``idle_seconds`` without a capture, and when the pool closes (server shutdown).

The resident process can be started before the first capture (:meth:`WarmPool.preload`,
``capture.session.preload``): it imports the frameworks and libraries the workspace's
model files name while the user reads their code, so the first capture pays no import.
A capture that arrives meanwhile waits for the rest of that preload only.

The checks before the worker (trust, saved source, interpreter, dependencies) run
exactly as for a one-shot worker (:mod:`capture.session.checks`,
:mod:`capture.session.runner`); only the last step differs: the request goes to a
:class:`Lease` on the folder's resident process instead of a new process, and
:func:`capture.session.conversation.converse` reads the answer the same way.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from ..graph.model import Capture
from ..worker.procs import MARKER_ENV, LogPump, capture_child, kill_worker_tree, register_child, release_worker
from ..worker.protocol import (
    FINAL_KINDS,
    MAX_CONTROL_FRAME,
    EscapedProcess,
    FrameReader,
    PreloadRequest,
    ProtocolError,
    encode_frame,
)
from .launcher import kept, launcher_script

log = logging.getLogger(__name__)

DEFAULT_IDLE_SECONDS = 600.0
#: What a warm worker is bound to (:func:`identity_for`).
Identity = tuple[Any, ...]
#: After a capture's final message, how long the resident process may take to say
#: its child exited before it is discarded.
EXIT_GRACE_S = 2.0
#: Failure stages a capture child reports itself (an exception in workspace code, a bad
#: recipe value, a checkpoint that does not fit): the child exits after its message and
#: the resident process, which ran none of it, stays warm. Any other failure (the
#: framework not loading, a device, a memory limit) discards it: in doubt.
CHILD_FAILURES = frozenset({"import", "trace", "recipe", "checkpoint", "fixture"})


class WarmPool:
    """The warm workers of one language server, one per workspace folder (identified
    by folder, interpreter and capture environment: another interpreter or
    environment for the folder replaces the old worker)."""

    def __init__(self, idle_seconds: float = DEFAULT_IDLE_SECONDS) -> None:
        self.idle_seconds = float(idle_seconds)
        self._workers: dict[str, _Resident] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._wake = threading.Event()
        self._reaper = threading.Thread(target=self._reap_idle, name="tensorviz-warm-idle", daemon=True)
        self._reaper.start()
        #: Why each folder's last worker was discarded (newest reason), for logs and tests.
        self.discarded: list[tuple[str, str]] = []

    # -------------------------------------------------------------- public
    def lease(self, workspace: Path, python: str, env: Mapping[str, str], identity: Identity, *,
              log_line: Callable[[str], None], wait_s: float = 30.0,
              cancel: threading.Event | None = None) -> "Lease | None":
        """The folder's warm worker for one capture, started if needed; None when it is
        busy (another capture of the folder runs) or the pool is closed. A preload still
        running is waited for, ``wait_s`` at most (the capture's time left): the capture
        then queues behind it in the resident process, under its own deadline (``cancel``
        set ends the wait the same way)."""
        key = str(workspace)
        with self._lock:
            if self._closed:
                return None
            resident = self._workers.get(key)
            if resident is not None and resident.busy:
                return None
            if resident is not None:
                resident.busy = True  # no other capture or preload uses it while it is checked
        if resident is not None:
            # A preload still importing: wait for the rest of it (outside the lock, which
            # other folders' captures need), then check the resident as it is now.
            reason = resident.unusable(python, identity, wait_s, cancel)
            if reason is not None:
                with self._lock:
                    resident.busy = False
                    if self._workers.get(key) is resident:
                        self._discard_locked(key, reason)
                resident = None
        if resident is None:
            with self._lock:
                if self._closed or key in self._workers:
                    return None  # closed, or another capture started one meanwhile: one-shot
                try:
                    resident = _Resident.start(workspace, python, env, identity)
                except OSError as exc:
                    log.info("warm worker for %s could not start: %s", workspace, exc)
                    return None
                self._workers[key] = resident
                resident.busy = True
        return Lease(self, key, resident, log_line)

    def preload(self, workspace: Path, python: str, env: Mapping[str, str], identity: Identity,
                modules: list[str]) -> str:
        """Start the folder's resident process (when none runs) and have it import
        ``modules`` (library names; ``pkg:Name`` imports ``pkg`` and reads ``Name``, as
        ``from pkg import Name`` would, so a lazily exported class loads its module),
        in the background. ``env``: the worker environment (:func:`worker_env`). What
        happened: ``"started"``, ``"preloading"`` (an idle resident imports more),
        ``"warm"`` (it has imported, or is importing, every one of them already),
        ``"busy"`` (a capture runs: it preloads what it loaded afterwards) or
        ``"closed"``. A resident bound to another interpreter or environment is replaced."""
        key = str(workspace)
        with self._lock:
            if self._closed:
                return "closed"
            resident = self._workers.get(key)
            if resident is not None and resident.busy:
                return "busy"
            if resident is not None and (resident.dead or resident.proc.poll() is not None
                                         or resident.python != python or resident.identity != identity):
                self._discard_locked(key, "a preload for another interpreter or environment replaces it"
                                     if not resident.dead and resident.proc.poll() is None else "it is no longer running")
                resident = None
            state = "preloading"
            if resident is None:
                try:
                    resident = _Resident.start(workspace, python, env, identity)
                except OSError as exc:
                    log.info("warm worker for %s could not start: %s", workspace, exc)
                    return "closed"
                self._workers[key] = resident
                state = "started"
            resident.last_used = time.monotonic()
            wanted = [m for m in modules if m not in resident.requested]
            if wanted:
                resident.preload(wanted)
            elif state == "preloading":
                state = "warm"  # everything asked for is loaded, or loading
        self._wake.set()
        return state

    def workers(self) -> dict[str, dict[str, Any]]:
        """What is alive: folder → {pid, python, captures, idle_s, preloaded}."""
        with self._lock:
            now = time.monotonic()
            return {
                k: {"pid": r.pid, "python": r.python, "captures": r.captures, "busy": r.busy,
                    "idle_s": round(now - r.last_used, 3), "preloaded": len(r.files),
                    "preloading": r.preloads_pending, "imported": r.imported}
                for k, r in self._workers.items()
            }

    def preloading(self, workspace: str | Path) -> bool:
        """Whether the folder's resident process is still importing a preload."""
        with self._lock:
            r = self._workers.get(str(workspace))
            return r is not None and r.preloads_pending > 0

    def discard(self, workspace: str | Path, reason: str = "discarded") -> bool:
        with self._lock:
            return self._discard_locked(str(workspace), reason)

    def retain(self, workspace: str | Path, python: str, env: Mapping[str, str]) -> bool:
        """Discard the folder's idle warm worker unless it runs ``python`` with the
        capture environment ``env`` (the folder's settings changed); True if discarded."""
        key = os.path.realpath(os.path.abspath(workspace))
        with self._lock:
            r = self._workers.get(key)
            if r is None or r.busy:
                return False
            if r.python != os.path.abspath(python):
                return self._discard_locked(key, f"the folder's interpreter is now {python}")
            if len(r.identity) == 3 and r.identity[1] != tuple(sorted(env.items())):
                return self._discard_locked(key, "the folder's capture environment setting changed")
            return False

    def set_idle_seconds(self, seconds: float) -> None:
        self.idle_seconds = float(seconds)
        self._wake.set()

    def close(self) -> None:
        """Stop every warm worker (the server is shutting down)."""
        with self._lock:
            self._closed = True
            for key in list(self._workers):
                self._discard_locked(key, "the language server stopped")
        self._wake.set()

    # -------------------------------------------------------------- inside
    def _discard_locked(self, key: str, reason: str) -> bool:
        resident = self._workers.pop(key, None)
        if resident is None:
            return False
        log.info("warm worker for %s discarded: %s", key, reason)
        self.discarded.append((key, reason))
        del self.discarded[:-50]
        resident.kill()
        return True

    def _release(self, key: str, resident: "_Resident", keep: bool, reason: str, modules: list[str] | None) -> None:
        with self._lock:
            resident.busy = False
            resident.last_used = time.monotonic()
            if self._workers.get(key) is not resident:
                resident.kill()
                return
            if not keep or self._closed:
                self._discard_locked(key, reason)
                return
            resident.captures += 1
            if modules:
                resident.preload(modules)
        self._wake.set()

    def _reap_idle(self) -> None:
        while True:
            self._wake.wait(timeout=max(0.05, min(5.0, self.idle_seconds / 4)))
            self._wake.clear()
            with self._lock:
                if self._closed and not self._workers:
                    return
                now = time.monotonic()
                for key, r in list(self._workers.items()):
                    if not r.busy and now - r.last_used >= self.idle_seconds:
                        self._discard_locked(key, f"idle for {self.idle_seconds:g} s")
                    elif r.proc.poll() is not None:
                        self._discard_locked(key, f"it exited (status {r.proc.returncode})")


class _Resident:
    """One resident process (the zygote), its result pipe and its log."""

    def __init__(self, proc: "subprocess.Popen[bytes]", read_fd: int, python: str, identity: Identity, workspace: str,
                 log_fd: int, marker: str | None = None) -> None:
        self.proc = proc
        self.marker = marker
        self.workspace = workspace
        self.read_fd = read_fd
        self.python = python
        self.identity = identity
        self.busy = False
        self.captures = 0
        self.last_used = time.monotonic()
        self.files: list[list[Any]] = []
        self.fork_safe = True
        self.unsafe_reason = ""
        self.reader = FrameReader(MAX_CONTROL_FRAME)
        self.pending: deque[dict[str, Any]] = deque()  # messages read before a lease wanted them
        self.preloads_pending = 0
        #: Libraries the preloads imported so far (their own count; ``files`` has every module).
        self.imported = 0
        #: Every name a preload asked for (imported, failed or still loading).
        self.requested: set[str] = set()
        self.sink: Callable[[str], None] = lambda line: None
        self.dead = False
        self._pid: int | None = None
        self._pump = LogPump(log_fd, lambda line: self.sink(line), name="tensorviz-warm-log")
        self.tail = self._pump.tail  # bounded lines, each cut (capture.worker.procs)
        self.escaped: list[EscapedProcess] = []

    @property
    def pid(self) -> int:
        """The resident process's own id: the child of its keeper (:func:`launcher.kept`),
        or the keeper's while that has not started it yet."""
        end = time.monotonic() + 2.0  # the keeper starts it within milliseconds
        while self._pid is None and self.proc.poll() is None and time.monotonic() < end:
            try:
                with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children", "rb") as fh:
                    children = fh.read().split()
            except OSError:
                break
            if children:
                self._pid = int(children[0])
            else:
                time.sleep(0.005)
        return self._pid if self._pid is not None else self.proc.pid

    @classmethod
    def start(cls, workspace: Path, python: str, env: Mapping[str, str], identity: Identity) -> "_Resident":
        launcher = launcher_script()
        read_fd, write_fd = os.pipe()
        log_r, log_w = os.pipe()
        try:
            # Under a keeper of TensorViz's own (launcher.kept), as the one-shot worker.
            proc = subprocess.Popen(
                kept([python, launcher, "--zygote", "--fd", str(write_fd)]),
                stdin=subprocess.PIPE, stdout=log_w, stderr=subprocess.STDOUT,
                pass_fds=(write_fd,), cwd=str(workspace), env=dict(env), start_new_session=True,
            )
        except OSError:
            for fd in (read_fd, write_fd, log_r, log_w):
                os.close(fd)
            raise
        # The resident is this process's own child, never an orphan another capture's
        # kill adopts (this process is a child subreaper): a resident started while a
        # capture fails was killed as that capture's stray.
        register_child(proc.pid)
        os.close(write_fd)
        os.close(log_w)
        resident = cls(proc, read_fd, python, identity, str(workspace), log_r, env.get(MARKER_ENV))
        # The resident's own id (its keeper's child), as the pool reports it.
        log.info("warm worker started for %s: %s (pid %d)", workspace, python, resident.pid)
        return resident

    def unusable(self, python: str, identity: Identity, wait_s: float = 0.0,
                 cancel: threading.Event | None = None) -> str | None:
        if self.dead or self.proc.poll() is not None:
            return "it is no longer running"
        if python != self.python:
            return f"the interpreter changed ({self.python} → {python})"
        if identity != self.identity:
            old, new = self.identity, identity
            if len(old) == 3 and len(new) == 3:
                if old[0] != new[0]:
                    return f"the interpreter {python} changed on disk"
                if old[1] != new[1]:
                    return "the capture environment changed"
                return "a package folder on the interpreter's path changed (a dependency was installed or removed)"
            return "the interpreter or its environment changed"
        self._drain(0.0)
        end = time.monotonic() + wait_s
        while self.preloads_pending and not self.dead and time.monotonic() < end and not (cancel and cancel.is_set()):
            # Libraries still loading: a capture would wait for them anyway (the resident
            # reads its requests in turn); see them first, so their files are checked too.
            self._drain(min(1.0, max(0.0, end - time.monotonic())))
        if self.dead:
            return "it is no longer running"
        if not self.fork_safe:
            return f"forking is no longer safe: {self.unsafe_reason}"
        for path, mtime in self.files:
            try:
                if os.stat(path).st_mtime_ns != mtime:
                    return f"a loaded library file changed: {path}"
            except OSError:
                return f"a loaded library file was removed: {path}"
        return None

    def preload(self, modules: list[str]) -> None:
        self.requested.update(modules)
        try:
            assert self.proc.stdin is not None  # started with stdin=PIPE
            self.proc.stdin.write(encode_frame(PreloadRequest(action="preload", modules=modules,
                                                              workspace=self.workspace)))
            self.proc.stdin.flush()
            self.preloads_pending += 1
        except (OSError, ValueError):
            self.dead = True

    def note(self, msg: dict[str, Any]) -> None:
        """A message of the resident process itself (not of a capture)."""
        if msg.get("kind") == "preloaded":
            self.preloads_pending = max(0, self.preloads_pending - 1)
            if type(msg.get("imported")) is int:
                self.imported += msg["imported"]
            self.files = [list(f) for f in msg.get("files") or [] if isinstance(f, (list, tuple)) and len(f) == 2]
            if not msg.get("fork_safe", True):
                self.fork_safe = False
                self.unsafe_reason = str(msg.get("reason") or "unknown")
            log.info("warm worker preloaded %s modules in %s s", msg.get("imported"), msg.get("seconds"))

    def _drain(self, timeout: float) -> None:
        """Read the resident's own messages (preload answers) for up to ``timeout``."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            ready, _, _ = select.select([self.read_fd], [], [], max(0.0, left))
            if not ready:
                return
            try:
                chunk = os.read(self.read_fd, 1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                self.dead = True
                return
            try:
                for msg in self.reader.feed(chunk):
                    if msg.get("kind") == "preloaded":
                        self.note(msg)
                    else:
                        self.pending.append(msg)
            except ProtocolError:
                self.dead = True
                return
            if not self.preloads_pending and timeout > 0:
                return

    def kill(self, own_groups: tuple[int, ...] = ()) -> None:
        """Kill it, its capture child's group and every process that came from them
        (also in sessions of their own: :mod:`capture.worker.procs`); never blocks on a pipe."""
        if self.dead and self.proc.returncode is not None:
            return
        self.dead = True
        try:
            self.escaped = kill_worker_tree(self.proc.pid, self.marker, own_groups)
        except Exception:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        release_worker(self.proc, self._pump, self.read_fd)


class Lease:
    """One capture on a resident process: a
    :class:`~capture.session.conversation.WorkerChannel`, so the runner converses with
    it through the same code as with a one-shot worker, deadline and cancellation
    included. :meth:`release` gives the resident back (or discards it)."""

    def __init__(self, pool: WarmPool, key: str, resident: _Resident, log_line: Callable[[str], None]) -> None:
        self.pool = pool
        self.key = key
        self.r = resident
        self.child_pid: int | None = None
        self.child_code: int | None = None
        self.modules: list[str] | None = None
        self.final_seen = False
        self.killed = False
        self._eof_next = False
        #: Processes the capture started outside its group, found and killed.
        self.escaped: list[EscapedProcess] = []
        resident.tail.clear()
        resident.sink = log_line

    # -- the watch interface --------------------------------------------------
    def send_request(self, data: bytes) -> None:
        try:
            assert self.r.proc.stdin is not None  # started with stdin=PIPE
            self.r.proc.stdin.write(data)
            self.r.proc.stdin.flush()
        except (OSError, ValueError):
            self._eof_next = True  # it died first; reported as a crash

    def read(self, timeout: float) -> bytes | None:
        if self.r.pending:
            # Messages read while checking the resident (a preload answer came with them).
            msgs, self.r.pending = list(self.r.pending), deque()
            data = b"".join(encode_frame(m) for m in msgs)
            self._sniff(msgs)
            return data
        if self._eof_next:
            return b""
        ready, _, _ = select.select([self.r.read_fd], [], [], max(0.0, timeout))
        if not ready:
            return None
        try:
            chunk = os.read(self.r.read_fd, 1 << 20)
        except OSError:
            return b""
        if not chunk:
            return b""
        try:
            msgs = list(self.r.reader.feed(chunk))
        except ProtocolError:
            return chunk  # the runner's own reader reports it
        self._sniff(msgs)
        # Pass on the capture's messages only (the runner ignores unknown kinds, but a
        # preload answer must not be counted twice). Nothing whole yet: None, not EOF.
        data = b"".join(encode_frame(m) for m in msgs if m.get("kind") != "preloaded")
        return data or (b"" if self._eof_next else None)

    def _sniff(self, msgs: list[dict[str, Any]]) -> None:
        for m in msgs:
            kind = m.get("kind")
            if kind == "forked" and type(m.get("pid")) is int:
                self.child_pid = m["pid"]
            elif kind == "modules":
                self.modules = [n for n in m.get("names") or [] if isinstance(n, str)]
            elif kind == "preloaded":
                self.r.note(m)
            elif kind in FINAL_KINDS:
                self.final_seen = True
            elif kind == "exited":
                self.child_code = m.get("code") if type(m.get("code")) is int else -1
                self.escaped += [cast(EscapedProcess, e) for e in m.get("escaped") or [] if isinstance(e, dict)]
                if not self.final_seen:
                    self._eof_next = True  # the child died without a result: a crash

    def exited(self) -> bool:
        return self.child_code is not None

    def kill_group(self) -> None:
        self.killed = True
        # The child's pid, also when its "forked" message is still unread (a deadline or a
        # cancellation right after the fork): its group is the capture's own, no escape.
        child = self.child_pid or capture_child(self.r.pid)
        # The resident first, with the child's group in the same sweep: a resident that
        # saw its child die would clear the child's strays itself, unreported.
        self.r.kill((child,) if child else ())
        if child:
            try:
                os.killpg(child, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.escaped = self.escaped + [e for e in self.r.escaped if e not in self.escaped]

    def finish(self) -> None:
        """After the final message: the resident reports the child's exit (it clears the
        child's process group first); without that report in time, discard it."""
        end = time.monotonic() + EXIT_GRACE_S
        while self.child_code is None and not self.killed:
            left = end - time.monotonic()
            if left <= 0:
                self.kill_group()
                return
            if self.read(min(left, 0.05)) == b"":
                self.kill_group()
                return

    def wait_exit(self, timeout: float) -> int | None:
        end = time.monotonic() + timeout
        while self.child_code is None:
            left = end - time.monotonic()
            if left <= 0 or self.r.proc.poll() is not None:
                break
            self.read(min(left, 0.05))
        if self.child_code is not None:
            return self.child_code
        code = self.r.proc.poll()
        self.kill_group()
        return code

    def log_tail(self) -> str:
        time.sleep(0.05)  # the log thread may still be reading the last lines
        return "\n".join(list(self.r.tail))

    # -- the end ----------------------------------------------------------------
    def release(self, result: Capture | None) -> None:
        """After the conversation: keep the resident for the next capture only when this
        one succeeded and its child exited as it should."""
        failure = result.failure if result is not None else None
        if result is None:
            reason = "the capture did not finish"
        elif failure is not None and not self.child_failure(failure):
            reason = f"the capture failed ({failure.stage}: {failure.type})"
        else:
            reason = ""
        keep = result is not None and not reason and not self.killed and self.child_code is not None and not self.r.dead
        self.r.sink = lambda line: None
        self.pool._release(self.key, self.r, keep, reason, self.modules if keep else None)

    def child_failure(self, failure: Any) -> bool:
        """Whether ``failure`` is one the capture child reported and then exited cleanly
        from (:data:`CHILD_FAILURES`): nothing of it happened in the resident process."""
        return (self.final_seen and self.child_code == 0 and failure.stage in CHILD_FAILURES
                and failure.type != "MemoryError")


def identity_for(python: str, env: Mapping[str, str], path_stamp: tuple[Any, ...]) -> Identity:
    """What a warm worker is bound to: the interpreter file, the capture environment,
    and the stamp of the interpreter's ``sys.path`` folders (installs change them)."""
    try:
        st = os.stat(python)
        stamp = (st.st_mtime_ns, st.st_ino, st.st_size)
    except OSError:
        stamp = None
    return (stamp, tuple(sorted(env.items())), path_stamp)
