"""Turning a file's bytes into source text, or into an error entry saying why not."""

from __future__ import annotations

import codecs

from .parsing import MAX_SOURCE_CHARS
from .positions import LineIndex, Position, Range
from .results import DiscoveryError


def read_source(path: str) -> str | DiscoveryError:
    try:
        with open(path, "rb") as handle:
            # Read one byte past the limit: enough to know the file is too large
            # without loading a multi-gigabyte file into memory.
            data = handle.read(MAX_SOURCE_CHARS * 4 + 1)
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
