"""The loopback viewer server: the browser app, its JSON API and a push channel.

Contract: ``viewer/API.md``. Security model, in the order checks run on every request:

1. the ``Host`` header must be ``127.0.0.1:PORT`` or ``localhost:PORT`` (a page on
   another origin that rebinds its DNS name to 127.0.0.1 still sends its own name);
2. the path must start with the random per-run token (``secrets.token_urlsafe``);
   anything else gets ``403`` with an empty body, the same for every failure;
3. static files come only from ``viewer/static/`` (resolved, symlinks included, and
   checked to stay inside it); source files only from the workspace, or from the
   recorded sources of captures the embedder marked ``trusted_sources`` (ones its own
   worker produced). A graph file someone else wrote (``api/open``, ``tensorviz view``)
   cannot widen that: its recorded sources count only when they resolve inside the
   workspace and still hash to the recorded sha256. A capture's library frames
   (installed files, by absolute path) are shown only for ``.py`` files inside the
   ``site-packages`` folders its worker recorded (``viewer/projection/library_sources.py``);
4. ``POST`` bodies are JSON (or, for ``api/open``, a graph file), size-bounded and
   must carry the matching ``Content-Type``.

No CORS header is ever sent, so other origins cannot read any answer.

The embedder (the language server, or a CLI command) passes hooks in; each is
optional and called on a request thread:

``reveal_handler(frame: Frame) -> bool``
    show a source location in the editor (``frame.file`` is an absolute, checked
    path); ``False`` (or no handler) makes the viewer show the source lines itself.
``setup_provider(profile: str | None) -> dict | None``
    the setup form's content (``api/setup``); ``None`` means "no setup" (404).
``save_profile(name: str, recipe: dict) -> list[dict] | None``
    save a profile; returns validation errors ``[{path, message}]`` (empty: saved).
``start_capture(profile: str) -> None``
    start a capture; progress and the result come back through :meth:`publish`
    and :meth:`add_capture`. Raising ``ValueError`` refuses with its message.

A capture's projection index is built lazily on the first request that needs it;
``add_capture(..., warm=True)`` or :meth:`ViewerServer.warm` build it ahead of the page.

The parts: this module holds the server's lifecycle and the captures it holds;
:mod:`viewer.server.security` the checks above and the HTTP plumbing;
:mod:`viewer.server.handlers` the API's routes; :mod:`viewer.server.served` what the
routes see of a held capture.
"""

from __future__ import annotations

import logging
import queue
import re
import secrets
import threading
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable

import safe_read

from capture.graph.failure_text import readable_message
from capture.graph.model import Capture

from .diffview import DiffStore
from .events import EventHub
from .handlers import _Handler
from capture.analysis.lines import LineIndex
from .connections import ConnectionGuard
from .security import _ApiError, _dumps, _HTTPServer
from .served import RevealHandler, SaveProfile, SetupProvider, StartCapture, _Entry
from .sources import MAX_SOURCE_BYTES, SourcePolicy

log = logging.getLogger("tensorviz.viewer")

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
#: What the api/open uploads held at once may take in memory, estimated (see
#: :func:`held_upload_bytes`); older ones are released (the newest is always held). A
#: bound on memory, not on uploads or their bytes: four files at the upload limit were
#: once held at 0.9 GB each, and 3,000 uploads of 14 KB at 453 MB.
MAX_HELD_UPLOAD_MEMORY = 256 << 20
#: A held upload's memory per byte of its file (its decoded capture and projection index;
#: measured 14-27x) and per capture (its entry, index and page state; measured 69 KB for
#: a 5 KB file), rounded up.
HELD_BYTES_PER_FILE_BYTE = 32
HELD_BYTES_PER_CAPTURE = 128 << 10
#: And per group: a group costs about 12 bytes in a file and about 2 KiB held (its object,
#: name and attrs, the index's per-group lists and pages; measured 2.0 KiB a group on a
#: 20,000-deep chain, 160x its file), so a file of groups is counted by them.
HELD_BYTES_PER_GROUP = 2560


def held_upload_bytes(size: int, groups: int = 0) -> int:
    """The memory an uploaded graph file of ``size`` bytes with ``groups`` groups is counted
    for while it is held."""
    return max(HELD_BYTES_PER_FILE_BYTE * size, HELD_BYTES_PER_GROUP * groups) + HELD_BYTES_PER_CAPTURE
EVENT_NAME = re.compile(r"^[a-z][a-z0-9-]{0,63}$")


class ViewerServer:
    """One loopback viewer: ``start()``, ``url``, ``add_capture()``, ``publish()``, ``stop()``.

    ``captures`` holds ``Capture`` objects or ``(capture, title)`` pairs, added with
    ``trusted_sources=False`` (see :meth:`add_capture`). ``workspace`` is the folder
    whose files ``api/source`` and reveal may read (besides the recorded sources of
    trusted captures). Safe to drive from any thread.
    """

    def __init__(
        self,
        captures: Iterable[Capture | tuple[Capture, str]] = (),
        *,
        workspace: str | Path | None = None,
        reveal_handler: RevealHandler | None = None,
        setup_provider: SetupProvider | None = None,
        save_profile: SaveProfile | None = None,
        start_capture: StartCapture | None = None,
        port: int = 0,
        static_dir: str | Path | None = None,
        browse_workspace: bool = True,
    ) -> None:
        self.workspace = Path(workspace).resolve() if workspace is not None else None
        #: What ``api/source`` and reveal may read. ``browse_workspace=False``: the workspace
        #: only anchors relative recorded sources (which must still match their sha256);
        #: its other files are not served (``tensorviz view`` without ``--workspace``: the
        #: current folder may be a home directory).
        self.sources = SourcePolicy(self.workspace, browse_workspace)
        self.reveal_handler = reveal_handler
        self.setup_provider = setup_provider
        self.save_profile = save_profile
        self.start_capture = start_capture
        self.static_dir = Path(static_dir or STATIC_DIR).resolve()
        self.token = secrets.token_urlsafe(24)
        self._requested_port = port
        self._lock = threading.Lock()
        self._entries: dict[int, _Entry] = {}
        self._next_id = 1
        self.events = EventHub()  # the open pages' streams (viewer/server/events.py)
        self._uploads: list[tuple[int, int]] = []  # api/open captures and their bytes, oldest first (keep_upload)
        self.diffs = DiffStore()  # diff mode: each capture's baseline (viewer/server/diffview.py)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        #: Open connections, capped, each with a deadline to send its request (connections.py).
        self.connections = ConnectionGuard()
        for item in captures:
            capture, title = item if isinstance(item, tuple) else (item, None)
            self.add_capture(capture, title)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> str:
        """Bind and serve on a background thread; returns :attr:`url`."""
        if self._httpd is not None:
            return self.url
        httpd = _HTTPServer(("127.0.0.1", self._requested_port), _Handler)
        httpd.viewer = self
        httpd.guard = self.connections
        self.connections.start()
        self._httpd = httpd
        # A short poll so that stop() returns promptly (it waits for the next poll).
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="tensorviz-viewer", daemon=True)
        self._thread.start()
        log.info("viewer serving at %s", self.url)
        return self.url

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the viewer server is not started")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{self.token}/"

    def url_for(self, capture_id: int) -> str:
        return f"{self.url}?capture={capture_id}"

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self.events.send(None)
        httpd.shutdown()
        httpd.server_close()
        self.connections.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "ViewerServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ captures

    def add_capture(self, capture: Capture, title: str | None = None, *, warm: bool = False,
                    trusted_sources: bool = False, baseline: tuple[Capture | Callable[[], Capture], str] | None = None,
                    replaces: int | None = None, in_place: bool = False) -> int:
        """Hold ``capture`` (newest becomes the default); returns its id and tells open
        pages: ``capture-ready {id, title}``, or ``capture-failed {id, message, stage}``.
        ``replaces``: the id of the capture this one recaptures in the background
        (recapture on save): ``capture-ready`` then carries ``replaces``, and a page
        showing that capture updates in place, keeping its camera and expansion.

        ``trusted_sources=True`` says the embedding process produced ``capture`` itself
        (its own worker ran the recipe): its recorded ``sources`` may then be shown by
        ``api/source`` and reveal even outside the workspace. Otherwise (the default,
        and always for ``api/open`` uploads) a recorded source counts only when it
        resolves, symlinks followed, to a regular file inside the workspace whose
        current sha256 is the recorded one: a hostile graph file cannot widen what the
        viewer serves.

        The capture's projection index is built on the first request that needs it
        (about 1.2 s for 100,000 nodes). ``warm=True`` starts building it now on a
        background thread, so that a page about to open (the editor's browser, a test,
        a benchmark) does not pay for it; see :meth:`warm`. Returns at once either way.

        ``baseline=(capture, label)``: the capture to offer a diff against (the previous
        capture of the same profile), set before open pages hear of the new one.

        ``in_place=True`` (with ``replaces``): ``capture`` completes the one held as
        ``replaces`` (the same graph, its statistics arrived after it) and takes its id
        and URL; its pages update in place as for a recapture."""
        self.sources.admit(capture, trusted=trusted_sources)
        with self._lock:
            if in_place and replaces is not None and int(replaces) in self._entries:
                cid = int(replaces)
            else:
                cid = self._next_id
                self._next_id += 1
            title = title or (capture.recipe or {}).get("model") or f"capture {cid}"
            self._entries[cid] = _Entry(cid, str(title), capture)
        if baseline is not None:
            self.diffs.set_baseline(cid, *baseline)
        if warm:
            self.warm(cid, wait=False)
        if replaces is not None and int(replaces) != cid:
            # A page showing the capture this one replaces updates in place (capture-ready
            # with ``replaces``): it now shows this one.
            self.events.moved(int(replaces), cid)
        if capture.failure is not None:
            self.publish("capture-failed", {"id": cid, "message": readable_message(capture.failure.message).text,
                                            "stage": capture.failure.stage})
        else:
            ready = {"id": cid, "title": str(title)}
            if replaces is not None:
                ready["replaces"] = int(replaces)
            self.publish("capture-ready", ready)
        return cid

    def keep_upload(self, capture_id: int, size: int, groups: int = 0) -> None:
        """``capture_id`` came through ``api/open`` as a graph file of ``size`` bytes:
        hold the newest uploads while their estimated memory (:func:`held_upload_bytes`)
        stays within :data:`MAX_HELD_UPLOAD_MEMORY` and release older ones (their pages
        get 404 and say so), so that uploads, large or many small ones, cannot grow this
        process without bound."""
        with self._lock:
            self._uploads.append((capture_id, held_upload_bytes(size, groups)))
            released = []
            while len(self._uploads) > 1 and sum(n for _, n in self._uploads) > MAX_HELD_UPLOAD_MEMORY:
                old, _ = self._uploads.pop(0)
                if self._entries.pop(old, None) is not None:
                    released.append(old)
        for old in released:
            self.diffs.forget(old)
            log.info("released uploaded capture %d (uploads are held up to about %d MiB of memory)", old,
                     MAX_HELD_UPLOAD_MEMORY >> 20)

    def warm(self, capture_id: int | None = None, *, wait: bool = True) -> threading.Thread | None:
        """Build a held capture's projection index now (default: the newest capture).

        The public way to take the cold first request's cost (about 1.2 s on a
        100,000-node capture) out of a page load. ``wait=True`` builds it on this thread
        and returns ``None`` once it is ready; ``wait=False`` builds it on a daemon
        thread and returns that thread (``None`` when it is already built). A request
        that arrives meanwhile waits for the same build; nothing is built twice.
        Raises ``KeyError`` when no such capture is held."""
        try:
            entry = self._entry(None if capture_id is None else str(capture_id))
        except _ApiError as exc:
            raise KeyError(exc.message) from None
        if entry.built:
            return None
        if wait:
            entry.prepared(_dumps)
            return None

        def build() -> None:
            try:
                entry.prepared(_dumps)
            except Exception:  # the request that needs it will report the problem
                log.error("building the projection of capture %s failed:\n%s", entry.id, traceback.format_exc())

        thread = threading.Thread(target=build, name=f"tensorviz-warm-{entry.id}", daemon=True)
        entry.expect_warm()
        thread.start()
        return thread

    def lines(self, capture_id: int) -> LineIndex | None:
        """Capture ``capture_id``'s line index (see :mod:`capture.analysis.lines`), built on first
        use: None for a capture this server does not hold, or one that failed."""
        with self._lock:
            entry = self._entries.get(int(capture_id))
        if entry is None or entry.capture.failure is not None:
            return None
        return entry.lines()

    def captures(self) -> list[dict]:
        with self._lock:
            entries = list(self._entries.values())
        return [{"id": e.id, "title": e.title, "failed": e.capture.failure is not None,
                 "nodes": len(e.capture.nodes), "stale": e.stale is not None} for e in entries]

    def _entry(self, capture_id: str | None) -> _Entry:
        with self._lock:
            if capture_id in (None, ""):
                if not self._entries:
                    raise _ApiError(404, "no capture yet")
                return self._entries[max(self._entries)]
            try:
                return self._entries[int(capture_id)]
            except (ValueError, KeyError):
                raise _ApiError(404, f"no capture {capture_id}") from None

    # ------------------------------------------------------------------ events

    def publish(self, event: str, data: dict | None = None) -> None:
        """Push a named server-sent event to every open page.

        ``stale {files, capture?}`` and ``fresh {capture?}`` also record the state of
        that capture (default: the newest) for ``api/capture``."""
        if not EVENT_NAME.match(event):
            raise ValueError(f"bad event name {event!r}")
        data = dict(data or {})
        if event in ("stale", "fresh"):
            with self._lock:
                cid = data.get("capture") or (max(self._entries) if self._entries else None)
                entry = self._entries.get(cid) if cid is not None else None
                if entry is not None:
                    entry.stale = [str(f) for f in data.get("files", [])] if event == "stale" else None
        self.events.send(f"event: {event}\ndata: {_dumps(data).decode('utf-8')}\n\n".encode("utf-8"))

    def _subscribe(self, capture_id: int | None = None) -> queue.Queue:
        if capture_id is None:
            with self._lock:
                capture_id = max(self._entries) if self._entries else None  # a page without ?capture= shows the newest
        return self.events.subscribe(capture_id)

    def _unsubscribe(self, q: queue.Queue) -> None:
        self.events.unsubscribe(q)

    def pages(self, capture_id: int) -> int:
        """How many open pages show capture ``capture_id``: their event channel named it
        (``api/events?capture=ID``; a page without one shows the capture that was the newest
        when it opened). A page that updated in place to a recapture counts for the recapture."""
        return self.events.pages(int(capture_id))

    @property
    def subscriber_count(self) -> int:
        return len(self.events)

    # ------------------------------------------------------------------ sources

    def resolve_source(self, file: Any) -> Path | None:
        """The real path of ``file`` when it may be shown (viewer/server/sources.py), else ``None``."""
        return self.sources.resolve(file)

    def source_lines(self, file: str, line: int, context: int) -> dict:
        real = self.resolve_source(file)
        if real is None:
            raise _ApiError(404, "not a source file of this workspace or capture")
        try:
            # A FIFO or device swapped in after resolve_source is refused, not waited on.
            data = safe_read.read_bytes(real, max_bytes=MAX_SOURCE_BYTES)
        except safe_read.TooLarge:
            raise _ApiError(413, "the source file is too large to show") from None
        except OSError as exc:
            raise _ApiError(404, f"cannot read the source file: {exc.strerror or exc}") from None
        lines = data.decode("utf-8", errors="replace").splitlines()
        line = max(1, line)
        start = max(1, line - context)
        end = min(len(lines), line + context)
        return {"file": file, "line": line, "start_line": start, "lines": lines[start - 1:end],
                "total_lines": len(lines)}


__all__ = ["ViewerServer", "STATIC_DIR"]
