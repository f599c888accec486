"""Which source files the viewer may show (``api/source``, reveal): the policy.

A file may be shown when it is a regular file inside the workspace (unless the server
was started not to browse it), or a source a capture recorded and :meth:`admit` let in:
any recorded source of a capture the embedding process made itself (``trusted``), else
only one that resolves, symlinks followed, to a regular file inside the workspace whose
current sha256 is the recorded one, so a hostile graph file cannot widen what is served;
plus the library files a capture's frames name (:mod:`viewer.projection.library_sources`).
For a capture the embedder did not make, those count only inside a ``site-packages``
folder of the environment the capture records (``meta.environment.prefix``) when that
prefix really is a Python environment (a ``pyvenv.cfg``, or a standard library's
``os.py``), laid out as one (``lib/pythonX.Y/site-packages``): any folder a crafted file
names ``site-packages`` widens nothing.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from capture.graph.freshness import source_sha256
from capture.graph.model import Capture

from ..projection.library_sources import environment_dirs, library_files

#: The largest source file shown (and hashed).
MAX_SOURCE_BYTES = 8 << 20


class SourcePolicy:
    def __init__(self, workspace: Path | None, browse_workspace: bool) -> None:
        self.workspace = workspace
        self.browse_workspace = browse_workspace
        self._lock = threading.Lock()
        self.recorded: set[Path] = set()
        #: The recorded sources let in only because their content matched (a capture the
        #: embedder did not make): the sha256s they may have. Checked again each time one
        #: is served: a file edited since it was admitted is another file.
        self.expected: dict[Path, set[str]] = {}

    def admit(self, capture: Capture, *, trusted: bool) -> None:
        """Let in what ``capture`` recorded (see the module's policy)."""
        libraries = library_files(capture)
        if not trusted and libraries:
            sites = python_site_dirs(capture.meta)
            libraries = [f for f in libraries if any(f.is_relative_to(d) for d in sites)]
        found = self._recordable(capture, trusted=trusted)
        with self._lock:
            for real, digest in found:
                if digest is None:  # the embedder's own: its sources, whatever they hold now
                    self.expected.pop(real, None)
                elif real not in self.recorded or real in self.expected:
                    self.expected.setdefault(real, set()).add(digest)
                self.recorded.add(real)
            self.recorded.update(libraries)
            for lib in libraries:
                self.expected.pop(lib, None)

    def _recordable(self, capture: Capture, *, trusted: bool) -> list[tuple[Path, str | None]]:
        """``(path, sha256 it must keep)`` for each source of ``capture`` let in (None: any)."""
        out: list[tuple[Path, str | None]] = []
        digests: dict[Path, str | None] = {}  # each file hashed once, however often it is listed
        for src in capture.sources:
            real = self.real_path(src.path)
            if real is None:
                continue
            if trusted:
                out.append((real, None))
            elif self.workspace is not None and real.is_relative_to(self.workspace) and real.is_file():
                if real not in digests:
                    digests[real] = sha256_of(real)
                if digests[real] is not None and digests[real] == str(src.sha256).lower():
                    out.append((real, digests[real]))
        return out

    def real_path(self, file: Any) -> Path | None:
        """The resolved, existing path ``file`` names (relative: to the workspace), or
        ``None`` for anything that is not a plausible path string or does not exist."""
        if not isinstance(file, str) or not file or "\x00" in file or len(file) > 4096:
            return None
        p = Path(file)
        if not p.is_absolute():
            if self.workspace is None:
                return None
            p = self.workspace / p
        try:
            return p.resolve(strict=True)
        except (OSError, RuntimeError, ValueError):
            return None

    def resolve(self, file: Any) -> Path | None:
        """The real path of ``file`` when it may be shown, else ``None``."""
        real = self.real_path(file)
        if real is None or not real.is_file():
            return None
        if self.browse_workspace and self.workspace is not None and real.is_relative_to(self.workspace):
            return real
        with self._lock:
            if real not in self.recorded:
                return None
            expected = set(self.expected.get(real, ()))
        if expected and sha256_of(real) not in expected:
            return None  # changed since a foreign graph file's hash let it in
        return real


def sha256_of(path: Path) -> str | None:
    """The file's sha256 (hex), or ``None`` when it cannot be read, is not a regular file
    or is too large to show: capture's one hashing helper, bounded by what the viewer shows."""
    try:
        if path.stat().st_size > MAX_SOURCE_BYTES:
            return None
    except OSError:
        return None
    return source_sha256(str(path))


_VERSIONED_LIB = re.compile(r"^python\d+(\.\d+)?$")


def python_site_dirs(meta: object) -> list[Path]:
    """The ``site-packages`` folders of ``meta["environment"]`` that belong to the
    environment it records: below its ``prefix``, laid out as ``lib/pythonX.Y/NAME`` (or
    Windows' ``Lib/NAME``), the prefix itself a Python environment."""
    env = meta.get("environment") if isinstance(meta, dict) else None
    prefix = env.get("prefix") if isinstance(env, dict) else None
    if not isinstance(prefix, str) or not prefix or "\x00" in prefix or not Path(prefix).is_absolute():
        return []
    try:
        root = Path(prefix).resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        return []
    if not _is_python_environment(root):
        return []
    out = []
    for d in environment_dirs(meta):
        if not d.is_relative_to(root):
            continue
        lib = d.parent
        if (_VERSIONED_LIB.match(lib.name) and lib.parent.name in ("lib", "lib64")) or lib.name == "Lib":
            out.append(d)
    return out


def _is_python_environment(root: Path) -> bool:
    if (root / "pyvenv.cfg").is_file() or (root / "Lib" / "os.py").is_file():
        return True
    for lib in ("lib", "lib64"):
        try:
            names = [n for n in (root / lib).iterdir() if _VERSIONED_LIB.match(n.name)]
        except OSError:
            continue
        if any((n / "os.py").is_file() for n in names[:32]):
            return True
    return False
