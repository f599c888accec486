"""Slow clients cannot exhaust the viewer (issue 29 item 7, slowloris): a connection
gets a deadline to send its request, the open connections are capped, and over the cap
a slow one gives way to a new one, so a real request is still answered; event streams
being answered are never cut."""

from __future__ import annotations

import http.client
import socket
import time

import pytest
from viewer_fixtures import tiny_capture

from viewer.server.app import ViewerServer


def _slow(port: int, sent: bytes = b"GET / HTTP/1.1\r\nHost: 127.0.0.1:") -> socket.socket:
    """A connection that has sent part of its headers and then nothing."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(sent)
    return s


def _closed_by_server(s: socket.socket, within: float) -> bool:
    s.settimeout(within)
    try:
        while True:
            data = s.recv(4096)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def _get(server: ViewerServer, path: str, timeout: float = 10) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        conn.request("GET", f"/{server.token}/{path}", headers={"Host": f"127.0.0.1:{server.port}"})
        res = conn.getresponse()
        res.read()
        return res.status
    finally:
        conn.close()


@pytest.fixture
def server():
    s = ViewerServer([tiny_capture()])
    s.connections.read_deadline_s = 1.0
    s.connections.max_connections = 16
    with s:
        yield s


@pytest.mark.parametrize("sent", [b"G", b"GET / HTTP/1.1\r\nHost: 127.0.0.1:", b""], ids=["request-line", "headers", "nothing"])
def test_a_request_fed_slowly_is_cut_at_the_deadline(server, sent):
    """One byte every 0.2 s, never idle long enough for a per-read timeout: the server cuts
    the connection (its whole-request deadline is 1 s here), the client never gives up.
    How long it is held: benchmarks/bench_hostile.py."""
    s = _slow(server.port, sent)
    cut = False
    try:
        for _ in range(300):  # 60 s of bytes: only a hang guard, the deadline is 1 s
            try:
                s.sendall(b"X")
            except OSError:
                cut = True
                break
            if _closed_by_server(s, 0.2):
                cut = True
                break
        assert cut, "a byte-a-time request was held for 60 s"
    finally:
        s.close()


def test_a_slow_body_is_cut_at_the_deadline(server):
    head = (f"POST /{server.token}/api/open HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            "Content-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\n").encode()
    s = _slow(server.port, head)
    try:
        assert _closed_by_server(s, 4), "a body that never arrives held its connection"
    finally:
        s.close()


def test_many_slow_connections_leave_room_for_a_real_request(server):
    slow = [_slow(server.port) for _ in range(60)]  # far over the cap of 16
    try:
        time.sleep(0.2)
        assert server.connections.open_count <= 16
        # Answered at all (the slow ones would hold it until the 10 s client timeout); how
        # fast, beside a calm server: benchmarks/bench_hostile.py's slowloris.
        assert _get(server, "api/captures") == 200
        assert server.connections.evicted >= 60 - 16
    finally:
        for s in slow:
            s.close()


def _stream(server: ViewerServer) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", f"/{server.token}/api/events", headers={"Host": f"127.0.0.1:{server.port}"})
    res = conn.getresponse()
    assert res.status == 200
    assert res.readline() == b"retry: 3000\n"
    return conn, res


def _ended(res: http.client.HTTPResponse) -> bool:
    """Whether the server ended this stream (end of file, or a reset)."""
    sock = socket.socket(fileno=res.fileno())
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False  # open, nothing to read now
    except ConnectionResetError:
        return True
    finally:
        sock.detach()


def test_event_streams_are_not_cut_at_the_read_deadline(server):
    streams = [_stream(server) for _ in range(2)]
    try:
        time.sleep(1.6)  # past the read deadline: streams are being answered, not read
        assert server.connections.stream_count == 2
        assert not any(_ended(res) for _, res in streams)
    finally:
        for conn, _ in streams:
            conn.close()


def test_a_full_server_says_503_when_every_connection_is_being_answered():
    from viewer.server.connections import ConnectionGuard

    guard = ConnectionGuard(max_connections=2)
    a, b, c = object(), object(), object()
    assert guard.admit(a) and guard.admit(b)
    guard.answering(a)
    guard.answering(b)
    assert not guard.admit(c)
    guard.closed(a)
    assert guard.admit(c)


def test_event_streams_have_their_own_bound_and_the_oldest_gives_way(server):
    """Issue 39 item 4: 128 open event streams made every request, the page included,
    answer 503 (until about 13 s after they closed). Streams are counted apart from the
    connections that serve pages and API calls (16 here), at most ``max_streams`` (4
    here), and a new stream ends the oldest."""
    server.connections.max_streams = 4
    streams = []
    try:
        for _ in range(24):  # more than the connection cap as well
            streams.append(_stream(server))
        assert _get(server, "") == 200  # the page
        assert _get(server, "api/captures") == 200
        assert server.connections.stream_count == 4
        assert server.connections.evicted_streams == 20
        deadline = time.monotonic() + 5
        while not all(_ended(res) for _, res in streams[:20]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [_ended(res) for _, res in streams] == [True] * 20 + [False] * 4
    finally:
        for conn, _ in streams:
            conn.close()


def test_a_closed_page_frees_its_stream_at_once(server):
    streams = [_stream(server) for _ in range(3)]
    assert server.connections.stream_count == 3
    for conn, res in streams:
        res.close()
        conn.close()
    deadline = time.monotonic() + 5
    while server.connections.stream_count and time.monotonic() < deadline:
        time.sleep(0.05)
    # Noticed within about a second (it took the 15 s keep-alive before), not at the next event.
    assert server.connections.stream_count == 0
    assert server.subscriber_count == 0
