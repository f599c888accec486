"""Discovery of one file: ``discover_source`` and the steps every caller shares."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from .analysis import ModuleAnalysis, analyse
from .candidates import find_candidates
from .inheritance import NoWorkspace, Resolver
from .parsing import check_text
from .positions import Position, Range
from .prefilter import may_contain_candidates
from .results import DiscoveryError, FileResult

if TYPE_CHECKING:
    from .workspace import WorkspaceIndex


def discover_source(
    text: str, path: str = "<string>", *, index: WorkspaceIndex | None = None
) -> FileResult:
    """Candidates in ``text``, the content of ``path``. Never raises.

    With ``index``, bases imported from other workspace files are followed and
    ``text`` becomes the index's view of ``path`` (as an open editor buffer is).
    Without, only the file itself is read. Repeat calls with unchanged text are
    answered from a cache.
    """
    if not isinstance(text, str):
        return FileResult(path, errors=(_not_text(text),))
    if index is not None:
        return index.discover(path, text)
    return _STANDALONE.discover(path, text)


def discover_text(
    path: str,
    text: str | DiscoveryError,
    analysis_of: Callable[[str], ModuleAnalysis],
    resolver: Resolver,
    *,
    workspace: bool,
) -> FileResult:
    """The shared pipeline: reject cheaply, then parse (via ``analysis_of``), then find."""
    try:
        if isinstance(text, DiscoveryError):
            return FileResult(path, errors=(text,))
        if "\x00" in text:
            return FileResult(path, errors=(check_text(text),))  # type: ignore[arg-type]
        # Before the size check: a huge generated file that mentions no framework
        # is simply not a model file, not an error.
        if not may_contain_candidates(text, workspace=workspace):
            return FileResult(path)
        problem = check_text(text)
        if problem is not None:
            return FileResult(path, errors=(problem,))
        analysis = analysis_of(text)
        if analysis.error is not None:
            return FileResult(path, errors=(analysis.error,))
        return FileResult(path, tuple(find_candidates(analysis, resolver)))
    except Exception as exc:  # a discovery bug must not take the server down with it
        return FileResult(path, errors=(internal_error(exc),))


def _not_text(value: object) -> DiscoveryError:
    return DiscoveryError(
        "binary",
        f"expected source text (str), got {type(value).__name__}",
        Range.at(Position(0, 0)),
    )


def internal_error(exc: BaseException) -> DiscoveryError:
    return DiscoveryError(
        "internal_error",
        f"discovery failed: {type(exc).__name__}: {exc}",
        Range.at(Position(0, 0)),
    )


class _StandaloneCache:
    """Results for files discovered without a workspace, by path, for unchanged text."""

    def __init__(self, capacity: int = 256) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[str, tuple[str, FileResult]] = OrderedDict()
        self._lock = threading.Lock()

    def discover(self, path: str, text: str) -> FileResult:
        with self._lock:
            entry = self._entries.get(path)
            # ``is`` first: the same buffer object costs nothing to compare.
            if entry is not None and (entry[0] is text or entry[0] == text):
                self._entries.move_to_end(path)
                return entry[1]
        result = discover_text(
            path, text, lambda t: analyse(path, t), Resolver(NoWorkspace()), workspace=False
        )
        with self._lock:
            self._entries[path] = (text, result)
            self._entries.move_to_end(path)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
        return result

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_STANDALONE = _StandaloneCache()
