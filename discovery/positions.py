"""LSP positions: 0-based lines, characters counted in UTF-16 code units.

LSP's default position encoding is UTF-16, while Python counts code points (and
``ast`` counts UTF-8 bytes), so every column that leaves discovery goes through
:class:`LineIndex`, which converts on the few lines that are not plain ASCII.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# The line breaks LSP recognises; ``str.splitlines`` also splits on form feeds
# and Unicode separators, which would disagree with every editor.
LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class Position:
    line: int
    character: int

    def to_json(self) -> dict[str, int]:
        return {"line": self.line, "character": self.character}


@dataclass(frozen=True, slots=True)
class Range:
    start: Position
    end: Position

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start.to_json(), "end": self.end.to_json()}

    @classmethod
    def at(cls, position: Position) -> Range:
        return cls(position, position)


def utf16_length(text: str) -> int:
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le")) // 2


class LineIndex:
    """The lines of one source text, split the way LSP splits them."""

    def __init__(self, text: str) -> None:
        self.lines: list[str] = LINE_BREAK.split(text)

    def line(self, line: int) -> str:
        """The text of 0-based ``line`` without its line break ('' past the end)."""
        if 0 <= line < len(self.lines):
            return self.lines[line]
        return ""

    def position(self, line: int, codepoint_column: int) -> Position:
        """A position from a column counted in code points."""
        text = self.line(line)
        return Position(line, utf16_length(text[: max(codepoint_column, 0)]))

    def position_from_utf8(self, line: int, byte_column: int) -> Position:
        """A position from a column counted in UTF-8 bytes, as ``ast`` reports."""
        text = self.line(line)
        if text.isascii():
            return Position(line, min(max(byte_column, 0), len(text)))
        prefix = text.encode("utf-8")[: max(byte_column, 0)].decode("utf-8", "replace")
        return Position(line, utf16_length(prefix))

    def end_of_line(self, line: int) -> Position:
        """After the last non-blank character of ``line``."""
        return Position(line, utf16_length(self.line(line).rstrip()))
