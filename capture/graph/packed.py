"""Packed integer and float columns of graph files, and the reader's validation error.

A packed integer column is one msgpack ``bin``: its first byte an :mod:`array` type code
(``bBhHiIqQ``: signed or unsigned, 1, 2, 4 or 8 bytes), the rest the entries,
little-endian. A float column is the entries as little-endian IEEE doubles. Shared by
:mod:`capture.graph.graphfile` and :mod:`capture.graph.map_columns`; the standard library
only (the worker imports it).
"""

from __future__ import annotations

import sys
from array import array
from typing import Any

#: The most entries one column (or one msgpack container) of a graph file may hold.
MAX_ENTRIES = 50_000_000
#: A packed integer column's type codes (its first byte) and their entry widths.
PACKED_WIDTH = {"b": 1, "B": 1, "h": 2, "H": 2, "i": 4, "I": 4, "q": 8, "Q": 8}
#: The :mod:`array` type code with each packed code's width and signedness on this platform.
ARRAY_CODE = {
    code: next(c for c in ((code, "l", "q") if code.islower() else (code, "L", "Q")) if array(c).itemsize == width)
    for code, width in PACKED_WIDTH.items()
}
BIG_ENDIAN = sys.byteorder == "big"


class Invalid(Exception):
    """A field of a graph file failed validation; the text names the field and why."""


def need(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise Invalid(f"{where}: {what}")


# --------------------------------------------------------------------------- writing


def pack_ints(col: list[int]) -> bytes:
    """``col`` as a packed integer column: the narrowest type code that holds every entry,
    then the entries little-endian."""
    lo, hi = (min(col), max(col)) if col else (0, 0)
    for code in ("BHIQ" if lo >= 0 else "bhiq"):
        bits = 8 * PACKED_WIDTH[code]
        if (hi < 1 << bits) if code.isupper() else (-(1 << (bits - 1)) <= lo and hi < 1 << (bits - 1)):
            packed = array(ARRAY_CODE[code], col)
            if BIG_ENDIAN:
                packed.byteswap()
            return code.encode() + packed.tobytes()
    raise ValueError(f"capture holds a value a graph file cannot store: an integer column holds "
                     f"{hi if hi >= 1 << 63 else lo}, outside the 64-bit range")


def pack_floats(col: list[float]) -> bytes:
    """``col`` (Python floats) as little-endian doubles: exact, as msgpack stores them."""
    packed = array("d", col)
    if BIG_ENDIAN:
        packed.byteswap()
    return packed.tobytes()


# --------------------------------------------------------------------------- reading


def packed_ints(obj: Any, where: str, length: int | None, lo: int, hi: int, *, few: bool = False,
                as_list: bool = True) -> Any:
    """A packed integer column of ``length`` entries (``None``: any number), each in
    [lo, hi), as a list (``as_list=False``: as the checked ``array`` itself, whose entries
    are the same integers, each made when it is read). Every entry is an integer by
    construction, and the type code bounds it: only the bounds the code leaves open are
    checked, by C-level passes."""
    need(type(obj) is bytes and len(obj) > 0, where, "expected a packed integer column")
    code = chr(obj[0])
    width = PACKED_WIDTH.get(code)
    if width is None:
        raise Invalid(f"{where}: unknown packed integer type {code!r}")
    n, extra = divmod(len(obj) - 1, width)
    need(extra == 0, where, f"{len(obj) - 1} bytes are not a whole number of {width}-byte entries")
    if length is not None:
        need(n == length, where, f"expected {length} entries, found {n}")
    need(n <= MAX_ENTRIES, where, f"{n:,} entries, over the {MAX_ENTRIES:,}-entry limit")
    entries = array(ARRAY_CODE[code])
    entries.frombytes(memoryview(obj)[1:])
    if BIG_ENDIAN:
        entries.byteswap()
    # Checked on the array, before the list of Python integers exists: a column that is
    # refused never costs more than its own bytes' worth of memory.
    bits = 8 * width
    code_lo, code_hi = (0, 1 << bits) if code.isupper() else (-(1 << (bits - 1)), 1 << (bits - 1))
    if n and (code_lo < lo or code_hi > hi):
        if width == 1:  # one byte per entry: delete the bytes of allowed values; none may remain
            allowed = bytes(v & 0xFF for v in range(max(lo, code_lo), min(hi, code_hi)))
            if not obj[1:].translate(None, allowed):
                return entries.tolist() if as_list else entries
        span = set(entries) if few else entries
        if (code_lo < lo and min(span) < lo) or (code_hi > hi and max(span) >= hi):
            bad = next(i for i, x in enumerate(entries) if not lo <= x < hi)
            raise Invalid(f"{where}[{bad}]: {entries[bad]} is out of range")
    return entries.tolist() if as_list else entries


def packed_floats(obj: Any, where: str, length: int, *, as_list: bool = True) -> Any:
    """A float column of ``length`` doubles, as a list of Python floats (``as_list=False``:
    as the ``array('d')`` itself, which gives the same floats when read, each made when
    it is read)."""
    need(type(obj) is bytes, where, "expected a packed float column")
    need(len(obj) == 8 * length, where, f"expected {length} doubles, found {len(obj)} bytes")
    entries = array("d")
    entries.frombytes(obj)
    if BIG_ENDIAN:
        entries.byteswap()
    return entries.tolist() if as_list else entries
