"""Where TensorViz keeps user-level state: outside every workspace.

Trust decisions and the interpreter a user picked live here, never in the
repository, so that a repository cannot trust itself (a checked-in file would
otherwise be able to grant its own code permission to run).

``TENSORVIZ_CONFIG_DIR`` overrides the location (tests isolate trust with it);
otherwise each platform's own convention is followed through ``platformdirs``:
the XDG base directories on Linux, ``~/Library/Application Support`` on macOS,
``%LOCALAPPDATA%`` on Windows.
"""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import PlatformDirs

_APP = "tensorviz"


def _dirs() -> PlatformDirs:
    # Built per call: the XDG variables are read when a path is asked for, so a
    # test (or a user) that changes them is honoured.
    return PlatformDirs(_APP, appauthor=False)


def config_dir() -> Path:
    override = os.environ.get("TENSORVIZ_CONFIG_DIR")
    if override:
        return Path(override).expanduser()
    return Path(_dirs().user_config_dir)


def state_dir() -> Path:
    override = os.environ.get("TENSORVIZ_STATE_DIR") or os.environ.get("TENSORVIZ_CONFIG_DIR")
    if override:
        return Path(override).expanduser() / "state"
    return Path(_dirs().user_state_dir)


def cache_dir() -> Path:
    """Disposable files (the demo workspace): ``~/.cache/tensorviz`` on Linux (honouring
    ``XDG_CACHE_HOME``), ``~/Library/Caches/tensorviz`` on macOS, ``%LOCALAPPDATA%`` on Windows."""
    return Path(_dirs().user_cache_dir)


def is_within(path: Path, root: Path) -> bool:
    """True when ``path`` is ``root`` or lies under it (both resolved)."""
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False
