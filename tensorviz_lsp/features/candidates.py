"""Discovery results per open document: cached per version, refreshed while typing.

Not an LSP method itself: lenses, code actions, freshness and Open as Graph read
from here. After ``textDocument/didChange`` discovery reruns once the user pauses
(``tensorviz.lensDebounceMs``), off the event loop, and then asks the client to
refresh its lenses (``workspace/codeLens/refresh``) when it can. A request that
arrives before then computes the current version at once.

A document that does not parse (mid-edit) keeps the last good candidates of the
lines that did not change (moved with them when lines were added or removed
above), or, when it never parsed, the candidates above the statement that does
not; and an open document gets a ``discovery`` diagnostic at the parse error,
cleared once it parses again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types

from ..backends import Backends, Candidate, Discovered, Pos, Span
from ..diagnostics import SOURCE
from ..feature import Feature, hook
from ..host import Host
from ..registry import register
from .interpreter import InterpreterSelection

log = logging.getLogger(__name__)

#: The diagnostics kind of a document discovery cannot read.
KIND = "discovery"
# The line breaks LSP counts (``str.splitlines`` also splits on form feeds).
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE_WITH_BREAK = re.compile(r".*?(?:\r\n|\r|\n)|.+\Z", re.S)


@dataclass
class _Entry:
    version: int | None
    candidates: list[Candidate]
    errors: list[str]
    # The last text that parsed and its candidates: what an unparsable version's
    # candidates are carried over from.
    good_text: str | None = None
    good_candidates: list[Candidate] = dataclasses.field(default_factory=list)
    # The interpreter whose packages library bases were read from (None: the server's).
    python: str | None = None
    # False: the library budget ran out; the next request discovers again.
    complete: bool = True
    # Where this version does not parse (None: it parses).
    problem: "Unreadable | None" = None


@dataclass(frozen=True)
class Unreadable:
    """Where and why discovery cannot read a text."""

    message: str
    span: Span


@register
class Candidates(Feature):
    name = "candidates"

    def __init__(self, server: Host, backends: Backends, interpreters: InterpreterSelection) -> None:
        super().__init__(server)
        self.backends = backends
        self.interpreters = interpreters
        self._cache: dict[str, _Entry] = {}
        self._inflight: dict[str, tuple[int | None, asyncio.Future]] = {}
        self._debounce: dict[str, asyncio.TimerHandle] = {}

    # -- queries ---------------------------------------------------------------
    def cached(self, uri: str) -> list[Candidate] | None:
        entry = self._cache.get(uri)
        doc = self.server.open_document(uri)
        if entry is None or (doc is not None and entry.version != doc.version):
            return None
        if not entry.complete or entry.python != self.interpreters.discovery_python(self.server.folder_for(uri)):
            # Library bases left unread, or another interpreter selected since.
            return None
        return entry.candidates

    def problem(self, uri: str) -> "Unreadable | None":
        """Where the document's last discovered version does not parse, else None."""
        entry = self._cache.get(uri)
        return entry.problem if entry is not None else None

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
        python = self.interpreters.discovery_python(root)
        try:
            result: Discovered = await self.server.run_blocking(self.backends.discover, text, path, root, python)
        except Exception:
            log.exception("discovery failed for %s", path)
            result = Discovered([], ["discovery failed"], parsed=False)
        previous = self._cache.get(uri)
        if result.parsed:
            self._cache[uri] = _Entry(
                version, result.candidates, result.errors, text, result.candidates, python, result.complete
            )
            self._report(uri, version, None)
            return result.candidates
        problem = await self.server.run_blocking(unreadable, text, result.errors)
        good: tuple[str | None, list[Candidate]]
        if previous is not None and previous.good_text is not None:
            # Keep the last good result while the user types, for the lines they did not touch.
            candidates = carry_over(previous.good_candidates, previous.good_text, text)
            good = (previous.good_text, previous.good_candidates)
        else:
            candidates = await self._discover_above(text, path, root, problem)
            good = (None, [])
        self._cache[uri] = _Entry(version, candidates, result.errors, good[0], good[1], python, problem=problem)
        self._report(uri, version, problem)
        return candidates

    async def _discover_above(self, text: str, path: Path, root: Path | None, problem: Unreadable) -> list[Candidate]:
        """Candidates in the statements above the one that does not parse."""
        above = text_above(text, problem.span.start.line)
        if not above.strip():
            return []
        try:
            result = await self.server.run_blocking(self.backends.discover, above, path, root, self.interpreters.discovery_python(root))
        except Exception:
            log.exception("discovery failed for %s", path)
            return []
        return result.candidates if result.parsed else []

    @hook
    async def interpreter_changed(self) -> None:
        """Rediscover the documents whose library bases came from another interpreter's
        packages than the one now selected (settings loaded or changed, a new choice)."""
        for uri, entry in list(self._cache.items()):
            if entry.python == self.interpreters.discovery_python(self.server.folder_for(uri)):
                continue
            if self.server.open_document(uri) is None:
                self._cache.pop(uri, None)
                continue
            entry.version = -1  # stale (no document version is negative); lenses diff against it
            await self._refresh(uri)

    @hook
    async def initialized(self) -> None:
        await self.interpreter_changed()

    @hook
    async def settings_changed(self) -> None:
        await self.interpreter_changed()

    def _report(self, uri: str, version: int | None, problem: Unreadable | None) -> None:
        doc = self.server.open_document(uri)
        if doc is None or doc.version != version:
            return  # closed, or a newer version has been (or will be) reported
        diags = []
        if problem is not None:
            start, end = problem.span.start, problem.span.end
            diags.append(
                types.Diagnostic(
                    range=types.Range(types.Position(start.line, start.character), types.Position(end.line, end.character)),
                    message=(
                        f"TensorViz discovery cannot read this file: {problem.message} "
                        f"(line {start.line + 1}, column {start.character + 1}). "
                        "Open as Graph lenses are those of the last version that could be read, "
                        "for the lines not changed since."
                    ),
                    severity=types.DiagnosticSeverity.Warning,
                    source=SOURCE,
                    code="unreadable-source",
                )
            )
        self.server.diagnostics.set(uri, KIND, diags)

    # -- document hooks --------------------------------------------------------
    def _is_python(self, uri: str) -> bool:
        return uri.endswith((".py", ".pyi"))

    @hook
    async def document_opened(self, uri: str) -> None:
        if self._is_python(uri):
            await self.get(uri)

    @hook
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
            await self.server.run_blocking(self.backends.index_changed, root, path, self.server.read_text(uri))

    @hook
    async def document_closed(self, uri: str) -> None:
        handle = self._debounce.pop(uri, None)
        if handle is not None:
            handle.cancel()
        self._cache.pop(uri, None)
        self.server.diagnostics.set(uri, KIND, [])
        root, path = self.server.folder_for(uri), self.server.path_of(uri)
        if root is not None and path is not None and self._is_python(uri):
            # The buffer is gone: the file on disk is what other files import again.
            await self.server.run_blocking(self.backends.index_changed, root, path, None)

    @hook
    async def files_changed(self, changes: list[types.FileEvent]) -> None:
        for change in changes:
            path = self.server.path_of(change.uri)
            root = self.server.folder_for(change.uri)
            if path is None or root is None or path.suffix != ".py":
                continue
            if self.server.open_document(change.uri) is not None:
                continue  # an open buffer wins over the disk until it is closed
            await self.server.run_blocking(self.backends.index_changed, root, path, None)
            self._cache.pop(change.uri, None)

    @hook
    def shutdown(self) -> None:
        for handle in self._debounce.values():
            handle.cancel()
        self._debounce.clear()


# -- documents that do not parse ------------------------------------------------


def unreadable(text: str, errors: list[str]) -> Unreadable:
    """Where discovery's parser stops in ``text`` (discovery's own position: CPython's
    syntax error, or libcst's ``ParserSyntaxError`` where only libcst rejects it)."""
    try:
        from discovery.parsing import parse_source
        from discovery.results import DiscoveryError
    except ImportError:  # pragma: no cover - discovery ships with the server
        parsed = None
    else:
        parsed = parse_source(text)
    if parsed is not None and isinstance(parsed, DiscoveryError):
        r = parsed.range
        return Unreadable(parsed.message, Span(Pos(r.start.line, r.start.character), Pos(r.end.line, r.end.character)))
    return Unreadable(errors[0] if errors else "cannot parse", Span(Pos(0, 0), Pos(0, 0)))


def carry_over(candidates: list[Candidate], old: str, new: str) -> list[Candidate]:
    """``candidates`` of ``old`` whose definitions are unchanged in ``new``, at their
    lines there: those before the first changed line stay, those after the last one
    move by the number of lines added or removed; the others are dropped."""
    a, b = _LINE_BREAK.split(old), _LINE_BREAK.split(new)
    common = min(len(a), len(b))
    head = 0
    while head < common and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < common - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    delta = len(b) - len(a)
    out = []
    for cand in candidates:
        first = cand.range.start.line
        end = cand.range.end
        last = end.line if end.character > 0 or end.line == first else end.line - 1
        if last < head:
            out.append(cand)
        elif first >= len(a) - tail:
            out.append(dataclasses.replace(cand, name_range=_shift(cand.name_range, delta), range=_shift(cand.range, delta)))
    return out


def _shift(span: Span, lines: int) -> Span:
    return Span(Pos(span.start.line + lines, span.start.character), Pos(span.end.line + lines, span.end.character))


def text_above(text: str, line: int) -> str:
    """The lines of ``text`` before the top-level statement (with its decorators) that
    holds 0-based ``line``."""
    lines = _LINE_WITH_BREAK.findall(text)
    start = min(line, len(lines))
    while start > 0 and not _starts_statement(lines[start] if start < len(lines) else ""):
        start -= 1
    while start > 0 and lines[start - 1].startswith("@"):
        start -= 1
    return "".join(lines[:start])


def _starts_statement(line: str) -> bool:
    return bool(line) and not line[0].isspace() and not line.startswith(("#", ")", "]", "}"))
