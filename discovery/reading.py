"""Turning a file's bytes into source text, or into an error entry saying why not."""

from __future__ import annotations

import codecs

import safe_read

from .parsing import MAX_SOURCE_CHARS
from .positions import LineIndex, Position, Range
from .results import DiscoveryError


def read_source(path: str, workspace: str | None = None) -> str | DiscoveryError:
    """The source text of ``path``, or why not. A FIFO, device or socket is refused
    without waiting on it; given ``workspace``, so is a file whose links lead out of it."""
    try:
        # Four bytes per character at most: a file over that cannot be under the limit.
        data = safe_read.read_bytes(path, workspace=workspace, max_bytes=MAX_SOURCE_CHARS * 4)
    except safe_read.TooLarge as exc:
        return DiscoveryError("too_large", f"{exc.strerror}; not parsed", _origin())
    except OSError as exc:
        return DiscoveryError("unreadable", f"cannot read file: {exc.strerror or exc}", _origin())
    return decode_source(data)


def decode_source(data: bytes) -> str | DiscoveryError:
    if b"\x00" in data[:8192]:
        return DiscoveryError("binary", "file contains NUL bytes; not Python source", _origin())
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Point at the offending byte: the line, and the characters before it.
        before = data[: exc.start]
        line = before.count(b"\n")
        line_start = before.rfind(b"\n") + 1
        prefix = before[line_start:].decode("utf-8", "replace")
        start = LineIndex(prefix).position(0, len(prefix))
        position = Position(line, start.character)
        return DiscoveryError(
            "not_utf8",
            f"file is not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            Range(position, Position(line, position.character + 1)),
        )


def _origin() -> Range:
    return Range.at(Position(0, 0))
