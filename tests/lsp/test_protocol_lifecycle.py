"""The real server on a raw pipe (issue 29 items 1 and 10): JSON nested deeper than the
decoder can follow is answered with a parse error and the server reads on; the life cycle
LSP prescribes holds (nothing before ``initialize``, one ``initialize``, nothing after
``shutdown`` but ``exit``)."""

from __future__ import annotations

import json

import pytest

from .test_framing import Wire, frame, hover, wire  # noqa: F401  (wire: the fixture)

# An unanswered request blocks the read: fail after a while instead of at pytest's 300 s.
pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

HOVER = {"textDocument": {"uri": "file:///nowhere/x.py"}, "position": {"line": 0, "character": 0}}
PARSE_ERROR, INVALID_REQUEST, NOT_INITIALIZED = -32700, -32600, -32002


def command(msg_id: int, argument: str) -> bytes:
    """An executeCommand request whose one argument is ``argument`` (raw JSON text)."""
    return ('{"jsonrpc": "2.0", "id": %d, "method": "workspace/executeCommand", '
            '"params": {"command": "tensorviz.nosuch", "arguments": [%s]}}' % (msg_id, argument)).encode()


def still_serving(wire: Wire, msg_id: int = 90) -> None:
    wire.send(frame(hover(msg_id, HOVER)))
    assert wire.response(msg_id) == {"jsonrpc": "2.0", "id": msg_id, "result": None}


@pytest.mark.parametrize("body, answered_id", [
    pytest.param(b"[" * 1000 + b"]" * 1000, None, id="1000-arrays"),  # the probe's message
    pytest.param(b"[" * 200_000 + b"]" * 200_000, None, id="200k-arrays"),
    pytest.param(b'{"a":' * 100_000 + b"1" + b"}" * 100_000, None, id="100k-objects"),
    pytest.param(command(41, "[" * 981 + "]" * 981), 41, id="981-levels-in-params"),  # the probe's other one
    pytest.param(command(42, '{"x": ' * 5000 + "null" + "}" * 5000), 42, id="5000-objects-in-params"),
    pytest.param(b'{"jsonrpc": "2.0", "method": "textDocument/didChange", "params": ' + b"[" * 3000 + b"]" * 3000
                 + b"}", None, id="3000-levels-in-a-notification"),
])
def test_deeply_nested_json_gets_a_parse_error_and_the_server_reads_on(wire, body, answered_id):
    wire.send(frame(body))
    reply = wire.read()
    while "method" in reply:  # the server's log notifications
        reply = wire.read()
    assert reply["id"] == answered_id and reply["error"]["code"] == PARSE_ERROR, reply
    assert "nested too deeply" in reply["error"]["message"]
    assert wire.proc.poll() is None, wire.proc.stderr.read().decode()
    still_serving(wire)


def test_nesting_the_decoder_follows_still_reaches_the_method(wire):
    # 500 levels decode: the command is looked up and refused by name, not as a parse error.
    wire.send(frame(command(43, "[" * 500 + "]" * 500)))
    reply = wire.response(43)
    assert reply["error"]["code"] != PARSE_ERROR and "tensorviz.nosuch" in reply["error"]["message"]
    still_serving(wire)


def test_a_request_before_initialize_gets_server_not_initialized(tmp_path):
    wire = Wire(tmp_path, initialize=False)
    try:
        wire.send(frame(hover(1, HOVER)))
        assert wire.response(1)["error"]["code"] == NOT_INITIALIZED
        # Its params do not even fit: the life cycle still comes first.
        wire.send(frame(hover(2, {"textDocument": {}})))
        assert wire.response(2)["error"]["code"] == NOT_INITIALIZED
        wire.send(frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}))
        assert wire.response(3)["error"]["code"] == NOT_INITIALIZED
        wire.initialize(tmp_path, msg_id=4)  # and initialize still works afterwards
        still_serving(wire)
    finally:
        wire.close()


def test_a_second_initialize_is_an_invalid_request(wire, tmp_path):
    wire.send(frame({"jsonrpc": "2.0", "id": 5, "method": "initialize",
                     "params": {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}}))
    reply = wire.response(5)
    assert reply["error"]["code"] == INVALID_REQUEST and "initialize" in reply["error"]["message"]
    still_serving(wire)


def test_requests_after_shutdown_and_a_second_shutdown_are_invalid_requests(wire):
    wire.send(frame({"jsonrpc": "2.0", "id": 6, "method": "shutdown"}))
    assert wire.response(6) == {"jsonrpc": "2.0", "id": 6, "result": None}
    for msg_id, message in ((7, {"jsonrpc": "2.0", "id": 7, "method": "shutdown"}),
                            (8, hover(8, HOVER)),
                            (9, hover(9, 5)),  # params that do not fit: still "shutting down"
                            (10, json.loads(command(10, "1")))):
        wire.send(frame(message))
        reply = wire.response(msg_id)
        assert reply["error"]["code"] == INVALID_REQUEST and "shutdown" in reply["error"]["message"], reply
    wire.send(frame({"jsonrpc": "2.0", "method": "exit"}))
    assert wire.proc.wait(timeout=30) == 0
