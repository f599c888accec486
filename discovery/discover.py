"""Discovery of one file: ``discover_source``, with or without a workspace index."""

from __future__ import annotations

import threading
from collections import OrderedDict

from .analysis import analyse
from .inheritance import NoWorkspace, Resolver
from .pipeline import discover_text, not_text
from .results import FileResult
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
        return FileResult(path, errors=(not_text(text),))
    if index is not None:
        return index.discover(path, text)
    return _STANDALONE.discover(path, text)


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
