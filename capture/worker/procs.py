"""Worker processes that cannot escape: their log read in bounded pieces, every process
they started found and killed, and death with their parent.

Used by both sides (stdlib only; the worker imports it too):

- :class:`LogPump` reads a worker's stdout+stderr pipe in bounded chunks on a thread,
  cuts long lines and keeps a bounded tail; closing it never blocks, even while a
  detached grandchild still holds the pipe's write end.
- :func:`kill_worker_tree` kills a worker's process group and every process that came
  from it, also those in a session of their own (``start_new_session=True``, a double
  fork with ``setsid``): found through ``/proc`` by the worker's marker variable (each
  worker gets a fresh :data:`MARKER_ENV` value that its descendants inherit) and by
  parent links (the worker is a child subreaper, so orphans of its children stay its
  children). It returns the escaped processes (outside the worker's group) for the
  failure record.
- :func:`die_with_parent` (in the worker): ``PR_SET_PDEATHSIG`` on Linux, then a check
  that the parent did not already go. The kernel sends the signal when the *thread*
  that started the worker exits, so callers start workers from long-lived threads (the
  CLI's main thread, the language server's executor). What the worker started is then
  killed by its keeper (:func:`keep_worker`: the process the parent started, a
  subreaper above the worker that dies with the parent and first kills everything below
  it); the warm resident, a subreaper too, does it itself.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Collection
# Not ``typing``'s (tens of milliseconds to import): the keeper (:func:`run_kept`) runs this
# file alone, and starts before every probe, install and worker. Type checkers read it as theirs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from .protocol import EscapedProcess

#: Every worker's environment carries a fresh value of this; its processes inherit it.
MARKER_ENV = "TENSORVIZ_WORKER_ID"
#: The pid of the process that started the worker (checked by :func:`die_with_parent`).
PARENT_ENV = "TENSORVIZ_PARENT_PID"

#: A log line longer than this is cut (its length is said in the cut line).
MAX_LINE_CHARS = 4096
#: Lines kept in a worker's log tail (so a tail holds at most about 800 KiB).
TAIL_LINES = 200
_CHUNK = 1 << 16

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def new_marker() -> str:
    return os.urandom(12).hex()


# --------------------------------------------------------------------------- the log


class LogPump:
    """A thread reading ``fd`` (the worker's stdout and stderr) in chunks of 64 KiB:
    complete lines, each cut to :data:`MAX_LINE_CHARS`, go to ``sink`` and to a tail of
    :data:`TAIL_LINES` lines. Memory stays bounded whatever the worker prints (a line
    of any length is never held whole). It owns ``fd`` and closes it when it stops."""

    def __init__(self, fd: int, sink: Callable[[str], None], name: str = "tensorviz-worker-log") -> None:
        self.fd = fd
        self.sink = sink
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._stop = threading.Event()
        self._eof = threading.Event()
        self._part = bytearray()
        self._cut = 0  # bytes of the current line dropped past the limit
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    ready, _, _ = select.select([self.fd], [], [], 0.05)
                except (OSError, ValueError):
                    break
                if not ready:
                    continue
                try:
                    chunk = os.read(self.fd, _CHUNK)
                except OSError:
                    break
                if not chunk:
                    break
                self._feed(chunk)
            self._flush_part()
        finally:
            self._eof.set()
            try:
                os.close(self.fd)
            except OSError:
                pass

    def _feed(self, chunk: bytes) -> None:
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            piece = chunk[start:] if nl < 0 else chunk[start:nl]
            room = MAX_LINE_CHARS - len(self._part)
            if len(piece) > room:
                self._part += piece[:max(room, 0)]
                self._cut += len(piece) - max(room, 0)
            else:
                self._part += piece
            if nl < 0:
                return
            self._emit()
            start = nl + 1

    def _emit(self) -> None:
        line = self._part.decode("utf-8", "replace").rstrip("\r")
        if self._cut:
            line += f" … [line cut: {self._cut + len(self._part):,} bytes in all]"
        self._part = bytearray()
        self._cut = 0
        self.tail.append(line)
        try:
            self.sink(line)
        except Exception:
            pass

    def _flush_part(self) -> None:
        if self._part or self._cut:
            self._emit()

    def text(self, wait: float = 0.2) -> str:
        """The tail (after waiting up to ``wait`` s for the writers to finish)."""
        self._eof.wait(wait)
        return "\n".join(list(self.tail))

    def close(self) -> None:
        """Stop reading (never blocks on the pipe: a detached process may hold it)."""
        self._stop.set()
        self._thread.join(timeout=1.0)


# --------------------------------------------------------------------------- /proc


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, pgid, sid) of ``pid`` from /proc, None when gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    try:
        fields = data[data.rindex(b")") + 2:].split()
        if fields[0] == b"Z":
            return None  # a zombie holds nothing
        return int(fields[1]), int(fields[2]), int(fields[3])
    except (ValueError, IndexError):
        return None


def _pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []


def _environ(pid: int) -> bytes:
    """``pid``'s environment as /proc gives it (its first MiB), empty when unreadable."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return fh.read(1 << 20)
    except OSError:
        return b""


def _has_marker(pid: int, needle: bytes) -> bool:
    return needle in _environ(pid)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read(600)
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()[:200] or "?"


def worker_processes(root: int, marker: str | None,
                     sessions: frozenset[int] | set[int] = frozenset(),
                     adopted: Collection[int] = ()) -> dict[int, tuple[int, int, int]]:
    """The live processes that came from worker ``root`` (itself included when alive):
    its descendants by parent link, every process carrying its ``marker``, every
    process of ``sessions`` (sessions seen led by one of them: a child started with
    ``env={}`` in a session of its own that forks and exits loses both the marker and
    the parent link, but not its session), and the ``adopted`` orphans (this process
    is a subreaper) with their descendants."""
    if not os.path.isdir("/proc"):
        return {}
    me = os.getpid()
    table: dict[int, tuple[int, int, int]] = {}
    for pid in _pids():
        st = _stat(pid)
        if st is not None:
            table[pid] = st
    found: set[int] = set()
    if root in table:
        found.add(root)
    needle = f"{MARKER_ENV}={marker}\0".encode() if marker else None
    if needle is not None:
        for pid in table:
            if pid != me and _has_marker(pid, needle):
                found.add(pid)
    if sessions:
        found |= {pid for pid, (_, _, sid) in table.items() if sid in sessions and pid != me}
    found |= {pid for pid in adopted if pid in table}
    # Descendants (also of processes found by marker), by parent links.
    changed = True
    while changed:
        changed = False
        for pid, (ppid, _, _) in table.items():
            if ppid in found and pid not in found and pid != me:
                found.add(pid)
                changed = True
    return {pid: table[pid] for pid in found}


#: How long a kill goes on scanning for processes that keep forking (each scan then
#: finds fewer; one that finds none ends it at once).
KILL_SCAN_SECONDS = 5.0


# --------------------------------------------------------------------------- the parent: orphans come home

# The capture's parent (the CLI, the language server) is a child subreaper (Linux): a
# process the worker's tree orphans (a child in a session of its own that forks and
# exits every 2 ms, once the worker is gone) becomes the parent's child instead of
# init's, and a loop reading the parent's own children (microseconds, faster than any
# fork) kills it until none is left. The parent's own children (workers, probes,
# installs) are registered, so only orphans it adopted count: children it never
# started, in a session not its own, started after the worker being killed.
_registry_lock = threading.Lock()
_registered: dict[int, int | None] = {}  # pid -> start time (clock ticks since boot)
_subreaper: bool | None = None


def register_child(pid: int) -> None:
    """``pid`` is a child this process started itself (a worker, an install): never an
    adopted orphan. Makes this process a child subreaper (once), so that what the
    child's tree orphans comes back here. (A child carrying a worker marker of its own
    is never taken for another worker's orphan, registered or not.)"""
    with _registry_lock:
        _adopt_orphans()
        _registered[pid] = _start_time(pid)


def _adopt_orphans() -> bool:
    """Become a child subreaper, once (call with the registry lock held)."""
    global _subreaper
    if _subreaper is None:
        _subreaper = become_subreaper()
    return _subreaper


def forget_child(pid: int) -> None:
    with _registry_lock:
        _registered.pop(pid, None)


def _start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
        return int(data[data.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def capture_child(resident: int) -> int | None:
    """The warm ``resident``'s capture child (:mod:`.zygote`): its oldest child that leads
    a process group of its own in the resident's session (the child does ``setpgid(0, 0)``
    first thing). Younger children of the resident are orphans of the capture's tree (the
    resident is their subreaper), started after the child. None when it has none."""
    me = _stat(resident)
    if me is None:
        return None
    best: tuple[int, int] | None = None
    for pid in _children_of(resident):
        st = _stat(pid)
        start = _start_time(pid)
        if st is None or start is None or st[1] != pid or st[2] != me[2]:
            continue
        if best is None or (start, pid) < best:
            best = (start, pid)
    return best[1] if best else None


def _adopted_children() -> list[int]:
    """This process's children that an orphan may be (zombies too): the kernel hands an
    orphan to its subreaper's first live thread, the leader (this process's main thread,
    whose task id is its pid), so that thread's children list holds every adopted one.
    Reading that one file keeps the chase's loop short however many threads this
    process has: a language server or a test run holds dozens to hundreds, and reading
    each one's list made a loop slower than a fork-hopper's 2 ms hop, so that every kill
    landed on a hop that had forked already (the suite's run, 3 hoppers survived). Every
    thread's list only where the leader's cannot be read."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children", "rb") as fh:
            return [int(p) for p in fh.read().split()]
    except (OSError, ValueError):
        pass
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{me}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{me}/task/{tid}/children", "rb") as fh:
                out.extend(int(p) for p in fh.read().split())
        except (OSError, ValueError):
            continue
    return out


def _adopted(since: int, marker: str | None, others: set[int] | None = None) -> list[int]:
    """Orphans this process adopted as a subreaper since ``since`` (a start time): its
    children it did not register, outside its own session, carrying no other worker's
    marker. ``others``, kept by the caller through one kill, holds the children found to
    be none of these, which are not read again: a long-lived parent has many (zombies of
    orphans adopted before, processes it started), and reading each one's stat at every
    turn made the chase slower than a fork-hopper's hop (the suite's run: every kill
    landed on a hop that had forked already). A pid among them is the same process for
    the few seconds of a kill: a zombie's pid is not reused, and a live one's only after
    the system's pids wrapped."""
    mine = os.getsid(0)
    with _registry_lock:
        registered = dict(_registered)
    foreign = f"{MARKER_ENV}=".encode()
    own = f"{MARKER_ENV}={marker}\0".encode() if marker else None
    out = []
    for pid in _adopted_children():
        if others is not None and pid in others:
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
            fields = stat[stat.rindex(b")") + 2:].split()
            sid, start = int(fields[3]), int(fields[19])
        except (OSError, ValueError, IndexError):
            continue
        # A registered child is the one started then: pids wrap (32,768 of them, and a
        # fork-hopper takes a new one every 2 ms), so a hop may get a registered number.
        if ((pid in registered and registered[pid] in (None, start)) or sid == mine or start < since
                or (own is not None and own not in (env := _environ(pid)) and foreign in env)):  # another worker's
            if others is not None:
                others.add(pid)
            continue
        out.append(pid)
    return out


def _reap(pids: set[int], within: float = 1.0) -> None:
    """Wait for the adopted children killed (they are this process's zombies now)."""
    deadline = time.monotonic() + within
    left = set(pids)
    while left and time.monotonic() < deadline:
        for pid in list(left):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                left.discard(pid)
        if left:
            time.sleep(0.002)


def kill_worker_tree(root: int, marker: str | None, own_groups: tuple[int, ...] = (),
                     scan_seconds: float = KILL_SCAN_SECONDS) -> list[EscapedProcess]:
    """Kill worker ``root``'s group and every process that came from it, scanning again
    until a scan finds none: each escaped process's session and group are killed whole
    and remembered, so a process that forks and exits faster than a scan (its children
    orphaned, without the marker) is still found by its session. Returns the ones that
    had left the worker's process groups (``root`` and ``own_groups``: escaped), as
    ``{pid, session, command}``: never a process of those groups, not even one adopted
    here while it exits, nor one whose state can no longer be read."""
    escaped: dict[int, EscapedProcess] = {}
    groups = {root, *own_groups}
    ours = {os.getsid(0), os.getpgrp()}  # this process's own session and group never
    sessions: set[int] = set()
    with _registry_lock:
        # Before the worker dies: its orphans come here from now on.
        since = (_registered.get(root) or _start_time(root)) if _adopt_orphans() else None
    adopted_killed: set[int] = set()
    others: set[int] = set()  # this process's children that are no orphans of this worker
    deadline = time.monotonic() + scan_seconds
    first = True
    while True:
        adopted = _adopted(since, marker, others) if since is not None else []
        live = worker_processes(root, marker, sessions, adopted)
        if first:
            first = False
            for group in (root, *own_groups):  # the worker first: it cannot react to the rest
                try:
                    os.killpg(group, signal.SIGKILL)
                except (ProcessLookupError, PermissionError, OSError):
                    pass
        if not live:
            # The scan read /proc once; a hopper adopted meanwhile is found by the chase.
            if since is None or not _chase_adopted(since, marker, others, escaped, deadline, groups):
                break
            continue
        _kill_found(live, groups, ours, sessions, escaped)
        if since is not None:
            adopted_killed |= _chase_adopted(since, marker, others, escaped, deadline, groups)
        if time.monotonic() >= deadline:
            break
        time.sleep(0.005)
    if since is not None:
        adopted_killed |= set(_adopted(since, marker, others))  # zombies left to reap
        _reap(adopted_killed)
    return sorted(escaped.values(), key=lambda e: e["pid"])


def _kill_found(live: dict[int, tuple[int, int, int]], groups: set[int], ours: set[int], sessions: set[int],
                escaped: dict[int, EscapedProcess]) -> None:
    """Kill the processes one scan of :func:`kill_worker_tree` found (``live``: pid ->
    (parent, group, session)): each one, and the whole group of one outside the worker's
    ``groups``; their sessions (not ``ours``) join ``sessions``, those outside ``groups``
    join ``escaped``."""
    for pid, (_, pgid, sid) in live.items():
        if sid not in ours:
            sessions.add(sid)
        if pgid not in groups and pid not in escaped:
            escaped[pid] = _escaped(pid, sid)
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if pgid not in groups and pgid not in ours:
            try:
                os.killpg(pgid, signal.SIGKILL)  # the whole group of an escaped leader
            except (ProcessLookupError, PermissionError, OSError):
                pass


def _chase_adopted(since: int, marker: str | None, others: set[int], escaped: dict[int, EscapedProcess],
                   deadline: float, groups: Collection[int]) -> set[int]:
    """Kill this process's orphans adopted since ``since`` (see ``_chase``). An orphan of
    the worker's own ``groups`` is no escape: the worker's keeper, killed with its group,
    may die before the worker (or the warm resident) does, which is then adopted here,
    still exiting."""
    return _chase(lambda: _adopted(since, marker, others), escaped, deadline, groups)


def _chase(children: Callable[[], list[int]], escaped: dict[int, EscapedProcess], deadline: float,
           groups: Collection[int] = ()) -> set[int]:
    """Kill this process's ``children()`` (adopted orphans, read again each turn) in a
    tight loop until a read finds none, alive or dead: a fork-hopper's next process is
    adopted the moment the previous one exits, and is killed before it forks again.
    Those alive outside the worker's process ``groups`` are ``escaped`` (one whose state
    cannot be read, a zombie by now, is not: nothing says where it was). Returns the
    processes seen (killed or reaped)."""
    killed: set[int] = set()
    while time.monotonic() < deadline:
        alive = []
        reaped = False
        for pid in children():
            try:  # each hop it left is a zombie of this process now: reaped, the list stays short
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if done:
                reaped = True  # one exited meanwhile: its successor may be adopted now
                killed.add(pid)
            else:
                alive.append(pid)
        if not alive and not reaped:
            break
        for pid in alive:
            if pid not in escaped:
                st = _stat(pid)
                if st is not None and st[1] not in groups:
                    escaped[pid] = _escaped(pid, st[2])
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            killed.add(pid)
    return killed


def kill_descendants(exclude: int | None = None) -> list[EscapedProcess]:
    """Kill every descendant of this process; report those outside process group
    ``exclude`` (the capture child's, killed already) and this process's own group (a
    fork of this process's, never the capture's): the warm worker's strays after its
    capture child exited. A subreaper sees them all: a scan of /proc for its
    descendants, and a chase of its own children (the capture child ``exclude``, a zombie
    its caller reaps, aside), which a process that forks and exits faster than a scan
    cannot outrun (a hop read as a zombie while its successor was not yet listed ended
    the scan, the hopper alive)."""
    me = os.getpid()
    escaped: dict[int, EscapedProcess] = {}
    deadline = time.monotonic() + KILL_SCAN_SECONDS
    own = {os.getpgrp()} | ({exclude} if exclude is not None else set())

    def strays() -> list[int]:
        return [pid for pid in _adopted_children() if pid != exclude]

    while time.monotonic() < deadline:  # until a scan finds none (strays may fork meanwhile)
        table = {pid: st for pid in _pids() if (st := _stat(pid)) is not None}
        found: set[int] = set()
        changed = True
        while changed:
            changed = False
            for pid, (ppid, _, _) in table.items():
                if (ppid == me or ppid in found) and pid not in found:
                    found.add(pid)
                    changed = True
        if not found:
            if not _chase(strays, escaped, deadline, own):
                break
            continue
        for pid in found:
            if table[pid][1] not in own:  # not of the excluded (already killed) group, nor this one's
                escaped.setdefault(pid, _escaped(pid, table[pid][2]))
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _chase(strays, escaped, deadline, own)
        time.sleep(0.01)
    return sorted(escaped.values(), key=lambda e: e["pid"])


# --------------------------------------------------------------------------- shared memory

#: How often the keeper (and the warm worker, for its capture child) looks at the shared
#: memory a capture with a memory limit has mapped.
SHARED_MEMORY_CHECK_S = 0.05


def _children_of(pid: int) -> list[int]:
    """``pid``'s children, from each of its threads' list (a child started from any thread)."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                out.extend(int(p) for p in fh.read().split())
        except (OSError, ValueError):
            continue
    return out


def _shared_rss(pid: int) -> int:
    """The shared memory ``pid`` has mapped and touched (``RssShmem``: MAP_SHARED
    anonymous mappings, /dev/shm and memfd files, System V segments), in bytes."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"RssShmem:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def shared_memory_below(pid: int) -> int:
    """The shared memory the processes below ``pid`` have mapped, in all (a segment two of
    them map counts for each: never less than what is held). Linux; 0 elsewhere."""
    total = 0
    seen = {pid}
    todo = _children_of(pid)
    while todo:
        child = todo.pop()
        if child in seen:
            continue
        seen.add(child)
        total += _shared_rss(child)
        todo.extend(_children_of(child))
    return total


def release_worker(proc: Any, pump: "LogPump", read_fd: int) -> None:
    """After its process tree was killed: reap ``proc`` (bounded), close its stdin, stop
    its log pump and close the result pipe. Never blocks on a pipe."""
    import subprocess

    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL'd processes exit
        pass
    forget_child(proc.pid)
    try:
        proc.stdin.close()
    except (OSError, ValueError):
        pass
    pump.close()
    try:
        os.close(read_fd)
    except OSError:
        pass


def _escaped(pid: int, session: int) -> EscapedProcess:
    return {"pid": pid, "session": session, "command": _cmdline(pid)}


def describe_escaped(escaped: list[EscapedProcess]) -> str:
    if not escaped:
        return ""
    shown = ", ".join(f"{e['pid']} ({e['command'][:60]})" for e in escaped[:5])
    more = f" and {len(escaped) - 5} more" if len(escaped) > 5 else ""
    return f"; {len(escaped)} process(es) it started outside its process group were killed: {shown}{more}"


# --------------------------------------------------------------------------- in the worker


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except Exception:
        return False


def become_subreaper() -> bool:
    """Orphaned descendants (a double fork) become this process's children (Linux)."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(expected_parent: int | None = None, sig: int = signal.SIGKILL) -> bool:
    """Be killed when the parent process dies (Linux ``PR_SET_PDEATHSIG``); exit at once
    if it already died (or ``expected_parent`` is not the parent any more). True when
    the kernel will do it."""
    ok = _prctl(_PR_SET_PDEATHSIG, int(sig))
    if expected_parent is None:
        raw = os.environ.get(PARENT_ENV, "")
        expected_parent = int(raw) if raw.isdigit() else None
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(75)  # the parent went before the signal was armed
    return ok


def keep_worker(memory_limit: int = 0) -> None:
    """Split this process in two before any user code runs (Linux): the parent becomes
    the worker's *keeper*, the child returns from this call and is the worker.

    ``memory_limit`` (bytes, 0: none): the keeper also watches the shared memory the
    processes below it have mapped (:func:`shared_memory_below`, every
    :data:`SHARED_MEMORY_CHECK_S`), which the worker's ``RLIMIT_DATA`` does not count;
    over the limit it kills them all and exits with
    :data:`~capture.worker.protocol.EXIT_SHARED_MEMORY`.

    The keeper runs only this function: a child subreaper (every process the worker's
    tree orphans is re-parented to it once the worker is gone, whatever its session,
    process group or environment), killed with its own parent's death by
    ``PR_SET_PDEATHSIG`` (SIGTERM, which it handles). When the CLI or language server
    that started it dies, even by SIGKILL, or when the worker exits, it kills every
    process below it (:func:`kill_descendants`: parent links, then its adopted
    orphans), then exits as the worker did (its status, or its signal), so the parent
    sees the worker's own exit. It holds none of the worker's pipes.

    A model's process can leave the keeper's tree only through a process outside it (a
    daemon asked to start it, such as ``systemd-run`` or ``at``), or by killing the
    keeper itself; that is beyond what TensorViz contains. Elsewhere (no ``fork``, no
    ``prctl``) this returns at once and the worker runs without a keeper."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return
    stop = {signal.SIGTERM, signal.SIGHUP, signal.SIGINT}
    watched = stop | {signal.SIGCHLD}
    # Blocked before the fork: neither side may miss one, and the keeper takes them
    # with sigwaitinfo (no Python handler, no race with a blocking wait).
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    parent = os.environ.get(PARENT_ENV, "")
    die_with_parent(int(parent) if parent.isdigit() else None, sig=signal.SIGTERM)
    become_subreaper()
    keeper = os.getpid()
    try:
        worker = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, watched)
        return  # the worker runs without a keeper (its parent still kills its tree)
    if worker == 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, watched)
        die_with_parent(keeper)  # the keeper killed: so is the worker (it kills the rest)
        become_subreaper()  # orphans of its children stay its children while it lives
        return
    _keep(worker, stop, memory_limit)


#: A kept command that could not be started exits with this status, after a line on
#: stderr starting with :data:`NOT_STARTED` that says why.
EXIT_NOT_STARTED = 127
NOT_STARTED = "tensorviz-keeper: cannot run "


def run_kept(argv: list[str]) -> NoReturn:
    """The keeper of a command the parent runs besides the worker (the interpreter probe,
    an approved install): ``argv`` is ``PARENT_PID -- COMMAND...``. Run by the parent's
    own interpreter (``python -I -S``, the standard library alone, nothing of the
    workspace: :func:`capture.session.launcher.kept`), it is what :func:`keep_worker` is
    to the worker, one process higher: it dies with the parent (``PR_SET_PDEATHSIG``,
    also when the parent is killed with SIGKILL or exits without a word), is a child
    subreaper, and starts COMMAND as its child (killed when the keeper dies). When the
    parent goes (or sends SIGTERM, SIGHUP, SIGINT), or when COMMAND exits, it kills
    every process below it, whatever session or group they moved to (a ``.venv/bin/python``
    wrapper script's background child, a process a ``.pth`` file started, pip's
    builds), then exits as COMMAND did. COMMAND keeps the keeper's stdin, stdout and
    stderr; the keeper itself holds none of them once COMMAND runs. When COMMAND cannot
    be started, the keeper writes ``tensorviz-keeper: cannot run PATH: REASON`` on stderr
    and exits with :data:`EXIT_NOT_STARTED`. Elsewhere than Linux it simply runs COMMAND."""
    parent_text, sep, *cmd = argv if len(argv) >= 3 else ["", "", ""]
    if sep != "--" or not parent_text.isdigit() or not cmd:
        sys.stderr.write("usage: tensorviz_keeper.py PARENT_PID -- COMMAND...\n")
        os._exit(2)
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        _exec(cmd)
    stop = {signal.SIGTERM, signal.SIGHUP, signal.SIGINT}
    watched = stop | {signal.SIGCHLD}
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    die_with_parent(int(parent_text), sig=signal.SIGTERM)
    become_subreaper()
    keeper = os.getpid()
    child = os.fork()
    if child == 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, watched)
        die_with_parent(keeper)  # the keeper killed (SIGKILL): so is the command
        if PARENT_ENV in os.environ:
            os.environ[PARENT_ENV] = str(keeper)  # a worker's own keeper checks its parent: this one
        _exec(cmd)
    _keep(child, stop)


def _exec(cmd: list[str]) -> NoReturn:
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        try:
            os.write(2, f"{NOT_STARTED}{cmd[0]}: {exc.strerror or exc}\n".encode("utf-8", "replace"))
        finally:
            os._exit(EXIT_NOT_STARTED)


def not_started(returncode: int, stderr: str) -> str | None:
    """Why a kept command could not be started (its keeper's line), None when it ran."""
    if returncode != EXIT_NOT_STARTED:
        return None
    for line in stderr.splitlines():
        if line.startswith(NOT_STARTED):
            return line[len(NOT_STARTED):].partition(": ")[2] or line
    return None


def _keep(worker: int, stop: set[signal.Signals], memory_limit: int = 0) -> NoReturn:
    """The keeper's loop (see :func:`keep_worker`); never returns."""
    status: int | None = None
    watched = stop | {signal.SIGCHLD}
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, 65536)  # the result pipe and every other descriptor: the worker's alone
        me = os.getpid()
        while status is None:
            if memory_limit:
                info = signal.sigtimedwait(watched, SHARED_MEMORY_CHECK_S)
                if info is None:
                    if shared_memory_below(me) > memory_limit:
                        from .protocol import EXIT_SHARED_MEMORY  # the worker's keeper: msgpack is there

                        kill_descendants()
                        os._exit(EXIT_SHARED_MEMORY)
                    continue
            else:
                info = signal.sigwaitinfo(watched)
            if info.si_signo in stop:
                break  # the parent died (or asked): the worker and everything below it go
            while True:  # reap: the worker, or orphans re-parented here that exited
                try:
                    pid, raw = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                if pid == worker:
                    status = raw
        kill_descendants()
    except BaseException:
        try:
            kill_descendants()
        except BaseException:
            pass
    _exit_as(status)


def _exit_as(status: int | None) -> NoReturn:
    """Exit with the worker's wait ``status``: its code, or by its signal."""
    if status is None:
        os._exit(70)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the worker's crash, not a second core
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
            os.kill(os.getpid(), sig)
        except (OSError, ValueError):
            pass
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
