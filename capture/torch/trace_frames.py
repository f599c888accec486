"""The source frames of a :class:`~capture.torch.trace.TorchTrace`: the innermost
workspace frame (else library frame) of each op and module call, and the definitions of
classes and functions (the :class:`TraceFrames` part of the trace)."""

from __future__ import annotations

import sys
from typing import Any


from ..worker.libframes import LibraryFiles, class_location
from ..graph.model import Frame
from ..worker.builder import GraphBuilder
from ..worker.plugin_helpers import code_position
from ..worker.workspace_files import WorkspaceFiles


_UNSEEN = object()
_LIBRARY_FILES: list[LibraryFiles] = []


def library_files() -> LibraryFiles:
    """This process's :class:`LibraryFiles` (its answers are per file and stay true while
    the process lives; made again once Flax is imported, whose layers it tells apart)."""
    got = _LIBRARY_FILES[0] if _LIBRARY_FILES else None
    if got is None or got.flax_imported != ("flax" in sys.modules):
        got = LibraryFiles()
        _LIBRARY_FILES[:] = [got]
    return got


class TraceFrames:
    """The frame methods of :class:`~capture.torch.trace.TorchTrace` (which sets the state
    below in its ``__init__``)."""

    b: GraphBuilder
    files: WorkspaceFiles | None
    _lib: LibraryFiles
    _stack: list[tuple[int, str | None, int | None, Any, int | None]]
    _outer_frame: Any
    _code_kind: dict[int, tuple[str, bool] | None]
    _codes: list[Any]
    _addr_frame: dict[tuple[int, int], int]

    # ------------------------------------------------------------------ frames

    def frame_of(self, f: Any) -> int | None:
        """The frame id of the innermost workspace frame at or above ``f``; when there is
        none, of the innermost library frame (``capture.worker.libframes``). The walk ends early
        at the innermost open module call (its call site's answer, computed once) and at
        the frame that started recording (nothing above it ran the model). Each frame costs
        one lookup of its code object's kind (most are Torch's and the trace's own: neither)."""
        kinds = self._code_kind
        if self._stack:
            top = self._stack[-1]
            stop, stop_fid = top[3], top[4]
        else:
            stop = stop_fid = None
        outer = self._outer_frame
        lib_fid = None
        while f is not None:
            if f is stop:
                if lib_fid is not None and (stop_fid is None or self.b.frames[stop_fid].library):
                    return lib_fid
                return stop_fid
            code = f.f_code
            kind: Any = kinds.get(id(code), _UNSEEN)
            if kind is _UNSEEN:
                self._codes.append(code)
                kind = kinds[id(code)] = self._code_kind_of(code)
            if kind is not None and not kind[1]:  # workspace code
                key = (id(code), f.f_lasti)
                fid = self._addr_frame.get(key)
                if fid is None:
                    fid = self._addr_frame[key] = self._intern_frame(code, f.f_lasti, f.f_lineno, kind[0])
                return fid
            if f is outer:  # the code that started recording is not the model's
                return lib_fid
            if kind is not None and lib_fid is None:  # the innermost library frame
                key = (id(code), f.f_lasti)
                lib_fid = self._addr_frame.get(key)
                if lib_fid is None:
                    lib_fid = self._addr_frame[key] = self._intern_frame(code, f.f_lasti, f.f_lineno, kind[0], True)
            f = f.f_back
        return lib_fid

    def _code_kind_of(self, code: Any) -> tuple[str, bool] | None:
        """``(workspace-relative path, False)``, ``(absolute path, True)`` for an
        installed library's file, or None for code that is neither."""
        filename = code.co_filename
        rel = self.files.relative(filename) if self.files is not None else None
        if rel is not None:
            return rel, False
        lib = self._lib.path(filename)
        return None if lib is None else (lib, True)

    def _class_frame(self, cls: type) -> int | None:
        """The frame id of ``cls``'s definition (workspace-relative, else a library frame
        with the file's absolute path), or None when its source file is unknown."""
        loc = class_location(cls)
        if loc is None:
            return None
        path, line = loc
        rel = self.files.relative(path) if self.files is not None else None
        if rel is not None:
            return self.b.frame(Frame(rel, line, 0, cls.__qualname__))
        return self.b.frame(Frame(path, line, 0, cls.__qualname__, True))

    def _function_frame(self, fn: Any) -> int | None:
        """The frame id of a plain function's definition (workspace-relative, else a
        library frame), or None when it has no source file."""
        code: Any = getattr(fn, "__code__", None)
        filename = getattr(code, "co_filename", None)
        if not isinstance(filename, str) or not filename.endswith(".py"):
            return None
        rel = self.files.relative(filename) if self.files is not None else None
        if rel is not None:
            return self.b.frame(Frame(rel, code.co_firstlineno, 0, fn.__qualname__))
        lib = self._lib.path(filename)
        return self.b.frame(Frame(lib, code.co_firstlineno, 0, fn.__qualname__, True)) if lib is not None else None

    def _intern_frame(self, code: Any, lasti: int, lineno: int | None, rel: str, library: bool = False) -> int:
        pline, column = code_position(code, lasti)
        line = pline or lineno
        fid = self.b.frame(Frame(rel, int(line or code.co_firstlineno), int(column), code.co_qualname, library))
        assert fid is not None
        return fid
