"""Show in Graph (``tensorviz.showInGraph``) and the viewer following the editor's cursor.

**Show in Graph** is a code action on every line that produced nodes in a capture of this
session (one action per profile whose latest capture ran the line, titled with the ops
behind the line's first call and "×N" for a line run N times), and a command taking a
file and a 0-based line (``[uri_or_path, line]`` or ``{uri, line, profile?, call?}``).
When a viewer page already shows that capture, it gets a ``show`` event and focuses the
line's items in place (no new tab); otherwise the capture's URL opens with
``&show=FILE:LINE[:CALL]``. Which capture, when several profiles ran the line and the
command names none: the one with an open page (the last opened when several have one);
with no page open, one profile is used as is and several are asked about (the last
opened first).

**Follow the cursor** (``tensorviz.followCursor``, off by default): LSP has no cursor
notification, so the cursor is read from ``textDocument/documentHighlight``, which VS Code
sends on every cursor move and Neovim/Helix send when configured to (docs/editors.md).
The VS Code extension also sends ``tensorviz/cursor {uri, line}`` on every selection
change (VS Code asks for highlights only while the cursor is on a word). The answer is
always "no highlights"; when the line changed, a debounced (latest wins)
``cursor {capture, file, line, keys}`` event goes to the open pages of captures that ran
the file. Never a capture, never a new tab; a page with nothing to outline gets
``keys: []``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import attrs
from attrs.validators import ge, min_len
from lsprotocol import types

from capture.analysis.lines import LineEntry

from ..feature import Feature, hook
from ..host import Host
from .args import ArgumentError, CommandArgs
from .lenses import Lenses
from .captured_lines import CapturedLines, FileLines
from ..records import rel_path
from ..registry import register
from .viewer_host import ViewerHost

log = logging.getLogger(__name__)

SHOW_IN_GRAPH = "tensorviz.showInGraph"
#: Quiet time after the last cursor move before the viewer is told (latest wins).
CURSOR_DEBOUNCE_S = 0.12
#: Keys sent in one event; a page reads the rest from ``api/line``.
MAX_EVENT_KEYS = 500


@attrs.define
class ShowInGraphArgs(CommandArgs):
    """``tensorviz.showInGraph``: ``{uri, line, profile?, call?}`` (``line`` 0-based, as LSP
    positions are; ``call``: which run of the line, 0 the first)."""

    uri: str = attrs.field(validator=min_len(1))
    line: int = attrs.field(validator=ge(0))
    profile: str | None = None
    call: int = attrs.field(default=0, validator=ge(0))

    COMMAND = SHOW_IN_GRAPH
    POSITIONAL = ("uri", "line", "profile")
    USAGE = "tensorviz.showInGraph needs a file (URI or path) and a 0-based line: [uri, line] or {uri, line, profile?}"


@dataclass
class Hit:
    """A capture that ran the line: its lines of the file and the line's entry."""

    lines: FileLines
    entry: LineEntry

    @property
    def profile(self) -> str:
        return self.lines.record.profile

    @property
    def capture_id(self) -> int:
        return viewed_id(self.lines.record)

    @property
    def root(self) -> Path:
        return self.lines.record.root


def summary(hit: Hit) -> str:
    """``3 ops ×12`` (ops behind the first call; the number of calls past one)."""
    ops = hit.entry.ops
    text = f"{ops:,} op{'s' if ops != 1 else ''}"
    if len(hit.entry.calls) > 1:
        text += f" ×{len(hit.entry.calls)}"
    return text


@register
class ShowInGraph(Feature):
    name = "show-in-graph"

    def __init__(self, server: Host, captured_lines: CapturedLines, viewers: ViewerHost) -> None:
        super().__init__(server)
        self.captured_lines = captured_lines
        self.viewers = viewers
        # follow-cursor state (touched on the loop thread only)
        self._cursor_line: dict[str, int] = {}
        self._cursor_want: tuple[str, int] | None = None
        self._cursor_timer: asyncio.TimerHandle | None = None
        self._cursor_seq = 0
        self._cursor_task: asyncio.Future | None = None
        #: (root, capture id) → True while that capture's pages outline something.
        self._outlined: dict[tuple[str, int], Path] = {}

    def commands(self):
        return {SHOW_IN_GRAPH: self.show_command}

    # ------------------------------------------------------------------ what ran a line
    def hits(self, path: Path, line0: int) -> list[Hit]:
        """Every latest capture (newest first) that ran current 0-based line ``line0`` of
        ``path``, placed across edits. Call off the event loop."""
        out = []
        for fl in self.captured_lines.file_lines(path):
            entry = fl.at(line0)
            if entry is not None and entry.calls:
                out.append(Hit(fl, entry))
        return out

    def _pages(self, root: Path, capture_id: int) -> int:
        viewer = self.viewers.running(root)
        try:
            return viewer.pages(capture_id) if viewer is not None else 0
        except Exception as exc:
            log.debug("counting the pages of capture %s failed: %s", capture_id, exc)
            return 0

    def _opened_rank(self, hit: Hit) -> int:
        """Where the profile's graph is in the folder's opened order (higher: opened later)."""
        order = list(self.viewers.urls.get(str(hit.root), {}))
        return order.index(hit.profile) if hit.profile in order else -1

    # ------------------------------------------------------------------ code action
    # Open as Graph (the lens's action) leads.
    @hook(after=(Lenses,))
    async def code_action(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        only = params.context.only if params.context else None
        if only and types.CodeActionKind.Empty not in only and "" not in only:
            return []
        uri = params.text_document.uri
        path = self.server.path_of(uri)
        if path is None or path.suffix != ".py":
            return []
        line0 = params.range.start.line
        hits = await self.server.run_blocking(self.hits, path, line0)
        actions = []
        for hit in hits:
            stale = " · as of the last capture" if hit.lines.stale else ""
            title = f"Show in Graph (profile {hit.profile}: {summary(hit)}{stale})"
            arg = {"uri": uri, "line": line0, "profile": hit.profile}
            actions.append(types.CodeAction(
                title=title, kind=types.CodeActionKind.Empty,
                command=types.Command(title=title, command=SHOW_IN_GRAPH, arguments=[arg]),
            ))
        return actions

    # ------------------------------------------------------------------ command
    async def show_command(self, args: list[Any]) -> dict[str, Any]:
        a = ShowInGraphArgs.parse(args)
        uri = a.uri if "://" in a.uri or a.uri.startswith("file:") else self.server.uri_of(Path(a.uri).absolute())
        path = self.server.path_of(uri)
        if path is None:
            raise ValueError(f"not a file: {a.uri}")
        where = f"{path.name}:{a.line + 1}"
        hits = await self.server.run_blocking(self.hits, path, a.line)
        if a.profile is not None:
            others = [h.profile for h in hits]
            hits = [h for h in hits if h.profile == a.profile]
            if not hits:
                ran = f" (it did in: {', '.join(others)})" if others else ""
                self.server.show_message(
                    f"TensorViz: {where} produced no nodes in the latest capture of profile {a.profile!r}{ran}.",
                    types.MessageType.Warning)
                return {"ok": False, "reason": "not-in-profile"}
        if not hits:
            self.server.show_message(
                f"TensorViz: {where} produced no nodes in any graph of this session. Open the model as a "
                "graph first; a line edited since the capture has no nodes until it is captured again.",
                types.MessageType.Warning)
            return {"ok": False, "reason": "no-nodes"}
        hit = await self._choose(hits, where)
        if hit is None:
            return {"ok": False, "reason": "cancelled"}
        calls = hit.entry.calls
        if a.call >= len(calls):
            raise ArgumentError(f"{SHOW_IN_GRAPH}: {where} ran {len(calls)} time(s) in profile {hit.profile}; "
                                f"call {a.call} does not exist (calls count from 0)")
        keys = calls[a.call].keys()
        data = {"capture": hit.capture_id, "file": hit.entry.file, "line": hit.entry.line, "call": a.call,
                "calls": len(calls), "keys": keys[:MAX_EVENT_KEYS]}
        result = {"ok": True, "profile": hit.profile, "capture": hit.capture_id, "file": hit.entry.file,
                  "line": hit.entry.line, "call": a.call, "calls": len(calls), "keys": keys}
        host = self.viewers
        if self._pages(hit.root, hit.capture_id) > 0:
            host.publish(hit.root, "show", data)
            return {**result, "shown": "page"}
        viewer = host.running(hit.root)
        if viewer is None:  # the index came from this viewer: it cannot have gone
            raise ValueError("the viewer server is not running")
        show = f"{hit.entry.file}:{hit.entry.line}" + (f":{a.call}" if a.call else "")
        url = f"{viewer.url_for(hit.capture_id)}&show={quote(show, safe='/:')}"
        opened = await host.show_url(url, f"{where} in the graph of {hit.profile}")
        return {**result, "shown": "url", "url": url, "opened": opened}

    async def _choose(self, hits: list[Hit], where: str) -> Hit | None:
        if len(hits) == 1:
            return hits[0]
        # newest-opened first; ties (never opened here) keep capture order, newest first
        ranked = sorted(hits, key=lambda h: -self._opened_rank(h))
        shown = [h for h in ranked if self._pages(h.root, h.capture_id) > 0]
        if shown:
            return shown[0]
        names = [h.profile for h in ranked]
        answer = await self.server.ask(f"Show {where} in the graph of which profile?", names)
        return next((h for h in ranked if h.profile == answer), None)

    # ------------------------------------------------------------------ follow the cursor
    @hook
    async def document_highlight(self, params: types.DocumentHighlightParams) -> list[types.DocumentHighlight]:
        self.cursor_moved(params.text_document.uri, params.position.line)
        return []

    @hook
    def cursor_notified(self, params: Any) -> None:
        """``tensorviz/cursor {uri, line}`` (the VS Code extension's own cursor report)."""
        get = params.get if isinstance(params, dict) else lambda k: getattr(params, k, None)
        uri, line = get("uri"), get("line")
        if isinstance(uri, str) and type(line) is int and line >= 0:
            self.cursor_moved(uri, line)
        else:
            log.debug("tensorviz/cursor ignored: needs {uri, line}, got %r", params)

    def cursor_moved(self, uri: str, line0: int) -> None:
        """The editor's cursor is on ``line0`` of ``uri`` (on the loop thread)."""
        root = self.server.root_for(uri)
        if root is None or not self.server.settings_for(root).follow_cursor:
            return
        if self._cursor_line.get(uri) == line0:
            return
        self._cursor_line[uri] = line0
        self._cursor_want = (uri, line0)
        self._cursor_seq += 1
        if self._cursor_timer is not None:
            self._cursor_timer.cancel()
        loop = asyncio.get_running_loop()
        self._cursor_timer = loop.call_later(CURSOR_DEBOUNCE_S, self._cursor_fire)
        # What a test (or a person reading a debug log) awaits instead of sleeping past the
        # debounce: this one when a move will be told, the one in _cursor_push when it was.
        log.debug("follow-cursor: line %d of %s, told in %g s unless the cursor moves on", line0 + 1, uri,
                  CURSOR_DEBOUNCE_S)

    def _cursor_fire(self) -> None:
        self._cursor_timer = None
        want, self._cursor_want = self._cursor_want, None
        if want is None:
            return
        self._cursor_task = asyncio.ensure_future(self._cursor_push(*want, self._cursor_seq))

    async def _cursor_push(self, uri: str, line0: int, seq: int) -> None:
        path = self.server.path_of(uri)
        if path is None:
            return
        try:
            files = await self.server.run_blocking(self.captured_lines.file_lines, path)
        except Exception:
            log.exception("follow-cursor: reading the captured lines of %s failed", path)
            return
        if seq != self._cursor_seq:
            return  # the cursor moved again meanwhile: that move's push says where
        host = self.viewers
        told: set[tuple[str, int]] = set()
        events = 0
        for fl in files:
            rec = fl.record
            cid = viewed_id(rec)
            if self._pages(rec.root, cid) <= 0:
                continue
            entry = fl.at(line0)
            key = (str(rec.root), cid)
            if entry is None or not entry.calls:
                if key in self._outlined:
                    host.publish(rec.root, "cursor", {"capture": cid, "file": rel_path(rec.root, path) or path.as_posix(), "line": None,
                                                       "keys": []})
                    self._outlined.pop(key, None)
                    events += 1
                continue
            host.publish(rec.root, "cursor", {"capture": cid, "file": entry.file, "line": entry.line,
                                               "keys": entry.first.keys()[:MAX_EVENT_KEYS]})
            self._outlined[key] = rec.root
            told.add(key)
            events += 1
        # captures outlining a line of another file: that line is no longer the cursor's
        for key in [k for k in self._outlined if k not in told]:
            host.publish(self._outlined.pop(key), "cursor", {"capture": key[1], "file": None, "line": None, "keys": []})
            events += 1
        log.debug("follow-cursor: line %d of %s told: %d cursor event(s)", line0 + 1, uri, events)

    @hook
    def settings_changed(self) -> None:
        """followCursor turned off: the outlines it left go, and the next move starts afresh."""
        host = self.viewers
        for key, root in list(self._outlined.items()):
            if not self.server.settings_for(root).follow_cursor:
                del self._outlined[key]
                host.publish(root, "cursor", {"capture": key[1], "file": None, "line": None, "keys": []})
        self._cursor_line.clear()

    @hook
    def document_closed(self, uri: str) -> None:
        self._cursor_line.pop(uri, None)

    @hook
    def shutdown(self) -> None:
        if self._cursor_timer is not None:
            self._cursor_timer.cancel()
            self._cursor_timer = None


def viewed_id(rec: Any) -> int:
    """The viewer's id of a capture whose lines are indexed (only a viewed capture's are)."""
    cid = rec.capture_id
    if not isinstance(cid, int):
        raise TypeError(f"capture {rec.profile!r} is not in the viewer")
    return cid
