"""The parent's side of the native Torch recorder's build (``capture/torch/native``).

A capture worker never builds the recorder: its whole process tree is swept when the
capture ends, and a compiler running 40-80 s in a session of its own would be killed (and
named) as an escaped process. When a Torch capture's ``meta["recorder"]`` says the recorder
is not built yet (:data:`capture.graph.meta.RECORDER_NOT_BUILT`), the session starts the
build here, after the capture: the capture's own interpreter (its Torch is the one the
build is for) runs ``capture.torch.native.build_main`` in the background, in a session of
its own so that it outlives a CLI that exits, at low priority, with the worker's
environment less the worker's marker. Its path holds only this ``capture`` package and
``safe_read``, through links in a private folder of its own (as the worker's launcher
does), which the build removes when it ends; one a killed build left is removed by the
next launcher (:func:`capture.session.launcher.remove_abandoned_launchers`: the folder
names the build as its owner). ``TENSORVIZ_TORCH_RECORDER=python`` never builds.

Nothing is installed: the build compiles this package's own source into the user's
cache folder (docs/torch-native-recorder.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from typing import Any

import safe_read

from ..graph.meta import RECORDER_NOT_BUILT
from ..worker.procs import MARKER_ENV, PARENT_ENV, forget_child, register_child
from .launcher import _OWNER, _PREFIX, DROPPED, _identity

# Builds started by this process and still running, by interpreter (one at a time each).
_running: dict[str, subprocess.Popen[bytes]] = {}
_lock = threading.Lock()

_CHILD = (
    "import os, shutil, sys\n"
    "folder = sys.argv[1]\n"
    "sys.path.insert(0, folder)\n"
    "try:\n"
    "    from capture.torch.native import build_main\n"
    "    build_main()\n"
    "finally:\n"
    "    shutil.rmtree(folder, ignore_errors=True)\n"
)


def wanted(meta: Any) -> bool:
    """Whether a capture's ``meta`` asks for the recorder's build."""
    note = meta.get("recorder") if isinstance(meta, dict) else None
    return isinstance(note, str) and note.startswith(RECORDER_NOT_BUILT)


def start(python: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes] | None:
    """Start the build with ``python`` in the background (None: one this process started
    still runs for it, or it could not start). ``env``: the capture's own variables."""
    with _lock:
        running = _running.get(python)
        if running is not None and running.poll() is None:
            return None
        folder = tempfile.mkdtemp(prefix=f"{_PREFIX}native-build-")
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        try:
            for name, source in (("capture", package), ("safe_read", os.path.dirname(safe_read.__file__))):
                os.symlink(source, os.path.join(folder, name), target_is_directory=True)
            child_env = {k: v for k, v in os.environ.items() if k not in DROPPED}
            child_env.update(env or {})
            for key in (MARKER_ENV, PARENT_ENV):  # not a worker: nothing sweeps it, it dies with no parent
                child_env.pop(key, None)
            proc = subprocess.Popen(
                [python, "-c", _CHILD, folder], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env=child_env, start_new_session=True, close_fds=True,
                preexec_fn=_lower_priority,
            )
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)
            return None
        register_child(proc.pid)  # started here: never an orphan to chase
        try:
            with open(os.path.join(folder, _OWNER), "w", encoding="ascii") as fh:
                fh.write(_identity(proc.pid))
        except OSError:  # the build already ended and removed its folder
            pass
        _running[python] = proc
    threading.Thread(target=_reap, args=(proc,), name="tensorviz-native-build", daemon=True).start()
    return proc


def _lower_priority() -> None:  # pragma: no cover - runs in the child before exec
    try:
        os.nice(10)
    except OSError:
        pass


def _reap(proc: subprocess.Popen[bytes]) -> None:
    proc.wait()
    forget_child(proc.pid)
