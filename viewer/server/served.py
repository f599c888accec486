"""What the request handlers see of the viewer server: a held capture (its projection
and line index, built on first use), the embedder's hook types, and the server itself as
a :class:`Served` protocol (:class:`viewer.server.app.ViewerServer` is the one)."""

from __future__ import annotations

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

    def prepared(self, encode: Callable[[Any], bytes] | None = None) -> None:
        """Build the projection and make what the first page reads (the warm-up). The
        lock is held throughout: a request meanwhile waits for it rather than making the
        same parts again on its own thread (two threads under one GIL: both slower)."""
        # the cyclic collector paused for the whole warm-up (capture/graph/gc_pause.py), not
        # part by part: between parts it looked at every object made so far each time
        with self._lock, gc_pause.paused():
            if self._projection is None:
                proj = self._projection = Projection(self.capture)
                proj.prepare()
                if encode is not None and self.capture.failure is None:
                    # encoded now too (``encode``: the server's JSON): a first chunk's page is
                    # 300-400 KB of JSON (60 ms)
                    self.first_pages = {key: encode(proj.children(*key)) for key in proj.first_pages()}

    @property
    def built(self) -> bool:
        return self._projection is not None


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
