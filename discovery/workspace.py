"""A workspace's files as discovery sees them, for bases that live in other files.

Module names are resolved relative to the workspace root (``pkg/layers.py`` is
``pkg.layers``, ``pkg/__init__.py`` is ``pkg``), and then, script-style, relative to
the importing file's own directory. Files are read lazily, only when a base
points into them, and each analysis is kept per file version: an editor's
unsaved text (``update``) or the file's modification time and size on disk.
Every result remembers the versions it consulted, so a repeat call costs a few
``stat``s and a change anywhere along a chain of bases invalidates it.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass, replace
from typing import Union

from .analysis import ModuleAnalysis, analyse, unparsed
from .inheritance import AnalysedModule, Resolver
from .libraries import LibraryBudget, LibraryEnvironment
from .pipeline import discover_text, internal_error, not_text
from .prefilter import may_provide_bases
from .reading import read_source
from .results import DiscoveryError, FileResult

# ("text", generation) for an in-memory buffer, ("disk", mtime_ns, size) for a
# file read from disk, None for a file that does not exist.
Version = Union[tuple[str, int], tuple[str, int, int], None]



@dataclass(slots=True)
class _CachedResult:
    result: FileResult
    dependencies: dict[str, Version]


class _Consultation:
    """One discovery's view of the index: records every file version it looked at."""

    def __init__(self, index: WorkspaceIndex) -> None:
        self.index = index
        self.libraries = index.libraries
        self.budget = LibraryBudget()
        self.dependencies: dict[str, Version] = {}
        self._modules: dict[tuple[str, str], ModuleAnalysis | None] = {}
        self._library_modules: dict[tuple[str, str | None], ModuleAnalysis | None] = {}

    def library(self, name: str, wanted: str | None = None) -> ModuleAnalysis | None:
        """An installed module, read from the index's library environment."""
        if self.libraries is None:
            return None
        key = (name, wanted)
        if key not in self._library_modules:
            found = None
            path = self.libraries.locate(name, self.version)
            if path is not None:
                found = self.libraries.analysis(
                    path, name, self.version(path), self.budget, wanted
                )
            self._library_modules[key] = found
        return self._library_modules[key]

    def version(self, path: str) -> Version:
        if path not in self.dependencies:
            self.dependencies[path] = self.index._version(path)
        return self.dependencies[path]

    def module(self, name: str, importer: AnalysedModule) -> AnalysedModule | None:
        importer_dir = os.path.dirname(importer.path)
        key = (name, importer_dir)
        if key not in self._modules:
            self._modules[key] = self._find_module(name, importer_dir)
        return self._modules[key]

    def _find_module(self, name: str, importer_dir: str) -> ModuleAnalysis | None:
        if not name or not all(part.isidentifier() for part in name.split(".")):
            return None
        relative = os.path.join(*name.split("."))
        for base in dict.fromkeys((self.index.root, importer_dir)):
            # A package wins over a module of the same name, as in Python's finder.
            for candidate in (
                os.path.join(base, relative, "__init__.py"),
                os.path.join(base, relative + ".py"),
            ):
                if self.version(candidate) is not None:
                    return self.index._analysis(candidate, self.version(candidate))
        return None


class WorkspaceIndex:
    """Discovery across the files of one workspace folder. Thread-safe."""

    def __init__(
        self, root: str | os.PathLike[str], libraries: LibraryEnvironment | None = None
    ) -> None:
        """``libraries``: the installed packages bases are followed into (see
        ``libraries.find_environment``); None: the workspace's files only."""
        self.root = os.path.abspath(os.fspath(root))
        self.libraries = libraries
        self._texts: dict[str, str] = {}
        self._generations: dict[str, int] = {}
        self._clock = 0
        self._analyses: dict[str, tuple[Version, ModuleAnalysis]] = {}
        self._results: dict[str, _CachedResult] = {}
        self._incomplete: set[str] = set()
        self._lock = threading.RLock()

    # --- public API ---------------------------------------------------------------------

    def update(self, path: str | os.PathLike[str], text: str) -> None:
        """Use ``text`` as the content of ``path`` (an open, maybe unsaved, buffer)."""
        key = self._key(path)
        with self._lock:
            current = self._texts.get(key)
            if current is not None and (current is text or current == text):
                return
            self._clock += 1
            self._texts[key] = text
            self._generations[key] = self._clock
            self._carry_over(key, text, ("text", self._clock))

    def set_libraries(self, libraries: LibraryEnvironment | None) -> None:
        """Follow bases into ``libraries`` from now on (the selected interpreter changed)."""
        with self._lock:
            if libraries is not self.libraries:
                self.libraries = libraries
                self._results.clear()

    def remove(self, path: str | os.PathLike[str]) -> None:
        """Forget the in-memory text of ``path``; the file on disk, if any, counts again."""
        key = self._key(path)
        with self._lock:
            if self._texts.pop(key, None) is None:
                return
            self._generations.pop(key, None)
            on_disk = read_source(key, self._containing(key))
            if isinstance(on_disk, DiscoveryError):
                self._analyses.pop(key, None)
            else:
                self._carry_over(key, on_disk, self._version(key))

    def _carry_over(self, key: str, text: str, version: Version) -> None:
        """``key`` now has ``version``. If its content is what was analysed before (an
        editor opening a file as it is on disk, or closing it after saving), keep the
        analysis and every result that read it; otherwise drop the analysis."""
        cached = self._analyses.get(key)
        if cached is None:
            return
        old_version, analysis = cached
        if analysis.text is not text and analysis.text != text:
            del self._analyses[key]
            return
        self._analyses[key] = (version, analysis)
        for result in self._results.values():
            if result.dependencies.get(key) == old_version:
                result.dependencies[key] = version

    def discover(self, path: str | os.PathLike[str], text: str | None = None) -> FileResult:
        """Candidates of ``path``: ``text`` if given (it also updates the index), else
        the index's text for it, else the file on disk. Never raises."""
        shown = os.fspath(path)
        if text is not None and not isinstance(text, str):
            return FileResult(shown, errors=(not_text(text),))
        try:
            key = self._key(path)
            with self._lock:
                if text is not None:
                    self.update(key, text)
                cached = self._results.get(key)
                if cached is not None and self._still_valid(cached):
                    result = cached.result
                else:
                    result = self._discover_fresh(key)
            return result if result.path == shown else replace(result, path=shown)
        except Exception as exc:
            return FileResult(shown, errors=(internal_error(exc),))

    def is_complete(self, path: str | os.PathLike[str]) -> bool:
        """False when the last discovery of ``path`` ran out of its library budget
        (``libraries.py``): some library bases were left unread, and discovering it
        again reads on."""
        with self._lock:
            return self._key(path) not in self._incomplete

    def module_name(self, path: str | os.PathLike[str]) -> str | None:
        """``pkg.layers`` for ``<root>/pkg/layers.py``; None outside the root or when
        the path is not an importable name."""
        name, _ = self._module_of(self._key(path))
        return name

    # --- internals ----------------------------------------------------------------------

    def _key(self, path: str | os.PathLike[str]) -> str:
        return os.path.normpath(os.path.abspath(os.fspath(path)))

    def _version(self, path: str) -> Version:
        generation = self._generations.get(path)
        if generation is not None:
            return ("text", generation)
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        return ("disk", info.st_mtime_ns, info.st_size)

    def _still_valid(self, cached: _CachedResult) -> bool:
        return all(self._version(p) == v for p, v in cached.dependencies.items())

    def _module_of(self, path: str) -> tuple[str | None, bool]:
        relative = os.path.relpath(path, self.root)
        if relative.startswith(os.pardir + os.sep) or relative == os.pardir or os.path.isabs(relative):
            return None, False
        stem, suffix = os.path.splitext(relative)
        if suffix != ".py":
            return None, False
        parts = stem.split(os.sep)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        if not all(part.isidentifier() for part in parts):
            return None, False
        return ".".join(parts), is_package

    def _containing(self, path: str) -> str | None:
        """The root when ``path`` is named inside it (its links must then stay inside:
        a committed link out of the workspace is not read); None for a file named
        outside it, which is read as named."""
        inside = os.path.abspath(path).startswith(self.root.rstrip(os.sep) + os.sep)
        return self.root if inside else None

    def _read(self, path: str) -> str | DiscoveryError:
        text = self._texts.get(path)
        return text if text is not None else read_source(path, self._containing(path))

    def _analysis(
        self, path: str, version: Version, text: str | DiscoveryError | None = None
    ) -> ModuleAnalysis | None:
        """The analysis of ``path`` at ``version``, parsing only when it changed."""
        cached = self._analyses.get(path)
        if cached is not None and cached[0] == version:
            return cached[1]
        if text is None:
            text = self._read(path)
        if isinstance(text, DiscoveryError):
            return None
        name, is_package = self._module_of(path)
        if may_provide_bases(text):
            analysis = analyse(path, text, name, is_package)
        else:
            analysis = unparsed(path, text, name)
        self._analyses[path] = (version, analysis)
        return analysis

    def _discover_fresh(self, key: str) -> FileResult:
        consultation = _Consultation(self)
        version = consultation.version(key)
        if version is None and key not in self._texts:
            text: str | DiscoveryError = read_source(key, self._containing(key))  # reports why it is missing
        else:
            text = self._read(key)

        def analysis_of(known_text: str) -> ModuleAnalysis:
            analysis = self._analysis(key, version, known_text)
            assert analysis is not None  # the text was readable just above
            return analysis

        result = discover_text(
            key, text, analysis_of, Resolver(consultation), workspace=True
        )
        if not consultation.budget.exhausted:
            self._results[key] = _CachedResult(result, consultation.dependencies)
            self._incomplete.discard(key)
        else:
            # Cut short by the library budget: not final. The next discovery carries
            # on, with the library files read so far cached.
            self._results.pop(key, None)
            self._incomplete.add(key)
        return result
