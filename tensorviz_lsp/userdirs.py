"""Where TensorViz keeps user-level state: outside every workspace.

Trust decisions and the interpreter a user picked live here, never in the
repository, so that a repository cannot trust itself (a checked-in file would
otherwise be able to grant its own code permission to run).

``TENSORVIZ_CONFIG_DIR`` overrides the location (tests isolate trust with it);
otherwise the XDG base directories are followed.
"""

from __future__ import annotations

import os
from pathlib import Path


def config_dir() -> Path:
    override = os.environ.get("TENSORVIZ_CONFIG_DIR")
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME")
    root = Path(base).expanduser() if base and os.path.isabs(os.path.expanduser(base)) else Path.home() / ".config"
    return root / "tensorviz"


def state_dir() -> Path:
    override = os.environ.get("TENSORVIZ_STATE_DIR") or os.environ.get("TENSORVIZ_CONFIG_DIR")
    if override:
        return Path(override).expanduser() / "state"
    base = os.environ.get("XDG_STATE_HOME")
    root = Path(base).expanduser() if base and os.path.isabs(os.path.expanduser(base)) else Path.home() / ".local" / "state"
    return root / "tensorviz"


def is_within(path: Path, root: Path) -> bool:
    """True when ``path`` is ``root`` or lies under it (both resolved)."""
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False
