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
"""

from __future__ import annotations

import hmac
import json
import logging
import mimetypes
import queue
import re
import secrets
import select
import socket
import socketserver
import threading
import traceback
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs, unquote, urlsplit

import safe_read

from capture.graph import graphfile
from capture.graph.failure_text import readable_message
from capture.graph.model import Capture, Frame, finite

from capture.recipe import (
    CHECKPOINT_SUFFIXES, DTYPES, FIXTURE_SUFFIXES, GENERATORS, PROFILE_NAME, PROFILE_NAME_INVALID, PROFILE_NAME_MAX,
    PROFILE_NAME_RULE,
)

from .diffview import DiffStore, DiffUnavailable
from .events import EventHub
from ..projection.lines import LineIndex, line_answer
from .connections import ConnectionGuard
from .sources import MAX_SOURCE_BYTES, SourcePolicy
from ..projection.projection import SUBTREE_ITEMS, Projection, ProjectionError

log = logging.getLogger("tensorviz.viewer")

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
CSP = (
    "default-src 'none'; script-src 'self'; worker-src 'self'; style-src 'self'; "
    "img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors vscode-webview:"
)
# frame-ancestors: no web page may frame the viewer; VS Code's editor tab may (a webview,
# editors/vscode/viewer-panel.js). Other extensions' webviews are code the user installed,
# and still need the per-session token to load anything.
MAX_JSON_BODY = 1 << 20
MAX_GRAPH_UPLOAD = 64 << 20  # a 1M-node graph file is about 45 MB
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
MAX_SOURCE_CONTEXT = 200
KEEPALIVE_SECONDS = 15.0
#: How often an idle event stream checks that its page is still there.
_STREAM_POLL_S = 1.0
EVENT_NAME = re.compile(r"^[a-z][a-z0-9-]{0,63}$")

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
    ".txt": "text/plain; charset=utf-8",
    ".md": "text/plain; charset=utf-8",
    ".map": "application/json",
    ".wasm": "application/wasm",
}

RevealHandler = Callable[[Frame], bool]
SetupProvider = Callable[[str | None], dict | None]
SaveProfile = Callable[[str, dict], "list[dict] | None"]
StartCapture = Callable[[str], None]


class _Refused(Exception):
    """Answer with ``status`` and an empty body (403 and friends: no hint)."""

    def __init__(self, status: int) -> None:
        self.status = status


class _ApiError(Exception):
    def __init__(self, status: int, message: str, extra: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.extra = status, message, extra or {}


@dataclass
class _Entry:
    id: int
    title: str
    capture: Capture
    stale: list[str] | None = None
    _projection: Projection | None = None
    _lines: LineIndex | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

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

    def prepared(self) -> None:
        """Build the projection and make what the first page reads (the warm-up). The
        lock is held throughout: a request meanwhile waits for it rather than making the
        same parts again on its own thread (two threads under one GIL: both slower)."""
        with self._lock:
            if self._projection is None:
                self._projection = Projection(self.capture)
                self._projection.prepare()

    @property
    def built(self) -> bool:
        return self._projection is not None


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
            entry.prepared()
            return None

        def build() -> None:
            try:
                entry.prepared()
            except Exception:  # the request that needs it will report the problem
                log.error("building the projection of capture %s failed:\n%s", entry.id, traceback.format_exc())

        thread = threading.Thread(target=build, name=f"tensorviz-warm-{entry.id}", daemon=True)
        thread.start()
        return thread

    def lines(self, capture_id: int) -> LineIndex | None:
        """Capture ``capture_id``'s line index (see :mod:`viewer.projection.lines`), built on first
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


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # The kernel's queue of connections not yet accepted: socketserver's default of 5
    # refused (or stalled for the clients' retry backoff) most of a burst of 200.
    request_queue_size = 1024
    viewer: ViewerServer
    guard: ConnectionGuard

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks the host up with getfqdn(), which can stall
        # for seconds on machines without working reverse DNS; nothing needs it.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", self.server_address[1]

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("viewer connection error:\n%s", traceback.format_exc())

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.guard.admit(request):
            try:  # every open connection is being answered: say so, hold nothing
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        self.guard.closed(request)
        super().shutdown_request(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "TensorViz"
    sys_version = ""
    timeout = 120
    server: _HTTPServer

    # Every method goes through the same checks; unknown ones end as 405 after them.
    def handle_one_request(self) -> None:
        # The request line, headers and body must arrive within the guard's deadline.
        self.server.guard.reading(self.connection)
        super().handle_one_request()

    def parse_request(self) -> bool:
        ok = super().parse_request()
        if ok and not self._has_body():
            self.server.guard.answering(self.connection)
        return ok

    def _has_body(self) -> bool:
        return self.headers.get("Content-Length", "0") != "0" or bool(self.headers.get("Transfer-Encoding"))

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_OPTIONS(self) -> None:
        self._handle("OPTIONS")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("viewer %s - %s", self.address_string(), format % args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # The stock error page names the server and echoes the request; say nothing.
        self._empty(code)

    # ------------------------------------------------------------------ plumbing

    @property
    def viewer(self) -> ViewerServer:
        return self.server.viewer

    def _common_headers(self) -> None:
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cache-Control", "no-store")

    def _empty(self, status: int) -> None:
        self.send_response(status)
        self._common_headers()
        self.send_header("Content-Length", "0")
        if status >= 400:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()

    def _send(self, status: int, body: bytes, content_type: str, *, html: bool = False) -> None:
        self.send_response(status)
        self._common_headers()
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if html:
            self.send_header("Content-Security-Policy", CSP)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, _dumps(obj), "application/json; charset=utf-8")

    def _unread_body(self) -> bool:
        sent = self.headers.get("Content-Length", "0") != "0" or self.headers.get("Transfer-Encoding")
        return bool(sent) and not self._consumed

    def _handle(self, method: str) -> None:
        self._consumed = False
        try:
            rest = self._authorise()
            if rest is None:
                return
            if rest == "" or rest == "index.html":
                self._need(method, "GET", "HEAD")
                self._static("index.html")
            elif rest.startswith("static/"):
                self._need(method, "GET", "HEAD")
                self._static(rest[len("static/"):])
            elif rest.startswith("api/"):
                self._api(method, rest[len("api/"):])
            else:
                self._empty(404)
        except _Refused as r:
            self._empty(r.status)
        except _ApiError as e:
            if self._unread_body():
                self.close_connection = True  # its bytes must not be taken for the next request
            self._json(e.status, {"error": e.message, **e.extra})
        except ProjectionError as e:
            self._json(e.status, {"error": str(e)})
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:  # a bug here must not take the server down
            log.error("viewer request failed:\n%s", traceback.format_exc())
            try:
                self._json(500, {"error": "internal error (see the TensorViz log)"})
            except OSError:
                self.close_connection = True

    def _authorise(self) -> str | None:
        """Host and token checks; returns the path after ``/TOKEN/`` (still encoded)."""
        port = self.server.server_address[1]
        host = self.headers.get("Host", "")
        if host not in (f"127.0.0.1:{port}", f"localhost:{port}") or len(self.headers.get_all("Host", [])) != 1:
            raise _Refused(403)
        if not self.path.startswith("/"):  # absolute-form or garbage request targets
            raise _Refused(403)
        path = urlsplit(self.path).path
        first, sep, rest = path[1:].partition("/")
        token = self.viewer.token
        if not hmac.compare_digest(first.encode("utf-8", "replace"), token.encode()):
            raise _Refused(403)
        if not sep:
            self.send_response(308)
            self._common_headers()
            self.send_header("Location", f"/{token}/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        return rest

    @staticmethod
    def _need(method: str, *allowed: str) -> None:
        if method not in allowed:
            raise _Refused(405)

    # ------------------------------------------------------------------ static files

    def _static(self, encoded: str) -> None:
        try:
            rel = unquote(encoded, errors="strict") if encoded else ""
        except UnicodeDecodeError:  # %ff%fe: no file of ours has such a name
            raise _Refused(404) from None
        parts = rel.split("/")
        if (not rel or rel.startswith("/") or "\\" in rel or "\x00" in rel or ":" in rel
                or any(p in ("", ".", "..") for p in parts)):
            raise _Refused(404)
        root = self.viewer.static_dir
        try:
            real = (root / rel).resolve(strict=True)
        except (OSError, RuntimeError):
            raise _Refused(404) from None
        if not real.is_relative_to(root) or not real.is_file():
            raise _Refused(404)
        suffix = real.suffix.lower()
        ctype = _TYPES.get(suffix) or mimetypes.guess_type(real.name)[0] or "application/octet-stream"
        self._send(200, real.read_bytes(), ctype, html=suffix == ".html")

    # ------------------------------------------------------------------ API

    def _api(self, method: str, encoded: str) -> None:
        name = unquote(encoded)
        query = self._query()
        if method == "GET" and name in _GETS:
            _GETS[name](self, query)
        elif method == "POST" and name in _POSTS:
            _POSTS[name](self, query)
        elif name in _GETS or name in _POSTS:
            raise _ApiError(405, f"api/{name} does not take {method}")
        else:
            raise _ApiError(404, f"no api/{name}")

    def _query(self) -> dict[str, str]:
        raw = urlsplit(self.path).query
        try:
            parsed = parse_qs(raw, keep_blank_values=True, strict_parsing=False, max_num_fields=32)
        except ValueError:
            raise _ApiError(400, "too many query parameters") from None
        return {k: v[-1] for k, v in parsed.items()}

    def _body(self, content_type: str, limit: int) -> bytes:
        if self.headers.get("Transfer-Encoding"):
            raise _ApiError(411, "send a Content-Length, not a chunked body")
        mtype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if mtype != content_type:
            raise _ApiError(415, f"the body must be {content_type}")
        length = self.headers.get("Content-Length")
        if length is None:
            raise _ApiError(411, "a Content-Length is required")
        try:
            n = int(length)
        except ValueError:
            raise _ApiError(400, "bad Content-Length") from None
        if n < 0:
            raise _ApiError(400, "bad Content-Length")
        if n > limit:
            if n <= 8 * limit:
                # Read the rest so that the sender sees the answer rather than a reset.
                while n > 0:
                    chunk = self.rfile.read(min(1 << 16, n))
                    if not chunk:
                        break
                    n -= len(chunk)
            self.close_connection = True  # anything unread must not be taken for a request
            raise _ApiError(413, f"the body is over {limit:,} bytes")
        self._consumed = True
        body = self.rfile.read(n)
        self.server.guard.answering(self.connection)
        return body

    def _check_origin(self) -> None:
        """Every POST: a browser's request from another page carries that page's Origin."""
        origin = self.headers.get("Origin")
        port = self.server.server_address[1]
        if origin is not None and origin not in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
            raise _Refused(403)

    def _json_body(self) -> dict:
        self._check_origin()
        data = self._body("application/json", MAX_JSON_BODY)
        try:
            obj = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: nested too deeply
            raise _ApiError(400, "the body is not valid JSON") from None
        if not isinstance(obj, dict):
            raise _ApiError(400, "the body must be a JSON object")
        return obj

    # -- reading

    def get_captures(self, q: dict) -> None:
        self._json(200, {"captures": self.viewer.captures()})

    def get_capture(self, q: dict) -> None:
        entry = self.viewer._entry(q.get("capture"))
        out = {"id": entry.id, "title": entry.title}
        out.update(entry.projection().summary())
        out["stale"] = None if entry.stale is None else {"files": entry.stale}
        out["diff"] = self.viewer.diffs.offer(entry.id)
        out["setup"] = self.viewer.setup_provider is not None
        self._json(200, out)

    def get_children(self, q: dict) -> None:
        group = _int_param(q, "group", -1)
        self._json(200, self._projection(q).children(group, q.get("chunk") or None, kernels=_flag(q, "kernels"),
                                                     weights=_flag(q, "weights")))

    def get_bodies(self, q: dict) -> None:
        self._json(200, self._projection(q).bodies(_int_param(q, "node")))

    def get_subtree(self, q: dict) -> None:
        group = _int_param(q, "group", -1)
        self._json(200, self._projection(q).subtree(group, _int_param(q, "max_items", SUBTREE_ITEMS),
                                                    kernels=_flag(q, "kernels"), weights=_flag(q, "weights")))

    def get_node(self, q: dict) -> None:
        self._json(200, self._projection(q).node(_int_param(q, "id")))

    def get_value(self, q: dict) -> None:
        self._json(200, self._projection(q).value(_int_param(q, "id")))

    def get_group(self, q: dict) -> None:
        self._json(200, self._projection(q).group(_int_param(q, "id")))

    def get_nodes(self, q: dict) -> None:
        self._json(200, self._projection(q).nodes_page(_int_param(q, "offset", 0), _int_param(q, "limit", 100)))

    def get_search(self, q: dict) -> None:
        self._json(200, self._projection(q).search(q.get("q", ""), _int_param(q, "limit", 50), op=q.get("op") or None,
                                                   cls=q.get("class") or None, shape=q.get("shape") or None,
                                                   dtype=q.get("dtype") or None, axis=q.get("axis") or None))

    def get_cost(self, q: dict) -> None:
        """What the capture costs: totals, memory, the uncounted ops, the device profiles,
        and with ``device=NAME`` the roofline time per group and op (estimated, not measured)."""
        from ..projection import devices as device_table

        proj = self._projection(q)
        try:
            table = device_table.load(self.viewer.workspace)
        except device_table.DeviceError as exc:
            table, problem = device_table.load(), str(exc)
        else:
            problem = ""

        out: dict[str, Any] = {**proj.cost_summary(), "devices": [d.json() for d in table.values()],
                               "estimate_note": device_table.estimate_text(table.get(q.get("device") or ""))}
        if problem:
            out["devices_problem"] = problem
        name = q.get("device")
        if name:
            device = table.get(name)
            if device is None:
                raise _ApiError(404, f"no device profile {name!r}")
            out["device"] = device.json()
            out["times"] = proj.cost_times(device)
        self._json(200, out)

    def get_source(self, q: dict) -> None:
        line = _int_param(q, "line", 1)
        context = min(max(_int_param(q, "context", 6), 0), MAX_SOURCE_CONTEXT)
        self._json(200, self.viewer.source_lines(q.get("file", ""), line, context))

    def get_diff(self, q: dict) -> None:
        entry = self.viewer._entry(q.get("capture"))

        def resolve(ref: str) -> tuple[int, Capture, str]:
            other = self.viewer._entry(ref)
            return other.id, other.capture, other.title

        try:
            answer = self.viewer.diffs.answer(entry.id, entry.capture, entry.projection,
                                              q.get("against", "previous"), resolve)
        except DiffUnavailable as exc:
            raise _ApiError(exc.status, str(exc)) from None
        self._json(200, answer)

    def get_setup(self, q: dict) -> None:
        provider = self.viewer.setup_provider
        setup = provider(q.get("profile") or None) if provider is not None else None
        if setup is None:
            raise _ApiError(404, "no setup form here")
        self._json(200, {**setup, "schema": form_schema()})

    def get_events(self, q: dict) -> None:
        viewer = self.viewer
        raw = q.get("capture")
        try:
            shown = int(raw) if raw not in (None, "") else None
        except ValueError:
            raise _ApiError(400, "capture must be an integer") from None
        sub = viewer._subscribe(shown)
        try:
            self.send_response(200)
            self._common_headers()
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Connection", "close")
            self.send_header("X-Accel-Buffering", "no")
            self.end_headers()
            self.close_connection = True
            # Streams have their own bound, apart from the connections that serve pages
            # and API calls; the oldest gives way to a new one (connections.py).
            self.server.guard.streaming(self.connection, lambda: sub.put(None))
            self.wfile.write(b"retry: 3000\n: connected\n\n")
            self.wfile.flush()
            idle = 0.0
            while True:
                try:
                    message = sub.get(timeout=_STREAM_POLL_S)
                    idle = 0.0
                except queue.Empty:
                    if _peer_closed(self.connection):
                        return  # the page went away: its slot is free at once
                    idle += _STREAM_POLL_S
                    if idle < KEEPALIVE_SECONDS:
                        continue
                    idle = 0.0
                    message = b": keep-alive\n\n"
                if message is None:
                    return
                self.wfile.write(message)
                self.wfile.flush()
        finally:
            viewer._unsubscribe(sub)

    def get_line(self, q: dict) -> None:
        entry = self.viewer._entry(q.get("capture"))
        if entry.capture.failure is not None:
            raise _ApiError(404, f"capture {entry.id} failed: it ran no lines")
        self._json(200, line_answer(entry.projection(), entry.lines(), q.get("file", ""), _int_param(q, "line")))

    def _projection(self, q: dict) -> Projection:
        return self.viewer._entry(q.get("capture")).projection()

    # -- acting

    def post_reveal(self, q: dict) -> None:
        body = self._json_body()
        frame = body.get("frame")
        if not isinstance(frame, dict) or not isinstance(frame.get("file"), str):
            raise _ApiError(400, "frame {file, line, column, function} is required")
        line, column = frame.get("line", 1), frame.get("column", 0)
        function = frame.get("function", "")
        if type(line) is not int or type(column) is not int or not isinstance(function, str):
            raise _ApiError(400, "frame.line and frame.column are integers, frame.function a string")
        viewer = self.viewer
        real = viewer.resolve_source(frame["file"])
        if real is None:
            raise _ApiError(404, "not a source file of this workspace or capture")
        handler = viewer.reveal_handler
        if handler is not None:
            try:
                if handler(Frame(str(real), line, column, function)):
                    self._json(200, {"handled": "editor"})
                    return
            except Exception:
                log.error("reveal handler failed:\n%s", traceback.format_exc())
        context = _int_param(q, "context", 10)
        source = viewer.source_lines(frame["file"], line, min(max(context, 0), MAX_SOURCE_CONTEXT))
        self._json(200, {"handled": "viewer", "source": source})

    def post_profile(self, q: dict) -> None:
        body = self._json_body()
        save = self.viewer.save_profile
        if save is None:
            raise _ApiError(404, "profiles cannot be saved here")
        name, recipe = body.get("name"), body.get("recipe")
        if not isinstance(name, str) or not name or not isinstance(recipe, dict):
            raise _ApiError(400, "name (a string) and recipe (an object) are required")
        errors = save(name, recipe) or []
        self._json(200, {"ok": not errors, "errors": list(errors)} if errors else {"ok": True})

    def post_capture(self, q: dict) -> None:
        body = self._json_body()
        start = self.viewer.start_capture
        if start is None:
            raise _ApiError(404, "captures cannot be started here")
        profile = body.get("profile")
        if not isinstance(profile, str) or not profile:
            raise _ApiError(400, "profile (a string) is required")
        try:
            start(profile)
        except ValueError as exc:
            raise _ApiError(409, str(exc), {"started": False}) from None
        self._json(200, {"started": True})

    def post_open(self, q: dict) -> None:
        self._check_origin()
        data = self._body("application/octet-stream", MAX_GRAPH_UPLOAD)
        name = q.get("name") or "dropped graph file"
        try:
            capture = graphfile.decode(data, name=name)
        except graphfile.GraphFileError as exc:
            raise _ApiError(400, str(exc)) from None
        # The page opens it right after this answer: start on its index now. Whoever
        # wrote the file, it is not this process's capture: its recorded sources widen
        # nothing (see ViewerServer.add_capture).
        cid = self.viewer.add_capture(capture, name, warm=True, trusted_sources=False)
        self.viewer.keep_upload(cid, len(data), len(capture.groups))
        self._json(200, {"id": cid})


def _peer_closed(sock: Any) -> bool:
    """Whether the client closed its end of ``sock`` (an event stream's page went away):
    a page sends nothing on its stream, so anything readable is the end (or an error)."""
    try:
        ready, _, _ = select.select([sock], [], [], 0)
        if not ready:
            return False
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except (OSError, ValueError):
        return True


def form_schema() -> dict:
    """What the setup form may offer, from the recipe's own definitions (capture.recipe):
    the browser keeps no copy of the dtype or generator lists or the profile-name rule."""
    return {
        "dtypes": list(DTYPES),
        "generators": list(GENERATORS),
        # The generator the form gives a fill value, and the one it gives an integer bound
        # (token ids: below the vocabulary size), by the recipe's names.
        "fill_generator": "full" if "full" in GENERATORS else None,
        "bounded_generator": "randint" if "randint" in GENERATORS else None,
        "default_dtype": "float32",
        # The profile-name rule (capture.recipe.profile_name): the pattern a name must
        # match, the characters the suggested name turns into "_", its length and wording.
        "profile_name": PROFILE_NAME.pattern,
        "profile_name_invalid": PROFILE_NAME_INVALID.pattern,
        "profile_name_max": PROFILE_NAME_MAX,
        "profile_name_rule": PROFILE_NAME_RULE,
        # Torch loads saved files: init.checkpoint and inputs.fixture (capture.torch.saved).
        "saved_files": {"frameworks": ["torch"], "checkpoint": list(CHECKPOINT_SUFFIXES),
                        "fixture": list(FIXTURE_SUFFIXES)},
    }


_GETS: dict[str, Callable[[_Handler, dict], None]] = {
    "captures": _Handler.get_captures,
    "capture": _Handler.get_capture,
    "children": _Handler.get_children,
    "subtree": _Handler.get_subtree,
    "bodies": _Handler.get_bodies,
    "node": _Handler.get_node,
    "value": _Handler.get_value,
    "group": _Handler.get_group,
    "nodes": _Handler.get_nodes,
    "search": _Handler.get_search,
    "cost": _Handler.get_cost,
    "source": _Handler.get_source,
    "setup": _Handler.get_setup,
    "diff": _Handler.get_diff,
    "line": _Handler.get_line,
    "events": _Handler.get_events,
}
_POSTS: dict[str, Callable[[_Handler, dict], None]] = {
    "reveal": _Handler.post_reveal,
    "profile": _Handler.post_profile,
    "capture": _Handler.post_capture,
    "open": _Handler.post_open,
}


def _int_param(q: dict, name: str, default: int | None = None) -> int:
    raw = q.get(name)
    if raw is None or raw == "":
        if default is None:
            raise _ApiError(400, f"{name} is required")
        return default
    try:
        return int(raw)
    except ValueError:
        raise _ApiError(400, f"{name} must be an integer") from None


def _flag(q: dict, name: str) -> bool:
    """A yes/no parameter: ``1``/``true``/``yes`` or ``0``/``false``/``no`` (absent: no)."""
    raw = (q.get(name) or "").lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise _ApiError(400, f"{name} must be 1 or 0")


def _dumps(obj: Any) -> bytes:
    try:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_default)
    except ValueError:  # NaN/inf in params or literals: JSON has no spelling for them
        text = json.dumps(finite(obj), separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                          default=_default)
    return text.encode("utf-8")


def _default(obj: Any) -> Any:
    if isinstance(obj, bytes):
        return obj.hex()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


__all__ = ["ViewerServer", "CSP", "STATIC_DIR"]
