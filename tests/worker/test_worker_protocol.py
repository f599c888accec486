"""Frames between parent and worker, read defensively."""

from __future__ import annotations

import io
import struct

import msgpack
import pytest

from capture.worker.protocol import FrameReader, ProtocolError, encode_frame, read_frame


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
