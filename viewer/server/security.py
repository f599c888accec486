"""The viewer's HTTP security and plumbing (the checks of :mod:`viewer.server.app`'s
security model, in order): the Host and token checks, static files from
``viewer/static/`` only, bounded and typed request bodies, the Origin of every POST,
the response headers (CSP, no sniffing, no referrer, no caching), and the connection
guard's admission. The API's routes are :mod:`viewer.server.handlers`."""

from __future__ import annotations

import hmac
import json
import logging
import mimetypes
import socketserver
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from capture.graph.model import finite

from .connections import ConnectionGuard
from .served import Served
from ..projection.projection import ProjectionError

log = logging.getLogger("tensorviz.viewer")

CSP = (
    "default-src 'none'; script-src 'self'; worker-src 'self'; style-src 'self'; "
    "img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors vscode-webview:"
)
# frame-ancestors: no web page may frame the viewer; VS Code's editor tab may (a webview,
# editors/vscode/viewer-panel.js). Other extensions' webviews are code the user installed,
# and still need the per-session token to load anything.
MAX_JSON_BODY = 1 << 20

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


class _Refused(Exception):
    """Answer with ``status`` and an empty body (403 and friends: no hint)."""

    def __init__(self, status: int) -> None:
        self.status = status


class _ApiError(Exception):
    def __init__(self, status: int, message: str, extra: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.extra = status, message, extra or {}


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # The kernel's queue of connections not yet accepted: socketserver's default of 5
    # refused (or stalled for the clients' retry backoff) most of a burst of 200.
    request_queue_size = 1024
    viewer: Served
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


class _GuardedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "TensorViz"
    sys_version = ""
    timeout = 120
    # Each answer goes out as it is written (TCP_NODELAY): with Nagle's algorithm, an
    # answer's body written after its headers waited for the client's delayed ACK, 40 ms
    # per request on loopback (the page's 40 modules took 1.8 s one after another).
    disable_nagle_algorithm = True
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
    def viewer(self) -> Served:
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
        """Answer ``api/NAME`` (the routes: :class:`viewer.server.handlers._Handler`)."""
        raise _Refused(404)

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
