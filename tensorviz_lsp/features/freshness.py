"""Freshness diagnostics: a graph goes stale when what it was captured from changes.

Every successful capture records its ``sources`` (workspace files with sha256) and
its ``recipe`` (the profile as captured, ``Recipe.to_dict()``). When one of the
sources changes in an open buffer (``textDocument/didChange``) or on disk
(``workspace/didChangeWatchedFiles``, ``didSave``), or when the profile now in
``.tensorviz/recipes.toml`` (its open buffer, else the disk) differs from the one
captured (the spec: changing any saved value requires another trace), a warning on
the symbol's name says the graph is stale and what changed, and the viewer is told
(``stale``, naming ``.tensorviz/recipes.toml (profile NAME changed)`` for a profile);
undoing the change, or recapturing, clears it (``fresh``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from lsprotocol import types

from ..backends import RECIPES_PATH, Backends, recipes_root
from ..diagnostics import SOURCE
from ..feature import Feature, hook
from ..host import Host
from .candidates import Candidates
from .lenses import lsp_range
from ..records import CaptureRecords, Record, rel_path, same_folder
from ..registry import register
from .viewer_host import ViewerHost

log = logging.getLogger(__name__)

KIND = "stale"


def recipe_label(profile: str, removed: bool = False) -> str:
    return f"{RECIPES_PATH.as_posix()} (profile {profile} {'removed' if removed else 'changed'})"


_UNKNOWN = object()


def profile_change(captured: Any, profile: str, text: str | None) -> str | None | object:
    """How the profile ``profile`` in the recipes text ``text`` compares with
    ``captured`` (the capture's ``recipe``): None when the same, a
    :func:`recipe_label` when it changed (edited, now invalid, or removed),
    ``_UNKNOWN`` when it cannot tell (no captured recipe; the document as a whole
    does not parse, as mid-edit: the last verdict stands)."""
    if not isinstance(captured, dict):
        return _UNKNOWN
    if text is None:
        return recipe_label(profile, removed=True)
    from capture.recipe import RecipeError, profile_from_document

    from ..recipes_store import parsed_recipes

    try:
        doc = parsed_recipes(text)
    except RecipeError:
        return _UNKNOWN
    profiles = doc.get("profiles") or {}
    if profile not in profiles:
        return recipe_label(profile, removed=True)
    try:
        now = profile_from_document(doc, profile, text=text).to_dict()
    except RecipeError:
        return recipe_label(profile)  # invalid now (its own diagnostic says why): not what was traced
    return None if _plain(now) == _plain(captured) else recipe_label(profile)


def _plain(data: Any) -> Any:
    """JSON-shaped (tuples as lists) so that a decoded capture compares with a fresh dict."""
    return json.loads(json.dumps(data, sort_keys=True, default=str))


@register
class Freshness(Feature):
    name = "freshness"

    def __init__(self, server: Host, backends: Backends, records: CaptureRecords, candidates: Candidates,
                 viewers: ViewerHost) -> None:
        super().__init__(server)
        self.backends = backends
        self.records = records
        self.candidates = candidates
        self.viewers = viewers

    def record(self, rec: Record) -> None:
        """A new capture of ``rec.profile`` replaces the old one in the registry: fresh
        again. Anything edited while it ran is checked at once."""
        old = self.records.put(rec)
        self._publish_uri(rec.uri)
        if old is not None and old.uri != rec.uri:
            self._publish_uri(old.uri)
        # No "fresh" for the old capture: a tab still showing it shows a stale graph, and
        # keeps its banner ("capture-ready" offers it the new one).
        if self.server.loop is not None and not self.server.stopping:
            self.server.call_soon(lambda: asyncio.ensure_future(self._recheck(rec)))

    async def _recheck(self, rec: Record) -> None:
        try:
            if self.records.get(rec.key) is rec:
                await self._check_record(rec, sources=True, recipe=True)
        except Exception:
            log.exception("freshness check after the capture of %s failed", rec.profile)

    def forget(self, root: Path, profile: str) -> None:
        rec = self.records.forget((str(root), profile))
        if rec is not None:
            self._publish_uri(rec.uri)

    # -- checking ---------------------------------------------------------------
    async def check(self, path: Path | None = None) -> None:
        """Recheck the records ``path`` concerns (a source, or a recipes file); all when None."""
        touched_root = recipes_root(path) if path is not None else None
        for rec in self.records.all():
            sources = recipe = path is None
            if path is not None:
                rel = rel_path(rec.root, path)
                sources = rel is not None and rel in rec.sources
                recipe = touched_root is not None and same_folder(touched_root, rec.root)
            if sources or recipe:
                await self._check_record(rec, sources=sources, recipe=recipe)

    async def _check_record(self, rec: Record, *, sources: bool, recipe: bool) -> None:
        seq = {aspect: rec.checks[aspect] + 1 for aspect, on in (("sources", sources), ("recipe", recipe)) if on}
        rec.checks.update(seq)
        changed = list(rec.changed_sources)
        if sources:
            buffers = {}
            for rel in rec.sources:
                doc = self.server.open_document(rec.root / rel)
                if doc is not None:
                    buffers[str(rec.root / rel)] = doc.source
            try:
                changed = sorted(
                    await self.server.run_blocking(self.backends.changed_sources, rec.capture, rec.root, buffers)
                )
            except Exception:
                log.exception("freshness check failed for %s", rec.profile)
                seq.pop("sources")
        verdict: Any = _UNKNOWN
        if recipe:
            text = self.server.read_text(rec.root / RECIPES_PATH)
            try:
                verdict = await self.server.run_blocking(
                    profile_change, rec.capture.recipe, rec.profile, text
                )
            except Exception:
                log.exception("comparing the profile %s with its capture failed", rec.profile)
        # Apply what this check learnt, unless a newer check of the same aspect started.
        if "sources" in seq and rec.checks["sources"] == seq["sources"]:
            rec.changed_sources = changed
        if verdict is not _UNKNOWN and rec.checks["recipe"] == seq.get("recipe"):
            rec.recipe_change = verdict
        if self.records.get(rec.key) is not rec:
            return  # recaptured meanwhile: the new record is checked on its own
        stale = rec.changed_sources + ([rec.recipe_change] if rec.recipe_change else [])
        if stale == rec.stale:
            return
        was_stale = bool(rec.stale)
        rec.stale = stale
        # The viewer learns first: an editor that reads the diagnostic and then asks
        # the viewer must find the capture already marked (CI saw the other order race).
        viewer = self.viewers
        if stale:
            log.info("graph of %s (%s) is stale: %s", rec.qualname, rec.profile, ", ".join(stale))
            viewer.publish(rec.root, "stale", {"files": stale, "capture": rec.capture_id})
        elif was_stale:
            viewer.publish(rec.root, "fresh", {"capture": rec.capture_id})
        self._publish_uri(rec.uri)

    def _publish_uri(self, uri: str) -> None:
        diags = []
        candidates = self.candidates.last_known(uri)
        for rec in self.records.all():
            if rec.uri != uri or not rec.stale:
                continue
            span = next((c.name_range for c in candidates if c.qualname == rec.qualname), rec.name_range)
            diags.append(
                types.Diagnostic(
                    range=lsp_range(span),
                    message=_stale_message(rec),
                    severity=types.DiagnosticSeverity.Warning,
                    source=SOURCE,
                    code="stale-graph",
                    data={"profile": rec.profile, "files": rec.stale},
                )
            )
        self.server.diagnostics.set(uri, KIND, diags)

    # -- hooks -------------------------------------------------------------------
    @hook
    async def document_changed(self, uri: str) -> None:
        path = self.server.path_of(uri)
        if path is not None and len(self.records):
            await self.check(path)

    @hook
    async def document_saved(self, uri: str) -> None:
        await self.document_changed(uri)

    @hook
    async def document_closed(self, uri: str) -> None:
        await self.document_changed(uri)

    @hook
    async def files_changed(self, changes: list[types.FileEvent]) -> None:
        for change in changes:
            await self.document_changed(change.uri)

    @hook
    async def folders_changed(self, added: list[str], removed: list[str]) -> None:
        for rec in self.records.forget_folders(removed):
            self._publish_uri(rec.uri)


def _stale_message(rec: Record) -> str:
    parts = []
    if rec.changed_sources:
        parts.append(f"{', '.join(rec.changed_sources)} changed since it was captured")
    if rec.recipe_change:
        parts.append(f"{rec.recipe_change} since it was captured" if not parts else rec.recipe_change)
    what = "; and ".join(parts) if parts else ", ".join(rec.stale)
    return f"The graph of {rec.qualname} is stale: {what} (profile {rec.profile}). Open as Graph again to recapture."
