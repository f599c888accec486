"""A failure's message cut to what a person reads.

An exception's text can be pages long: PyTorch's "Could not run 'aten::equal' with
arguments from the 'SparseCPU' backend" is followed by 45 lines of dispatcher
registrations, XLA errors carry whole HLO dumps. The failure record keeps the text whole
(``tensorviz inspect FILE.tvg`` prints it); what a terminal, a diagnostic or the
viewer's failure page shows first is :func:`readable_message`: the first paragraph, at
most :data:`MAX_LINES` lines and about :data:`MAX_CHARS` characters; a longer paragraph
is cut after its first sentence where there is one. Standard library only (part of ``capture``); the viewer
receives the cut text from the server, never cuts it again in the browser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Lines of the first paragraph shown at most.
MAX_LINES = 6
#: Characters shown at most (a longer first sentence is cut at a word).
MAX_CHARS = 400

_SENTENCE_END = re.compile(r"[.!?](?=\s)")


@dataclass(frozen=True, slots=True)
class Readable:
    """``text``: what to show; ``cut``: whether the message had more (then ``lines``
    and ``chars`` say how much there was in all)."""

    text: str
    cut: bool
    lines: int
    chars: int


def readable_message(message: str, *, max_lines: int = MAX_LINES, max_chars: int = MAX_CHARS) -> Readable:
    """The part of ``message`` a person reads first (see the module docstring)."""
    full = (message or "").strip()
    all_lines = full.splitlines()
    first: list[str] = []
    for line in all_lines:
        if not line.strip():
            if first:
                break
            continue
        first.append(line.rstrip())
        if len(first) >= max_lines:
            break
    text = "\n".join(first)
    if len(text) > max_chars:
        head = text[:max_chars]
        # The first sentence says what went wrong; what follows a long one is detail.
        ends = [m.end() for m in _SENTENCE_END.finditer(head) if m.end() >= 40]
        if ends:
            text = head[: ends[0]]
        else:
            space = head.rfind(" ")
            text = head[: space if space >= 40 else max_chars]
    text = text.rstrip()
    cut = text != full
    if cut:
        text += " …"
    return Readable(text=text, cut=cut, lines=len(all_lines), chars=len(full))


def cut_note(readable: Readable, where: str) -> str:
    """``the whole message (47 lines): WHERE`` for a cut message, else empty."""
    if not readable.cut:
        return ""
    size = f"{readable.lines} lines" if readable.lines > 1 else f"{readable.chars:,} characters"
    return f"the whole message ({size}): {where}"
