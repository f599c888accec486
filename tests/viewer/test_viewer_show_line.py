"""``api/line`` (a source line's calls, keys and item paths) and the open pages counted per
capture, on the checked-in Flax Linen ResNet-18 capture (its frames name the user's lines)."""

from __future__ import annotations

import http.client
import json
import socket
import time
from pathlib import Path

import pytest

from capture.graph import graphfile
from capture.graph.model import Capture, Failure
from viewer.server.app import ViewerServer

REAL = Path(__file__).resolve().parent / "real_models"


def line_no(text: str) -> int:
    src = (REAL / "resnet18_linen.py").read_text().splitlines()
    return next(i for i, line in enumerate(src, 1) if line.strip().startswith(text))


@pytest.fixture
def server():
    cap = graphfile.read(REAL / "captures" / "resnet18_linen.tvg")
    s = ViewerServer([(cap, "resnet")], workspace=REAL)
    s.start()
    yield s
    s.stop()


def get(s: ViewerServer, path: str) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    try:
        conn.request("GET", f"/{s.token}/{path}", headers={"Host": f"127.0.0.1:{s.port}"})
        res = conn.getresponse()
        return res.status, json.loads(res.read() or b"null")
    finally:
        conn.close()


def test_api_line_answers_every_call_with_keys_and_paths(server):
    n = line_no("x = self.block_cls(")
    status, body = get(server, f"api/line?capture=1&file=resnet18_linen.py&line={n}")
    assert status == 200, body
    assert body["file"] == "resnet18_linen.py" and body["line"] == n
    assert body["calls_total"] == 8 and len(body["calls"]) == 8
    idx = server.lines(1)
    entry = idx.at("resnet18_linen.py", n)
    for call, want in zip(body["calls"], entry.calls):
        assert call["keys"] == want.keys() and len(call["keys"]) == 1 and call["keys"][0].startswith("g")
        assert call["ops"] == want.ops > 0
        # a group's path ends with the group: its ancestors are what to open
        key = call["keys"][0]
        assert call["paths"][key][-1] == key
    # the blocks are different groups, in program order, named as the model names them
    assert len({c["keys"][0] for c in body["calls"]}) == 8
    assert [c["where"] for c in body["calls"]] == [f"ResNetBlock_{i}" for i in range(8)]
    # an op line: node keys whose paths are api/node's item_path
    conv = line_no("y = self.conv(self.filters, (3, 3), self.strides)")
    status, body = get(server, f"api/line?file=/any/where/resnet18_linen.py&line={conv}")
    assert status == 200 and body["calls_total"] == 8
    assert body["calls"][2]["where"] == "ResNetBlock_2.Conv_0"  # the module the line called
    ret = line_no("return self.act(residual + y)")
    _, body_ret = get(server, f"api/line?file=resnet18_linen.py&line={ret}")
    assert body_ret["calls"][1]["where"] == "ResNetBlock_1"  # ops of its own: the block it ran in
    for key, path in body["calls"][0]["paths"].items():
        if key.startswith("n"):
            _, node = get(server, f"api/node?id={key[1:]}")
            assert node["item_path"] == path


def test_api_line_refuses_what_did_not_run(server):
    status, body = get(server, "api/line?file=resnet18_linen.py&line=1")
    assert status == 404 and "resnet18_linen.py:1 produced nothing" in body["error"]
    assert get(server, "api/line?file=other.py&line=3")[0] == 404
    assert get(server, "api/line?file=resnet18_linen.py")[0] == 400
    assert get(server, "api/line?file=resnet18_linen.py&line=x")[0] == 400
    failed = server.add_capture(Capture.failed_capture(Failure("ValueError", "boom", stage="trace")))
    status, body = get(server, f"api/line?capture={failed}&file=resnet18_linen.py&line=5")
    assert status == 404 and "failed" in body["error"]


class Page:
    """An open page's event channel (``api/events?capture=...``)."""

    def __init__(self, s: ViewerServer, capture: int | None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        q = f"?capture={capture}" if capture is not None else ""
        self.sock.sendall(f"GET /{s.token}/api/events{q} HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\n\r\n".encode())
        buf = b""
        while b": connected" not in buf:
            buf += self.sock.recv(4096)

    def close(self) -> None:
        self.sock.close()


def wait(pred, timeout: float = 40) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return False


def test_pages_are_counted_per_capture(server):
    cap = graphfile.read(REAL / "captures" / "resnet18_linen.tvg")
    assert server.pages(1) == 0
    one = Page(server, 1)
    newest = Page(server, None)
    assert server.pages(1) == 2  # capture 1 is the newest: the page without one shows it
    two = server.add_capture(cap, "again")
    # the page without ?capture= still shows what it loaded (it offers the new one)
    assert server.pages(1) == 2 and server.pages(two) == 0
    later = Page(server, None)
    assert server.pages(two) == 1
    # a background recapture of capture 1: its pages now show the new capture
    three = server.add_capture(cap, "recaptured", replaces=1)
    assert server.pages(1) == 0 and server.pages(three) == 2 and server.pages(two) == 1
    for page in (one, newest, later):
        page.close()
    server.publish("progress", {"message": "anyone?"})  # a closed page is dropped at its next write
    assert wait(lambda: server.pages(three) == 0 and server.pages(two) == 0), (server.pages(three), server.pages(two))
    bad = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    bad.request("GET", f"/{server.token}/api/events?capture=x", headers={"Host": f"127.0.0.1:{server.port}"})
    assert bad.getresponse().status == 400
    bad.close()
