"""What an ``.npz`` file would take once read, from its zip directory and each array's
``.npy`` header, before NumPy reads any of it.

An ``.npz`` is a zip of ``.npy`` files, and zip compresses well: a 3 MB file of zeros
decompressed to 3.4 GB in the worker. NumPy allocates an array whole from the shape in
its header before it reads the data, so both are checked: each member's decompressed
size (the zip directory's) and the bytes its header's shape and dtype declare, each
summed over the file, against ``max_saved_file_bytes``. Standard library only.
"""

from __future__ import annotations

import ast
import io
import math
import re
import struct
import zipfile

_MAGIC = b"\x93NUMPY"
# A simple dtype descriptor: byte order, kind, item size ('<f4', '|b1', '<U10', '<c16').
_SIMPLE_DESCR = re.compile(r"^[<>|=]?([a-zA-Z])(\d+)$")


class NpzTooLarge(ValueError):
    def __init__(self, member: str, total: int) -> None:
        super().__init__(member, total)
        self.member = member
        self.total = total


def check_npz_size(data: bytes, limit: int) -> int:
    """The most bytes reading the ``.npz`` ``data`` would hold (decompressed members, or
    the arrays their headers declare, whichever is larger, summed). Raises
    :class:`NpzTooLarge` naming the member that takes the sum past ``limit``;
    ``zipfile.BadZipFile`` or ``ValueError`` for a file that is not a readable ``.npz``."""
    total = 0
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for info in zf.infolist():
            declared = info.file_size
            if info.filename.endswith(".npy") and info.file_size > 0:
                with zf.open(info) as member:
                    declared = max(declared, _declared_bytes(member.read(_header_room(info.file_size))))
            total += declared
            if total > limit:
                raise NpzTooLarge(info.filename, total)
    return total


def _header_room(size: int) -> int:
    return min(size, 1 << 16)


def _declared_bytes(head: bytes) -> int:
    """The bytes the array of a ``.npy`` file declares (its header's shape times its
    item size); 0 when the header cannot be read (NumPy then refuses the file)."""
    if not head.startswith(_MAGIC) or len(head) < 10:
        return 0
    major = head[6]
    if major == 1:
        (length,), start = struct.unpack("<H", head[8:10]), 10
    elif len(head) >= 12:
        (length,), start = struct.unpack("<I", head[8:12]), 12
    else:
        return 0
    try:
        header = ast.literal_eval(head[start:start + length].decode("latin1"))
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError):
        return 0
    if not isinstance(header, dict):
        return 0
    shape, descr = header.get("shape"), header.get("descr")
    if not isinstance(shape, tuple) or not all(type(d) is int and d >= 0 for d in shape):
        return 0
    return math.prod(shape) * _item_size(descr)


def _item_size(descr: object) -> int:
    if isinstance(descr, str):
        m = _SIMPLE_DESCR.match(descr)
        if m:
            kind, n = m.group(1), int(m.group(2))
            return n * 4 if kind == "U" else n
        return 1
    if isinstance(descr, list):  # a structured dtype: its fields' sizes
        total = 0
        for field in descr:
            if isinstance(field, tuple) and len(field) >= 2:
                count = math.prod(field[2]) if len(field) > 2 and isinstance(field[2], tuple) else 1
                total += _item_size(field[1]) * max(count, 1)
        return max(total, 1)
    return 1
