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
"""

from __future__ import annotations

import ntpath
import os
import re
import posixpath
import secrets
import stat
import sys
import time
from pathlib import Path
from itertools import islice
from collections.abc import Sequence
from typing import Any, cast

import msgpack

from ..units import COUNT_LIMIT
from . import gc_pause
from .map_columns import MapColumns, pack_maps, unpack_maps
from .packed import ARRAY_CODE as _ARRAY_CODE  # noqa: F401 (tests read the type codes)
from .packed import BIG_ENDIAN as _BIG_ENDIAN  # noqa: F401
from .packed import MAX_ENTRIES as _MAX_CONTAINER
from .packed import PACKED_WIDTH as _PACKED_WIDTH  # noqa: F401
from .packed import Invalid as _Invalid
from .packed import need as _need
from .packed import pack_ints as _pack_ints
from .packed import packed_ints as _packed_ints
from .compiled import CompiledError, check_compiled
from .sharding import ShardingError, check_devices, check_meshes, check_sharding
from .tables import NodeTable, ValueTable
from .model import (
    ABSTRACT_FORWARD_SCOPE,
    COVERAGE_STATUSES,
    EFFECTS,
    FORMAT_NAME,
    Capture,
    Coverage,
    Failure,
    Frame,
    Group,
    Node,
    NodeCosts,
    Source,
    Value,
)

# Generous for real models, small enough that a hostile file cannot exhaust memory.
DEFAULT_MAX_FILE_BYTES = 1 << 30
_MAX_STR = 16 << 20
_MAX_DEPTH = 64
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


def _encode(capture: Capture, version: int) -> bytes:
    _check_dense(capture)
    strings: dict[str, int] = {}

    def s(text: str) -> int:
        idx = strings.get(text)
        if idx is None:
            idx = strings[text] = len(strings)
        return idx

    def s_all(texts: Sequence[str]) -> list[int]:  # one lookup per distinct text
        index = {t: s(t) for t in dict.fromkeys(texts)}
        return list(map(index.__getitem__, texts))

    # Operands and outputs in CSR form: flat columns plus per-node offsets, so the
    # reader checks whole columns at once instead of 200,000 little lists. A file's
    # nodes and values (tables) hand over their own columns.
    nodes = NodeTable.of(capture.nodes)
    values = ValueTable.of(capture.values)
    ops, node_group, node_frame, in_off, in_ref, out_off, out_ids, opaque = nodes.columns()
    in_pos, literals, node_params = nodes.input_positions(), nodes.literals(), nodes.params_map()
    shape_off, shape_dims = values.shape_columns()
    measured = values.measured_column() if values.measured_any() else None
    columnar = version >= 3

    packed = version >= 2
    ints = _pack_ints if packed else list
    param_nodes = sorted(i for i, p in node_params.items() if p)
    params_columns: dict[str, Any]
    if packed:  # each distinct params map stored once (real programs repeat a few)
        param_table, param_index = _distinct_maps([node_params[i] for i in param_nodes])
        params_columns = {"param_nodes": ints(param_nodes), "param_table": param_table,
                          "param_index": ints(param_index)}
    else:
        params_columns = {"param_nodes": param_nodes, "param_maps": [node_params[i] for i in param_nodes]}
    all_int_dims = list(map(type, shape_dims)).count(int) == len(shape_dims)
    sharding_table, sharding_index = _sharding_columns(values)
    body = {
        "backend": capture.backend,
        "framework": capture.framework,
        "framework_version": capture.framework_version,
        "coverage": [
            capture.coverage.scope,
            capture.coverage.status,
            list(capture.coverage.reasons),
            capture.coverage.effects,
        ],
        "values": {
            "shape_offsets": ints(shape_off),
            # packed when every dimension is a size; a list when some are names
            "shape_dims": ints(cast(list[int], shape_dims)) if all_int_dims else shape_dims,
            "dtype": ints(s_all(values.dtype_column())),
            "measured": None if measured is None else pack_maps(measured, s) if columnar else list(measured),
            # how values are split across devices: each distinct map once, and per value
            # its index in the table (-1: none); absent when no value is split
            **({"sharding_table": sharding_table, "sharding_index": ints(sharding_index)}
               if sharding_table else {}),
        },
        "nodes": {
            "op": ints(s_all(ops)),
            "input_offsets": ints(in_off),
            "input_positions": ints(in_pos),
            "input_refs": ints(in_ref),
            "output_offsets": ints(out_off),
            "output_ids": ints(out_ids),
            **params_columns,
            "group": ints(node_group),
            "frame": ints(node_frame),
            "opaque": ints(sorted(opaque)),
        },
        "literals": literals,
        "groups": _group_columns(capture.groups, s, s_all) if columnar else [
            [g.kind, g.name, -1 if g.parent is None else g.parent, g.attrs or None]
            for g in capture.groups
        ],
        "frames": [[s(f.file), f.line, f.column, s(f.function)] for f in capture.frames],
        "inputs": capture.inputs,
        "outputs": capture.outputs,
        "sources": [[src.path, src.sha256] for src in capture.sources],
        "recipe": capture.recipe,
        "failure": None
        if capture.failure is None
        else {
            "type": capture.failure.type,
            "message": capture.failure.message,
            "stage": capture.failure.stage,
            "frames": [[f.file, f.line, f.column, f.function] for f in capture.failure.frames],
            "details": capture.failure.details,
        },
        "meta": capture.meta,
        "strings": list(strings),
    }
    if capture.meshes:
        body["meshes"] = capture.meshes
    if capture.devices is not None:
        body["devices"] = capture.devices
    if capture.compiled is not None:  # the program as XLA compiled it (capture.graph.compiled)
        body["compiled"] = capture.compiled
    library = [i for i, f in enumerate(capture.frames) if f.library]
    if library:  # the frames that name an installed library file (absolute path)
        body["library_frames"] = library
    if capture.cost is not None:  # what each node costs (absent: not counted; older readers skip it)
        body["cost"] = _cost_columns(capture.cost, len(nodes), ints)
    header = {
        "format": FORMAT_NAME,
        "version": version,
        "counts": {
            "values": len(values),
            "nodes": len(nodes),
            "groups": len(capture.groups),
            "frames": len(capture.frames),
        },
    }
    try:
        return cast(bytes, msgpack.packb(header, use_bin_type=True) + msgpack.packb(body, use_bin_type=True))
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"capture holds a value a graph file cannot store: {exc}") from exc


def _group_columns(groups: list[Group], s: Any, s_all: Any) -> dict[str, Any]:
    """Version 3's groups: kind, name and parent columns, and the attrs as map columns."""
    return {
        "kind": _pack_ints(s_all([g.kind for g in groups])),
        "name": _pack_ints(s_all([g.name for g in groups])),
        "parent": _pack_ints([-1 if g.parent is None else g.parent for g in groups]),
        "attrs": pack_maps([g.attrs or None for g in groups], s),
    }


def _distinct_maps(maps: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    """``(each distinct map once, per map its index in that table)``; maps are equal when
    their stored bytes are (equal maps, equal keys). A map object given again is packed
    once (values share their sharding maps)."""
    table: list[dict[str, Any]] = []
    seen: dict[bytes, int] = {}
    by_id: dict[int, int] = {}
    index = []
    pack = msgpack.Packer(use_bin_type=True).pack
    for m in maps:
        k = by_id.get(id(m))
        if k is None:
            try:
                key = pack(m)
            except (TypeError, ValueError, OverflowError) as exc:
                raise ValueError(f"capture holds a value a graph file cannot store: {exc}") from exc
            k = seen.get(key)
            if k is None:
                k = seen[key] = len(table)
                table.append(m)
            by_id[id(m)] = k
        index.append(k)
    return table, index


def _sharding_columns(values: ValueTable) -> tuple[list[dict[str, Any]], list[int]]:
    """The values' shardings as a table of distinct maps and an index per value (-1: none);
    ``([], [])`` when no value has one (read from the sharding column: no rows built)."""
    column = values.sharding_column()
    if column is None or all(x is None for x in column):
        return [], []
    table, distinct = _distinct_maps([x for x in column if x is not None])
    shared = iter(distinct)
    return table, [-1 if x is None else next(shared) for x in column]


def _cost_columns(cost: NodeCosts, n_nodes: int, ints: Any) -> dict[str, Any]:
    for name in ("flops", "bytes_read", "bytes_written", "rule"):
        col = getattr(cost, name)
        if len(col) != n_nodes:
            raise ValueError(f"capture cost column {name} has {len(col)} entries for {n_nodes} nodes")
        # beyond the column's signed 64 bits: refused here, never written for the reader to refuse
        if name != "rule" and col and (min(col) < -1 or max(col) > MAX_COST):
            big = next(i for i, x in enumerate(col) if not -1 <= x <= MAX_COST)
            raise ValueError(f"capture cost column {name}: node {big}'s count {col[big]} is outside -1 (uncounted) "
                             "to 2^63-1, the most a graph file stores (a counter leaves such an op uncounted: "
                             "capture/units.py OVERFLOW_REASON)")
    return {
        "flops": ints(cost.flops), "bytes_read": ints(cost.bytes_read), "bytes_written": ints(cost.bytes_written),
        "rule": ints(cost.rule), "rules": list(cost.rules), "estimates": ints(list(cost.estimates)),
        "notes": cost.notes or None,
    }


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


def atomic_write(target: Path, data: bytes, *, new_mode: int = 0o644) -> None:
    """Replace ``target`` with ``data`` or leave it exactly as it was (a fresh file in the
    same folder, flushed to disk, then renamed over it). Raises ``OSError``.

    TensorViz's one atomic write (graph files, recipes, JSON state). An existing file keeps
    its permission bits; a new one gets ``new_mode`` less the umask, applied by the kernel
    at ``open`` (reading the umask would mean setting it, process-wide, under the
    language server's threads)."""
    fd, tmp = _create_temporary(target.parent if str(target.parent) else Path("."), target.name, new_mode)
    try:
        _hold(fd)  # until this write ends: a temporary nobody holds was left by a killed one
        with os.fdopen(fd, "wb") as fh:
            try:
                os.fchmod(fh.fileno(), stat.S_IMODE(target.stat().st_mode))
            except FileNotFoundError:
                pass  # a new file: the mode it was created with stands
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _remove_stale_temporaries(Path(tmp).parent, target.name)


#: A temporary that no writer holds (see :func:`_hold`) and that has not changed for this
#: long was left by a killed write. (The grace covers the moment between a writer's
#: creating its temporary and taking hold of it.)
ABANDONED_AFTER_SECONDS = 2.0


def _hold(fd: int) -> None:
    """Hold an exclusive ``flock`` on a temporary being written: the kernel lets it go
    when the writer ends, however it ends (SIGKILL included), so a temporary nobody holds
    is a killed write's. Where there is no ``flock``, temporaries are judged by age."""
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX)  # (a cleaner testing it holds it only for that moment)
    except (ImportError, OSError):
        pass


def open_regular_file(path: str | os.PathLike[str]) -> int | None:
    """A descriptor open for reading on ``path`` when it is a regular file; None when it
    cannot be opened or is anything else (a link is never followed, a FIFO never waited
    on). The caller closes it."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def abandoned_temporary(path: str | os.PathLike[str]) -> bool:
    """Whether ``path``, a temporary :func:`atomic_write` made, was left by a write that
    was killed: nobody holds it and it has not changed for :data:`ABANDONED_AFTER_SECONDS`
    (:data:`STALE_TEMPORARY_SECONDS` where locks cannot be taken, or for a temporary of an
    older TensorViz, which took none). Never follows a link."""
    fd = open_regular_file(path)
    if fd is None:
        return False
    try:
        age = time.time() - os.fstat(fd).st_mtime
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a write under way holds it
        except (ImportError, OSError):
            return age > STALE_TEMPORARY_SECONDS
        return age > ABANDONED_AFTER_SECONDS
    finally:
        os.close(fd)  # (and its lock with it)


#: Where locks cannot be taken: a temporary older than this was left by a killed write.
STALE_TEMPORARY_SECONDS = 600


def _remove_stale_temporaries(folder: Path, name: str) -> None:
    """Delete ``.NAME.<hex>.tmp`` files that killed writes left beside ``NAME``: at the
    next write of ``NAME``, whenever they were left (55 killed writes once left 130 MB for
    ten minutes)."""
    pattern = re.compile(rf"^\.{re.escape(name)}\.[0-9a-f]{{12}}\.tmp$")
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            if pattern.match(entry.name) and entry.is_file(follow_symlinks=False) and abandoned_temporary(entry.path):
                os.unlink(entry.path)
        except OSError:
            continue


def _create_temporary(folder: Path, name: str, mode: int) -> tuple[int, str]:
    """A fresh file next to the target, created with ``mode`` (``O_EXCL``: never an existing one)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")


def _check_dense(capture: Capture) -> None:
    tables: tuple[tuple[str, Sequence[Value | Node | Group]], ...] = (
        ("values", capture.values), ("nodes", capture.nodes), ("groups", capture.groups))
    for label, items in tables:
        if isinstance(items, (NodeTable, ValueTable)):
            continue  # a file's rows: dense by construction
        for i, item in enumerate(items):
            if item.id != i:
                raise ValueError(f"{label}[{i}] has id {item.id}; ids must be dense indices")


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
    # collector would otherwise run hundreds of times for nothing (5-10x slower).
    with gc_pause.paused():
        return _decode_body(unpacker, name, data)


#: A graph header is a small map; a file whose first MiB holds none is not a graph file.
MAX_HEADER_BYTES = 1 << 20


def _limits(size: int, *, packed: bool = False, longest: int | None = None) -> dict[str, Any]:
    """msgpack's bounds for ``size`` bytes. ``packed``: a version-2 body, whose integer
    columns are binary blobs (version 1 files hold none). ``longest``: the most elements
    one list may have (a map: half as many entries)."""
    bound = min(size, _MAX_CONTAINER, longest if longest is not None else size)
    return dict(
        raw=False,
        use_list=True,
        strict_map_key=True,
        max_str_len=min(size, _MAX_STR),
        max_bin_len=size if packed else 0,
        max_array_len=bound,
        max_map_len=bound if longest is None else max(bound // 2, 1),  # an entry is two elements
        max_ext_len=0,
        ext_hook=_refuse_ext,
    )


def _unpacker(size: int, **hooks: Any) -> msgpack.Unpacker:
    return msgpack.Unpacker(max_buffer_size=max(size, 1), **_limits(size), **hooks)


#: Lists and maps a body may hold: a graph file TensorViz writes has about two per value,
#: node, group and frame (real models: 2.0-2.4), and at least 26 bytes per container.
#: A hostile file of empty lists (1 byte each, 64 in memory) would otherwise decode to
#: about 75 times its size before any field is checked.
CONTAINERS_BASE = 4096
CONTAINERS_PER_ITEM = 16
MIN_BYTES_PER_CONTAINER = 4


def _declared_items(header: dict[str, Any]) -> int:
    """The values, nodes, groups and frames ``header``'s counts declare (0 for nonsense)."""
    counts = header.get("counts")
    if not isinstance(counts, dict):
        return 0
    return sum(n for key in ("values", "nodes", "groups", "frames")
               if type(n := counts.get(key)) is int and n > 0)


def container_budget(header: dict[str, Any], size: int) -> int:
    """How many lists and maps a body of ``size`` bytes with ``header``'s counts may hold."""
    items = _declared_items(header)
    return min(CONTAINERS_BASE + CONTAINERS_PER_ITEM * items, max(CONTAINERS_BASE, size // MIN_BYTES_PER_CONTAINER))


#: Everything a body holds (strings, numbers, lists and maps, each counted once where it
#: sits): a graph file TensorViz writes holds at most about 28 per value, node, group and
#: frame (real models: 5-28, version 1's list columns the most), and at least 2 bytes per
#: element in version 1 (columns of small integers), 4 in version 2. A file whose ``meta``
#: holds 13 M short strings (3 bytes each, 56 in memory) would otherwise decode to 28
#: times its size under a header declaring a small graph.
ELEMENTS_BASE = 1 << 16
ELEMENTS_PER_ITEM = 64
MIN_BYTES_PER_ELEMENT = {1: 2, 2: 3, 3: 3}


def element_budget(header: dict[str, Any], size: int, version: int) -> int:
    """How many elements a body of ``size`` bytes with ``header``'s counts may hold."""
    items = _declared_items(header)
    per_byte = MIN_BYTES_PER_ELEMENT.get(version, 2)
    return min(ELEMENTS_BASE + ELEMENTS_PER_ITEM * items, max(ELEMENTS_BASE, size // per_byte))


#: What decoding a body may take in memory, as a multiple of the body's bytes (plus
#: :data:`MEMORY_BASE`), whatever its header declares: a graph file TensorViz writes takes
#: about 1-7x (the real models of the tests: 4-6x in version 2, packed columns about 1x;
#: version 1's integer lists up to 9.3x), while short strings, small integers and empty
#: lists take 13-75x their bytes. The budget follows what is decoded: each list and map
#: is charged when it is complete, with what Python holds for it (:class:`_MemoryCharge`).
MEMORY_PER_BYTE = 10
MEMORY_BASE = 1 << 20
#: The most one element of a list not yet complete can take (its slot, and a one-character
#: string outside Latin-1: 8 + 80 bytes): no list may be longer than the budget allows
#: at this rate, nor a map (a key and a value) at twice it.
WORST_ELEMENT_BYTES = 88


def memory_budget(size: int) -> int:
    """The bytes decoding a body of ``size`` bytes may take (see :data:`MEMORY_PER_BYTE`)."""
    return MEMORY_PER_BYTE * size + MEMORY_BASE


class _OverBudget(Exception):
    pass


_NoneType = type(None)
#: What an element costs in memory besides its slot, by type (sys.getsizeof rounded up to
#: the allocator's 16 bytes, as the process's resident memory sees it; a string's text
#: beyond its first 30 bytes is at most its own bytes in the file, which the budget's
#: margin covers; lists and maps are charged when they complete).
_ELEMENT_BYTES = {int: 32, float: 32, str: 80, bytes: 48, list: 0, dict: 0, _NoneType: 0, bool: 0}
#: Integers Python holds once for the whole process (a new one costs nothing).
_CACHED_INTS = frozenset(range(-5, 257))
#: A map key new to this decode: its string (interned, so a repeated key costs nothing)
#: and its entry in the table of interned strings.
_NEW_KEY_BYTES = 160


class _MemoryCharge:
    """The hooks that count what a body's decoding holds: containers against the
    header's budget, elements, and bytes of memory against :func:`memory_budget` (each
    list and map charged when msgpack completes it: its own size and its elements'; map
    keys once per distinct key, as msgpack interns them). Raises :class:`_OverBudget`."""

    def __init__(self, containers: int, elements: int, memory: int) -> None:
        left = [containers, elements, memory]
        keys: set[str] = set()
        cost = _ELEMENT_BYTES.__getitem__
        small = _CACHED_INTS.__contains__
        size = sys.getsizeof

        def over() -> None:
            raise _OverBudget("containers" if left[0] < 0 else "elements" if left[1] < 0 else "memory")

        def charged_list(obj: list[Any]) -> list[Any]:
            n = len(obj)
            c = 64 + 8 * n + sum(map(cost, map(type, obj)))
            if n > 32:  # a long column: what Python really holds for it
                kinds = set(map(type, obj))
                if kinds == {int}:
                    c -= 32 * sum(map(small, obj))
                elif kinds == {str}:  # each string's size, and the allocator's rounding up to 16 bytes
                    c += sum(map(size, obj)) - 64 * n
            left[0] -= 1
            left[1] -= n + 1
            left[2] -= c
            if left[0] < 0 or left[1] < 0 or left[2] < 0:
                over()
            return obj

        def charged_map(obj: dict[Any, Any]) -> dict[Any, Any]:
            n = len(obj)
            before = len(keys)
            keys.update(obj)
            left[0] -= 1
            left[1] -= 2 * n + 1
            left[2] -= size(obj) + _NEW_KEY_BYTES * (len(keys) - before) + sum(map(cost, map(type, obj.values())))
            if left[0] < 0 or left[1] < 0 or left[2] < 0:
                over()
            return obj

        self.list_hook = charged_list
        self.object_hook = charged_map
        self._left = left

    @property
    def used(self) -> int:
        return -self._left[2]


def _return_memory() -> None:
    """After a refused body: hand the freed memory back to the system (glibc keeps freed
    heap pages otherwise; a viewer stayed at 1.1 GB after refusing one file)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


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


def _refuse_ext(code: int, data: bytes) -> Any:
    raise ValueError("msgpack extension types are not used by graph files")


# --------------------------------------------------------------------------- validation

_PLAIN_SCALARS = (type(None), bool, int, float, str)
# A meta key naming a runtime timing: captures name durations by their unit
# (``elapsed_s``, ``capture_s``, ``checkpoint_load_s``), which a Jaxpr capture cannot carry.
_RUNTIME_TIMING = re.compile(r"(?:_(?:s|ms|us|ns|seconds)|^(?:elapsed|duration|timings?))$")


def _map(obj: Any, where: str) -> dict[Any, Any]:
    if type(obj) is not dict:
        raise _Invalid(f"{where}: expected a map")
    return obj


def _list(obj: Any, where: str, length: int | None = None) -> list[Any]:
    if type(obj) is not list:
        raise _Invalid(f"{where}: expected a list")
    if length is not None:
        _need(len(obj) == length, where, f"expected {length} entries, found {len(obj)}")
    return obj


def _str(obj: Any, where: str) -> str:
    if type(obj) is not str:
        raise _Invalid(f"{where}: expected a string")
    return obj


def _int(obj: Any, where: str) -> int:
    if type(obj) is not int:
        raise _Invalid(f"{where}: expected an integer")
    return obj


def _all_ints(col: list[Any], where: str, lo: int, hi: int, *, few: bool = False) -> None:
    """Every entry an int (never a bool or a float) in [lo, hi).

    The checks run as C-level passes over the column (its entries' types, then its range;
    ``few``: the column holds few distinct values, so the range is taken over their set,
    which is cheaper than ``min`` plus ``max`` over the whole column). Only a column that
    fails is scanned again in Python, to name the first bad entry."""
    if not col:
        return
    if list(map(type, col)).count(int) == len(col):
        span = set(col) if few else col
        if lo <= min(span) and max(span) < hi:
            return
    for i, x in enumerate(col):
        if type(x) is not int:
            raise _Invalid(f"{where}[{i}]: expected an integer")
    bad = next(i for i, x in enumerate(col) if not lo <= x < hi)
    raise _Invalid(f"{where}[{bad}]: {col[bad]} is out of range")


def _listed_ints(obj: Any, where: str, length: int | None, lo: int, hi: int, *, few: bool = False) -> list[int]:
    """A version-1 integer column: a list of ``length`` entries (``None``: any number), each
    an integer in [lo, hi)."""
    col = _list(obj, where, length)
    _all_ints(col, where, lo, hi, few=few)
    return col


def _plain(obj: Any, where: str, depth: int = 0) -> Any:
    """Accept only msgpack/JSON-compatible plain data."""
    t = type(obj)
    if t in _PLAIN_SCALARS:
        return obj
    _need(depth < _MAX_DEPTH, where, "nested too deeply")
    if t is list:
        for i, x in enumerate(obj):
            if type(x) not in _PLAIN_SCALARS:
                _plain(x, f"{where}[{i}]", depth + 1)
        return obj
    if t is dict:
        for k, x in obj.items():
            if type(x) not in _PLAIN_SCALARS:
                _plain(x, f"{where}.{k}", depth + 1)
        return obj
    raise _Invalid(f"{where}: unsupported {t.__name__} value")


def _shallow(obj: Any, where: str, depth: int = 1) -> Any:
    """``obj`` (a map or list of decoded msgpack, so plain types only) when its nesting is
    within ``_MAX_DEPTH``: every reader (``inspect --json``, the viewer's JSON) recurses.
    Scalars are skipped without a call, so flat data costs one pass over its values."""
    for x in (obj.values() if type(obj) is dict else obj):
        t = type(x)
        if t is dict or t is list:
            _need(depth < _MAX_DEPTH, where, "nested too deeply")
            _shallow(x, where, depth + 1)
    return obj


def _within_depth(objs: list[Any]) -> bool:
    """Whether every one of ``objs`` (maps and lists of decoded msgpack) passes
    :func:`_shallow`. One list comprehension per nesting level over all of them at once,
    instead of a call per container; a caller that gets ``False`` runs :func:`_shallow` on
    each, which names the one that is too deep."""
    level = objs
    for _ in range(_MAX_DEPTH):  # level k+1 holds the containers nested k deep in objs
        level = [x for c in level for x in (c.values() if type(c) is dict else c)
                 if type(x) is dict or type(x) is list]
        if not level:
            return True
    return False


def _opt_map(obj: Any, where: str) -> dict[Any, Any]:
    if obj is None:
        return {}
    return cast(dict[Any, Any], _plain(_map(obj, where), where))


def _tree(obj: Any, where: str, n_values: int, depth: int = 0) -> Any:
    _need(depth < _MAX_DEPTH, where, "structure nested too deeply")
    _map(obj, where)
    _need(len(obj) == 1, where, "a structure entry has exactly one key")
    (key, inner), = obj.items()
    if key == "value":
        _need(type(inner) is int and 0 <= inner < n_values, where, "value id out of range")
    elif key in ("list", "tuple"):
        for i, child in enumerate(_list(inner, f"{where}.{key}")):
            _tree(child, f"{where}.{key}[{i}]", n_values, depth + 1)
    elif key == "dict":
        for i, pair in enumerate(_list(inner, f"{where}.dict")):
            _list(pair, f"{where}.dict[{i}]", 2)
            _need(type(pair[0]) in (str, int), f"{where}.dict[{i}]", "keys are strings or integers")
            _tree(pair[1], f"{where}.dict[{i}]", n_values, depth + 1)
    elif key == "static":
        _need(type(inner) in _PLAIN_SCALARS, where, "static leaves are scalars, strings or null")
    else:
        raise _Invalid(f"{where}: unknown structure kind {key!r}")
    return obj


def _build(body: Any, header: dict[str, Any], version: int = FILE_VERSION) -> Capture:
    b = _map(body, "body")
    packed = version >= 2
    ints = _packed_ints if packed else _listed_ints
    strings = _list(b.get("strings"), "strings")
    if list(map(type, strings)).count(str) != len(strings):
        raise _Invalid("strings: expected a list of strings")
    n_str = len(strings)
    coverage = _read_coverage(b.get("coverage"))

    # values
    vals = _map(b.get("values"), "values")
    dtypes = ints(vals.get("dtype"), "values.dtype", None, 0, n_str, few=True)
    n_values = len(dtypes)
    shape_off = _offsets(vals.get("shape_offsets"), "values.shape_offsets", n_values, packed)
    dims = _read_dims(vals.get("shape_dims"), shape_off[-1], packed)
    measured = _read_measured(vals.get("measured"), strings, n_values, version)
    meshes, devices = _read_meshes(b)
    shardings = _read_shardings(vals, n_values, shape_off, dims, meshes, ints)
    values = ValueTable(shape_off, cast(list[int | str], dims), list(map(strings.__getitem__, dtypes)), measured, shardings)

    # groups and frames (nodes refer to them)
    groups = _columnar_groups(_map(b.get("groups"), "groups"), strings) if version >= 3 else \
        _listed_groups(b.get("groups"))
    _check_acyclic(groups)
    frames = _read_frames(b, strings)
    nodes = _read_nodes(b, strings, n_values, len(groups), len(frames), packed)
    n_nodes = len(nodes)

    cost = _cost(b.get("cost"), n_nodes, ints)
    compiled = _read_compiled(b.get("compiled"), n_nodes)
    inputs = _tree(b.get("inputs"), "inputs", n_values)
    outputs = _tree(b.get("outputs"), "outputs", n_values)
    sources = _read_sources(b.get("sources"))
    recipe = b.get("recipe")
    if recipe is not None:
        _plain(_map(recipe, "recipe"), "recipe")
    failure = None if b.get("failure") is None else _read_failure(b["failure"], n_nodes)
    backend = _str(b.get("backend"), "backend")
    if failure is None:
        _check_evidence(b.get("meta"), backend, coverage, values, measured, groups)
    counts = header.get("counts")
    if isinstance(counts, dict):
        _need(counts.get("nodes") == n_nodes and counts.get("values") == n_values, "header.counts",
              "do not match the body")
    return Capture(
        backend=backend,
        framework=_str(b.get("framework"), "framework"),
        framework_version=_str(b.get("framework_version"), "framework_version"),
        coverage=coverage,
        values=values,
        nodes=nodes,
        groups=groups,
        frames=frames,
        inputs=inputs,
        outputs=outputs,
        sources=sources,
        recipe=recipe,
        failure=failure,
        meta=_opt_map(b.get("meta"), "meta"),
        meshes=meshes,
        devices=devices,
        cost=cost,
        compiled=compiled,
    )


def _read_compiled(obj: Any, n_nodes: int) -> dict[str, Any] | None:
    """``Capture.compiled`` (``capture.graph.compiled.check_compiled``), within the nesting every reader allows."""
    try:
        compiled = check_compiled(obj, n_nodes)
    except CompiledError as exc:
        raise _Invalid(str(exc)) from None
    if compiled is not None and not _within_depth([compiled]):
        raise _Invalid("compiled: nested too deeply")
    return compiled


def _read_coverage(obj: Any) -> Coverage:
    """``[scope, status, reasons, effects]``: what the capture covers."""
    cov = _list(obj, "coverage", 4)
    reasons = _list(cov[2], "coverage.reasons")
    for i, r in enumerate(reasons):
        _str(r, f"coverage.reasons[{i}]")
    _need(cov[1] in COVERAGE_STATUSES, "coverage.status", f"one of {', '.join(COVERAGE_STATUSES)}")
    _need(cov[3] in EFFECTS, "coverage.effects", f"one of {', '.join(EFFECTS)}")
    return Coverage(scope=_str(cov[0], "coverage.scope"), status=cov[1], reasons=reasons, effects=cov[3])


def _read_dims(dims: Any, n_dims: int, packed: bool) -> list[Any]:
    """The values' dimensions, ``n_dims`` of them: each a size (a non-negative integer) or
    a name (a string). A packed column holds sizes only."""
    if packed and type(dims) is bytes:  # every dimension a size (names make it a list)
        signed = dims[:1].islower()  # an unsigned type code holds no negative size
        sizes = _packed_ints(dims, "values.shape_dims", n_dims, -(1 << 63), 1 << 64)
        if signed and sizes and min(sizes) < 0:
            raise _Invalid("values.shape_dims: dimensions are sizes or names")
        return sizes
    listed = _list(dims, "values.shape_dims", n_dims)
    dim_types = set(map(type, listed))
    if not (dim_types <= {int, str} and min(
            set(listed) if dim_types == {int} else [d for d in listed if type(d) is int], default=0) >= 0):
        raise _Invalid("values.shape_dims: dimensions are sizes or names")
    return listed


def _read_meshes(b: dict[Any, Any]) -> tuple[list[Any], Any]:
    """The body's device meshes and devices (``check_meshes``, ``check_devices``), within
    the nesting every reader allows."""
    try:
        meshes = check_meshes(b.get("meshes"))
        devices = check_devices(b.get("devices"))
    except ShardingError as exc:
        raise _Invalid(str(exc)) from None
    if not _within_depth(meshes + ([devices] if devices else [])):
        raise _Invalid("meshes: nested too deeply")
    return meshes, devices


def _read_frames(b: dict[Any, Any], strings: list[str]) -> list[Frame]:
    """The source frames, those listed in ``library_frames`` marked as library code."""
    n_str = len(strings)
    frames = []
    for i, f in enumerate(_list(b.get("frames"), "frames")):
        _list(f, f"frames[{i}]", 4)
        _all_ints(f, f"frames[{i}]", 0, 1 << 62)
        _need(f[0] < n_str and f[3] < n_str, f"frames[{i}]", "string index out of range")
        frames.append(Frame(strings[f[0]], f[1], f[2], strings[f[3]]))
    library = b.get("library_frames")
    if library is not None:
        _all_ints(_list(library, "library_frames"), "library_frames", 0, len(frames))
        for i in library:
            # Navigation only: an absolute path (POSIX or Windows: the file may come from
            # another machine); the viewer decides separately whether it may show it.
            _need(posixpath.isabs(frames[i].file) or ntpath.isabs(frames[i].file),
                  f"library_frames: frame {i}", "a library frame's file is an absolute path")
            frames[i].library = True
    return frames


def _read_nodes(b: dict[Any, Any], strings: list[str], n_values: int, n_groups: int, n_frames: int,
                packed: bool) -> NodeTable:
    """The node table: whole columns are checked here; rows are built on access."""
    ints = _packed_ints if packed else _listed_ints
    nd = _map(b.get("nodes"), "nodes")
    ops = ints(nd.get("op"), "nodes.op", None, 0, len(strings), few=True)
    n_nodes = len(ops)
    literals = _list(b.get("literals"), "literals")
    if not _within_depth([literals]):
        _shallow(literals, "literals")
    in_off = _offsets(nd.get("input_offsets"), "nodes.input_offsets", n_nodes, packed)
    in_pos = ints(nd.get("input_positions"), "nodes.input_positions", in_off[-1], 0, 1 << 31, few=True)
    in_ref = ints(nd.get("input_refs"), "nodes.input_refs", in_off[-1], -len(literals), n_values)
    out_off = _offsets(nd.get("output_offsets"), "nodes.output_offsets", n_nodes, packed)
    out_ids = ints(nd.get("output_ids"), "nodes.output_ids", out_off[-1], 0, n_values)
    param_nodes = ints(nd.get("param_nodes"), "nodes.param_nodes", None, 0, n_nodes)
    param_maps = _read_param_maps(nd, len(param_nodes), packed)
    grp = ints(nd.get("group"), "nodes.group", n_nodes, -1, n_groups, few=True)
    frm = ints(nd.get("frame"), "nodes.frame", n_nodes, -1, n_frames, few=True)
    opaque_ids = ints(nd.get("opaque"), "nodes.opaque", None, 0, n_nodes)
    return NodeTable(
        list(map(strings.__getitem__, ops)), in_off, in_pos, in_ref, literals, out_off, out_ids,
        dict(zip(param_nodes, param_maps)), grp, frm, frozenset(opaque_ids),
    )


def _read_param_maps(nd: dict[Any, Any], n_param_nodes: int, packed: bool) -> list[dict[Any, Any]]:
    """Per node with params (``nodes.param_nodes``), its params map. Version 1: one map per
    such node; version 2: a table of distinct maps and, per such node, its map's index in
    the table."""
    maps_key = "param_table" if packed else "param_maps"
    maps_field = f"nodes.{maps_key}"
    param_maps = _list(nd.get(maps_key), maps_field, None if packed else n_param_nodes)
    if list(map(type, param_maps)).count(dict) != len(param_maps):
        raise _Invalid(f"{maps_field}: expected maps")
    if not _within_depth(param_maps):
        for i, pm in enumerate(param_maps):
            _shallow(pm, f"{maps_field}[{i}]")
        raise _Invalid(f"{maps_field}: nested too deeply")  # not reached: _shallow names the map
    if packed:
        param_index = _packed_ints(nd.get("param_index"), "nodes.param_index", n_param_nodes, 0, len(param_maps))
        param_maps = list(map(param_maps.__getitem__, param_index))
    return param_maps


def _read_sources(obj: Any) -> list[Source]:
    """The source files the capture ran, each ``[path, sha256]``."""
    sources = []
    for i, src in enumerate(_list(obj, "sources")):
        _list(src, f"sources[{i}]", 2)
        sources.append(Source(_str(src[0], f"sources[{i}].path"), _str(src[1], f"sources[{i}].sha256")))
    return sources


def _read_failure(obj: Any, n_nodes: int) -> Failure:
    """A failed capture's failure record; such a capture carries no nodes."""
    fr = _map(obj, "failure")
    fframes = []
    for i, f in enumerate(_list(fr.get("frames"), "failure.frames")):
        _list(f, f"failure.frames[{i}]", 4)
        fframes.append(Frame(_str(f[0], "failure.frames.file"), _int(f[1], "failure.frames.line"),
                             _int(f[2], "failure.frames.column"), _str(f[3], "failure.frames.function")))
    failure = Failure(
        _str(fr.get("type"), "failure.type"),
        _str(fr.get("message"), "failure.message"),
        _str(fr.get("stage"), "failure.stage"),
        fframes,
        _opt_map(fr.get("details"), "failure.details"),
    )
    _need(n_nodes == 0, "failure", "a failed capture carries no nodes")
    return failure


def _check_evidence(meta: Any, backend: str, coverage: Coverage, values: ValueTable,
                    measured: Sequence[dict[str, Any] | None] | None, groups: list[Group]) -> None:
    """A traced program is abstract: it cannot claim eager execution or carry
    measurements, and an eager capture cannot pose as a traced program. An abstract
    forward measures nothing either."""
    traced = coverage.scope == "traced_program"
    _need(traced or backend != "jaxpr", "coverage.scope",
          f"{coverage.scope!r} does not match backend 'jaxpr' (a traced program's scope is 'traced_program')")
    if traced and values.measured_any():
        raise _Invalid("values.measured: a traced program carries no measured evidence")
    if backend == "jaxpr" and isinstance(meta, dict):
        timing = next((k for k in meta if type(k) is str and _RUNTIME_TIMING.search(k)), None)
        _need(timing is None, f"meta.{timing}", "a traced program carries no runtime timings")
    if coverage.scope == ABSTRACT_FORWARD_SCOPE:
        _refuse_measurements(measured, groups)


#: The largest FLOP or byte count one node may carry (a signed 64-bit integer).
MAX_COST = COUNT_LIMIT  # the same limit the counters refuse beyond (capture/units.py)


def _cost(obj: Any, n_nodes: int, ints: Any) -> NodeCosts | None:
    """The per-node cost columns (``NodeCosts``), or None for a file written without them."""
    if obj is None:
        return None
    c = _map(obj, "cost")
    rules = _list(c.get("rules"), "cost.rules")
    if list(map(type, rules)).count(str) != len(rules):
        raise _Invalid("cost.rules: expected a list of strings")
    # -1 (UNCOUNTED) or a count
    flops = ints(c.get("flops"), "cost.flops", n_nodes, -1, MAX_COST + 1)
    read = ints(c.get("bytes_read"), "cost.bytes_read", n_nodes, -1, MAX_COST + 1)
    written = ints(c.get("bytes_written"), "cost.bytes_written", n_nodes, -1, MAX_COST + 1)
    rule = ints(c.get("rule"), "cost.rule", n_nodes, 0, len(rules), few=True)
    estimates = ints(c.get("estimates"), "cost.estimates", None, 0, n_nodes)
    if any(a >= b for a, b in zip(estimates, islice(estimates, 1, None))):
        raise _Invalid("cost.estimates: node ids must be sorted, each once")
    return NodeCosts(flops, read, written, rule, rules, estimates, _opt_map(c.get("notes"), "cost.notes"))


def _read_shardings(vals: dict[str, Any], n_values: int, shape_off: list[int], dims: list[Any], meshes: list[Any],
                    ints: Any) -> list[dict[str, Any] | None] | None:
    """Per value its sharding map (shared with equal ones) or None; None when no value has one."""
    table = vals.get("sharding_table")
    if table is None:
        _need(vals.get("sharding_index") is None, "values.sharding_index", "present without values.sharding_table")
        return None
    table = _list(table, "values.sharding_table")
    if list(map(type, table)).count(dict) != len(table):
        raise _Invalid("values.sharding_table: expected maps")
    if not _within_depth(table):
        raise _Invalid("values.sharding_table: nested too deeply")
    _need(not table or bool(meshes), "values.sharding_table", "shardings without meshes")
    index = ints(vals.get("sharding_index"), "values.sharding_index", n_values, -1, len(table))
    checked: set[tuple[int, int]] = set()
    for v, k in enumerate(index):
        if k < 0:
            continue
        rank = shape_off[v + 1] - shape_off[v]
        if (k, rank) in checked:  # the checks depend on the rank alone
            continue
        try:
            check_sharding(table[k], dims[shape_off[v]:shape_off[v + 1]], meshes, f"values.sharding_table[{k}]")
        except ShardingError as exc:
            raise _Invalid(f"{exc} (value {v})") from None
        checked.add((k, rank))
    return [None if k < 0 else table[k] for k in index]


# What only a run measures: refused in an abstract capture (it ran on fake tensors).
ABSTRACT_REFUSED_VALUE_KEYS = ("stats", "bytes")
ABSTRACT_REFUSED_GROUP_KEYS = ("output_bytes", "result_bytes")


def _read_measured(measured: Any, strings: list[str], n_values: int,
                   version: int) -> Sequence[dict[str, Any] | None] | None:
    """The values' measured maps: version 3's map columns, or a list of maps."""
    if measured is None:
        return None
    if version >= 3:
        return unpack_maps(measured, strings, "values.measured", n_values, check_raw=_raw_within_depth)
    _list(measured, "values.measured", n_values)
    present = [m for m in measured if m is not None]
    if list(map(type, present)).count(dict) != len(present) or not _within_depth(present):
        for i, m in enumerate(measured):
            if m is not None:
                _shallow(_map(m, f"values.measured[{i}]"), f"values.measured[{i}]")
        raise _Invalid("values.measured: nested too deeply")  # not reached: _shallow names the entry
    return cast(list[dict[str, Any] | None], measured)


def _listed_groups(obj: Any) -> list[Group]:
    """Versions 1 and 2's groups: one ``[kind, name, parent, attrs]`` list each."""
    groups_raw = _list(obj, "groups")
    n_groups = len(groups_raw)
    groups = []
    for i, g in enumerate(groups_raw):
        _list(g, f"groups[{i}]", 4)
        parent = _int(g[2], f"groups[{i}].parent")
        _need(-1 <= parent < n_groups and parent != i, f"groups[{i}].parent", "out of range")
        groups.append(
            Group(i, _str(g[0], f"groups[{i}].kind"), _str(g[1], f"groups[{i}].name"),
                  None if parent < 0 else parent, _opt_map(g[3], f"groups[{i}].attrs"))
        )
    return groups


def _columnar_groups(cols: dict[Any, Any], strings: list[str]) -> list[Group]:
    """Version 3's groups: kind, name and parent columns, and the attrs in map columns."""
    n_str = len(strings)
    kinds = _packed_ints(cols.get("kind"), "groups.kind", None, 0, n_str, few=True)
    n = len(kinds)
    names = _packed_ints(cols.get("name"), "groups.name", n, 0, n_str)
    parents = _packed_ints(cols.get("parent"), "groups.parent", n, -1, n)
    bad = next((i for i, p in enumerate(parents) if p == i), None)
    if bad is not None:
        raise _Invalid(f"groups[{bad}].parent: out of range")
    attrs = unpack_maps(cols.get("attrs"), strings, "groups.attrs", n, check_raw=_raw_plain)
    return [Group(i, strings[k], strings[m], None if p < 0 else p, a or {})
            for i, k, m, p, a in zip(range(n), kinds, names, parents, attrs)]


def _raw_within_depth(values: list[Any], where: str) -> None:
    """A plain column of measured maps: nested no deeper than any value may be (the
    first value too deep is named by its index in the column)."""
    if not _within_depth([values]):
        for i, x in enumerate(values):
            if type(x) is dict or type(x) is list:
                _shallow([x], f"{where}[{i}]")


def _raw_plain(values: list[Any], where: str) -> None:
    """A plain column of group attrs: plain data only, nested no deeper than allowed."""
    _plain(values, where)


def _refuse_measurements(measured: Sequence[dict[str, Any] | None] | None, groups: list[Group]) -> None:
    """An abstract capture keeps what fake tensors know (device, strides, storages and
    aliases, labels) and nothing measured: no statistics, no bytes."""
    if isinstance(measured, MapColumns):
        for key in ABSTRACT_REFUSED_VALUE_KEYS:
            if key in measured.keys():
                i = next(i for i, x in enumerate(measured.values_of(key)) if x is not None)
                raise _Invalid(f"values.measured[{i}].{key}: an abstract capture carries no measured evidence")
        return _refuse_group_measurements(groups)
    for i, m in enumerate(measured or ()):
        if m is not None:
            for key in ABSTRACT_REFUSED_VALUE_KEYS:
                if key in m:
                    raise _Invalid(f"values.measured[{i}].{key}: an abstract capture carries no measured evidence")
    _refuse_group_measurements(groups)


def _refuse_group_measurements(groups: list[Group]) -> None:
    for g in groups:
        for key in ABSTRACT_REFUSED_GROUP_KEYS:
            if key in g.attrs:
                raise _Invalid(f"groups[{g.id}].attrs.{key}: an abstract capture carries no measured evidence")


def _offsets(obj: Any, where: str, n: int, packed: bool) -> list[int]:
    """CSR offsets: n+1 non-decreasing integers starting at 0."""
    if packed:
        off = _packed_ints(obj, where, n + 1, 0, 1 << 62)
        _need(off[0] == 0, where, "must start at 0")
        if sorted(off) != off:  # sorting a sorted list of ints is one linear pass
            raise _Invalid(f"{where}: offsets must not decrease")
        return off
    off = _list(obj, where, n + 1)
    # One C-level pass each: types, then order (sorting a sorted list of ints is a
    # linear scan). Only a column that fails is checked again entry by entry, for the message.
    if list(map(type, off)).count(int) == len(off) and off[0] == 0 and off[-1] < 1 << 62 and sorted(off) == off:
        return off
    _all_ints(off, where, 0, 1 << 62)
    _need(off[0] == 0, where, "must start at 0")
    if any(a > b for a, b in zip(off, off[1:])):
        raise _Invalid(f"{where}: offsets must not decrease")
    return off


def _check_acyclic(groups: list[Group]) -> None:
    state = [0] * len(groups)  # 0 unknown, 1 on path, 2 fine
    for start in range(len(groups)):
        path = []
        g: int | None = start
        while g is not None and state[g] == 0:
            state[g] = 1
            path.append(g)
            g = groups[g].parent
        if g is not None and state[g] == 1:
            raise _Invalid(f"groups[{g}].parent: groups form a cycle")
        for x in path:
            state[x] = 2

