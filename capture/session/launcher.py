"""How a worker process is started: the launcher script that puts this ``capture`` package
(and nothing else of this environment) on the selected interpreter's path, and the
environment every worker process gets. Used by the one-shot worker, the interpreter
probe and the warm worker alike."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import sys
from collections.abc import Mapping, Sequence

import safe_read

from ..worker.procs import MARKER_ENV, PARENT_ENV, new_marker

_launcher_lock = threading.Lock()
_launcher_dir: str | None = None

_LAUNCHER = '''"""TensorViz capture worker launcher (generated; safe to delete)."""
import sys
from capture.worker.main import main
sys.exit(main())
'''

_KEEPER = '''"""TensorViz process keeper (generated; safe to delete): capture.worker.procs.run_kept."""
import os
import sys
try:
    from _frozen_importlib_external import SourceFileLoader  # loaded already: nothing to import
except ImportError:
    from importlib.machinery import SourceFileLoader
# procs.py alone (the standard library), not the capture package, from its cached bytecode:
# the keeper starts fast.
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "capture", "worker", "procs.py")
procs = {"__name__": "tensorviz_procs", "__file__": path}
exec(SourceFileLoader("tensorviz_procs", path).get_code("tensorviz_procs"), procs)
procs["run_kept"](sys.argv[1:])
'''

#: Variables of this process the worker never gets (docs/worker-environment.md):
#: ``PYTHONHOME`` would swap the selected interpreter's standard library for another
#: Python's; ``PYTHONSAFEPATH`` would keep the launcher's folder (this ``capture``
#: package) off the worker's path; ``PYTHONSTARTUP`` and ``PYTHONINSPECT`` are for an
#: interactive prompt (``PYTHONINSPECT`` would leave the worker waiting at one).
#: ``PYTHONPATH`` is kept: where a person's JAX or Torch lives on it (Cloud TPU images),
#: their own ``python`` sees it, and so must the worker; the launcher's folder still comes
#: first, so it cannot replace this ``capture`` package.
DROPPED = ("PYTHONHOME", "PYTHONSAFEPATH", "PYTHONSTARTUP", "PYTHONINSPECT")


#: The launcher folders: ``tensorviz-worker-PID-<random>`` in the temporary folder, with
#: an ``owner`` file saying ``PID START`` (the process's start time, so a reused pid is
#: not taken for the owner).
_PREFIX = "tensorviz-worker-"
_OWNER = "owner"


def launcher_script() -> str:
    """A script in a private folder holding only links to this ``capture`` package and
    ``safe_read``: run by the selected interpreter, it puts them (and nothing else of
    this environment) first on the worker's path. The folder goes when this process
    exits; one a killed process left (SIGKILL runs no exit handler) is removed when the
    next process makes its own (:func:`remove_abandoned_launchers`)."""
    global _launcher_dir
    with _launcher_lock:
        if _launcher_dir is None or not os.path.exists(os.path.join(_launcher_dir, "capture")):
            remove_abandoned_launchers()
            folder = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-")
            with open(os.path.join(folder, _OWNER), "w", encoding="ascii") as fh:
                fh.write(_identity(os.getpid()))
            package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            # ``safe_read`` (stdlib only) is how capture reads workspace files.
            for name, source in (("capture", package), ("safe_read", os.path.dirname(safe_read.__file__))):
                try:
                    os.symlink(source, os.path.join(folder, name), target_is_directory=True)
                except (OSError, NotImplementedError):
                    shutil.copytree(source, os.path.join(folder, name), ignore=shutil.ignore_patterns("__pycache__"))
            for script, text in (("tensorviz_worker.py", _LAUNCHER), (_KEEPER_SCRIPT, _KEEPER)):
                with open(os.path.join(folder, script), "w", encoding="utf-8") as fh:
                    fh.write(text)
            _launcher_dir = folder
            atexit.register(shutil.rmtree, folder, True)
        return os.path.join(_launcher_dir, "tensorviz_worker.py")


_KEEPER_SCRIPT = "tensorviz_keeper.py"


def kept(command: Sequence[str]) -> list[str]:
    """``command`` run under a keeper of its own (:func:`capture.worker.procs.run_kept`):
    TensorViz's own interpreter (``-I -S``: nothing of the workspace or of this
    environment's site packages) starts it, and it and every process it starts die
    with this process, however this process ends (SIGKILL included), and when it exits.
    The interpreter probe and an approved install run so; start it from a thread that
    lives as long as the command (``PR_SET_PDEATHSIG`` follows the starting thread)."""
    keeper = os.path.join(os.path.dirname(launcher_script()), _KEEPER_SCRIPT)
    return [sys.executable, "-I", "-S", keeper, str(os.getpid()), "--", *command]


def remove_abandoned_launchers(temp: str | None = None) -> list[str]:
    """Remove the launcher folders in ``temp`` (default: the temporary folder) whose
    owner process is gone: this user's real folders (never a link) with an owner file
    naming a pid that no longer runs, or runs as another process (another start time).
    Folders without an owner file are left alone: nothing says whose they are.
    Returns the paths removed."""
    temp = temp or tempfile.gettempdir()
    removed: list[str] = []
    try:
        entries = list(os.scandir(temp))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(_PREFIX):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if not entry.is_dir(follow_symlinks=False) or (hasattr(os, "getuid") and st.st_uid != os.getuid()):
                continue
            owner = safe_read.read_text(os.path.join(entry.path, _OWNER), workspace=entry.path, max_bytes=64)
        except (OSError, UnicodeDecodeError):
            continue
        pid_text = owner.split(" ", 1)[0]
        if not pid_text.isdigit() or _identity(int(pid_text)) == owner:
            continue  # its owner still runs
        shutil.rmtree(entry.path, ignore_errors=True)  # the folder's links are removed, never followed
        removed.append(entry.path)
    return removed


def _identity(pid: int) -> str:
    """``PID START`` for a running process (START: its start time in clock ticks since
    boot, from /proc; ``-`` where there is none), ``""`` when it does not run."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return ""
    except PermissionError:
        pass  # runs, as another user
    except OSError:
        return ""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
        start = data[data.rindex(b")") + 2:].split()[19].decode()
    except (OSError, ValueError, IndexError):
        start = "-"
    return f"{pid} {start}"


def worker_env(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without :data:`DROPPED` (``PYTHONPATH`` is kept),
    plus ``extra`` (the capture's own variables), a fresh process marker and this
    process's id: every process of the worker inherits the marker
    (:mod:`capture.worker.procs` finds and kills them, also in sessions of their own),
    and the worker dies with this process."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    env[MARKER_ENV] = new_marker()
    env[PARENT_ENV] = str(os.getpid())
    return env
