"""The capture history of a workspace: the last captures of each profile, for diffs.

    WORKSPACE/.tensorviz/captures/history/PROFILE/000042-20261201T023400Z.tvg

Each successful capture of a profile (``tensorviz capture`` / ``open``, Open as Graph and
recapture in the editor, all through :func:`capture.session.run_session`) is kept as a
portable graph file, so that "what changed since the previous capture" always has
something to compare with. A failed capture is not kept: a
failure record has no graph to diff.

Bounds, per profile (:class:`HistoryLimits`): at most ``max_captures`` files (default 10)
and at most ``max_bytes`` bytes (default 256 MiB), except that the newest two are always
kept, so the previous capture survives a bound in bytes smaller than two graphs.

Every write is atomic (:func:`capture.graph.atomic.atomic_write`: a temporary file in the same
folder, then a rename), and pruning starts only after the new file is in place, one
``unlink`` per old file: an interrupted or failed write leaves the history exactly as it
was, never a half-written graph file. Temporary files left by a process that was killed
mid-write are removed by the next prune once they are an hour old. Files are ordered by
their sequence number (the leading digits), not by clock time.

The history lives in the workspace, which may link its folders anywhere: a history
folder whose path leads out of the workspace through a link is refused
(:func:`~capture.session.graph_files.inside_workspace`), and pruning never removes
through a link at all. It removes only what TensorViz wrote there: a regular file named
like an entry that begins with a graph file's header, and its own write temporaries.
"""

from __future__ import annotations

import functools
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..graph import atomic, graphfile
from ..graph.model import Capture
from ..recipe import PROFILE_NAME
from .graph_files import LinkedOutside, inside_workspace

HISTORY_DIR = Path(".tensorviz") / "captures" / "history"
DEFAULT_MAX_CAPTURES = 10
DEFAULT_MAX_BYTES = 256 << 20
_NAME = re.compile(r"^(\d{6,})-(\d{8}T\d{6}Z)\.tvg$")

#: A kept capture offered for a diff: how to read it (on the first diff, not before), and
#: its label (``previous capture of PROFILE (12:03:41 UTC, 1 Dec)``).
Baseline = tuple[Callable[[], Capture], str]


class HistoryError(Exception):
    """A history operation failed; ``str()`` is one line for a person."""


@dataclass(frozen=True)
class HistoryLimits:
    max_captures: int = DEFAULT_MAX_CAPTURES
    max_bytes: int = DEFAULT_MAX_BYTES

    def __post_init__(self) -> None:
        if self.max_captures < 1:
            raise ValueError("a capture history keeps at least 1 capture")
        if self.max_bytes < 0:
            raise ValueError("the history's byte bound cannot be negative")


@dataclass(frozen=True)
class Entry:
    """One kept capture: ``seq`` orders entries, ``stamp`` is when it was kept (UTC)."""

    path: Path
    seq: int
    stamp: str
    size: int

    @property
    def label(self) -> str:
        """``12:03:41 UTC, 1 Dec`` from the file name, for the viewer's diff offer."""
        try:
            t = time.strptime(self.stamp, "%Y%m%dT%H%M%SZ")
        except ValueError:
            return self.stamp
        return time.strftime("%H:%M:%S UTC, %d %b", t).replace(" 0", " ")


class CaptureHistory:
    """The history of one workspace (``root``). Cheap to make; holds no open files."""

    def __init__(self, root: str | os.PathLike[str], limits: HistoryLimits | None = None) -> None:
        self.root = Path(root)
        self.limits = limits or HistoryLimits()

    def folder(self, profile: str) -> Path:
        if not isinstance(profile, str) or not PROFILE_NAME.match(profile):
            raise HistoryError(f"{profile!r} is not a profile name a history folder can have")
        try:
            return inside_workspace(self.root, self.root / HISTORY_DIR / profile)
        except LinkedOutside as exc:
            raise HistoryError(exc.strerror) from None

    # -- reading

    def profiles(self) -> list[str]:
        """The profiles with a history folder, sorted (none through a link out)."""
        try:
            names = os.listdir(inside_workspace(self.root, self.root / HISTORY_DIR))
        except OSError:
            return []
        return sorted(n for n in names if PROFILE_NAME.match(n) and (self.root / HISTORY_DIR / n).is_dir())

    def entries(self, profile: str) -> list[Entry]:
        """The kept captures of ``profile``, newest first (none: ``[]``)."""
        folder = self.folder(profile)
        out = []
        try:
            names = os.listdir(folder)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise HistoryError(f"cannot list {folder}: {exc.strerror or exc}") from None
        for name in names:
            m = _NAME.match(name)
            if m is None:
                continue
            path = folder / name
            try:
                st = path.stat()
            except OSError:
                continue  # pruned meanwhile
            out.append(Entry(path, int(m.group(1)), m.group(2), st.st_size))
        out.sort(key=lambda e: e.seq, reverse=True)
        return out

    def latest(self, profile: str) -> Entry | None:
        got = self.entries(profile)
        return got[0] if got else None

    def previous(self, profile: str) -> Entry | None:
        """The capture kept before the newest one: what a new capture is compared with."""
        got = self.entries(profile)
        return got[1] if len(got) > 1 else None

    def load(self, entry: Entry) -> Capture:
        """The capture of ``entry``; :class:`capture.graph.graphfile.GraphFileError` when it cannot be read."""
        return graphfile.read(entry.path)

    def previous_capture(self, profile: str) -> tuple[Capture, Entry] | None:
        """The newest readable capture before the newest one, with its entry (``None``: none)."""
        for entry in self.entries(profile)[1:]:
            try:
                return self.load(entry), entry
            except graphfile.GraphFileError:
                continue
        return None

    def baseline(self, profile: str) -> Baseline | None:
        """Before a new capture of ``profile`` is recorded: its newest kept capture, as a
        reader and a label, for ``ViewerServer.add_capture(baseline=…)`` (read on the
        first diff, not now). ``None`` when nothing is kept yet."""
        entry = self.latest(profile)
        if entry is None:
            return None
        return functools.partial(self.load, entry), f"previous capture of {profile} ({entry.label})"

    # -- writing

    def record(self, profile: str, capture: Capture, encoded: bytes | None = None) -> Entry | None:
        """Keep ``capture`` as the newest of ``profile`` and prune what the limits drop.
        ``encoded``: the capture's graph file bytes when the caller has them already.

        A failed capture is not kept (``None``). Raises :class:`HistoryError` when the
        file cannot be written; the history is then as it was before the call."""
        if capture.failure is not None:
            return None
        folder = self.folder(profile)
        try:
            data = encoded if encoded is not None else graphfile.encode(capture)
        except ValueError as exc:
            raise HistoryError(f"cannot keep the capture of {profile}: {exc}") from None
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HistoryError(f"cannot create {folder}: {exc.strerror or exc}") from None
        existing = self.entries(profile)
        seq = existing[0].seq + 1 if existing else 1
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        path = folder / f"{seq:06d}-{stamp}.tvg"
        while path.exists():  # another process took this number meanwhile
            seq += 1
            path = folder / f"{seq:06d}-{stamp}.tvg"
        try:
            atomic.atomic_write(path, data)
        except OSError as exc:
            raise HistoryError(f"cannot write {path}: {exc.strerror or exc}") from None
        self.prune(profile)
        return Entry(path, seq, stamp, len(data))

    def prune(self, profile: str) -> list[Path]:
        """Remove the entries the limits drop (oldest first) and stale temporary files;
        returns the removed entries' paths."""
        keep_n, keep_bytes = self.limits.max_captures, self.limits.max_bytes
        removed: list[Path] = []
        total = 0
        folder = self.folder(profile)
        if _through_link(self.root, folder):
            return removed
        for k, entry in enumerate(self.entries(profile)):
            total += entry.size
            if k < min(2, keep_n) or (k < keep_n and total <= keep_bytes):
                continue
            if not _written_by_tensorviz(entry.path):
                continue
            try:
                entry.path.unlink()
                removed.append(entry.path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise HistoryError(f"cannot remove {entry.path}: {exc.strerror or exc}") from None
        self._remove_stale_temporaries(folder)
        return removed

    @staticmethod
    def _remove_stale_temporaries(folder: Path) -> None:
        """What killed writes of entries left (each entry has a name of its own, so the
        next write of one never meets another's): removed once nobody holds them."""
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            if _TEMPORARY.match(entry.name) is None:
                continue
            try:
                if entry.is_file(follow_symlinks=False) and atomic.abandoned_temporary(entry.path):
                    os.unlink(entry.path)
            except OSError:
                pass


#: What :func:`capture.graph.atomic.atomic_write` names its temporaries: ``.ENTRY.<hex>.tmp``.
_TEMPORARY = re.compile(r"^\.\d{6,}-\d{8}T\d{6}Z\.tvg\.[0-9a-f]{6,}\.tmp$")


def _through_link(root: Path, folder: Path) -> bool:
    """Whether any component of ``folder`` below ``root`` is a link (to anywhere)."""
    here = root
    for part in folder.relative_to(root).parts:
        here = here / part
        if os.path.islink(here):
            return True
    return False


def _written_by_tensorviz(path: Path) -> bool:
    """A regular file (not a link) that begins with a graph file's header."""
    fd = atomic.open_regular_file(path)
    if fd is None:
        return False
    try:
        return graphfile.has_graph_header(os.read(fd, 64))
    except OSError:
        return False
    finally:
        os.close(fd)


__all__ = ["Baseline", "CaptureHistory", "Entry", "HistoryError", "HistoryLimits", "HISTORY_DIR"]
