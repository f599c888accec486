"""Which files are the user's own workspace code, and their workspace-relative names.

A workspace often holds its own virtual environment (``.venv/``): files there, and any
``site-packages``/``dist-packages`` tree, are libraries, not user code. TensorViz's own
``capture`` package is never user code either (the worker's frames are not the user's).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import os
import sys
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any, Sequence

from ..graph.freshness import file_sha256
from ..graph.model import Frame, Source

_LIBRARY_DIRS = ("site-packages", "dist-packages", "__pycache__")
_CAPTURE_PACKAGE = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Files of modules the warm worker's resident process loaded and found to be outside
# the workspace (root -> paths): a capture forked from it need not resolve them again.
_KNOWN_LIBRARY_FILES: dict[str, frozenset[str]] = {}


def _anonymous(function: str) -> bool:
    """A code object without a name of its own: ``<listcomp>``, ``<genexpr>``, ``<lambda>``…
    (``<module>`` is a file's top level, a place of its own)."""
    return function.startswith("<") and function != "<module>"


def remember_library_files(root: str | os.PathLike[str], paths: list[str]) -> None:
    """Record ``paths`` (checked here) as library files for captures of ``root``."""
    files = WorkspaceFiles(root)
    _KNOWN_LIBRARY_FILES[files._root_text] = frozenset(p for p in paths if files._relative(p) is None)


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
        self._cache: dict[str, str | None] = dict.fromkeys(_KNOWN_LIBRARY_FILES.get(self._root_text, ()))
        # sha256 of the exact bytes each workspace module was compiled from, recorded
        # when it was imported (see :meth:`watch_imports`); first import wins.
        self._imported: dict[str, str] = {}

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
        """Workspace frames of a traceback, outermost first. A comprehension's, generator
        expression's or lambda's frame on the very line of the frame that called it
        (``[t.view(s) for t in qkv]`` raising: Python 3.11 gives ``forward`` line 9, then
        ``<listcomp>`` line 9) is that line once: the caller's function, the inner frame's
        column."""
        out: list[Frame] = []
        for fs in traceback.extract_tb(tb):
            rel = self.relative(fs.filename)
            if rel is None:
                continue
            frame = Frame(file=rel, line=fs.lineno or 0, column=getattr(fs, "colno", None) or 0, function=fs.name)
            last = out[-1] if out else None
            if (last is not None and _anonymous(fs.name) and (last.file, last.line) == (frame.file, frame.line)):
                out[-1] = Frame(file=last.file, line=last.line, column=frame.column or last.column, function=last.function)
                continue
            out.append(frame)
        return out

    def record_import(self, path: str | os.PathLike[str], data: bytes) -> None:
        """Record that the workspace file ``path`` was imported from ``data``."""
        rel = self.relative(path)
        if rel is not None and rel not in self._imported:
            self._imported[rel] = hashlib.sha256(data).hexdigest()

    def record_saved_file(self, rel: str, digest: str) -> None:
        """Record the sha256 of a data file the capture loaded (a checkpoint or a
        fixture, at its workspace-relative ``rel``): it joins the capture's sources."""
        self._imported.setdefault(rel, digest)

    def watch_imports(self) -> "ImportHasher":
        """From now on, hash every workspace module's source as it is imported (the
        bytes compiled, not the file read later: an edit saved during the capture then
        shows as a change). Installs an :class:`ImportHasher` first on ``sys.meta_path``;
        meant for the worker process (call once)."""
        hasher = ImportHasher(self)
        sys.meta_path.insert(0, hasher)
        return hasher

    def imported_sources(self, extra: Sequence[str] = ()) -> list[Source]:
        """Every workspace file among the loaded modules (plus ``extra`` paths, and every
        file recorded by :meth:`record_import`, also when its import failed), with its
        sha256 as imported, else as now on disk, sorted by path."""
        found: dict[str, str] = dict(self._imported)
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


class ImportHasher(importlib.abc.MetaPathFinder):
    """A ``sys.meta_path`` finder that asks the finders after it, and gives each
    workspace module they find as a plain source file a loader that reads the source
    once, records its sha256, and compiles exactly those bytes (no bytecode cache: a
    ``.pyc`` is validated by mtime and size only, and is not the text)."""

    def __init__(self, files: WorkspaceFiles) -> None:
        self.files = files

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        for finder in list(sys.meta_path):
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if (
            type(loader) is importlib.machinery.SourceFileLoader
            and spec.origin
            and spec.origin == loader.path
            and self.files.contains(spec.origin)
        ):
            spec.loader = _HashingLoader(loader.name, loader.path, self.files)
        return spec

    def invalidate_caches(self) -> None:
        pass


class _HashingLoader(importlib.machinery.SourceFileLoader):
    def __init__(self, fullname: str, path: str, files: WorkspaceFiles) -> None:
        super().__init__(fullname, path)
        self._files = files

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        data = self.get_data(path)
        self._files.record_import(path, data)
        return self.source_to_code(data, path)
