"""Portable graph files (``.tvg``): msgpack, columnar, safe to read from anywhere.

A file is two consecutive msgpack objects:

1. a small header map: ``{"format": "tensorviz-graph", "version": 3, "counts": {...}}``;
2. the body: the capture in columnar form (ids are dense indices, so they are not
   stored; repeated strings such as op names and dtypes go through one string table).

Version 2 stores the node and value columns of integers packed: one msgpack ``bin``
whose first byte is an :mod:`array` type code (``bBhHiIqQ``: signed or unsigned, 1, 2, 4
or 8 bytes) and the rest the entries, little-endian (shape dimensions stay a list when
some are names) (:mod:`capture.graph.packed`). Nodes' params go through a table of
distinct maps (``param_table``, and ``param_index`` per node with params). Reading it
decodes no msgpack integer per entry and needs no per-entry type check: a packed entry is
an integer by construction, and its type code already bounds it. Version 3 (written now)
also stores the values' ``measured`` maps and the groups (kind, name, parent and
``attrs``) as columns (:mod:`capture.graph.map_columns`): a Torch capture's measured
evidence, most of its file, is then a few dozen packed arrays instead of a map and
several lists per value, and a value's map is built when it is asked for. Versions 1
(integer columns as msgpack lists, one params map per node with params) and 2 are still
read, with the same checks they always had.

The reader treats every file as hostile: the file size, every msgpack container and
string are bounded, the header is checked before the body is decoded, and every
field is type-checked and every reference range-checked. Any problem raises
:class:`GraphFileError`, whose text is one line naming the file and the problem.
Writes are atomic: a temporary file in the same folder, then a rename, so a failed
write leaves the previous file untouched.

The file's parts live beside this module, which holds its entry points (``read``,
``decode``, ``encode``, ``write``), its header and :class:`GraphFileError`: the body's
columns are built in :mod:`capture.graph.file_encode`, checked and rebuilt in
:mod:`capture.graph.file_decode`, bounded while msgpack decodes them by
:mod:`capture.graph.file_budgets`; the atomic write is :mod:`capture.graph.atomic`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import msgpack

from . import gc_pause
from .atomic import atomic_write
from .file_budgets import (
    MEMORY_PER_BYTE,
    WORST_ELEMENT_BYTES,
    _limits,
    _MemoryCharge,
    _OverBudget,
    _return_memory,
    _unpacker,
    container_budget,
    element_budget,
    memory_budget,
)
from .file_decode import _build
from .file_encode import _encode
from .model import FORMAT_NAME, Capture
from .packed import Invalid as _Invalid

# Generous for real models, small enough that a hostile file cannot exhaust memory.
DEFAULT_MAX_FILE_BYTES = 1 << 30
#: The version of the file encoding this module writes (see the module docstring). It is
#: the encoding's; the capture's own content, what ``to_json`` prints with
#: ``capture.graph.model.FORMAT_VERSION``, did not change in version 2.
FILE_VERSION = 3
#: The versions it reads (and can write, for an older reader).
READ_VERSIONS = (1, 2, FILE_VERSION)


class GraphFileError(Exception):
    """A graph file could not be read or written; ``str()`` is one line."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


# --------------------------------------------------------------------------- writing


def encode(capture: Capture, *, version: int = FILE_VERSION) -> bytes:
    """The file's bytes for ``capture``: format ``version`` 3, or 1 or 2 for a reader that
    predates version 3."""
    if version not in READ_VERSIONS:
        raise ValueError(f"graph file version {version} cannot be written "
                         f"(versions {', '.join(map(str, READ_VERSIONS))} can)")
    # Encoding makes a container or two per value and node, and the capture's own objects
    # may all still be young: with the cyclic collector on, it ran full collections over
    # them again and again (most of a 100,000-op encode, growing as n^1.3). Nothing made
    # here is a cycle.
    with gc_pause.paused():
        return _encode(capture, version)


def write(capture: Capture, path: str | os.PathLike[str]) -> None:
    """Write ``capture`` to ``path`` atomically (temp file in the same folder + rename)."""
    target = Path(path)
    try:
        data = encode(capture)
    except ValueError as exc:
        raise GraphFileError(target, str(exc)) from None
    try:
        atomic_write(target, data)
    except OSError as exc:
        raise GraphFileError(target, f"cannot write: {exc.strerror or exc}") from None


# --------------------------------------------------------------------------- reading


def read(path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> Capture:
    """Read and validate a graph file. Raises :class:`GraphFileError` on any problem."""
    p = Path(path)
    try:
        # Non-blocking open, then the open file's own type: a FIFO or a device named as a
        # graph file (or swapped in after a check) is refused, never waited on or read.
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if stat.S_ISDIR(st.st_mode):
                raise GraphFileError(p, "is a directory, not a graph file")
            if not stat.S_ISREG(st.st_mode):
                raise GraphFileError(p, "is not a regular file (a pipe, socket or device), not a graph file")
            if st.st_size > max_bytes:
                raise GraphFileError(p, f"file is {st.st_size:,} bytes, over the {max_bytes:,}-byte limit")
            data = fh.read(max_bytes + 1)
    except GraphFileError:
        raise
    except IsADirectoryError:
        raise GraphFileError(p, "is a directory, not a graph file") from None
    except OSError as exc:
        raise GraphFileError(p, f"cannot read: {exc.strerror or exc}") from None
    return decode(data, name=str(p), max_bytes=max_bytes)


def decode(data: bytes, *, name: str = "<bytes>", max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> Capture:
    if len(data) > max_bytes:
        raise GraphFileError(name, f"file is {len(data):,} bytes, over the {max_bytes:,}-byte limit")
    if not data:
        raise GraphFileError(name, "empty file, not a TensorViz graph file")
    # The header is read from the file's first bytes only, and the body in place: no
    # copy of a large file is held while it decodes.
    head = min(len(data), MAX_HEADER_BYTES)
    unpacker = _unpacker(head)
    unpacker.feed(memoryview(data)[:head])
    # Decoding allocates millions of small containers and no cycles; the cyclic
    # collector would otherwise run hundreds of times for nothing (5-10x slower); what it
    # made joins the oldest generation unwalked (gc_pause's ``settle``).
    with gc_pause.paused(settle=True):
        return _decode_body(unpacker, name, data)


#: A graph header is a small map; a file whose first MiB holds none is not a graph file.
MAX_HEADER_BYTES = 1 << 20


def _decode_body(unpacker: msgpack.Unpacker, name: str, data: bytes) -> Capture:
    header, version = _read_header(unpacker, name, data)
    # The body is decoded with every list and map counted against a budget from the
    # header's counts (a header may only lower it), and every element where it sits: a
    # container's length is counted when it is complete. And what it takes in memory is
    # charged against a budget from the bytes actually there (memory_budget): a header
    # that declares ten million nodes lifts nothing. No one container may be longer than
    # either budget allows (refused at its header, before its elements exist).
    start = unpacker.tell()
    size = len(data) - start
    budget = container_budget(header, size)
    elements = element_budget(header, size, version)
    memory = memory_budget(size)
    charge = _MemoryCharge(budget, elements, memory)
    longest = min(elements, memory // WORST_ELEMENT_BYTES)
    refused = None
    try:
        body = msgpack.unpackb(memoryview(data)[start:], list_hook=charge.list_hook, object_hook=charge.object_hook,
                               **_limits(len(data), packed=version >= 2, longest=longest))
        charge.settle()  # the short lists charged last
    except _OverBudget as over:
        refused = over.args[0]  # raised below, once this exception (and its frames) are gone
    except msgpack.ExtraData:
        raise GraphFileError(name, "trailing data after the graph body") from None
    except msgpack.OutOfData:
        raise GraphFileError(name, "truncated: the graph body is incomplete") from None
    except Exception as exc:
        raise _undecodable_body(name, exc, longest, elements, size) from None
    if refused is not None:
        _return_memory()  # what was decoded is gone: its memory goes back to the system
        raise _over_budget(name, refused, budget, elements, memory, size) from None
    try:
        return _build(body, header, version)
    except _Invalid as exc:
        raise GraphFileError(name, f"invalid field {exc}") from None


def _read_header(unpacker: msgpack.Unpacker, name: str, data: bytes) -> tuple[dict[str, Any], int]:
    """The graph header at the start of ``data`` and its version, one this TensorViz reads."""
    prefix = data[:64]
    try:
        header = unpacker.unpack()
    except msgpack.OutOfData:
        if len(data) > MAX_HEADER_BYTES:
            raise GraphFileError(name, "not a TensorViz graph file (no graph header in its first MiB)") from None
        if _HEADER_MARK in prefix or (b"\x83" + _HEADER_MARK).startswith(prefix):
            raise GraphFileError(name, "truncated before the end of the header") from None
        raise GraphFileError(name, "not a TensorViz graph file (no graph header)") from None
    except Exception:  # msgpack raises several types for garbage bytes
        raise GraphFileError(name, "not a TensorViz graph file (no graph header)") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise GraphFileError(name, "not a TensorViz graph file (no graph header)")
    version = header.get("version")
    if type(version) is not int:
        raise GraphFileError(name, "graph header has no integer version")
    if version not in READ_VERSIONS:
        newer = "newer" if version > FILE_VERSION else "older"
        raise GraphFileError(
            name, f"graph file version {version} is {newer} than this TensorViz reads "
            f"(versions {', '.join(map(str, READ_VERSIONS))})"
        )
    return header, version


def _undecodable_body(name: str, exc: Exception, longest: int, elements: int, size: int) -> GraphFileError:
    """Why msgpack could not decode the body (``exc``, anything but running out of data
    or budget): cut short, a container longer than the budgets allow, or corrupt."""
    if isinstance(exc, ValueError):
        if "incomplete input" in str(exc):
            return GraphFileError(name, "truncated: the graph body is incomplete")
        if "exceeds max_array_len" in str(exc) or "exceeds max_map_len" in str(exc):
            why = "more than a graph of the size its header declares can" if longest == elements else \
                f"more than {MEMORY_PER_BYTE}x the body's {size:,} bytes of memory allows"
            return GraphFileError(
                name, f"corrupt graph body: a list or map of over {longest:,} strings, numbers, lists and maps, "
                f"{why} (a hostile or corrupt file)")
    return GraphFileError(name, f"corrupt graph body ({type(exc).__name__})")


def _over_budget(name: str, refused: str, budget: int, elements: int, memory: int, size: int) -> GraphFileError:
    """The body ran past one of its budgets (``refused``: which one, as
    :class:`_MemoryCharge` names it)."""
    if refused == "memory":
        return GraphFileError(
            name, f"decoding the body would take more than {memory / (1 << 20):,.0f} MiB of memory, "
            f"{MEMORY_PER_BYTE}x its {size:,} bytes (a graph file TensorViz writes takes under 10x; "
            "a hostile or corrupt file)")
    what = f"{budget:,} lists and maps" if refused == "containers" else \
        f"{elements:,} strings, numbers, lists and maps"
    return GraphFileError(
        name, f"the body holds more than {what}, more than a graph of the size its header "
        "declares can (a hostile or corrupt file)")


# How every header begins on disk; tells a cut-short graph file from other bytes.
_HEADER_MARK = msgpack.packb("format") + msgpack.packb(FORMAT_NAME)


def has_graph_header(prefix: bytes) -> bool:
    """Whether ``prefix`` (a file's first 64 bytes) begins like a graph file TensorViz
    wrote: a header map whose first key is ``format``, naming this format."""
    return len(prefix) > len(_HEADER_MARK) and 0x80 <= prefix[0] <= 0x8F and prefix[1:1 + len(_HEADER_MARK)] == _HEADER_MARK
