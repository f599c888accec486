"""A successful capture lands: the folder's viewer holds it (a recapture's tab updates in
place), its freshness record and captured texts are in place, the other features hear
of it (``capture_landed``: inlay hints refresh), and its URL is the profile's newest.

When the viewer cannot listen (no loopback socket: ``[Errno 97] Address family not
supported`` in a sandbox), the capture still lands without it: the graph file is
written, hints and hovers work, and the answer says so (``reason: "viewer-unavailable"``,
with ``tensorviz view FILE`` to open it elsewhere), never a traceback."""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

from lsprotocol import types

from capture.graph.model import Capture
from capture.session import SessionResult

from ..feature import Feature
from ..host import Host
from .captured_lines import CapturedLines
from .capturing import CaptureTarget
from .freshness import Freshness
from ..records import CaptureRecords, Record
from ..registry import register
from .viewer_host import ViewerHost

log = logging.getLogger(__name__)


@register
class GraphLanding:
    def __init__(self, server: Host, viewers: ViewerHost, records: CaptureRecords, freshness: Freshness,
                 captured_lines: CapturedLines) -> None:
        self.server = server
        self.viewers = viewers
        self.records = records
        self.freshness = freshness
        self.captured_lines = captured_lines
        self._first: dict[tuple[str, str], int] = {}  # graphs shown before their statistics, by profile

    def first_graph(self, target: CaptureTarget, capture: Capture, *, show: bool, background: bool) -> None:
        """The graph first (from the capturing thread): a graph whose parameters'
        statistics follow it (``meta.stats_pending``, the inspector says "measuring…"), or
        whose compiled program does (``compiled.status`` pending: "compiling for N
        devices…"), is in the viewer (and shown) before they arrive; :meth:`land` then replaces it
        in place with the complete capture. A viewer that cannot listen shows nothing
        here: :meth:`land` says so once the capture is complete."""
        try:
            viewer = self.viewers.viewer(target.root)
        except OSError:
            return
        old = self.records.get(target.key)
        replaces = old.capture_id if background and old is not None and old.capture_id is not None else None
        cid = viewer.add_capture(capture, f"{target.qualname} ({target.profile})", warm=True, trusted_sources=True,
                                 replaces=replaces)
        self._first[target.key] = cid
        if show:
            url = viewer.url_for(cid)
            self.viewers.remember_url(target.root, target.profile, url)
            # Not waited for: the statistics are measured meanwhile.
            self.server.call_soon(asyncio.ensure_future, self.viewers.show_url(url, f"Graph of {target.qualname}"))

    async def land(self, target: CaptureTarget, result: SessionResult, *, show: bool, background: bool) -> dict[str, Any]:
        """``show``: open the graph's URL in the editor's browser; ``background``: a
        recapture, whose viewer tab updates in place."""
        capture = result.capture
        root, profile, qualname = target.root, target.profile, target.qualname
        try:
            viewer = await self.server.run_blocking(self.viewers.viewer, root)
        except OSError as exc:
            return await self._without_viewer(target, result, exc, background=background)
        first = self._first.pop(target.key, None)  # shown before its statistics: replaced in place, not shown again
        # add_capture tells open pages ("capture-ready"), so a page showing the setup
        # form or an older graph offers the new one.
        # warm: the index builds while the browser starts, not on its first request;
        # trusted_sources: this process's own worker recorded them (not a foreign file).
        # The history's newest capture of this profile before this one: the page offers
        # the diff against it (read on the first diff, not now).
        extra: dict[str, Any] = {}
        if result.baseline is not None:
            extra["baseline"] = result.baseline
        old = self.records.get(target.key)
        if first is not None:
            extra.update(replaces=first, in_place=True)  # the same graph, its statistics in: its id and URL
            show = False
        elif background and old is not None and old.capture_id is not None:
            extra["replaces"] = old.capture_id  # its tab updates in place
        capture_id = await self.server.run_blocking(
            functools.partial(viewer.add_capture, capture, f"{qualname} ({profile})", warm=True, trusted_sources=True,
                              **extra)
        )
        record = Record(root, profile, target.uri, qualname, capture, {s.path for s in capture.sources},
                        target.name_range, capture_id=capture_id)
        self.freshness.record(record)
        # The text each source had when captured: where its lines' data goes after edits.
        await self.server.run_blocking(self.captured_lines.remember, record)
        await self.server.call_hook(Feature.capture_landed, record)  # inlay hints refresh
        url = viewer.url_for(capture_id)
        self.viewers.remember_url(root, profile, url)
        saved = result.graph_file
        log.info("captured %s: %d nodes%s", qualname, len(capture.nodes), f", saved to {saved}" if saved else "")
        if show:
            await self.viewers.show_url(url, f"Graph of {qualname}")
        answer: dict[str, Any] = {"ok": True, "url": url, "capture": capture_id, "nodes": len(capture.nodes),
                                  "file": str(saved) if saved else None}
        if result.problems:
            answer["problems"] = list(result.problems)
        if saved is None:
            # The graph is on screen, but not kept (a full disk, a folder that cannot be
            # written): that is no success to report.
            message = "; ".join(result.problems) or "the graph file was not written"
            answer.update(ok=False, reason="not-saved", message=message)
            said = f"TensorViz: the graph of {qualname} is shown but was not saved: {message}"
            if background:
                log.warning("%s", said)
            else:
                self.server.show_message(said, types.MessageType.Warning)
        return answer

    async def _without_viewer(self, target: CaptureTarget, result: SessionResult, exc: OSError, *,
                              background: bool) -> dict[str, Any]:
        """The capture lands for the editor (records, hints) with no viewer to show it."""
        capture, qualname = result.capture, target.qualname
        record = Record(target.root, target.profile, target.uri, qualname, capture, {s.path for s in capture.sources},
                        target.name_range)
        self.freshness.record(record)
        await self.server.run_blocking(self.captured_lines.remember, record)
        await self.server.call_hook(Feature.capture_landed, record)
        saved = result.graph_file
        why = f"the viewer cannot listen on 127.0.0.1: {exc.strerror or exc}"
        if saved is not None:
            message = f"the graph of {qualname} was captured and saved to {saved}, but {why}; open it where a " \
                      f"browser can reach this machine with: tensorviz view {saved}"
        else:
            message = f"the graph of {qualname} was captured, but {why}; and it was not saved: " + \
                      ("; ".join(result.problems) or "the graph file was not written")
        log.warning("%s", message)
        if not background:
            self.server.show_message(f"TensorViz: {message}", types.MessageType.Warning)
        answer: dict[str, Any] = {"ok": False, "reason": "viewer-unavailable", "message": message, "url": None,
                                  "nodes": len(capture.nodes), "file": str(saved) if saved else None}
        if result.problems:
            answer["problems"] = list(result.problems)
        return answer
