"""What decoding a graph file's body may hold and take: msgpack's bounds, and the
budgets of containers, elements and memory charged while the body decodes
(:func:`capture.graph.graphfile.decode` applies them)."""

from __future__ import annotations

import sys
from itertools import chain
from typing import Any

import msgpack

from .packed import MAX_ENTRIES as _MAX_CONTAINER

_MAX_STR = 16 << 20


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
#: What an ASCII string takes beyond its characters (``sys.getsizeof("")``): a compact
#: ASCII string holds one byte per character after it, so a column of them is charged by
#: lengths (C-level passes) rather than by getsizeof per string (100,000 strings: 21 ms).
_ASCII_STR_BYTES = sys.getsizeof("")
#: A map key new to this decode: its string (interned, so a repeated key costs nothing)
#: and its entry in the table of interned strings.
_NEW_KEY_BYTES = 160


#: Short lists (a capture's literal operands: 43k of one to three integers in a 100k-op
#: Torch capture) are charged in batches of this many, by C-level passes over the batch,
#: instead of a Python computation each: what decoding holds past the budget before a
#: batch is charged is at most this many short lists.
SHORT_LIST = 32
SHORT_BATCH = 4096


class _MemoryCharge:
    """The hooks that count what a body's decoding holds: containers against the
    header's budget, elements, and bytes of memory against :func:`memory_budget` (each
    list and map charged when msgpack completes it: its own size and its elements'; map
    keys once per distinct key, as msgpack interns them; lists of up to
    :data:`SHORT_LIST` elements in batches of :data:`SHORT_BATCH`, and the last batch by
    :meth:`settle`, which the decoder calls once msgpack is done). Raises
    :class:`_OverBudget`."""

    def __init__(self, containers: int, elements: int, memory: int) -> None:
        left = [containers, elements, memory]
        keys: set[str] = set()
        cost = _ELEMENT_BYTES.__getitem__
        small = _CACHED_INTS.__contains__
        size = sys.getsizeof
        short: list[list[Any]] = []  # short lists not charged yet
        keep = short.append

        def over() -> None:
            raise _OverBudget("containers" if left[0] < 0 else "elements" if left[1] < 0 else "memory")

        def settle() -> None:
            """Charge the short lists not charged yet."""
            if not short:
                return
            k = len(short)
            items = list(chain.from_iterable(short))
            short.clear()
            left[0] -= k
            left[1] -= len(items) + k
            left[2] -= 64 * k + 8 * len(items) + sum(map(cost, map(type, items)))
            if left[0] < 0 or left[1] < 0 or left[2] < 0:
                over()

        def charged_list(obj: list[Any]) -> list[Any]:
            n = len(obj)
            if n <= SHORT_LIST:
                keep(obj)
                if len(short) >= SHORT_BATCH:
                    settle()
                return obj
            c = 64 + 8 * n + sum(map(cost, map(type, obj)))
            kinds = set(map(type, obj))  # a long column: what Python really holds for it
            if kinds == {int}:
                c -= 32 * sum(map(small, obj))
            elif kinds == {str}:  # each string's size, and the allocator's rounding up to 16 bytes
                ascii_only = all(map(str.isascii, obj))
                c += (_ASCII_STR_BYTES * n + sum(map(len, obj)) if ascii_only else sum(map(size, obj))) - 64 * n
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
        self.settle = settle
        self._left = left
        self._memory = memory

    @property
    def used(self) -> int:
        """The bytes of memory charged so far."""
        self.settle()
        return self._memory - self._left[2]


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

def _refuse_ext(code: int, data: bytes) -> Any:
    raise ValueError("msgpack extension types are not used by graph files")
