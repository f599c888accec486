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
from collections.abc import Mapping

import safe_read

from ..worker.procs import MARKER_ENV, PARENT_ENV, new_marker

_launcher_lock = threading.Lock()
_launcher_dir: str | None = None

_LAUNCHER = '''"""TensorViz capture worker launcher (generated; safe to delete)."""
import sys
from capture.worker.main import main
sys.exit(main())
'''

#: Variables of this process that would change what the selected interpreter imports.
_DROPPED = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT")


def launcher_script() -> str:
    """A script in a private folder holding only links to this ``capture`` package and
    ``safe_read``: run by the selected interpreter, it puts them (and nothing else of
    this environment) first on the worker's path."""
    global _launcher_dir
    with _launcher_lock:
        if _launcher_dir is None or not os.path.exists(os.path.join(_launcher_dir, "capture")):
            folder = tempfile.mkdtemp(prefix="tensorviz-worker-")
            package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            # ``safe_read`` (stdlib only) is how capture reads workspace files.
            for name, source in (("capture", package), ("safe_read", os.path.dirname(safe_read.__file__))):
                try:
                    os.symlink(source, os.path.join(folder, name), target_is_directory=True)
                except (OSError, NotImplementedError):
                    shutil.copytree(source, os.path.join(folder, name), ignore=shutil.ignore_patterns("__pycache__"))
            with open(os.path.join(folder, "tensorviz_worker.py"), "w", encoding="utf-8") as fh:
                fh.write(_LAUNCHER)
            _launcher_dir = folder
            atexit.register(shutil.rmtree, folder, True)
        return os.path.join(_launcher_dir, "tensorviz_worker.py")


def worker_env(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without what would redirect the worker's imports,
    plus ``extra`` (the capture's own variables), a fresh process marker and this
    process's id: every process of the worker inherits the marker
    (:mod:`capture.worker.procs` finds and kills them, also in sessions of their own),
    and the worker dies with this process."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    env[MARKER_ENV] = new_marker()
    env[PARENT_ENV] = str(os.getpid())
    return env
