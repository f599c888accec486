"""Reading XLA's HLO text: the grammar both readers of a compiled module share.

:mod:`capture.jax.compiled` reads a compiled module's collectives and every instruction's
per-device shape; :mod:`capture.jax.xla_flops` costs its instructions one by one. Both read
the same lines: an instruction's head (``ROOT %name = TYPE op(operands), attrs``), its array
types, the ``op_name`` and ``stack_frame_id`` of its metadata and the module's frame tables,
an operand's instruction, the computations of the module. This module holds that grammar,
once; the regular expressions and rules are those the two readers had.

Standard library only (the worker's readers; no JAX).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

#: An instruction line up to its result type: ``  ROOT %name = `` (the name a group ``name``).
LINE_HEAD = r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*"
#: An HLO element type: ``f32``, ``pred``, ``bf16``, ``f8e4m3fn``.
DTYPE = r"[a-z]+\d*(?:e\d+m\d+\w*)?"
START = re.compile(LINE_HEAD)
#: An array type's dimensions (``f32[8,16]{1,0}``: ``8,16``).
ARRAY_DIMS = re.compile(DTYPE + r"\[([\d,]*)\]")
OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
FRAME_ID = re.compile(r"stack_frame_id=(\d+)")
SOURCE = re.compile(r'source_file="((?:[^"\\]|\\.)*)"\s+source_line=(\d+)')

_HEAD = re.compile(r"^(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s*(?:\(.*\))?\s*(?:->.*)?\{\s*$")
_OP = re.compile(r"[\w\-]+")
_SPECIAL = re.compile(r'[()\[\]{},"\\]')
_CLOSE = {"(": ")", "{": "}", "[": "]"}
_COMMENT = re.compile(r"/\*.*?\*/")

#: ``stack_frame_id`` -> ``[(file, line), …]``, innermost first.
Frames = dict[int, list[tuple[str, int]]]


def dims(text: str) -> list[int]:
    """``"8,16"`` -> ``[8, 16]`` (``""``: a scalar's ``[]``)."""
    return [int(d) for d in text.split(",") if d]


def metadata(text: str) -> tuple[str, int] | None:
    """``(op_name, stack_frame_id or -1)`` of an instruction's metadata in ``text``; None
    without an equation's name (none, or one XLA gave: ``broadcast.23`` has no ``/``)."""
    name = OP_NAME.search(text) if "op_name=" in text else None
    if name is None or "/" not in name.group(1):
        return None
    fid = FRAME_ID.search(text)
    return name.group(1), int(fid.group(1)) if fid else -1


def frames_table(text: str) -> Frames:
    """``stack_frame_id`` -> ``[(file, line), …]``, innermost first, from the module's
    ``FileNames`` / ``FileLocations`` / ``StackFrames`` tables."""
    head = text.split("\nENTRY", 1)[0]
    files: dict[int, str] = {}
    locs: dict[int, tuple[int, int]] = {}
    frames: dict[int, tuple[int, int]] = {}
    section = ""
    for line in head.splitlines()[:200_000]:
        s = line.strip()
        if s in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = s
            continue
        if not s or s.startswith("%") or s.startswith("HloModule"):
            if s.startswith("%"):
                break
            continue
        num, _, rest = s.partition(" ")
        if not num.isdigit():
            continue
        k = int(num)
        if section == "FileNames":
            files[k] = rest.strip().strip('"')
        elif section == "FileLocations":
            f, ln = re.search(r"file_name_id=(\d+)", rest), re.search(r"\bline=(\d+)", rest)
            if f and ln:
                locs[k] = (int(f.group(1)), int(ln.group(1)))
        elif section == "StackFrames":
            loc, parent = re.search(r"file_location_id=(\d+)", rest), re.search(r"parent_frame_id=(\d+)", rest)
            if loc:
                frames[k] = (int(loc.group(1)), int(parent.group(1)) if parent else 0)
    out: Frames = {}
    for k in frames:
        chain: list[tuple[str, int]] = []
        seen: set[int] = set()
        cur = k
        while cur in frames and cur not in seen and len(chain) < 64:
            seen.add(cur)
            loc_id, parent_id = frames[cur]
            if loc_id in locs:
                file_id, line_no = locs[loc_id]
                chain.append((files.get(file_id, ""), line_no))
            cur = parent_id
        out[k] = chain
    return out


def _unquoted(s: str, i: int) -> Iterator[re.Match[str]]:
    """The brackets and commas of ``s`` from ``i`` on, outside quoted strings."""
    quoted = escaped = False
    for m in _SPECIAL.finditer(s, i):
        c = m.group(0)
        if escaped:
            escaped = False
        elif quoted:
            escaped, quoted = c == "\\", c != '"'
        elif c == '"':
            quoted = True
        else:
            yield m


def _balanced(s: str, i: int) -> int:
    """The index after the bracket group opening at ``s[i]``."""
    stack = [_CLOSE[s[i]]]
    for m in _unquoted(s, i + 1):
        c = m.group(0)
        if c in _CLOSE:
            stack.append(_CLOSE[c])
        elif c == stack[-1]:
            stack.pop()
            if not stack:
                return m.end()
    return len(s)


def parse_instruction(line: str) -> dict[str, Any] | None:
    """``{"name", "type", "op", "operands", "attrs"}`` of one HLO instruction line; None for
    anything else. ``attrs``: the text after the operands (``, dimensions={0}, …``)."""
    m = START.match(line)
    if m is None:
        return None
    i = m.end()
    if i >= len(line):
        return None
    if line[i] == "(":
        j = _balanced(line, i)
    else:
        j = i
        while j < len(line) and not line[j].isspace():
            j = _balanced(line, j) if line[j] in "{[" else j + 1
    type_text = line[i:j]
    op = _OP.match(line, j + 1 if j < len(line) and line[j] == " " else j)
    if op is None or op.end() >= len(line) or line[op.end()] != "(":
        return None
    k = _balanced(line, op.end())
    inner = line[op.end() + 1:k - 1]
    return {"name": m.group("name"), "type": type_text, "op": op.group(0), "operands": split_top(inner),
            "attrs": line[k:]}


def split_top(text: str) -> list[str]:
    """Comma-separated items at the top bracket level (outside quotes)."""
    if not any(c in text for c in '([{"'):
        return [t.strip() for t in text.split(",") if t.strip()]
    out, depth, start = [], 0, 0
    for m in _unquoted(text, 0):
        c = m.group(0)
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:m.start()].strip())
            start = m.end()
    out.append(text[start:].strip())
    return [t for t in out if t]


def operand_ref(operand: str) -> str:
    """The instruction an operand names (``f32[8] %a``, ``/*index=5*/%a``: ``a``)."""
    return _COMMENT.sub("", operand).strip().split(" ")[-1].lstrip("%")


def computations(text: str) -> tuple[dict[str, list[str]], str | None]:
    """``(computation name -> its lines with the header and closing brace, the entry's name)``."""
    out: dict[str, list[str]] = {}
    entry = None
    cur: list[str] | None = None
    for line in text.splitlines():
        if cur is None:
            s = line.strip()
            if s.endswith("{") and (s.startswith("%") or s.startswith("ENTRY")):
                m = _HEAD.match(s)
                if m:
                    cur = out.setdefault(m.group("name"), [])
                    cur.append(line)
                    if s.startswith("ENTRY"):
                        entry = m.group("name")
            continue
        cur.append(line)
        if line.strip() == "}":
            cur = None
    return out, entry
