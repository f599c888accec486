"""The warm worker's resident side: a pre-imported parent (a "zygote") that forks one
child per capture. Parent side: :mod:`capture.session.warm`.

Runs in the selected interpreter as ``launcher.py --zygote --fd N``. It never imports
workspace code and never runs a framework operation: it only imports libraries (the
frameworks and heavy libraries the last capture imported, named by that capture's
child) so that each forked child starts with them loaded. Every capture runs in a
fresh child forked from this unchanged state, so nothing one capture did (workspace
modules, RNG, default device, grad mode, JAX config, monkey-patches) exists in the next.

Requests come on stdin, one frame each; messages go to the pipe ``N``:

    {"action": "preload", "workspace": root, "modules": [name or "name:Attribute", ...]}
        -> {"kind": "preloaded", "imported": int, "failed": int, "seconds": float,
            "files": [[path, mtime_ns], ...], "fork_safe": bool, "reason": str}
    {"action": "capture", ...the worker request...}
        -> the child: {"kind": "forked", "pid": int}, progress, {"kind": "modules",
           "names": [...]} (on success), then result / failure
        -> then this process: {"kind": "exited", "pid": int, "code": int}

Only one writer uses the pipe at a time: this process is silent while its child runs.
End of stdin (the parent went away) ends this process.
"""

from __future__ import annotations

import faulthandler
import importlib
import os
import signal
import sys
import time
from typing import Any, cast

from .request import Send, flush_and_exit
from .protocol import (
    ExitedMessage,
    FailureMessage,
    ForkedMessage,
    ModulesMessage,
    PreloadedMessage,
    PreloadRequest,
    WorkerMessage,
    WorkerRequest,
)

_SKIP = ("__main__", "__mp_main__")


def serve(fd: int) -> int:
    from .protocol import ProtocolError, encode_frame, read_frame

    from .procs import become_subreaper, die_with_parent, kill_descendants

    def parent_gone(signum: int, frame: Any) -> None:
        # The language server died (PR_SET_PDEATHSIG): take the capture child and every
        # process it started (this process is their subreaper) along.
        try:
            kill_descendants()
        finally:
            flush_and_exit(0)

    signal.signal(signal.SIGTERM, parent_gone)
    die_with_parent(sig=signal.SIGTERM)
    become_subreaper()
    out = os.fdopen(fd, "wb", buffering=0)
    faulthandler.enable(file=sys.stderr, all_threads=True)
    stdin = sys.stdin.buffer

    def send(message: WorkerMessage) -> None:
        out.write(encode_frame(message))

    while True:
        try:
            request = read_frame(stdin)
        except (ProtocolError, OSError):
            flush_and_exit(0)  # the parent went away (or sent garbage): never outlive it
        action = request.get("action")
        if action == "preload":
            send(_preload(cast(PreloadRequest, request)))
        elif action == "capture":
            _fork_capture(cast(WorkerRequest, request), fd, send)
        else:
            print(f"tensorviz warm worker: unknown action {action!r}", file=sys.stderr)
            flush_and_exit(3)


def fork_safety() -> tuple[bool, str]:
    """Whether forking now is safe: JAX refuses (warns) once its runtime (a backend) is
    initialised, as XLA's threads then hold locks; importing jax alone starts none."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    backends = getattr(bridge, "_backends", None) if bridge is not None else None
    if backends:
        return False, "a JAX backend was initialised in the warm worker (" + ", ".join(map(str, backends)) + ")"
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                return False, "CUDA was initialised in the warm worker"
        except Exception:
            pass
    return True, ""


def _preload(request: PreloadRequest) -> PreloadedMessage:
    from .workspace_files import WorkspaceFiles

    started = time.monotonic()
    files = WorkspaceFiles(str(request.get("workspace") or "/"))
    imported = failed = 0
    for entry in request.get("modules") or []:
        if not isinstance(entry, str):
            continue
        # "pkg:Name" is ``from pkg import Name``: a lazily exported class (transformers'
        # GPT2LMHeadModel) loads its own module only when it is read.
        name, _, attr = entry.partition(":")
        if name in _SKIP or (name in sys.modules and not attr):
            continue
        try:
            module = importlib.import_module(name)
            if attr:
                value = getattr(module, attr)
                module = sys.modules.get(getattr(value, "__module__", None) or name, module)
            imported += 1
        except BaseException as exc:  # an import that fails here simply stays cold
            if isinstance(exc, KeyboardInterrupt):
                raise
            failed += 1
            if not attr:
                sys.modules.pop(name, None)
            continue
        if module is not None and _is_workspace(module, files):
            # A library name that resolved into the workspace: that is user code, which
            # this process must never hold. Give up warmth rather than keep it.
            return PreloadedMessage(kind="preloaded", imported=imported, failed=failed, files=[],
                                    seconds=round(time.monotonic() - started, 3), fork_safe=False,
                                    reason=f"{name} resolved to a workspace file")
    _prepare_jax()
    safe, reason = fork_safety()
    from .workspace_files import remember_library_files

    remember_library_files(files.root, [p for p, _ in _module_files()])
    return PreloadedMessage(
        kind="preloaded",
        imported=imported,
        failed=failed,
        seconds=round(time.monotonic() - started, 3),
        files=_module_files(),
        fork_safe=safe,
        reason=reason,
    )


def _prepare_jax() -> None:
    """With jax loaded: find and register its PJRT plugins now (reading every installed
    distribution's entry points), so each child only creates its backend. Registering
    creates no backend and starts no runtime thread (JAX's own fork check looks at
    backends); :func:`fork_safety` still checks before every fork."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    register = getattr(bridge, "_discover_and_register_pjrt_plugins", None)
    if callable(register) and not getattr(bridge, "_backends", None):
        try:
            register()
        except Exception as exc:  # the child registers them itself then
            print(f"tensorviz warm worker: registering JAX plugins failed: {exc}", file=sys.stderr)


# Each loaded module file's modification time, taken right after the preload that
# loaded it and never refreshed: a later change must show as a change.
_seen_files: dict[str, int] = {}


def _module_files() -> list[list[Any]]:
    """Every loaded module's file and its modification time when it was loaded: the
    parent compares them before each capture (a changed dependency discards this
    process)."""
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or path in _seen_files:
            continue
        try:
            _seen_files[path] = os.stat(path).st_mtime_ns
        except OSError:
            continue
    return [[p, m] for p, m in _seen_files.items()]


def _is_workspace(module: Any, files: Any) -> bool:
    path = getattr(module, "__file__", None)
    if isinstance(path, str) and files.contains(path):
        return True
    for entry in list(getattr(module, "__path__", None) or []):
        if isinstance(entry, str) and files.contains(entry):
            return True
    return False


def library_modules(workspace: str, before: set[str]) -> list[str]:
    """Modules the capture loaded that are libraries (not workspace code, not loaded
    before the fork), in load order: what the next capture's child should find loaded."""
    from .workspace_files import WorkspaceFiles

    files = WorkspaceFiles(workspace)
    out = []
    for name, module in list(sys.modules.items()):
        if name in before or name in _SKIP or module is None:
            continue
        if getattr(module, "__spec__", None) is None and not hasattr(module, "__path__"):
            continue  # registered by hand, not importable by name
        if _is_workspace(module, files):
            continue
        out.append(name)
    return out


def _fork_capture(request: WorkerRequest, fd: int, send: Send) -> None:
    safe, reason = fork_safety()
    if not safe:
        from ..graph.model import Failure, failure_json

        failure = Failure(type="WarmWorkerUnsafe", stage="crash",
                          message=f"the warm worker cannot fork a capture: {reason}; the next capture starts a new worker")
        send(FailureMessage(kind="failure", failure=failure_json(failure), sources=[],  # type: ignore[typeddict-item]
                            framework="", framework_version=""))
        send(ExitedMessage(kind="exited", pid=0, code=1))
        return
    before = set(sys.modules)
    # The preloaded libraries' objects move to the permanent generation: a collection in
    # the child then leaves them alone instead of writing to (copying) every page the
    # parent shares with it. Measured: 70-240 ms less per capture with JAX loaded. The
    # child keeps them frozen (capture.graph.gc_pause.frozen_kept).
    from ..graph import gc_pause

    gc_pause.freeze_for_fork()
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        _child(request, fd, send, before, parent)
    # Wait for the child without reaping it, clear its process group (stray children
    # of user code), then reap: its group id cannot be reused meanwhile.
    limits = request.get("limits") if isinstance(request.get("limits"), dict) else {}
    asked = limits.get("max_memory_bytes")
    memory = asked if type(asked) is int else 0
    over = _wait_child(pid, memory)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    # Processes the child started in sessions of their own: this process is a subreaper,
    # so orphans are its children now; all of them are strays of that capture.
    from .procs import kill_descendants

    try:
        escaped = kill_descendants(exclude=pid)
    except Exception:
        escaped = []
    try:
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
    except ChildProcessError:
        code = -1
    if over:
        from .protocol import EXIT_SHARED_MEMORY

        code = EXIT_SHARED_MEMORY
    _reap_all()
    send(ExitedMessage(kind="exited", pid=pid, code=code, escaped=escaped))


def _reap_all() -> None:
    """Reap killed strays (zombies reparented to this subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _wait_child(pid: int, memory_limit: int = 0) -> bool:
    """Until ``pid`` exits (not reaped). Should the parent go away meanwhile (its end of
    stdin closes), kill the child's group and exit: a capture never outlives the
    language server that asked for it. With a ``memory_limit``, the shared memory the
    capture's processes map is counted against it (``RLIMIT_DATA`` does not): over it,
    the child's group and everything below this process are killed, and True returned."""
    import select

    from .procs import SHARED_MEMORY_CHECK_S, shared_memory_below

    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        poller.register(0, 0)  # hang-up and errors are always reported
        tick = int(SHARED_MEMORY_CHECK_S * 1000) if memory_limit else None
        try:
            while True:
                ready = poller.poll(tick)
                if not ready and memory_limit and shared_memory_below(os.getpid()) > memory_limit:
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                    try:
                        from .procs import kill_descendants

                        kill_descendants(exclude=pid)
                    except Exception:
                        pass
                    _wait_child(pid)
                    return True
                for fd, events in ready:
                    if fd == pidfd:
                        return False
                    if events & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                        try:
                            os.killpg(pid, signal.SIGKILL)
                        except (ProcessLookupError, PermissionError):
                            pass
                        try:
                            from .procs import kill_descendants

                            kill_descendants(exclude=pid)  # what the capture started elsewhere
                        except Exception:
                            pass
                        flush_and_exit(0)
        finally:
            os.close(pidfd)
    while True:
        try:
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
            return False
        except InterruptedError:
            continue
        except ChildProcessError:
            return False


def _child(request: WorkerRequest, fd: int, send: Send, before: set[str], parent: int) -> None:
    started = time.monotonic()
    try:
        os.setpgid(0, 0)  # its own group: the parent's deadline kills it and its strays
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the resident's handler is not the capture's
        from .procs import die_with_parent

        die_with_parent(parent)  # the warm worker killed: so is this capture
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        send(ForkedMessage(kind="forked", pid=os.getpid()))
    except BaseException:
        os._exit(70)
    from .request import run_request

    workspace = str(request.get("workspace") or "")

    def send_with_modules(message: WorkerMessage) -> None:
        if message.get("kind") == "result":
            try:
                send(ModulesMessage(kind="modules", names=library_modules(workspace, before)))
            except Exception:
                pass
        send(message)

    run_request(request, started, send_with_modules)
