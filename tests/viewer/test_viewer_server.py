"""The loopback viewer server: token and Host checks, headers, static and source
containment, POST checks, every API endpoint and the event stream."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
import struct
import threading
from pathlib import Path

import pytest
from viewer_fixtures import tiny_capture

from capture.graph import graphfile
from capture.graph.model import Capture, Failure, Frame, Source
from synthetic import synthetic_capture
from capture.analysis.index import ROOT
from viewer.server.app import ViewerServer
from viewer.server.handlers import KEEPALIVE_SECONDS
from viewer.server.security import CSP


class Client:
    """Raw HTTP against the server: paths and headers go out exactly as written."""

    def __init__(self, server: ViewerServer) -> None:
        self.server = server
        self.prefix = f"/{server.token}/"

    def request(self, method: str, path: str, *, body: bytes | None = None, headers: dict | None = None,
                host: str | None = None, raw: bool = False) -> tuple[int, dict, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        try:
            target = path if raw else self.prefix + path
            conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            if host is not False:
                conn.putheader("Host", f"127.0.0.1:{self.server.port}" if host is None else host)
            for k, v in (headers or {}).items():
                conn.putheader(k, v)
            if body is not None and "Content-Length" not in (headers or {}):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            res = conn.getresponse()
            return res.status, {k.lower(): v for k, v in res.getheaders()}, res.read()
        finally:
            conn.close()

    def get(self, path: str, **kw) -> tuple[int, dict, bytes]:
        return self.request("GET", path, **kw)

    def json(self, path: str, expect: int = 200) -> dict:
        status, headers, body = self.get(path)
        assert status == expect, (path, status, body)
        assert headers["content-type"].startswith("application/json")
        return json.loads(body)

    def post(self, path: str, obj, *, ctype: str = "application/json", expect: int | None = 200, **kw):
        body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        status, headers, data = self.request("POST", path, body=body, headers={"Content-Type": ctype, **kw.pop("headers", {})}, **kw)
        if expect is not None:
            assert status == expect, (path, status, data)
        return status, json.loads(data) if data else None


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "model.py").write_text("".join(f"line {i}\n" for i in range(1, 31)))
    (tmp_path / "secret.txt").write_text("not for the browser\n")
    (ws / "escape.py").symlink_to(tmp_path / "secret.txt")
    return ws


@pytest.fixture
def static(tmp_path: Path) -> Path:
    st = tmp_path / "static"
    st.mkdir()
    (st / "index.html").write_text("<!doctype html><script type=module src=static/app.js></script>")
    (st / "app.js").write_text("export const x = 1;\n")
    (st / "sub").mkdir()
    (st / "sub" / "style.css").write_text("body{}\n")
    (st / "out.js").symlink_to(tmp_path / "secret.txt")
    return st


class Hooks:
    def __init__(self) -> None:
        self.revealed: list[Frame] = []
        self.saved: list[tuple[str, dict]] = []
        self.started: list[str] = []
        self.editor = True

    def reveal(self, frame: Frame) -> bool:
        self.revealed.append(frame)
        return self.editor

    def setup(self, profile):
        return {"profile": profile or "jax_example", "recipe": {"kind": "model"}, "fields": [], "inputs": [], "needs": []}

    def save(self, name, recipe):
        self.saved.append((name, recipe))
        return [] if recipe.get("kind") == "model" else [{"path": "kind", "message": "kind must be 'model'"}]

    def start(self, profile):
        if profile == "busy":
            raise ValueError("a capture is already running")
        self.started.append(profile)


@pytest.fixture
def hooks() -> Hooks:
    return Hooks()


@pytest.fixture
def server(workspace, static, hooks):
    s = ViewerServer([(tiny_capture(), "tiny")], workspace=workspace, static_dir=static,
                     reveal_handler=hooks.reveal, setup_provider=hooks.setup,
                     save_profile=hooks.save, start_capture=hooks.start)
    s.start()
    yield s
    s.stop()


@pytest.fixture
def client(server) -> Client:
    return Client(server)


# --------------------------------------------------------------------------- token and Host


def test_url_is_loopback_with_a_random_token(server):
    assert server.url == f"http://127.0.0.1:{server.port}/{server.token}/"
    assert len(server.token) >= 32
    other = ViewerServer()
    assert other.token != server.token


@pytest.mark.parametrize(
    "path",
    ["/", "/api/capture", "/static/app.js", "/index.html", "/x/api/capture", "/%s/api/capture",
     "/%s-/api/capture", "//api/capture", "http://127.0.0.1/TOKEN/api/capture", "*"],
)
def test_requests_without_the_token_get_an_empty_403(client, server, path):
    if "%s" in path:  # the token cut short, or with another last character
        other = "-" if server.token[-1] != "-" else "_"  # a token ends in "-" one time in 64
        path = path.replace("%s-", "%s" + other) % server.token[:-1]
    path = path.replace("TOKEN", server.token) if path.startswith("http") else path
    for method in ("GET", "POST", "OPTIONS"):
        status, headers, body = client.request(method, path, raw=True, body=b"{}" if method == "POST" else None)
        assert (status, body) == (403, b""), (method, path)
        assert not any(k.startswith("access-control-") for k in headers)


@pytest.mark.parametrize(
    "host",
    ["evil.example:{port}", "127.0.0.1", "localhost", "127.0.0.1:1", "127.0.0.2:{port}",
     "[::1]:{port}", "127.0.0.1:{port}.evil.example", ""],
)
def test_wrong_host_gets_an_empty_403_even_with_the_token(client, server, host):
    status, _, body = client.get("api/capture", host=host.format(port=server.port))
    assert (status, body) == (403, b"")


def test_missing_or_repeated_host_is_refused(client, server):
    assert client.get("api/capture", host=False)[0] == 403
    status, _, _ = client.get("api/capture", headers={"Host": f"127.0.0.1:{server.port}"})
    assert status == 403  # two Host headers


def test_both_loopback_names_are_accepted(client, server):
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}"):
        assert client.get("api/capture", host=host)[0] == 200


def test_token_without_slash_redirects_into_the_app(client, server):
    status, headers, _ = client.request("GET", f"/{server.token}", raw=True)
    assert status == 308 and headers["location"] == f"/{server.token}/"


# --------------------------------------------------------------------------- headers


def test_html_carries_the_csp_and_nothing_allows_other_origins(client):
    status, headers, body = client.get("")
    assert status == 200 and body.startswith(b"<!doctype html>")
    assert headers["content-security-policy"] == CSP
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert headers["x-content-type-options"] == "nosniff"
    # Framed only by VS Code's editor tab (a vscode-webview: page), never by a web page;
    # X-Frame-Options would forbid that tab too, and frame-ancestors supersedes it.
    assert "frame-ancestors vscode-webview:" in CSP.split("; ") and "x-frame-options" not in headers
    for path in ("", "index.html", "static/app.js", "api/capture", "api/nope", "static/nope.js"):
        for origin in ({}, {"Origin": "https://evil.example"}):
            for method in ("GET", "OPTIONS"):
                _, h, _ = client.request(method, path, headers={**origin, "Access-Control-Request-Method": "POST"})
                assert not any(k.startswith("access-control-") for k in h), (method, path, h)


def test_static_files_have_types_and_no_csp_needed(client):
    status, headers, body = client.get("static/app.js")
    assert status == 200 and headers["content-type"].startswith("text/javascript")
    assert client.get("static/sub/style.css")[1]["content-type"].startswith("text/css")


# --------------------------------------------------------------------------- static containment


@pytest.mark.parametrize(
    "path",
    [
        "static/../../secret.txt", "static/..%2f..%2fsecret.txt", "static/%2e%2e/%2e%2e/secret.txt",
        "static/%2E%2E%2F%2E%2E%2Fsecret.txt", "static/sub/../../secret.txt", "static//etc/passwd",
        "static/%2fetc%2fpasswd", "static/..\\..\\secret.txt", "static/%5c..%5csecret.txt",
        "static/out.js", "static/sub", "static/", "static/./app.js", "static/app.js%00.html",
        "static/%252e%252e/secret.txt", "../secret.txt", "%2e%2e/secret.txt", "static/C:/x",
    ],
)
def test_static_traversal_is_refused(client, path):
    status, _, body = client.get(path)
    assert status in (403, 404), path
    assert b"not for the browser" not in body


def test_traversal_cannot_leave_the_token_prefix_either(client, server):
    status, _, _ = client.request("GET", f"/{server.token}/../{server.token}/api/capture", raw=True)
    assert status == 404  # the server does not normalise paths; nothing is there


# --------------------------------------------------------------------------- sources


def test_source_lines_from_the_workspace(client):
    d = client.json("api/source?file=model.py&line=10&context=2")
    assert d == {"file": "model.py", "line": 10, "start_line": 8, "lines": ["line 8", "line 9", "line 10", "line 11", "line 12"], "total_lines": 30}
    assert client.json("api/source?file=model.py&line=1&context=500")["lines"][-1] == "line 30"


@pytest.mark.parametrize(
    "file",
    ["../secret.txt", "{root}/secret.txt", "/etc/passwd", "escape.py", "%2e%2e/secret.txt", "", ".", "nope.py",
     "model.py%00"],
)
def test_source_outside_the_workspace_is_refused(client, workspace, file):
    file = file.format(root=workspace.parent)
    status, _, body = client.get(f"api/source?file={file}&line=1")
    assert status == 404 and b"not for the browser" not in body


def test_recorded_sources_outside_the_workspace_are_served_only_for_trusted_captures(tmp_path, static):
    """A capture this process produced itself (its own worker) may name files outside the
    workspace; the same sources in a capture of unknown origin widen nothing."""
    lib = tmp_path / "lib.py"
    lib.write_text("a = 1\nb = 2\n")
    cap = tiny_capture()
    cap.sources.append(Source(str(lib), "0" * 64))
    with ViewerServer(static_dir=static) as s:
        c = Client(s)
        s.add_capture(cap, "untrusted")  # the default
        assert c.get(f"api/source?file={lib}&line=2&context=0")[0] == 404
        s.add_capture(cap, "ours", trusted_sources=True)
        assert c.json(f"api/source?file={lib}&line=2&context=0")["lines"] == ["b = 2"]
        assert c.get("api/source?file=/etc/passwd&line=1")[0] == 404
        assert c.get("api/source?file=model.py&line=1")[0] == 404  # no workspace: nothing relative


def test_captures_given_to_the_constructor_are_untrusted(tmp_path, static):
    lib = tmp_path / "lib.py"
    lib.write_text("a = 1\n")
    cap = tiny_capture()
    cap.sources.append(Source(str(lib), hashlib.sha256(lib.read_bytes()).hexdigest()))
    with ViewerServer([cap], static_dir=static) as s:
        assert Client(s).get(f"api/source?file={lib}&line=1")[0] == 404


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _hostile_graph_file(tmp_path: Path, workspace: Path, sources: list[Source]) -> bytes:
    cap = tiny_capture()
    cap.sources = list(sources)
    cap.frames = [Frame(src.path, 1, 0, "steal") for src in sources] or cap.frames
    for node in cap.nodes:
        node.frame = 0 if node.frame is not None else None
    path = tmp_path / "hostile.tvg"
    graphfile.write(cap, path)
    return path.read_bytes()


@pytest.mark.parametrize("kind", ["absolute", "dotdot", "symlink", "absolute-through-workspace"])
def test_an_uploaded_hostile_graph_file_cannot_widen_what_is_served(client, hooks, workspace, tmp_path, kind):
    """``api/open`` takes graph files from anywhere (a drop, a URL parameter): their
    recorded sources, even with the right sha256, never reach files outside the workspace."""
    secret = workspace.parent / "secret.txt"
    name = {
        "absolute": str(secret),
        "dotdot": "../secret.txt",
        "symlink": "escape.py",  # ws/escape.py -> ../secret.txt
        "absolute-through-workspace": str(workspace / ".." / "secret.txt"),
    }[kind]
    data = _hostile_graph_file(tmp_path, workspace, [Source(name, _sha(secret))])
    _, body = client.post("api/open?name=hostile.tvg", data, ctype="application/octet-stream")
    cid = body["id"]
    assert client.json(f"api/capture?capture={cid}")["sources"][0]["path"] == name
    for file in {name, str(secret), str(secret.resolve())}:
        status, _, text = client.get(f"api/source?file={file}&line=1")
        assert status == 404 and b"not for the browser" not in text, file
        status, answer = client.post("api/reveal", {"frame": {"file": file, "line": 1}}, expect=None)
        assert status == 404 and "not for the browser" not in json.dumps(answer), file
    assert hooks.revealed == []


def test_an_uploaded_graph_file_keeps_workspace_sources_that_still_match(client, server, workspace, tmp_path):
    """Untrusted recorded sources inside the workspace are admitted only when they still
    hash to the recorded sha256; either way nothing outside the workspace is reached."""
    (workspace / "pkg").mkdir()
    other = workspace / "pkg" / "other.py"
    other.write_text("x = 1\n")
    data = _hostile_graph_file(tmp_path, workspace, [Source("pkg/other.py", _sha(other)),
                                                      Source("model.py", "f" * 64)])
    client.post("api/open?name=g.tvg", data, ctype="application/octet-stream")
    assert server.resolve_source("pkg/other.py") == other.resolve()
    with server.sources._lock:
        recorded = set(server.sources.recorded)
    assert other.resolve() in recorded
    assert (workspace / "model.py").resolve() not in recorded  # stale hash: not recorded
    assert all(p.is_relative_to(workspace) for p in recorded)


def test_a_source_admitted_by_its_hash_is_checked_again_when_served(workspace, static, tmp_path):
    """Issue 39 item 6: a source a foreign graph file recorded was let in because its
    sha256 matched when the file was loaded, and was still served after it changed. A
    viewer that does not browse the workspace (``tensorviz view`` without --workspace)
    serves it only while it still holds what was recorded."""
    (workspace / "pkg").mkdir()
    other = workspace / "pkg" / "other.py"
    other.write_text("x = 1\n")
    data = _hostile_graph_file(tmp_path, workspace, [Source("pkg/other.py", _sha(other))])
    with ViewerServer(workspace=workspace, static_dir=static, browse_workspace=False) as server:
        client = Client(server)
        client.post("api/open?name=g.tvg", data, ctype="application/octet-stream")
        status, _, text = client.get("api/source?file=pkg/other.py&line=1")
        assert status == 200 and b"x = 1" in text
        other.write_text("password = 'hunter2'\n")  # another file now, under the same name
        status, _, text = client.get("api/source?file=pkg/other.py&line=1")
        assert status == 404 and b"hunter2" not in text
        assert server.resolve_source("pkg/other.py") is None
        other.write_text("x = 1\n")  # what was recorded, again
        assert server.resolve_source("pkg/other.py") == other.resolve()
        # A capture the embedder made itself records its sources whatever they hold.
        own = tiny_capture()
        own.sources = [Source("pkg/other.py", "0" * 64)]
        server.add_capture(own, trusted_sources=True)
        other.write_text("y = 2\n")
        assert server.resolve_source("pkg/other.py") == other.resolve()


# --------------------------------------------------------------------------- POST checks


def test_post_needs_json_content_type(client):
    assert client.post("api/profile", {"name": "a", "recipe": {}}, ctype="text/plain", expect=415)
    assert client.post("api/profile", {"name": "a", "recipe": {}}, ctype="application/x-www-form-urlencoded", expect=415)
    assert client.post("api/reveal", {"frame": {"file": "model.py"}}, ctype="application/json; charset=utf-8")[0] == 200


def test_post_body_is_bounded(client, server):
    big = json.dumps({"name": "a", "recipe": {"pad": "x" * (1 << 20)}}).encode()
    status, body = client.post("api/profile", big, expect=None)
    assert status == 413 and "bytes" in body["error"]
    # a lying Content-Length is refused before anything is read
    status, _, _ = client.request("POST", "api/profile", body=b"{}", headers={"Content-Type": "application/json", "Content-Length": str(50 << 20)})
    assert status == 413


def test_post_without_length_or_with_bad_json(client):
    status, _, _ = client.request("POST", "api/reveal", headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"}, body=b"0\r\n\r\n")
    assert status == 411
    assert client.post("api/reveal", b"{nope", expect=400)[1]["error"]
    assert client.post("api/reveal", b"[1, 2]", expect=400)
    assert client.post("api/reveal", "\xff".encode("latin-1"), expect=400)


def test_post_from_another_origin_is_refused(client):
    status, body = client.post("api/capture", {"profile": "p"}, headers={"Origin": "https://evil.example"}, expect=None)
    assert status == 403 and body is None


def test_refused_bodies_never_leak_into_the_next_request(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    sneaky = b"GET /%s/api/capture HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (server.token.encode(), server.port)
    try:
        for path, ctype in (("api/nope", "application/json"), ("api/children", "application/json"),
                            ("api/profile", "text/plain")):
            conn.request("POST", f"/{server.token}/{path}", body=sneaky, headers={"Content-Type": ctype})
            res = conn.getresponse()
            res.read()
            assert res.status in (404, 405, 415) and res.getheader("Connection") == "close"
            conn.close()
        conn.request("GET", f"/{server.token}/api/captures")  # keep-alive still works for good requests
        first = conn.getresponse()
        first.read()
        conn.request("GET", f"/{server.token}/api/captures")
        assert first.status == 200 and conn.getresponse().status == 200
    finally:
        conn.close()


def test_wrong_methods_and_unknown_endpoints(client):
    assert client.request("DELETE", "api/capture")[0] == 405
    assert client.request("PUT", "static/app.js")[0] == 405
    assert client.request("GET", "api/reveal")[0] == 405
    assert client.json("api/nope", expect=404)["error"]
    assert client.get("nowhere")[0] == 404


# --------------------------------------------------------------------------- reading


def test_capture_summary(client):
    d = client.json("api/capture")
    assert d["id"] == 1 and d["title"] == "tiny" and d["backend"] == "jaxpr"
    assert d["counts"]["nodes"] == 5 and d["stale"] is None and d["failure"] is None
    assert d["coverage"]["scope"] == "traced_program" and d["measured"] is False
    assert d["sources"] == [{"path": "model.py", "sha256": "0" * 64}]
    assert client.json("api/captures") == {"captures": [{"id": 1, "title": "tiny", "failed": False, "nodes": 5, "stale": False}]}


def test_children_node_value_group_nodes_search(client):
    root = client.json("api/children?group=-1")
    assert [it["key"] for it in root["items"]] == ["g0", "n3", "n4"]
    assert client.json("api/children")["items"] == root["items"]  # group defaults to the root
    assert [it["key"] for it in client.json("api/children?group=1")["items"]] == ["n0", "n1"]
    node = client.json("api/node?id=2")
    assert node["op"] == "add" and node["params"] == {"note": "inf"}  # JSON has no Infinity
    assert client.json("api/value?id=4")["label"] == "f32[]"
    assert client.json("api/group?id=1")["honest_short"] == "tracing scope"
    assert [n["id"] for n in client.json("api/nodes?offset=3&limit=10")["nodes"]] == [3, 4]
    assert [r["id"] for r in client.json("api/search?q=model.py:5")["results"]] == [0, 1]
    assert client.json("api/search?q=f32%5B2%2C3%5D&limit=2")["truncated"] is True


@pytest.mark.parametrize(
    "path",
    ["api/node?id=99", "api/value?id=-1", "api/group?id=7", "api/children?group=9", "api/children?group=0&chunk=1",
     "api/capture?capture=9", "api/children?capture=x"],
)
def test_unknown_things_are_404(client, path):
    assert client.json(path, expect=404)["error"]


@pytest.mark.parametrize("path", ["api/node", "api/node?id=x", "api/nodes?limit=0", "api/children?group=zero",
                                  "api/nodes?offset=-5"])
def test_bad_parameters_are_400(client, path):
    assert client.json(path, expect=400)["error"]


def test_several_captures_default_to_the_newest(client, server):
    cid = server.add_capture(synthetic_capture(300), "second")
    assert cid == 2
    assert client.json("api/capture")["title"] == "second"
    assert client.json("api/capture?capture=1")["title"] == "tiny"
    assert client.json("api/children?group=-1&capture=1")["items"][0]["label"] == "outer"


def test_no_capture_yet(static):
    with ViewerServer(static_dir=static) as s:
        c = Client(s)
        assert c.json("api/capture", expect=404)["error"] == "no capture yet"
        assert c.json("api/captures") == {"captures": []}
        assert c.get("api/setup")[0] == 404 and c.post("api/capture", {"profile": "p"}, expect=404)
        assert c.post("api/profile", {"name": "p", "recipe": {}}, expect=404)


class _GatedProjection:
    """Counts index builds (and the threads they ran on); a build waits for ``gate``,
    so a test decides when it ends instead of timing it."""

    builds: list[str] = []
    started = threading.Event()
    gate = threading.Event()

    def __init__(self, capture) -> None:
        from viewer.projection.projection import Projection

        _GatedProjection.builds.append(threading.current_thread().name)
        _GatedProjection.started.set()
        assert _GatedProjection.gate.wait(30), "the test never let the build finish"
        self._real = Projection(capture)

    def __getattr__(self, name):
        return getattr(self._real, name)


@pytest.fixture
def gated_index(monkeypatch):
    import viewer.server.served as server_module

    _GatedProjection.builds = []
    _GatedProjection.started = threading.Event()
    _GatedProjection.gate = threading.Event()
    monkeypatch.setattr(server_module, "Projection", _GatedProjection)
    yield _GatedProjection
    _GatedProjection.gate.set()  # never leave a build thread waiting


def test_warm_builds_the_index_before_the_first_request(static, gated_index):
    gated_index.gate.set()
    with ViewerServer([(synthetic_capture(300), "a"), (synthetic_capture(200), "b")], static_dir=static) as s:
        assert gated_index.builds == []  # lazy by default
        assert s.warm() is None  # the newest, on this thread
        assert gated_index.builds == [threading.current_thread().name]
        c = Client(s)
        assert c.json("api/capture")["title"] == "b"
        assert c.json("api/children?group=-1&capture=2")["items"]
        assert gated_index.builds == [threading.current_thread().name], "the requests found the index built"
        s.warm(2)  # already built: nothing to do
        assert len(gated_index.builds) == 1
        s.warm(1)
        assert len(gated_index.builds) == 2
        with pytest.raises(KeyError):
            s.warm(99)


def test_add_capture_warm_builds_in_the_background_and_requests_share_it(static, gated_index):
    with ViewerServer(static_dir=static) as s:
        # Returns while its build is still held at the gate: it did not wait for it.
        cid = s.add_capture(synthetic_capture(300), "warm", warm=True)
        assert gated_index.started.wait(30)
        assert gated_index.builds == [f"tensorviz-warm-{cid}"]
        c = Client(s)
        seen: list[dict] = []
        request = threading.Thread(target=lambda: seen.append(c.json(f"api/children?group=-1&capture={cid}")))
        request.start()  # it waits for the same build...
        gated_index.gate.set()
        request.join(30)
        assert seen and seen[0]["items"]
        assert gated_index.builds == [f"tensorviz-warm-{cid}"], "...and started no second one"
        thread = s.warm(cid, wait=False)
        assert thread is None  # built already
        cid2 = s.add_capture(synthetic_capture(100), "later")
        thread = s.warm(cid2, wait=False)
        thread.join(30)
        assert gated_index.builds == [f"tensorviz-warm-{cid}", f"tensorviz-warm-{cid2}"]


def test_the_summary_is_answered_while_the_warm_up_still_makes_the_pages(static, monkeypatch):
    """The page's first question (``api/capture``) is answered as soon as the warm-up has
    the projection and its summary, not after the first view's pages (on a 100k-op
    capture those are most of the warm-up); a page's request meanwhile waits for the
    warm-up's pages rather than making them again. While the warm-up runs, request
    threads get the GIL within half a millisecond; the switch interval is restored after."""
    import sys

    from viewer.projection.projection import Projection
    import viewer.server.served as served

    pages_gate, preparing = threading.Event(), threading.Event()
    intervals: list[float] = []
    real_prepare = Projection.prepare

    def gated_prepare(self):
        intervals.append(sys.getswitchinterval())
        preparing.set()
        assert pages_gate.wait(30), "the test never let the warm-up finish"
        real_prepare(self)

    monkeypatch.setattr(Projection, "prepare", gated_prepare)
    before = sys.getswitchinterval()
    with ViewerServer(static_dir=static) as s:
        cid = s.add_capture(synthetic_capture(2000), "summary first", warm=True)
        assert preparing.wait(30)
        c = Client(s)
        summary = c.json(f"api/capture?capture={cid}")  # answered with the pages still held at the gate
        assert summary["id"] == cid and summary["counts"]["nodes"] == 2000 and not s._entry(str(cid)).first_pages
        seen: list[dict] = []
        page = threading.Thread(target=lambda: seen.append(c.json(f"api/children?group=-1&capture={cid}")))
        page.start()
        page.join(0.2)
        assert not seen, "a page waits for the warm-up's pages"
        pages_gate.set()
        page.join(30)
        assert seen and seen[0]["items"]
        entry = s._entry(str(cid))
        assert (ROOT, None) in entry.first_pages
        assert summary == {**c.json(f"api/capture?capture={cid}"), "id": cid}  # the same answer after it
        fresh = Projection(entry.capture).summary()
        assert all(summary[k] == json.loads(json.dumps(v)) for k, v in fresh.items()), "the summary made before the pages"
    assert intervals == [min(before, served.WARM_SWITCH_INTERVAL_S)]
    assert sys.getswitchinterval() == before


def test_answers_go_out_without_waiting_for_nagle():
    """An answer's body, written after its headers, must not wait for the client's delayed
    ACK (40 ms a request on loopback): the server's sockets are TCP_NODELAY."""
    from viewer.server.handlers import _Handler

    assert _Handler.disable_nagle_algorithm is True


def test_the_warm_up_makes_the_pages_the_first_view_opens(static):
    """While the browser starts, the warm-up makes the pages the first view asks for in
    turn (model/first-view.js: the root, the trunk, the first chunk of a chunked trunk
    group); the page's requests then find them made, not one round trip of work each."""
    flat = synthetic_capture(5000, grouped=False)  # one jit of 5,000 ops: the trunk, in chunks
    with ViewerServer(static_dir=static) as s:
        cid = s.add_capture(flat, "flat")
        s.warm(cid)
        proj = s._entry(str(cid)).projection()
        made = dict(proj.pages._views)
        (trunk,) = proj.trunk()
        assert (ROOT, None, False, False) in made and (trunk, None, False, False) in made
        assert (trunk, 0, False, False) in made  # the first chunk, which the first view opens
        c = Client(s)
        summary = c.json(f"api/capture?capture={cid}")
        assert [t["id"] for t in summary["trunk"]] == [trunk]
        page = c.json(f"api/children?group={trunk}&capture={cid}")
        assert page["items"][0]["type"] == "chunk" and page["items"][0]["key"] == f"c{trunk}:0"
        assert c.json(f"api/children?group={trunk}&chunk=0&capture={cid}") == json.loads(json.dumps(made[(trunk, 0, False, False)]))
        assert set(proj.pages._views) == set(made), "every page the first view asked for was made by the warm-up"
        entry = s._entry(str(cid))
        assert set(entry.first_pages) == {(ROOT, None), (trunk, None), (trunk, 0)}  # sent as encoded then
        # the same pages with kernels or weights asked are made on request, not the first view's
        with_weights = c.json(f"api/children?group={trunk}&chunk=0&weights=1&capture={cid}")
        assert with_weights.get("weights_asked") is True
        assert "chunk" in c.json(f"api/children?group={trunk}&chunk=x&capture={cid}", expect=400)["error"]


def test_failed_capture_is_served_with_its_failure(client, server):
    failed = Capture.failed_capture(Failure("ModuleNotFoundError", "No module named 'model'", "import",
                                            [Frame("model.py", 3, 0, "<module>")]), framework="jax")
    server.add_capture(failed, "broken")
    d = client.json("api/capture")
    assert d["failure"]["stage"] == "import" and d["failure"]["frames"][0]["line"] == 3
    assert client.json("api/children?group=-1")["items"] == []


# --------------------------------------------------------------------------- acting


def test_reveal_goes_to_the_editor_with_a_checked_absolute_path(client, hooks, workspace):
    status, body = client.post("api/reveal", {"frame": {"file": "model.py", "line": 12, "column": 4, "function": "net"}})
    assert body == {"handled": "editor"}
    assert hooks.revealed == [Frame(str((workspace / "model.py").resolve()), 12, 4, "net")]


def test_reveal_without_an_editor_returns_the_lines(client, hooks):
    hooks.editor = False
    _, body = client.post("api/reveal", {"frame": {"file": "model.py", "line": 12}})
    assert body["handled"] == "viewer"
    assert body["source"]["start_line"] == 2 and body["source"]["lines"][10] == "line 12"


def test_reveal_outside_the_workspace_is_refused_before_the_handler(client, hooks, workspace):
    for file in ("../secret.txt", str(workspace.parent / "secret.txt"), "escape.py", "/etc/passwd"):
        assert client.post("api/reveal", {"frame": {"file": file, "line": 1}}, expect=404)
    assert hooks.revealed == []
    assert client.post("api/reveal", {"frame": {"file": "model.py", "line": "1"}}, expect=400)
    assert client.post("api/reveal", {"frame": "model.py"}, expect=400)


def test_setup_profile_and_capture_hooks(client, hooks):
    assert client.json("api/setup")["profile"] == "jax_example"
    assert client.json("api/setup?profile=other")["profile"] == "other"
    assert client.post("api/profile", {"name": "p", "recipe": {"kind": "model"}})[1] == {"ok": True}
    _, body = client.post("api/profile", {"name": "p", "recipe": {"kind": "x"}})
    assert body == {"ok": False, "errors": [{"path": "kind", "message": "kind must be 'model'"}]}
    assert hooks.saved == [("p", {"kind": "model"}), ("p", {"kind": "x"})]
    assert client.post("api/profile", {"name": "", "recipe": {}}, expect=400)
    assert client.post("api/capture", {"profile": "p"})[1] == {"started": True}
    assert hooks.started == ["p"]
    _, body = client.post("api/capture", {"profile": "busy"}, expect=409)
    assert body == {"error": "a capture is already running", "started": False}


def test_open_a_dropped_graph_file(client, tmp_path):
    path = tmp_path / "g.tvg"
    graphfile.write(synthetic_capture(500), path)
    status, body = client.post("api/open?name=g.tvg", path.read_bytes(), ctype="application/octet-stream")
    assert body == {"id": 2}
    assert client.json("api/capture?capture=2")["counts"]["nodes"] == 500
    status, body = client.post("api/open", b"\x93garbage", ctype="application/octet-stream", expect=400)
    assert "not a TensorViz graph file" in body["error"]
    assert client.post("api/open", path.read_bytes(), ctype="application/json", expect=415)


# --------------------------------------------------------------------------- events


class EventStream:
    def __init__(self, server: ViewerServer) -> None:
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        self.sock.sendall(f"GET /{server.token}/api/events HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode())
        self.buf = b""

    def read_until(self, marker: bytes) -> bytes:
        while marker not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(self.buf)
            self.buf += chunk
        head, _, self.buf = self.buf.partition(marker)
        return head + marker

    def event(self) -> tuple[str, dict]:
        while True:
            block = self.read_until(b"\n\n").decode()
            lines = [ln for ln in block.splitlines() if ln and not ln.startswith(":")]
            if any(ln.startswith("event:") for ln in lines):
                name = next(ln for ln in lines if ln.startswith("event:"))[6:].strip()
                data = json.loads(next(ln for ln in lines if ln.startswith("data:"))[5:])
                return name, data

    def close(self, *, reset: bool = False) -> None:
        """``reset``: abort the connection (RST), as a browser tab killed mid-stream does."""
        if reset:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


def test_events_are_pushed_to_open_pages(server, client, monkeypatch):
    a, b = EventStream(server), EventStream(server)
    try:
        for stream in (a, b):
            head = stream.read_until(b"\r\n\r\n").decode()
            assert head.startswith("HTTP/1.1 200") and "text/event-stream" in head
            assert "access-control" not in head.lower()
            stream.read_until(b": connected\n\n")
        assert server.subscriber_count == 2
        server.publish("progress", {"message": "tracing", "fraction": 0.5})
        server.publish("stale", {"files": ["model.py"]})
        cid = server.add_capture(synthetic_capture(200), "fresh one")
        server.publish("capture-failed", {"message": "boom"})
        for stream in (a, b):
            assert stream.event() == ("progress", {"message": "tracing", "fraction": 0.5})
            assert stream.event() == ("stale", {"files": ["model.py"]})
            assert stream.event() == ("capture-ready", {"id": cid, "title": "fresh one"})
            assert stream.event() == ("capture-failed", {"message": "boom"})
        assert client.json("api/capture?capture=1")["stale"] == {"files": ["model.py"]}
        server.publish("fresh", {"capture": 1})
        assert a.event() == ("fresh", {"capture": 1})
        assert client.json("api/capture?capture=1")["stale"] is None
    finally:
        left = threading.Semaphore(0)
        unsubscribe = server._unsubscribe
        monkeypatch.setattr(server, "_unsubscribe", lambda q: (unsubscribe(q), left.release()))
        a.close(reset=True)
        b.close(reset=True)
    # A page that went away is dropped at the next write to it: this event, or at the
    # latest the keep-alive.
    server.publish("progress", {"message": "nobody listens"})
    assert left.acquire(timeout=2 * KEEPALIVE_SECONDS + 10) and left.acquire(timeout=2 * KEEPALIVE_SECONDS + 10)
    assert server.subscriber_count == 0


def test_stop_ends_event_streams(workspace, static):
    s = ViewerServer(static_dir=static)
    s.start()
    stream = EventStream(s)
    stream.read_until(b": connected\n\n")
    done = threading.Event()

    def drain():
        try:
            while stream.sock.recv(1024):
                pass
        except OSError:
            pass
        done.set()

    threading.Thread(target=drain, daemon=True).start()
    s.stop()
    assert done.wait(5), "the event stream stayed open after stop()"
    stream.close()
    with pytest.raises(ValueError):
        s.publish("Bad Name", {})


def test_real_static_folder_is_the_default():
    from viewer.server.app import STATIC_DIR

    s = ViewerServer()
    assert s.static_dir == STATIC_DIR and STATIC_DIR.name == "static" and os.path.isdir(STATIC_DIR)


# --------------------------------------------------------------------------- hostile clients (issue 17)


def test_a_burst_of_200_concurrent_requests_is_all_answered(client):
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int) -> int:
        return client.get("static/app.js" if i % 2 else "api/capture")[0]

    with ThreadPoolExecutor(max_workers=200) as pool:
        statuses = list(pool.map(one, range(200)))
    assert statuses == [200] * 200


def test_every_post_checks_the_origin_the_upload_too(client, tmp_path):
    path = tmp_path / "g.tvg"
    graphfile.write(synthetic_capture(50), path)
    evil = {"Origin": "https://evil.example"}
    status, _, _ = client.request("POST", "api/open?name=g.tvg", body=path.read_bytes(),
                                  headers={"Content-Type": "application/octet-stream", **evil})
    assert status == 403
    assert [c["id"] for c in client.json("api/captures")["captures"]] == [1]


def test_undecodable_paths_are_404_and_deep_json_is_400(client):
    assert client.get("static/%ff%fe")[0] == 404
    deep = b"[" * 100_000 + b"]" * 100_000
    status, _, body = client.request("POST", "api/reveal", body=deep, headers={"Content-Type": "application/json"})
    assert status == 400 and b"not valid JSON" in body


def test_only_the_newest_uploads_are_held(client, server, tmp_path, monkeypatch):
    # Bounded by the uploads' estimated memory (issue 29 item 8, issue 39 item 3), not by
    # their number: here room for four files of this size.
    from viewer.server import app

    path = tmp_path / "g.tvg"
    graphfile.write(synthetic_capture(50), path)
    monkeypatch.setattr(app, "MAX_HELD_UPLOAD_MEMORY", 4 * app.held_upload_bytes(path.stat().st_size) + 10)
    ids = [client.post("api/open?name=g.tvg", path.read_bytes(), ctype="application/octet-stream")[1]["id"]
           for _ in range(4 + 2)]
    held = [c["id"] for c in client.json("api/captures")["captures"]]
    assert held == [1] + ids[2:]  # the capture the server was given stays; two oldest uploads released
    assert client.json(f"api/capture?capture={ids[0]}", expect=404)


def test_uploads_are_held_by_bytes_not_by_count(client, server, tmp_path, monkeypatch):
    from viewer.server import app

    small, large = tmp_path / "small.tvg", tmp_path / "large.tvg"
    graphfile.write(synthetic_capture(20), small)
    graphfile.write(synthetic_capture(4000), large)
    monkeypatch.setattr(app, "MAX_HELD_UPLOAD_MEMORY",
                        app.held_upload_bytes(large.stat().st_size) + 3 * app.held_upload_bytes(small.stat().st_size))

    def upload(path):
        return client.post(f"api/open?name={path.name}", path.read_bytes(), ctype="application/octet-stream")[1]["id"]

    smalls = [upload(small) for _ in range(12)]  # many small files fit where four large ones would not
    held = {c["id"] for c in client.json("api/captures")["captures"]}
    assert len(held & set(smalls)) >= 4
    big = upload(large)
    held = [c["id"] for c in client.json("api/captures")["captures"]]
    assert big in held and len(set(held) & set(smalls)) == 3  # the large one pushed the older small ones out
    alone = upload(large)
    alone2 = upload(large)  # over the bound alone: the newest is still held, nothing else uploaded
    held = [c["id"] for c in client.json("api/captures")["captures"]]
    assert held == [1, alone2] and alone not in held


def test_many_small_uploads_are_bounded_by_what_they_hold(client, server, tmp_path, monkeypatch):
    """Issue 39 item 3: 3,000 uploads of 14 KB were all held (42 MB of files, under the
    old bound of 128 MiB of files) and took 453 MB: each held upload is counted for its
    decoded capture and index (a multiple of its bytes) and for what any capture costs."""
    from viewer.server import app

    small = tmp_path / "small.tvg"
    graphfile.write(synthetic_capture(20), small)
    size = small.stat().st_size
    assert app.held_upload_bytes(size) >= app.HELD_BYTES_PER_FILE_BYTE * size + app.HELD_BYTES_PER_CAPTURE
    assert app.HELD_BYTES_PER_FILE_BYTE * size < app.HELD_BYTES_PER_CAPTURE  # the per-capture cost dominates
    monkeypatch.setattr(app, "MAX_HELD_UPLOAD_MEMORY", 10 * app.held_upload_bytes(size))
    ids = [client.post("api/open?name=small.tvg", small.read_bytes(), ctype="application/octet-stream")[1]["id"]
           for _ in range(30)]
    held = [c["id"] for c in client.json("api/captures")["captures"]]
    assert held == [1] + ids[-10:]
