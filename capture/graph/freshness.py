"""Is a capture still what the source says? Compare its recorded sources with the
current files (or the editor's open, possibly unsaved, buffers)."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .model import Source


@dataclass(frozen=True, slots=True)
class SourceChange:
    """``path``: workspace-relative, as recorded. ``state``: ``"changed"`` (the bytes
    differ, on disk or in an open buffer) or ``"missing"`` (the file is gone).
    ``in_buffer``: the comparison used an open buffer's text rather than the disk."""

    path: str
    state: str
    in_buffer: bool = False


def stale_sources(
    sources: Iterable[Source],
    workspace: str | os.PathLike[str],
    open_buffers: Mapping[str, str] | None = None,
) -> list[SourceChange]:
    """The recorded sources that no longer match, in recorded order; empty when fresh.

    ``open_buffers`` maps a path (absolute, or workspace-relative) to the buffer's
    current text; an open buffer wins over the disk, its text hashed as UTF-8."""
    root = Path(os.path.realpath(os.path.abspath(workspace)))
    buffers: dict[str, str] = {}
    for path, text in (open_buffers or {}).items():
        full = path if os.path.isabs(path) else os.path.join(root, path)
        buffers[os.path.realpath(full)] = text
    changes = []
    for src in sources:
        full = os.path.realpath(root / src.path)
        if full in buffers:
            digest = hashlib.sha256(buffers[full].encode("utf-8")).hexdigest()
            if digest != src.sha256:
                changes.append(SourceChange(src.path, "changed", in_buffer=True))
            continue
        if not os.path.isfile(full):
            changes.append(SourceChange(src.path, "missing"))
            continue
        on_disk = source_sha256(full)
        if on_disk is None:
            changes.append(SourceChange(src.path, "missing"))
        elif on_disk != src.sha256:
            changes.append(SourceChange(src.path, "changed"))
    return changes


def is_fresh(sources: Iterable[Source], workspace: str | os.PathLike[str], open_buffers: Mapping[str, str] | None = None) -> bool:
    return not stale_sources(sources, workspace, open_buffers)


# Large sources (a Torch checkpoint of gigabytes) are hashed again only when their size,
# modification time or inode changed: a freshness check runs on every edit of any source
# of a graph, and rehashing a checkpoint each time would cost seconds. Small files (source
# code) are always hashed, so an edit within the clock's resolution is never missed.
_LARGE = 1 << 20
_digests: dict[str, tuple[tuple[int, int, int], str]] = {}
_MAX_CACHED = 256


def source_sha256(path: str) -> str | None:
    """A source file's sha256 (None: unreadable), large files hashed once per (size,
    modification time, inode): what every freshness and recapture check reads."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if st.st_size < _LARGE:
        return file_sha256(path)
    key = (st.st_size, st.st_mtime_ns, st.st_ino)
    cached = _digests.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    digest = file_sha256(path)
    if digest is not None:
        if len(_digests) >= _MAX_CACHED:
            _digests.pop(next(iter(_digests)))
        _digests[path] = (key, digest)
    return digest


def file_sha256(path: str | os.PathLike[str]) -> str | None:
    """The sha256 of a file's bytes, or None when it cannot be read."""
    h = hashlib.sha256()
    try:
        # Without blocking, and of regular files only: a FIFO or a device named like a
        # source never hangs (or endlessly feeds) the hash.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return h.hexdigest()
