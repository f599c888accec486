"""What the ``tensorviz`` command prints reaches a terminal: strings from graph files,
recipes and the model's output must not drive it.

A graph file can hold any text (a model name, a group, a failure message): printed raw,
``\\x1b]0;…\\x07`` retitles the window, OSC 52 (``\\x1b]52;c;…\\x07``) writes the clipboard
and ``\\r\\x1b[K`` erases what was printed before. Every C0 control character but tab and
newline, DEL and every C1 character (``\\x80``-``\\x9f``: a terminal may read ``\\x9b`` as
CSI) is printed escaped as ``\\xNN`` (``\\x1b``, ``\\x0d``).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator, TextIO

_CONTROLS = [c for c in range(0x20) if chr(c) not in "\t\n"] + [0x7F] + list(range(0x80, 0xA0))
_ESCAPES = {c: f"\\x{c:02x}" for c in _CONTROLS}


def printable(text: str) -> str:
    """``text`` with its terminal control characters escaped (tab and newline kept)."""
    return text.translate(_ESCAPES)


class _EscapingStream:
    """A text stream whose ``write`` escapes control characters; the rest is the stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(printable(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def escaped_output() -> Iterator[None]:
    """While inside: everything printed to ``sys.stdout`` and ``sys.stderr`` is escaped.
    (Bytes written to their ``buffer`` are not: the language server's protocol.)"""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _EscapingStream(out), _EscapingStream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
