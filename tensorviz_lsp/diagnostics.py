"""Diagnostics from several features, published together per document.

Each feature owns a *kind* (``stale``, ``capture``, ``recipes``); publishing one
kind for a URI never drops another kind's diagnostics on the same URI.
"""

from __future__ import annotations

import threading
import typing
from collections import defaultdict

from lsprotocol import types

if typing.TYPE_CHECKING:  # pragma: no cover
    from .server import TensorVizServer

SOURCE = "tensorviz"


class DiagnosticsHub:
    def __init__(self, server: "TensorVizServer") -> None:
        self.server = server
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
        self.server.call_soon(
            self.server.text_document_publish_diagnostics,
            types.PublishDiagnosticsParams(uri=uri, diagnostics=merged),
        )

    def clear_kind(self, kind: str, *, only: typing.Callable[[str], bool] | None = None) -> None:
        with self._lock:
            uris = [u for u, kinds in self._by_uri.items() if kind in kinds and (only is None or only(u))]
        for uri in uris:
            self.set(uri, kind, [])

    def get(self, uri: str, kind: str) -> list[types.Diagnostic]:
        with self._lock:
            return list(self._by_uri.get(uri, {}).get(kind, []))
