"""Which files are the user's own workspace code, and their workspace-relative names.

A workspace often holds its own virtual environment (``.venv/``): files there, and any
``site-packages``/``dist-packages`` tree, are libraries, not user code. TensorViz's own
``capture`` package is never user code either (the worker's frames are not the user's).
"""

from __future__ import annotations

import hashlib
import os
import sys
import traceback
from pathlib import Path
from types import TracebackType

from ..model import Frame, Source

_LIBRARY_DIRS = ("site-packages", "dist-packages", "__pycache__")
_CAPTURE_PACKAGE = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class WorkspaceFiles:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(os.path.realpath(os.path.abspath(root)))
        self._root_text = str(self.root)
        excluded = set()
        for prefix in {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}:
            real = os.path.realpath(prefix)
            # A venv inside the workspace is library code; the workspace itself is not
            # excluded when it happens to be the interpreter's prefix's parent.
            if real != self._root_text:
                excluded.add(real)
        excluded.add(_CAPTURE_PACKAGE)
        self._excluded = tuple(sorted(excluded))
        self._cache: dict[str, str | None] = {}

    def relative(self, path: str | os.PathLike[str]) -> str | None:
        """Workspace-relative POSIX path of a user file, else None."""
        key = os.fspath(path)
        try:
            return self._cache[key]
        except KeyError:
            pass
        rel = self._relative(key)
        if len(self._cache) < 100_000:
            self._cache[key] = rel
        return rel

    def contains(self, path: str | os.PathLike[str]) -> bool:
        return self.relative(path) is not None

    def _relative(self, path: str) -> str | None:
        if not path or path.startswith("<"):
            return None
        real = os.path.realpath(os.path.abspath(path))
        if real != self._root_text and not real.startswith(self._root_text + os.sep):
            return None
        for ex in self._excluded:
            if real == ex or real.startswith(ex + os.sep):
                return None
        rel = os.path.relpath(real, self._root_text)
        parts = rel.split(os.sep)
        if any(p in _LIBRARY_DIRS for p in parts) or rel == ".":
            return None
        return "/".join(parts)

    def traceback_frames(self, tb: TracebackType | None) -> list[Frame]:
        """Workspace frames of a traceback, outermost first."""
        out = []
        for fs in traceback.extract_tb(tb):
            rel = self.relative(fs.filename)
            if rel is not None:
                out.append(Frame(file=rel, line=fs.lineno or 0, column=getattr(fs, "colno", None) or 0, function=fs.name))
        return out

    def imported_sources(self, extra: list[str] = ()) -> list[Source]:
        """Every workspace file among the loaded modules (plus ``extra`` paths), with its
        sha256, sorted by path."""
        found: dict[str, str] = {}
        for path in list(extra) + [getattr(m, "__file__", None) for m in list(sys.modules.values())]:
            if not isinstance(path, str):
                continue
            rel = self.relative(path)
            if rel is None or rel in found:
                continue
            digest = file_sha256(self.root / rel)
            if digest is not None:
                found[rel] = digest
        return [Source(path=p, sha256=h) for p, h in sorted(found.items())]


def file_sha256(path: str | os.PathLike[str]) -> str | None:
    """The sha256 of a file's bytes, or None when it cannot be read."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()
