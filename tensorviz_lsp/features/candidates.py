"""Discovery results per open document: cached per version, refreshed while typing.

Not an LSP method itself: lenses, code actions, freshness and Open as Graph read
from here. After ``textDocument/didChange`` discovery reruns once the user pauses
(``tensorviz.lensDebounceMs``), off the event loop, and then asks the client to
refresh its lenses (``workspace/codeLens/refresh``) when it can. A request that
arrives before then computes the current version at once. A document that does
not parse (mid-edit) keeps its last good candidates.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types

from ..backends import Candidate, Discovered
from ..feature import Feature

log = logging.getLogger(__name__)


@dataclass
class _Entry:
    version: int | None
    candidates: list[Candidate]
    errors: list[str]


class Candidates(Feature):
    name = "candidates"

    def __init__(self, server) -> None:
        super().__init__(server)
        self._cache: dict[str, _Entry] = {}
        self._inflight: dict[str, tuple[int | None, asyncio.Future]] = {}
        self._debounce: dict[str, asyncio.TimerHandle] = {}

    # -- queries ---------------------------------------------------------------
    def cached(self, uri: str) -> list[Candidate] | None:
        entry = self._cache.get(uri)
        doc = self.server.open_document(uri)
        if entry is None or (doc is not None and entry.version != doc.version):
            return None
        return entry.candidates

    def last_known(self, uri: str) -> list[Candidate]:
        entry = self._cache.get(uri)
        return entry.candidates if entry else []

    async def get(self, uri: str) -> list[Candidate]:
        """Candidates for the document's current version (computed when needed)."""
        cached = self.cached(uri)
        if cached is not None:
            return cached
        doc = self.server.open_document(uri)
        version = doc.version if doc is not None else None
        inflight = self._inflight.get(uri)
        if inflight is not None and inflight[0] == version:
            return await asyncio.shield(inflight[1])
        text = doc.source if doc is not None else self.server.read_text(uri)
        if text is None:
            return []
        path = self.server.path_of(uri)
        if path is None or path.suffix not in (".py", ".pyi"):
            return []
        fut = asyncio.ensure_future(self._discover(uri, version, text, path))
        self._inflight[uri] = (version, fut)
        try:
            return await asyncio.shield(fut)
        finally:
            if self._inflight.get(uri, (None, None))[1] is fut:
                self._inflight.pop(uri, None)

    async def find(self, uri: str, qualname: str) -> Candidate | None:
        for cand in await self.get(uri):
            if cand.qualname == qualname or cand.name == qualname:
                return cand
        return None

    # -- computing -------------------------------------------------------------
    async def _discover(self, uri: str, version: int | None, text: str, path: Path) -> list[Candidate]:
        root = self.server.folder_for(uri)
        try:
            result: Discovered = await self.server.run_blocking(self.server.backends.discover, text, path, root)
        except Exception:
            log.exception("discovery failed for %s", path)
            result = Discovered([], ["discovery failed"], parsed=False)
        previous = self._cache.get(uri)
        candidates = result.candidates
        if not result.parsed and previous is not None:
            candidates = previous.candidates  # keep the last good result while the user types
        self._cache[uri] = _Entry(version, candidates, result.errors)
        return candidates

    # -- document hooks --------------------------------------------------------
    def _is_python(self, uri: str) -> bool:
        return uri.endswith((".py", ".pyi"))

    async def document_opened(self, uri: str) -> None:
        if self._is_python(uri):
            await self.get(uri)

    def document_changed(self, uri: str) -> None:
        if not self._is_python(uri):
            return
        root = self.server.folder_for(uri)
        delay = self.server.settings_for(root).lens_debounce_ms / 1000
        handle = self._debounce.pop(uri, None)
        if handle is not None:
            handle.cancel()
        loop = asyncio.get_running_loop()
        self._debounce[uri] = loop.call_later(delay, lambda: asyncio.ensure_future(self._refresh(uri)))

    async def _refresh(self, uri: str) -> None:
        self._debounce.pop(uri, None)
        # Checked again here: the document may have closed during the pause.
        if self.server.open_document(uri) is None:
            return
        before = [(c.qualname, c.name_range) for c in self.last_known(uri)]
        candidates = await self.get(uri)
        after = [(c.qualname, c.name_range) for c in candidates]
        if before != after and self.server.supports_lens_refresh():
            try:
                await self.server.workspace_code_lens_refresh_async(None)
            except Exception as exc:
                log.debug("codeLens refresh failed: %s", exc)
        root = self.server.folder_for(uri)
        path = self.server.path_of(uri)
        if root is not None and path is not None:
            await self.server.run_blocking(self.server.backends.index_changed, root, path, self.server.read_text(uri))

    async def document_closed(self, uri: str) -> None:
        handle = self._debounce.pop(uri, None)
        if handle is not None:
            handle.cancel()
        self._cache.pop(uri, None)
        root, path = self.server.folder_for(uri), self.server.path_of(uri)
        if root is not None and path is not None and self._is_python(uri):
            # The buffer is gone: the file on disk is what other files import again.
            await self.server.run_blocking(self.server.backends.index_changed, root, path, None)

    async def files_changed(self, changes: list[types.FileEvent]) -> None:
        for change in changes:
            path = self.server.path_of(change.uri)
            root = self.server.folder_for(change.uri)
            if path is None or root is None or path.suffix != ".py":
                continue
            if self.server.open_document(change.uri) is not None:
                continue  # an open buffer wins over the disk until it is closed
            await self.server.run_blocking(self.server.backends.index_changed, root, path, None)
            self._cache.pop(change.uri, None)

    def shutdown(self) -> None:
        for handle in self._debounce.values():
            handle.cancel()
        self._debounce.clear()
