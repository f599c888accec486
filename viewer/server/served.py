"""What the request handlers see of the viewer server: a held capture (its projection
and line index, built on first use), the embedder's hook types, and the server itself as
a :class:`Served` protocol (:class:`viewer.server.app.ViewerServer` is the one)."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from capture.graph import gc_pause
from capture.graph.model import Capture, Frame

from .diffview import DiffStore
from capture.analysis.lines import LineIndex
from ..projection.projection import Projection

RevealHandler = Callable[[Frame], bool]
SetupProvider = Callable[[str | None], dict | None]
SaveProfile = Callable[[str, dict], "list[dict] | None"]
StartCapture = Callable[[str], None]


@dataclass
class _Entry:
    id: int
    title: str
    capture: Capture
    stale: list[str] | None = None
    _projection: Projection | None = None
    _lines: LineIndex | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: The first view's pages as sent, made by the warm-up ((group, chunk) -> JSON bytes;
    #: pages without kernels and weights): the page's first requests send them as they are.
    first_pages: dict[tuple[int, int | None], bytes] = field(default_factory=dict)
    #: The projection's part of ``api/capture`` (:meth:`Projection.summary`), made by the
    #: warm-up before the rest of it, so that the page's first question is answered while
    #: the first view's pages are still being made.
    _summary: dict[str, Any] | None = None
    #: Set while a warm-up runs, until its summary is made (or it failed before).
    _summary_due: threading.Event | None = None

    def projection(self) -> Projection:
        # Built on first use (or by ViewerServer.warm), so that add_capture returns at
        # once (the language server calls it on its own thread); concurrent first
        # requests, and a request that arrives while a warm-up builds it, wait here.
        with self._lock:
            if self._projection is None:
                self._projection = Projection(self.capture)
            return self._projection

    def lines(self) -> LineIndex:
        """The capture's line → nodes/values index (built once, after the projection)."""
        proj = self.projection()
        with self._lock:
            if self._lines is None:
                self._lines = proj.line_index()
            return self._lines

    def summary(self) -> dict[str, Any]:
        """The projection's summary (``api/capture``): the warm-up's as soon as it has made
        it (before the first view's pages), else made now from the projection."""
        due = self._summary_due
        if due is not None:
            due.wait()
        got = self._summary
        return got if got is not None else self.projection().summary()

    def expect_warm(self) -> threading.Event:
        """A warm-up is about to start (on another thread): ``api/capture`` waits for its
        summary from now on rather than for the whole warm-up."""
        due = self._summary_due
        if due is None:
            due = self._summary_due = threading.Event()
        return due

    def prepared(self, encode: Callable[[Any], bytes] | None = None) -> None:
        """Build the projection and make what the first page reads (the warm-up): the
        summary first (the page's first question), then the first view's pages. The lock
        is held throughout: a request meanwhile waits for it (``api/capture`` only for the
        summary) rather than making the same parts again on its own thread (two threads
        under one GIL: both slower)."""
        # the cyclic collector paused for the whole warm-up (capture/graph/gc_pause.py), not
        # part by part: between parts it looked at every object made so far each time
        due = self.expect_warm()
        try:
            # settle: what it made joins the oldest generation unwalked (the first
            # allocation after it walked it all: 70-100 ms on a 100k-op capture)
            with self._lock, gc_pause.paused(settle=True), _responsive():
                if self._projection is None:
                    proj = self._projection = Projection(self.capture)
                    self._summary = proj.summary()
                    due.set()
                    proj.prepare()
                    if encode is not None and self.capture.failure is None:
                        # encoded now too (``encode``: the server's JSON): a first chunk's page
                        # is 300-400 KB of JSON (60 ms)
                        self.first_pages = {key: encode(proj.children(*key)) for key in proj.first_pages()}
        finally:
            due.set()
            self._summary_due = None

    @property
    def built(self) -> bool:
        return self._projection is not None


_switch_lock = threading.Lock()
_switch_users = 0
_switch_before = 0.0
#: The interpreter's thread switch interval while a warm-up runs (seconds; Python's default
#: is 0.005): a request thread waiting for the GIL gets it this soon. The warm-up is one
#: long CPU-bound thread; at the default, each of a static file request's blocking calls
#: waited up to 5 ms for it to hand the GIL back, and the page's 40 modules arrived
#: 0.3-0.5 s later than from an idle server.
WARM_SWITCH_INTERVAL_S = 0.0005


class _responsive:
    """While any warm-up runs, the switch interval is at most :data:`WARM_SWITCH_INTERVAL_S`
    (restored to what it was when the last one ends)."""

    def __enter__(self) -> None:
        global _switch_users, _switch_before
        with _switch_lock:
            if _switch_users == 0:
                _switch_before = sys.getswitchinterval()
                sys.setswitchinterval(min(_switch_before, WARM_SWITCH_INTERVAL_S))
            _switch_users += 1

    def __exit__(self, *exc: object) -> None:
        global _switch_users
        with _switch_lock:
            _switch_users -= 1
            if _switch_users == 0:
                sys.setswitchinterval(_switch_before)


class Served(Protocol):
    """The viewer server as its request handlers use it (:class:`viewer.server.app.ViewerServer`)."""

    token: str
    static_dir: Path
    workspace: Path | None
    diffs: DiffStore
    reveal_handler: RevealHandler | None
    setup_provider: SetupProvider | None
    save_profile: SaveProfile | None
    start_capture: StartCapture | None

    def add_capture(self, capture: Capture, title: str | None = None, *, warm: bool = False,
                    trusted_sources: bool = False, baseline: tuple[Capture | Callable[[], Capture], str] | None = None,
                    replaces: int | None = None, in_place: bool = False) -> int: ...

    def keep_upload(self, capture_id: int, size: int, groups: int = 0) -> None: ...

    def captures(self) -> list[dict]: ...

    def _entry(self, capture_id: str | None) -> _Entry: ...

    def _subscribe(self, capture_id: int | None = None) -> Any: ...

    def _unsubscribe(self, q: Any) -> None: ...

    def resolve_source(self, file: Any) -> Path | None: ...

    def source_lines(self, file: str, line: int, context: int) -> dict: ...
