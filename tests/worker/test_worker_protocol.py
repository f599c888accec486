"""Frames between parent and worker, read defensively."""

from __future__ import annotations

import io
import struct

import msgpack
import pytest

from capture.graph.model import Failure
from capture.worker.protocol import (
    DETAILS,
    FINAL_KINDS,
    MESSAGES,
    FrameReader,
    ProtocolError,
    check_message,
    encode_frame,
    environment_needed,
    inputs_needed,
    missing_dependencies,
    read_frame,
    unsupported_version,
)


def test_frames_split_anywhere_are_reassembled():
    data = b"".join(encode_frame({"kind": "progress", "message": f"m{i}", "fraction": i / 10}) for i in range(5))
    reader = FrameReader(1 << 20)
    out = []
    for i in range(0, len(data), 3):
        out += list(reader.feed(data[i : i + 3]))
    assert [m["message"] for m in out] == [f"m{i}" for i in range(5)]
    assert reader.pending == 0


@pytest.mark.parametrize(
    "data, problem",
    [
        pytest.param(struct.pack(">I", 1 << 30), "over the", id="oversized"),
        pytest.param(struct.pack(">I", 3) + b"\xc1\xc1\xc1", "undecodable", id="garbage"),
        pytest.param(struct.pack(">I", 1) + msgpack.packb(5), "map with a kind", id="not-a-map"),
    ],
)
def test_bad_frames_raise_protocol_error(data, problem):
    with pytest.raises(ProtocolError, match=problem):
        list(FrameReader(1 << 20).feed(data))


def test_blocking_read_of_a_truncated_request():
    frame = encode_frame({"action": "capture"})
    assert read_frame(io.BytesIO(frame)) == {"action": "capture"}
    with pytest.raises(ProtocolError, match="ended inside a frame"):
        read_frame(io.BytesIO(frame[:-1]))


# -- typed messages: what the parent accepts ------------------------------------------


@pytest.mark.parametrize(
    "message, problem",
    [
        pytest.param({"kind": "progress", "message": "m", "fraction": None}, None, id="progress"),
        pytest.param({"kind": "progress", "message": "m"}, "lacks 'fraction'", id="progress-no-fraction"),
        pytest.param({"kind": "progress", "message": 3, "fraction": 0.5}, "int for 'message'", id="progress-number"),
        pytest.param({"kind": "result", "graph": "text"}, "str for 'graph'", id="result-not-bytes"),
        pytest.param({"kind": "exited", "pid": 7, "code": -9}, None, id="exited"),
        pytest.param({"kind": "exited", "pid": 7, "code": 0, "escaped": [{"pid": 8}]}, "list for 'escaped'",
                     id="exited-bad-escaped"),
        pytest.param({"kind": "failure", "failure": {"type": "E", "message": "m", "stage": "trace", "frames": [],
                                                     "details": {}},
                      "sources": [["model.py", "ab"]], "framework": "jax", "framework_version": ""}, None, id="failure"),
        pytest.param({"kind": "failure", "failure": {"type": "E", "message": "m"}, "sources": [], "framework": "",
                      "framework_version": ""}, "dict for 'failure'", id="failure-incomplete"),
    ],
)
def test_messages_are_checked_against_their_kind(message, problem):
    if problem is None:
        assert check_message(message) == message
    else:
        with pytest.raises(ProtocolError, match=problem):
            check_message(message)


def test_a_kind_this_side_does_not_know_is_ignored():
    assert check_message({"kind": "from-a-newer-worker", "x": 1}) is None


def test_every_kind_has_a_type_and_the_final_kinds_are_kinds():
    assert FINAL_KINDS <= set(MESSAGES)
    assert set(DETAILS) == {"trust", "source", "interpreter", "dependencies", "device", "recipe", "import",
                            "checkpoint", "fixture", "trace", "limit", "deadline", "crash", "cancelled", "internal"}


# -- typed failure details: each reader reads its own kind only ---------------------

NEED = {"section": "inputs", "input": "args[0]", "path": "profiles.p.inputs.args[0]", "axis": 0, "name": "batch",
        "shape": ["batch", 3], "dtype": "float32"}
OLD_TORCH = Failure("UnsupportedVersion", "PyTorch 2.1.2 is not supported", stage="dependencies",
                    details={"package": "torch", "found": "2.1.2", "needed": ">=2.13", "python": "/py"})
MISSING = Failure("MissingDependencies", "missing jax", stage="dependencies",
                  details={"missing": ["jax"], "python": "/py", "install": ["/py", "-m", "pip", "install", "jax"]})
NEEDS = Failure("InputsNeeded", "unknown input dimensions", stage="recipe", details={"needs": [NEED]})
X64 = Failure("CaptureError", "float64 needs JAX_ENABLE_X64=1", stage="recipe",
              details={"paths": ["inputs.args[0]"], "dtype": "float64", "environment": {"JAX_ENABLE_X64": "1"}})


@pytest.mark.parametrize(
    "failure, needs, missing, unsupported, environment",
    [
        # The bug of issue 27: a version requirement read as input dimensions.
        pytest.param(OLD_TORCH, [], None, ("torch", "2.1.2", ">=2.13"), {}, id="unsupported-torch"),
        pytest.param(MISSING, [], ["jax"], None, {}, id="missing"),
        pytest.param(NEEDS, [NEED], None, None, {}, id="inputs-needed"),
        pytest.param(X64, [], None, None, {"JAX_ENABLE_X64": "1"}, id="environment"),
        pytest.param(Failure("CaptureError", "m", stage="trace", details={"needs": [NEED], "missing": ["x"],
                                                                            "environment": {"A": "1"}}),
                     [], None, None, {}, id="another-kind-with-those-keys"),
        pytest.param(Failure("InputsNeeded", "m", stage="recipe", details={"needs": ">=2.13"}), [], None, None, {},
                     id="needs-not-a-list"),
    ],
)
def test_failure_details_are_read_by_kind(failure, needs, missing, unsupported, environment):
    assert inputs_needed(failure) == needs
    got = missing_dependencies(failure)
    assert (got["missing"] if got else None) == missing
    version = unsupported_version(failure)
    assert ((version["package"], version["found"], version["needed"]) if version else None) == unsupported
    assert environment_needed(failure) == environment
