"""The source frame of each equation of a converted jaxpr: :class:`FrameTable` picks
the innermost user frame of its traceback (else a library frame), deduplicated.

JAX is imported only inside functions: importing this module needs the standard
library alone."""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Any

from ..worker.libframes import LibraryFiles
from ..graph.model import Frame
from ..worker.workspace_files import WorkspaceFiles

_MAX_TRACEBACK_CACHE = 200_000


def _library_prefixes() -> tuple[str, ...]:
    """Folders whose files are never the user's frame: the standard library, installed
    packages, and TensorViz's own capture package."""
    prefixes: set[str] = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_path(key)
        if p:
            prefixes.add(os.path.realpath(p))
    for p in sys.path:
        if p and os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages"):
            prefixes.add(os.path.realpath(p))
    prefixes.add(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    for mod in ("jax", "jaxlib", "flax", "numpy", "optax", "chex", "ml_dtypes"):
        m = sys.modules.get(mod)
        f = getattr(m, "__file__", None)
        if f:
            prefixes.add(os.path.dirname(os.path.realpath(f)))
    return tuple(sorted(p.rstrip(os.sep) + os.sep for p in prefixes))


class FrameTable:
    """Picks the innermost user frame of each equation's traceback, deduplicated.

    With a workspace: the innermost frame in a workspace file (the user's own code, not
    a virtual environment inside it nor TensorViz itself), written relative to the
    workspace root. Without one (a standalone conversion): the innermost frame outside
    the standard library and installed packages, with its path as Python reports it.
    When neither exists: the innermost library frame (``capture.worker.libframes``: e.g. a
    Flax layer's ``__call__``), ``library=True`` with the file's absolute path; the
    search for one ends at TensorViz's own frames (what called the capture)."""

    def __init__(self, workspace: str | os.PathLike[str] | None) -> None:
        self.frames: list[Frame] = []
        self._files = WorkspaceFiles(workspace) if workspace is not None else None
        self._library = _library_prefixes() if workspace is None else ()
        self._names: dict[str, str | None] = {}  # co_filename -> frame file, None: not user code
        self._by_addr: dict[tuple[Any, int], int] = {}
        self._by_tb: dict[Any, int | None] = {}
        # made when a traceback without a user frame first needs it (most equations of a
        # workspace model have one: its folders are then never resolved)
        self._lib_files: LibraryFiles | None = None

    @property
    def _lib(self) -> LibraryFiles:
        if self._lib_files is None:
            self._lib_files = LibraryFiles()
        return self._lib_files

    def _name(self, filename: str) -> str | None:
        try:
            return self._names[filename]
        except KeyError:
            pass
        if self._files is not None:
            name = self._files.relative(filename)
        elif not filename or filename.startswith("<"):
            name = None
        else:
            name = None if os.path.realpath(filename).startswith(self._library) else filename
        self._names[filename] = name
        return name

    def frame_of(self, traceback: Any) -> int | None:
        if traceback is None:
            return None
        # Tracebacks compare and hash by their (code, offset) frames, in C: equations
        # traced from the same stack (a layer in a Python loop) share one lookup.
        try:
            return self._by_tb[traceback]
        except KeyError:
            pass
        except TypeError:  # an unhashable traceback type: no caching
            return self._frame_of(traceback)
        idx = self._frame_of(traceback)
        if len(self._by_tb) < _MAX_TRACEBACK_CACHE:
            self._by_tb[traceback] = idx
        return idx

    def _frame_of(self, traceback: Any) -> int | None:
        return self.frame_of_raw(*traceback.raw_frames())

    def frame_of_raw(self, codes: Any, lastis: Any) -> int | None:
        """The innermost workspace frame of ``(code, byte offset)`` pairs, innermost
        first; else the innermost library frame (not the frameworks' own internals)."""
        names = self._names
        for i, code in enumerate(codes):
            filename = code.co_filename
            try:
                name = names[filename]
            except KeyError:
                name = self._name(filename)
            if name is not None:
                return self._intern(code, lastis[i], name, False)
        # No user frame: the innermost library frame before TensorViz's own (what called the capture).
        lib = self._lib
        for code, lasti in zip(codes, lastis):
            if lib.is_capture(code.co_filename):
                return None
            lib_path = lib.path(code.co_filename)
            if lib_path is not None:
                return self._intern(code, lasti, lib_path, True)
        return None

    def _intern(self, code: Any, lasti: int, name: str, library: bool) -> int:
        key = (code, lasti)
        idx = self._by_addr.get(key)
        if idx is None:
            line, column = _location(code, lasti)
            idx = self._by_addr[key] = len(self.frames)
            self.frames.append(Frame(name, line, column, getattr(code, "co_qualname", code.co_name), library))
        return idx


def _location(code: Any, lasti: int) -> tuple[int, int]:
    """(line, 0-based column) of the instruction at byte offset ``lasti``."""
    try:
        from jax._src.lib import xla_client

        line, column, _, _ = xla_client.Traceback.code_addr2location(code, lasti)
        return max(int(line), 0), max(int(column), 0)
    except Exception:  # older/newer JAX without the helper: CPython's own table
        for start, end, ln in code.co_lines():
            if start <= lasti < end and ln is not None:
                return ln, 0
        return code.co_firstlineno, 0
