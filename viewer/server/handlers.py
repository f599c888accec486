"""The viewer's JSON API: one method per ``api/NAME`` route (``viewer/API.md``), on
the request handler whose checks :mod:`viewer.server.security` makes first."""

from __future__ import annotations

import logging
import queue
import select
import socket
import traceback
from typing import Any, Callable
from urllib.parse import unquote

from capture.graph import graphfile
from capture.graph.model import Capture, Frame

from capture.frameworks import FRAMEWORK_NAMES, capabilities
from capture.recipe import (
    CHECKPOINT_SUFFIXES, DEFAULT_FRAMEWORK, DTYPES, FIXTURE_SUFFIXES, GENERATORS, PROFILE_NAME, PROFILE_NAME_INVALID, PROFILE_NAME_MAX,
    PROFILE_NAME_RULE,
)

from .diffview import DiffUnavailable
from .security import _ApiError, _GuardedHandler
from capture.analysis.lines import line_answer
from ..projection.projection import SUBTREE_ITEMS, Projection

log = logging.getLogger("tensorviz.viewer")

MAX_GRAPH_UPLOAD = 64 << 20  # a 1M-node graph file is about 45 MB
MAX_SOURCE_CONTEXT = 200
KEEPALIVE_SECONDS = 15.0
#: How often an idle event stream checks that its page is still there.
_STREAM_POLL_S = 1.0


class _Handler(_GuardedHandler):
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

    # -- reading

    def get_captures(self, q: dict) -> None:
        self._json(200, {"captures": self.viewer.captures()})

    def get_capture(self, q: dict) -> None:
        entry = self.viewer._entry(q.get("capture"))
        out = {"id": entry.id, "title": entry.title}
        out.update(entry.summary())
        out["stale"] = None if entry.stale is None else {"files": entry.stale}
        out["diff"] = self.viewer.diffs.offer(entry.id)
        out["setup"] = self.viewer.setup_provider is not None
        self._json(200, out)

    def get_children(self, q: dict) -> None:
        group = _int_param(q, "group", -1)
        entry = self.viewer._entry(q.get("capture"))
        proj = entry.projection()
        kernels, weights = _flag(q, "kernels"), _flag(q, "weights")
        chunk = q.get("chunk") or None
        made = None if kernels or weights or (chunk is not None and _chunk_key(chunk) is None) else \
            entry.first_pages.get((group, _chunk_key(chunk)))
        if made is not None:  # the first view's, made and encoded by the warm-up
            self._send(200, made, "application/json; charset=utf-8")
            return
        self._json(200, proj.children(group, chunk, kernels=kernels, weights=weights))

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
        from capture.analysis import devices as device_table

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
        self._json(200, line_answer(entry.projection().analysis, entry.lines(), q.get("file", ""), _int_param(q, "line")))

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
        # The frameworks whose declaration loads saved files (Torch: init.checkpoint and
        # inputs.fixture, capture.torch.saved).
        "saved_files": {"frameworks": [n for n in FRAMEWORK_NAMES if capabilities(n).saved_files],
                        "checkpoint": list(CHECKPOINT_SUFFIXES), "fixture": list(FIXTURE_SUFFIXES)},
        # A recipe's framework when it names none (and discovery says nothing).
        "default_framework": DEFAULT_FRAMEWORK,
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


def _chunk_key(chunk: str | None) -> int | None:
    """A chunk parameter as the warm-up's first pages are keyed: an integer, None for the
    whole group (and for one that is not a number: no first page is made for it, and the
    projection answers it with its own error)."""
    try:
        return None if chunk is None else int(chunk)
    except ValueError:
        return None


def _flag(q: dict, name: str) -> bool:
    """A yes/no parameter: ``1``/``true``/``yes`` or ``0``/``false``/``no`` (absent: no)."""
    raw = (q.get(name) or "").lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise _ApiError(400, f"{name} must be 1 or 0")
