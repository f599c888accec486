"""``textDocument/inlayHint``: what each captured source line produced, at its end.

After a capture, every user line that made values shows them at the end of the line:
``f32[2,8,8,8]``, ``→ f32[2,8] · f32[2,8]`` for several (``+N`` past three), and
``×12`` for a line that ran 12 times (a block's line, a loop body: the first call's
values are shown), and ``⚠ NaN`` (or ``Inf``) when a measured value holds some. The tooltip (markdown) says where the numbers come from: for PyTorch
the measured min/max/mean/std, NaN/Inf counts and bytes of each value; for JAX that the
shapes are traced, not measured, and for a line inside a ``scan``/``while``/``cond``
body that they are one iteration's, as traced, never executed. It also names the
number of ops behind the line, the profile and the capture time.

Which capture: the latest capture of every profile whose sources include the file
(:class:`~.captured_lines.CapturedLines`). One hint per line: the newest capture that
ran the line gives it, and its tooltip names the other profiles that ran the same line
too (with their values when they differ), so two profiles of one model never put two
hints on a line.

Stale: lines changed since the capture have no hint; the rest keep theirs, moved with
the edits above them, labelled `` (stale)`` with "as of the last capture" and why in
the tooltip (this file, another source, or the profile changed). A recapture makes
them fresh again.

Cost: the hints of a file are computed once per (document version, captures of the
file, their staleness) off the event loop and kept; a request then only picks the hints
in its range. The capture's line index is built off the loop as the capture lands. A
client that resolves tooltips (``inlayHint/resolve``, as Neovim 0.11 and VS Code do)
gets hints without them, a third of the bytes, and each tooltip is made when shown.
``workspace/inlayHint/refresh`` is sent, when the client supports it, after a capture
of the file lands (its hints already computed) and when a capture turns stale or fresh.
``tensorviz.inlayHints`` (default true) turns the hints off.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from lsprotocol import types

from ..feature import Feature, hook
from ..host import Host
from ..records import CaptureRecords, rel_path
from ..registry import register
from . import line_values as lv
from .captured_lines import CapturedLines
from .freshness import Freshness

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Cached:
    key: tuple
    hints: list[types.InlayHint]
    #: current 0-based line -> its tooltip, made on first use (``inlayHint/resolve``)
    tooltips: dict[int, Callable[[], str]]
    token: int


def utf16_len(text: str) -> int:
    """A line's length in LSP's default position unit (UTF-16 code units)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def units_of(server: Any) -> Callable[[str], int]:
    """A text's length in the position unit negotiated with the client (Neovim takes
    UTF-8, VS Code UTF-16)."""
    try:
        count = server.workspace.position_codec.client_num_units
    except Exception:
        return utf16_len
    return lambda text: len(text) if text.isascii() else count(text)


@register
class ShapeHints(Feature):
    name = "inlay-hints"

    def __init__(self, server: Host, captured_lines: CapturedLines, records: CaptureRecords) -> None:
        super().__init__(server)
        self.captured_lines = captured_lines
        self.records = records
        self._lock = threading.Lock()
        self._cache: dict[str, _Cached] = {}
        self._pending: dict[tuple, asyncio.Future] = {}
        # What the last refresh was sent for: (root, profile) → (capture id, stale).
        self._freshness: dict[tuple, tuple] = {}
        self._tokens = itertools.count(1)
        self._by_token: dict[int, str] = {}  # the current hints' token -> their document
        self._memo: dict[tuple, tuple] = {}  # (capture, line entry) -> what it shows
        self._tasks: set[asyncio.Task] = set()

    # -- the hints of a document ---------------------------------------------------
    def enabled(self, uri: str) -> bool:
        return self.server.settings_for(self.server.root_for(uri)).inlay_hints

    def _state(self, uri: str) -> tuple[tuple, str | None, Path | None]:
        """``(key, text, path)``: the key names everything the hints depend on; the text
        is the one they are computed on (the open buffer, else the disk)."""
        path = self.server.path_of(uri)
        if path is None:
            return ("none",), None, None
        lines = self.captured_lines
        records = tuple(
            (rec.profile, rec.capture_id, tuple(rec.stale)) for rec, _ in lines.records_for(path)
        )
        doc = self.server.open_document(uri)
        if doc is not None:
            text = doc.source
            version: Any = ("buffer", doc.version, len(text))
        else:
            try:
                st = path.stat()
                version = ("disk", st.st_mtime_ns, st.st_size)
            except OSError:
                return ("missing", records), None, path
            text = None  # read in the executor
        return (version, records), text, path

    async def hints_for(self, uri: str) -> list[types.InlayHint]:
        """Every hint of the document (cached per document version and capture)."""
        key, text, path = self._state(uri)
        if path is None or not key[1]:
            return []
        with self._lock:
            cached = self._cache.get(uri)
        if cached is not None and cached.key == key:
            return cached.hints
        pending_key = (uri, key)
        fut = self._pending.get(pending_key)
        if fut is None:
            fut = asyncio.ensure_future(self.server.run_blocking(self._compute, uri, key, path, text))
            self._pending[pending_key] = fut
            fut.add_done_callback(lambda _f: self._pending.pop(pending_key, None))
        return await asyncio.shield(fut)

    def lazy_tooltips(self) -> bool:
        """The client resolves a hint's tooltip on demand (``inlayHint/resolve``): hints
        go without one, a third of the bytes, and a tooltip is made when shown."""
        caps = self.server.caps.text_document
        hint = caps.inlay_hint if caps else None
        resolve = hint.resolve_support if hint else None
        return bool(resolve and "tooltip" in (resolve.properties or ()))

    def _compute(self, uri: str, key: tuple, path: Path, text: str | None) -> list[types.InlayHint]:
        if text is None:
            text = self.server.read_text(path)
            if text is None:
                return []
        token = next(self._tokens)
        lazy = self.lazy_tooltips()
        placed = place_hints(self.captured_lines, path, text, units_of(self.server), self._memo)
        hints, tooltips = [], {}
        for hint, make_tooltip in placed:
            line = hint.position.line
            if lazy:
                hint.data = token  # small: it is sent with every hint
                tooltips[line] = make_tooltip
            else:
                hint.tooltip = types.MarkupContent(kind=types.MarkupKind.Markdown, value=make_tooltip())
            hints.append(hint)
        with self._lock:
            old = self._cache.get(uri)
            if old is not None:
                self._by_token.pop(old.token, None)
            self._cache[uri] = _Cached(key, hints, tooltips, token)
            self._by_token[token] = uri
        return hints

    @hook
    def inlay_hint_resolve(self, hint: types.InlayHint) -> types.InlayHint | None:
        token = hint.data
        if type(token) is not int:
            return None  # not one of ours
        with self._lock:
            uri = self._by_token.get(token)
            cached = self._cache.get(uri) if uri is not None else None
        # (hints of an older version of the document: the editor asks for new ones anyway)
        make = cached.tooltips.get(hint.position.line) if cached is not None and cached.token == token else None
        if make is not None:
            hint.tooltip = types.MarkupContent(kind=types.MarkupKind.Markdown, value=make())
        return hint

    @hook
    async def inlay_hint(self, params: types.InlayHintParams) -> list[types.InlayHint]:
        uri = params.text_document.uri
        if not self.enabled(uri):
            return []
        hints = await self.hints_for(uri)
        lo, hi = params.range.start.line, params.range.end.line
        return [h for h in hints if lo <= h.position.line <= hi]

    # -- refresh -----------------------------------------------------------------
    async def refresh(self) -> None:
        if not self.server.supports_inlay_hint_refresh() or self.server.stopping:
            return
        try:
            await self.server.workspace_inlay_hint_refresh_async(None)
        except Exception as exc:  # the client went away or refused: hints come on the next request
            log.debug("workspace/inlayHint/refresh failed: %s", exc)

    def _freshness_changed(self) -> bool:
        now = {r.key: (r.capture_id, bool(r.stale)) for r in self.records.all()}
        changed = now != self._freshness
        self._freshness = now
        return changed

    @hook
    def capture_landed(self, record: Any) -> None:
        # In the background: Open as Graph shows its URL without waiting for the hints.
        task = asyncio.ensure_future(self._landed(record))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _landed(self, record: Any) -> None:
        self._freshness_changed()
        self._memo.clear()  # what the replaced capture's lines showed
        if not self.server.settings_for(record.root).inlay_hints:
            return
        # Build the capture's line index now, off the loop: a file of it opened later
        # gets its hints without waiting for the index.
        try:
            await self.server.run_blocking(self.captured_lines.index, record)
        except Exception:
            log.exception("building the line index of %s failed", record.profile)
        # Compute the hints of the open documents this capture ran before telling the
        # editor, so its request right after the refresh is answered from the cache.
        for uri in list(self._open_uris()):
            path = self.server.path_of(uri)
            if path is None or not self.enabled(uri):
                continue
            rel = rel_path(record.root, path)
            if rel is None or rel not in record.sources:
                continue
            try:
                await self.hints_for(uri)
            except Exception:
                log.exception("computing the inlay hints of %s failed", uri)
        await self.refresh()

    def _open_uris(self) -> list[str]:
        try:
            return list(self.server.workspace.text_documents.keys())
        except Exception:
            return []

    async def _maybe_refresh(self) -> None:
        if self._freshness_changed():
            await self.refresh()

    # After Freshness's check of the same change: the hints show what it found stale.
    @hook(after=(Freshness,))
    async def document_changed(self, uri: str) -> None:
        await self._maybe_refresh()

    @hook(after=(Freshness,))
    async def document_saved(self, uri: str) -> None:
        await self._maybe_refresh()

    @hook(after=(Freshness,))
    async def files_changed(self, changes: list[types.FileEvent]) -> None:
        await self._maybe_refresh()

    @hook
    def document_closed(self, uri: str) -> None:
        with self._lock:
            old = self._cache.pop(uri, None)
            if old is not None:
                self._by_token.pop(old.token, None)

    @hook
    async def settings_changed(self) -> None:
        await self.refresh()


def place_hints(
    lines: CapturedLines, path: Path, text: str, units: Callable[[str], int] = utf16_len,
    memo: dict | None = None,
) -> list[tuple[types.InlayHint, Callable[[], str]]]:
    """The hints of ``path`` with text ``text`` (call off the event loop), each without
    its tooltip and with a function that makes it; ``units`` measures a line in the
    client's position unit. ``memo`` keeps what each line entry shows (its values do not
    change with edits), so that hints placed again after an edit only move."""
    current = text.splitlines()
    shown: dict[int, tuple] = {}  # current 0-based line -> (FileLines, entry, labels)
    also: dict[int, list[tuple]] = {}
    for fl in lines.file_lines(path, text):
        capture = fl.record.capture
        for line0, entry in fl.placed():
            if not entry.calls or line0 >= len(current):
                continue
            if line0 in shown:
                also.setdefault(line0, []).append((fl, entry))
                continue
            brief = _brief(capture, entry, memo)
            if brief[0]:  # (a line whose ops made no value has nothing to show)
                shown[line0] = (fl, entry, brief)
    out: list[tuple[types.InlayHint, Callable[[], str]]] = []
    stale_of: dict[int, str | None] = {}
    for line0 in sorted(shown):
        fl, entry, (labels, n_runs, bad) = shown[line0]
        rec = fl.record
        if id(fl) not in stale_of:
            stale_of[id(fl)] = lv.stale_text(rec, rel_path(rec.root, path) or path.name, fl.stale)
        stale = stale_of[id(fl)]
        hint = types.InlayHint(
            position=types.Position(line=line0, character=units(current[line0])),
            label=lv.hint_label(labels, n_runs, stale is not None, bad),
            kind=types.InlayHintKind.Type,
            padding_left=True,
        )
        out.append((hint, functools.partial(tooltip, fl, entry, stale, also.get(line0, []))))
    return out


def compute_hints(
    lines: CapturedLines, path: Path, text: str, units: Callable[[str], int] = utf16_len
) -> list[types.InlayHint]:
    """:func:`place_hints` with every tooltip made (clients that do not resolve them)."""
    out = []
    for hint, make in place_hints(lines, path, text, units):
        hint.tooltip = types.MarkupContent(kind=types.MarkupKind.Markdown, value=make())
        out.append(hint)
    return out


def _labels(capture: Any, entry: Any) -> list[str]:
    return lv.labels_of(capture, lv.runs(entry)[0].results)


def _brief(capture: Any, entry: Any, memo: dict | None) -> tuple[list[str], int, str | None]:
    """``(labels, runs, NaN/Inf)`` of what the line shows."""
    key = (id(capture), id(entry))
    got = memo.get(key) if memo is not None else None
    if got is not None and got[0] is entry:
        return got[1]
    ran = lv.runs(entry)
    brief = (lv.labels_of(capture, ran[0].results), len(ran), lv.nonfinite(capture, ran[0].results))
    if memo is not None:
        if len(memo) > 100_000:
            memo.clear()
        memo[key] = (entry, brief)  # the entry kept: its id is not reused while here
    return brief


def tooltip(fl: Any, entry: Any, stale: str | None, others: list[tuple]) -> str:
    rec, capture = fl.record, fl.record.capture
    parts = [lv.header(rec, capture)]
    parts.append("\n".join(lv.value_lines(capture, lv.runs(entry)[0].results)))
    parts.append(f"{lv.calls_text(capture, entry)}. {lv.provenance(capture, entry)}")
    if stale:
        parts.append(stale)
    for ofl, oentry in others:
        olabels = _labels(ofl.record.capture, oentry)
        same = olabels == _labels(capture, entry)
        what = "the same values" if same else " · ".join(f"`{t}`" for t in olabels[:lv.LABEL_VALUES])
        n = len(lv.runs(oentry))
        times = f", {n}×" if n > 1 else ""
        parts.append(f"Also run by profile `{ofl.record.profile}` (captured at {lv.when(ofl.record.captured_at)}{times}): {what}")
    return "\n\n".join(parts)
