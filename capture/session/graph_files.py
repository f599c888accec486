"""Where a capture's graph file goes: one place for the CLI and the editor.

    WORKSPACE/.tensorviz/captures/PROFILE.tvg          the newest capture of each profile
    WORKSPACE/.tensorviz/captures/history/PROFILE/     the last good ones (history.py)

The newest capture is kept whatever it gave, a failure capture included (it says why),
except a capture refused before anything ran (an untrusted workspace, unsaved editor
buffers) or cancelled: that leaves the file as it was. A failure never replaces a good
graph, though: when ``PROFILE.tvg`` holds a successful capture, the failure is written
beside it as ``PROFILE.failed.tvg`` (:func:`failure_file`), and the next successful
capture removes that. ``tensorviz capture -o OUT.tvg`` writes OUT.tvg instead (and
``OUT.failed.tvg`` by the same rule). Writes are atomic: a failed write leaves the old file.

A workspace is untrusted material: a committed ``.tensorviz`` (or ``captures/``, or a
history folder) may be a link to anywhere. :func:`inside_workspace` refuses a path
whose existing components lead out of the workspace, naming the link and its target,
before anything is written, listed or removed there.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import safe_read

from ..graph import atomic, graphfile
from ..recipe import PROFILE_NAME

CAPTURES_DIR = Path(".tensorviz") / "captures"

#: Failure stages after which no graph file is written: nothing ran, or the user stopped it.
NOT_WRITTEN_STAGES = frozenset({"trust", "source", "cancelled"})


class LinkedOutside(OSError):
    """A TensorViz folder of the workspace (``.tensorviz``, ``captures``, a history
    folder) is a link leading out of it: nothing is written, read or removed there."""

    def __init__(self, link: Path, target: str) -> None:
        super().__init__(errno.EACCES, f"{link} is a link to {target}, outside the workspace; "
                         "TensorViz writes nothing there (remove the link)", str(link))
        self.link = link
        self.target = target


def inside_workspace(workspace: str | os.PathLike[str], path: Path) -> Path:
    """``path`` (below ``workspace``) when every component of it that exists stays
    inside the workspace after resolving links; else :class:`LinkedOutside` naming the
    first link that leads out. A link that stays inside is followed."""
    root = Path(workspace)
    try:
        rel = path.relative_to(root)
    except ValueError:
        raise LinkedOutside(path, os.path.realpath(path)) from None
    here = root
    for part in rel.parts:
        here = here / part
        if not os.path.islink(here):
            if not os.path.lexists(here):
                break  # nothing below it exists yet: it will be made inside
            continue
        if not safe_read.is_inside(here, root):
            raise LinkedOutside(here, os.path.realpath(here))
    return path


class GraphFileNameError(ValueError):
    """A profile name that cannot name a graph file (it would leave the captures folder)."""


def graph_file(workspace: str | os.PathLike[str], profile: str) -> Path:
    """``WORKSPACE/.tensorviz/captures/PROFILE.tvg``."""
    if not PROFILE_NAME.match(profile):
        raise GraphFileNameError(f"{profile!r} is not a profile name a graph file can have")
    return Path(workspace) / CAPTURES_DIR / f"{profile}.tvg"


def failure_file(path: Path) -> Path:
    """Where a failure goes when ``path`` holds a good graph: ``NAME.failed.tvg`` beside it."""
    stem = path.name[: -len(".tvg")] if path.name.endswith(".tvg") else path.name
    return path.with_name(f"{stem}.failed.tvg")


def holds_good_capture(path: Path) -> bool:
    """Whether ``path`` is a graph file of a successful capture (read like any file:
    a broken or failed one is not good, and may be replaced)."""
    if not path.is_file():
        return False
    try:
        return graphfile.read(path).failure is None
    except (graphfile.GraphFileError, OSError):
        return False


def write_encoded(data: bytes, path: Path) -> None:
    """Write an encoded graph file, creating its folder; ``OSError`` when it cannot (the
    old file, if any, is then unchanged)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.atomic_write(path, data)
