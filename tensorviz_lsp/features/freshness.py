"""Freshness diagnostics: a graph goes stale when a file it was captured from changes.

Every successful capture records its ``sources`` (workspace files with sha256).
When one of them changes in an open buffer (``textDocument/didChange``) or on disk
(``workspace/didChangeWatchedFiles``, ``didSave``), a warning on the symbol's name
says the graph is stale and which file changed, and the viewer is told (``stale``);
undoing the change, or recapturing, clears it (``fresh``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types

from ..backends import Span
from ..diagnostics import SOURCE
from ..feature import Feature
from .candidates import Candidates
from .lenses import lsp_range
from .viewer_host import ViewerHost

log = logging.getLogger(__name__)

KIND = "stale"


@dataclass
class Record:
    root: Path
    profile: str
    uri: str
    qualname: str
    capture: Any
    sources: set[str]
    name_range: Span
    capture_id: int | None = None
    stale: list[str] = field(default_factory=list)


class Freshness(Feature):
    name = "freshness"

    def __init__(self, server) -> None:
        super().__init__(server)
        self.records: dict[tuple[str, str], Record] = {}

    def record(self, rec: Record) -> None:
        """A new capture of ``rec.profile`` replaces the old one: fresh again."""
        old = self.records.get((str(rec.root), rec.profile))
        self.records[(str(rec.root), rec.profile)] = rec
        self._publish_uri(rec.uri)
        if old is not None and old.uri != rec.uri:
            self._publish_uri(old.uri)
        if old is not None and old.stale:
            self.server.get_feature(ViewerHost).publish(old.root, "fresh", {"capture": old.capture_id})

    def forget(self, root: Path, profile: str) -> None:
        rec = self.records.pop((str(root), profile), None)
        if rec is not None:
            self._publish_uri(rec.uri)

    def stale_files(self, root: Path, profile: str) -> list[str]:
        rec = self.records.get((str(root), profile))
        return list(rec.stale) if rec else []

    # -- checking ---------------------------------------------------------------
    def _rel(self, root: Path, path: Path) -> str | None:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            return None

    async def check(self, path: Path | None = None) -> None:
        for rec in list(self.records.values()):
            if path is not None:
                rel = self._rel(rec.root, path)
                if rel is None or rel not in rec.sources:
                    continue
            buffers = {}
            for rel in rec.sources:
                doc = self.server.open_document(rec.root / rel)
                if doc is not None:
                    buffers[str(rec.root / rel)] = doc.source
            try:
                changed = await self.server.run_blocking(
                    self.server.backends.changed_sources, rec.capture, rec.root, buffers
                )
            except Exception:
                log.exception("freshness check failed for %s", rec.profile)
                continue
            changed = sorted(changed)
            if changed == rec.stale:
                continue
            was_stale = bool(rec.stale)
            rec.stale = changed
            self._publish_uri(rec.uri)
            viewer = self.server.get_feature(ViewerHost)
            if changed:
                log.info("graph of %s (%s) is stale: %s changed", rec.qualname, rec.profile, ", ".join(changed))
                viewer.publish(rec.root, "stale", {"files": changed, "capture": rec.capture_id})
            elif was_stale:
                viewer.publish(rec.root, "fresh", {"capture": rec.capture_id})

    def _publish_uri(self, uri: str) -> None:
        diags = []
        candidates = self.server.get_feature(Candidates).last_known(uri)
        for rec in self.records.values():
            if rec.uri != uri or not rec.stale:
                continue
            span = next((c.name_range for c in candidates if c.qualname == rec.qualname), rec.name_range)
            files = ", ".join(rec.stale)
            diags.append(
                types.Diagnostic(
                    range=lsp_range(span),
                    message=(
                        f"The graph of {rec.qualname} is stale: {files} changed since it was captured "
                        f"(profile {rec.profile}). Open as Graph again to recapture."
                    ),
                    severity=types.DiagnosticSeverity.Warning,
                    source=SOURCE,
                    code="stale-graph",
                    data={"profile": rec.profile, "files": rec.stale},
                )
            )
        self.server.diagnostics.set(uri, KIND, diags)

    # -- hooks -------------------------------------------------------------------
    async def document_changed(self, uri: str) -> None:
        path = self.server.path_of(uri)
        if path is not None and self.records:
            await self.check(path)

    async def document_saved(self, uri: str) -> None:
        await self.document_changed(uri)

    async def document_closed(self, uri: str) -> None:
        await self.document_changed(uri)

    async def files_changed(self, changes: list[types.FileEvent]) -> None:
        for change in changes:
            await self.document_changed(change.uri)

    async def folders_changed(self, added: list[str], removed: list[str]) -> None:
        for key in [k for k in self.records if k[0] in removed]:
            rec = self.records.pop(key)
            self._publish_uri(rec.uri)
