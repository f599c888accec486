"""Worker messages: length-prefixed msgpack frames over pipes.

A frame is a 4-byte big-endian length, then that many bytes of one msgpack map.

Parent -> worker (stdin, one frame)::

    {"protocol": 1, "action": "capture" | "probe_device",
     "workspace": "/abs/root", "recipe": Recipe.to_dict(), "limits": Limits.to_dict()}

Worker -> parent (a dedicated pipe, never stdout, which user code may print to)::

    {"kind": "progress", "message": str, "fraction": float | None}     # any number
    {"kind": "result", "graph": bytes}        # a capture.graph.graphfile-encoded Capture
    {"kind": "failure", "failure": failure_json(...), "sources": [[path, sha256], ...],
     "framework": str, "framework_version": str}
    {"kind": "device_ok"}                     # answer to "probe_device"

Exactly one of result / failure / device_ok ends the stream.

The warm worker (:mod:`capture.worker.zygote`, parent side :mod:`capture.session.warm`) reads
such requests one after another on its stdin, plus ``{"action": "preload", ...}``, and
answers each capture through a forked child with the same messages, framed by
``{"kind": "forked", "pid"}`` first and, from the resident process after the child
ended, ``{"kind": "exited", "pid", "code"}``; a successful child also sends
``{"kind": "modules", "names"}`` before its result. The parent ignores kinds it does not
know, so the one-shot conversation code serves both.
"""

from __future__ import annotations

import struct
from typing import Any, BinaryIO, Iterator

import msgpack

PROTOCOL_VERSION = 1
_HEADER = struct.Struct(">I")
MAX_CONTROL_FRAME = 16 * 1024 * 1024  # request, progress, failure


class ProtocolError(Exception):
    pass


def encode_frame(message: dict[str, Any]) -> bytes:
    body = msgpack.packb(message, use_bin_type=True)
    if len(body) >= 1 << 32:
        raise ProtocolError(f"message of {len(body):,} bytes does not fit a frame")
    return _HEADER.pack(len(body)) + body


def decode_message(body: bytes, *, max_bytes: int) -> dict[str, Any]:
    try:
        msg = msgpack.unpackb(
            body,
            raw=False,
            strict_map_key=True,
            max_bin_len=max_bytes,
            max_str_len=min(max_bytes, MAX_CONTROL_FRAME),
            max_ext_len=0,
        )
    except Exception as exc:  # msgpack raises several types for garbage
        raise ProtocolError(f"undecodable message ({type(exc).__name__})") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("kind", msg.get("action")), str):
        raise ProtocolError("a message is a map with a kind")
    return msg


def read_frame(stream: BinaryIO, *, max_bytes: int = MAX_CONTROL_FRAME) -> dict[str, Any]:
    """One frame from a blocking stream (the worker reading its request)."""
    header = _read_exact(stream, _HEADER.size)
    (size,) = _HEADER.unpack(header)
    if size > max_bytes:
        raise ProtocolError(f"frame of {size:,} bytes is over the {max_bytes:,}-byte limit")
    return decode_message(_read_exact(stream, size), max_bytes=max_bytes)


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise ProtocolError("the stream ended inside a frame")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class FrameReader:
    """Incremental frames from non-blocking reads (the parent's side)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buf = bytearray()

    def feed(self, data: bytes) -> Iterator[dict[str, Any]]:
        self._buf += data
        while len(self._buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buf)
            if size > self.max_bytes:
                raise ProtocolError(f"the worker sent a {size:,}-byte message, over the {self.max_bytes:,}-byte limit")
            if len(self._buf) < _HEADER.size + size:
                return
            body = bytes(self._buf[_HEADER.size : _HEADER.size + size])
            del self._buf[: _HEADER.size + size]
            yield decode_message(body, max_bytes=self.max_bytes)

    @property
    def pending(self) -> int:
        return len(self._buf)
