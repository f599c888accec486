"""Diagnostics from several features, published together per document.

Each feature owns a *kind* (``stale``, ``capture``, ``recipes``); publishing one
kind for a URI never drops another kind's diagnostics on the same URI.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Callable

from lsprotocol import types

SOURCE = "tensorviz"


class DiagnosticsHub:
    """``publish(params)``: sends ``textDocument/publishDiagnostics`` (from any thread)."""

    def __init__(self, publish: Callable[[types.PublishDiagnosticsParams], None]) -> None:
        self._publish = publish
        self._by_uri: dict[str, dict[str, list[types.Diagnostic]]] = defaultdict(dict)
        self._lock = threading.Lock()

    def set(self, uri: str, kind: str, diagnostics: list[types.Diagnostic]) -> None:
        with self._lock:
            kinds = self._by_uri[uri]
            if not diagnostics and kind not in kinds:
                return
            if diagnostics:
                kinds[kind] = list(diagnostics)
            else:
                kinds.pop(kind, None)
            merged = [d for k in sorted(kinds) for d in kinds[k]]
        self._publish(types.PublishDiagnosticsParams(uri=uri, diagnostics=merged))

    def get(self, uri: str, kind: str) -> list[types.Diagnostic]:
        with self._lock:
            return list(self._by_uri.get(uri, {}).get(kind, []))
