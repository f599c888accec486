"""Installed packages as discovery reads them: source files, never imports.

``class TinyBert(BertModel)`` is a candidate because ``BertModel`` is, through
``transformers``' own files, a ``torch.nn.Module``. A :class:`LibraryEnvironment` is
the packages of one interpreter (folders from :mod:`discovery.environment`); the
workspace index asks it for a module when a base's import leaves the workspace, and
follows re-exports inside it as it does inside the workspace: package
``__init__.py`` files, ``if TYPE_CHECKING:`` imports, ``from .x import *`` (limited
by ``__all__``) and lazy-import tables (``_import_structure``, the ``_LazyModule``
convention).

Library files are read as *skeletons*: the bodies of functions and long docstrings
are dropped (found with ``ast``, which is ~8x faster than libcst) before libcst
parses what is left, since discovery needs only imports, classes, their bases,
class-level fields and method signatures. ``modeling_utils.py`` of transformers
shrinks ~10x; without skeletons the first resolution of three transformers models
takes ~3x the CPU time (benchmarks/bench_discovery.py).

Bounds, per discovery of one workspace file (a lookup that runs out leaves the base
unresolved, and the result is not cached, so the next discovery carries on with the
files already read):

* :data:`MAX_LIBRARY_FILES` files opened (parsed, or peeked at and skipped);
* :data:`LIBRARY_TIME_BUDGET_S` seconds of this thread's CPU time spent reading and
  parsing library files (CPU time: on a busy machine, waiting for a core is not work,
  and a bound in wall time would cut lookups short there; the file count bounds slow
  disks);
* :data:`MAX_STAR_DEPTH` nested ``import *`` re-exports followed;
* :data:`MAX_LIBRARY_CLASS_DEPTH` library classes on one inheritance path
  (enforced by :mod:`discovery.inheritance`).

Results are kept per environment (shared by every workspace using it) and per file
version: each analysis remembers the file's modification time and size, and the
workspace results that used it re-check those, so an upgrade or an edit of the
package shows at the next discovery.
"""

from __future__ import annotations

import ast
import os
import re
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Union

from .analysis import ModuleAnalysis, analyse
from .reading import read_source
from .results import DiscoveryError

MAX_LIBRARY_FILES = 256
LIBRARY_TIME_BUDGET_S = 3.0
MAX_STAR_DEPTH = 6
MAX_LIBRARY_CLASS_DEPTH = 32
# Environments kept at once (each holds the analyses of the files it read).
_MAX_ENVIRONMENTS = 8
# Analyses an environment keeps (least recently used dropped first): a parsed
# skeleton costs ~20-50x its text in memory; one transformers model needs ~15.
MAX_CACHED_LIBRARY_FILES = 1024

Version = Union[tuple[str, int], tuple[str, int, int], None]
_LINE = re.compile(r".*?(?:\r\n|\r|\n)|.+\Z", re.S)


class LibraryBudget:
    """What one discovery may still spend on library files."""

    def __init__(self) -> None:
        self.files = 0
        self.seconds = 0.0
        self.exhausted = False

    def allows_another(self) -> bool:
        if self.files >= MAX_LIBRARY_FILES or self.seconds >= LIBRARY_TIME_BUDGET_S:
            self.exhausted = True
        return not self.exhausted


class LibraryEnvironment:
    """The installed packages of one interpreter: ``paths`` in import order. Thread-safe."""

    def __init__(self, paths: tuple[str, ...]) -> None:
        self.paths = tuple(paths)
        self._analyses: OrderedDict[str, tuple[Version, ModuleAnalysis | None]] = OrderedDict()
        # path → (version, names the file's text cannot provide)
        self._lacking: dict[str, tuple[Version, set[str]]] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LibraryEnvironment({self.paths!r})"

    def locate(self, name: str, version_of: Callable[[str], Version]) -> str | None:
        """The file of module ``name`` (a package's ``__init__.py`` first), or None.

        ``version_of`` stats a path and records it, so that a package installed later
        invalidates results that did not find it."""
        parts = name.split(".")
        if not name or not all(part.isidentifier() for part in parts):
            return None
        relative = os.path.join(*parts)
        for root in self.paths:
            for candidate in (
                os.path.join(root, relative, "__init__.py"),
                os.path.join(root, relative + ".py"),
            ):
                if version_of(candidate) is not None:
                    return candidate
        return None

    def analysis(
        self,
        path: str,
        name: str,
        version: Version,
        budget: LibraryBudget,
        wanted: str | None = None,
    ) -> ModuleAnalysis | None:
        """The skeleton analysis of ``path`` (module ``name``) at ``version``.

        With ``wanted``, a file whose text cannot provide that name (it neither
        mentions it nor re-exports with ``import *`` or a lazy table) is skipped
        without parsing. None when unreadable, skipped or over ``budget``."""
        with self._lock:
            cached = self._analyses.get(path)
            if cached is not None and cached[0] == version:
                self._analyses.move_to_end(path)
                return cached[1]
            if wanted is not None:
                lacking = self._lacking.get(path)
                if lacking is not None and lacking[0] == version and wanted in lacking[1]:
                    return None
        if not budget.allows_another():
            return None
        started = time.thread_time()
        try:
            budget.files += 1
            text = read_source(path)
            if isinstance(text, DiscoveryError):
                analysis = None
            elif wanted is not None and not _may_provide(text, wanted):
                with self._lock:
                    entry = self._lacking.get(path)
                    if entry is None or entry[0] != version:
                        if len(self._lacking) >= 8 * MAX_CACHED_LIBRARY_FILES:
                            self._lacking.clear()  # only saves peeks: start over
                        entry = (version, set())
                        self._lacking[path] = entry
                    entry[1].add(wanted)
                return None
            else:
                analysis = analyse(path, skeleton(text), name, path.endswith("__init__.py"))
                analysis.library = True
            with self._lock:
                self._analyses[path] = (version, analysis)
                self._analyses.move_to_end(path)
                while len(self._analyses) > MAX_CACHED_LIBRARY_FILES:
                    self._analyses.popitem(last=False)
            return analysis
        finally:
            budget.seconds += time.thread_time() - started

    def cached_files(self) -> int:
        """How many library files this environment holds analyses of."""
        with self._lock:
            return sum(1 for _, a in self._analyses.values() if a is not None)


def _may_provide(text: str, name: str) -> bool:
    return name in text or "import *" in text or "_import_structure" in text


def skeleton(text: str) -> str:
    """``text`` with the body of every function and method, and every docstring of a
    module or class spanning lines, replaced by ``...``.

    Lines keep their numbers up to the first body dropped; nothing else changes, so
    classes, their bases and fields, signatures and imports read as before. Text
    ``ast`` rejects (newer syntax than this interpreter's) is returned whole."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text
    lines = _LINE.findall(text)
    cuts: list[tuple[int, int]] = []  # 0-based first and last line of each body

    def cut(first: ast.stmt, last: ast.stmt) -> None:
        """Drop ``first``…``last`` when they own their lines (nothing else shares them)."""
        start, end = first.lineno - 1, (last.end_lineno or last.lineno) - 1
        column = first.col_offset
        decorators = getattr(first, "decorator_list", None)
        if decorators:  # a decorated definition starts at its first ``@``
            start = decorators[0].lineno - 1
            column = lines[start].find("@") if start < len(lines) else -1
            if column < 0:
                return
        if end >= len(lines) or lines[start].encode("utf-8")[:column].strip():
            return
        rest = lines[end].encode("utf-8")[last.end_col_offset or 0 :].strip()
        if rest and not rest.startswith(b"#"):
            return
        cuts.append((start, end))

    pending: list[list[ast.stmt]] = [tree.body]
    while pending:
        for node in pending.pop():
            if isinstance(node, ast.ClassDef):
                pending.append(node.body)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                # ``if TYPE_CHECKING:``, ``try: … except ImportError:``: still top level.
                pending.append(node.body)
                pending.append(getattr(node, "orelse", []))
                pending.append(getattr(node, "finalbody", []))
                for handler in getattr(node, "handlers", []):
                    pending.append(handler.body)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.body[0].lineno > node.lineno:  # not ``def f(): return 1``
                    cut(node.body[0], node.body[-1])
            elif (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
                and (node.end_lineno or node.lineno) > node.lineno
            ):
                cut(node, node)  # a docstring over several lines (transformers' run long)
    return _with_cuts(text, lines, cuts)


def _with_cuts(text: str, lines: list[str], cuts: list[tuple[int, int]]) -> str:
    """``text`` with each cut (0-based first and last line) replaced by ``...`` at the
    indentation of its first line; a cut inside one made already is left out."""
    if not cuts:
        return text
    out: list[str] = []
    position = 0
    for start, end in sorted(cuts):
        if start < position:
            continue  # inside a body already dropped
        out.extend(lines[position:start])
        line = lines[start]
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        out.append(indent + "...\n")
        position = end + 1
    out.extend(lines[position:])
    return "".join(out)


_REGISTRY: OrderedDict[tuple[str, ...], LibraryEnvironment] = OrderedDict()
_REGISTRY_LOCK = threading.Lock()


def library_environment(paths: tuple[str, ...] | list[str]) -> LibraryEnvironment | None:
    """The shared environment for ``paths`` (None when there are none), so that
    every workspace on one interpreter uses one cache."""
    key = tuple(paths)
    if not key:
        return None
    with _REGISTRY_LOCK:
        env = _REGISTRY.get(key)
        if env is None:
            env = _REGISTRY[key] = LibraryEnvironment(key)
        _REGISTRY.move_to_end(key)
        while len(_REGISTRY) > _MAX_ENVIRONMENTS:
            _REGISTRY.popitem(last=False)
        return env


def find_environment(
    workspace: str | os.PathLike[str] | None = None,
    python: str | os.PathLike[str] | None = None,
) -> LibraryEnvironment | None:
    """The packages discovery follows bases into: those of ``python`` (the selected
    interpreter) when given, else of the workspace's ``.venv``/``venv``. Reads the
    disk only; runs nothing."""
    from .environment import site_packages, workspace_environment

    if python is not None:
        return library_environment(site_packages(python))
    if workspace is not None:
        return library_environment(workspace_environment(workspace))
    return None
