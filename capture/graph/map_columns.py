"""A list of maps stored as columns: how graph files (version 3) keep the per-value
``measured`` evidence and the per-group ``attrs``.

A 100,000-op Torch capture has about 200,000 measured maps (device, strides, bytes,
storage, aliases, statistics …) and, as msgpack maps, they are most of its file and of
the time it takes to read it: every map and list is an object msgpack makes and the
reader checks one by one. Stored as columns they are a few dozen packed arrays.

Maps with the same keys in the same order (a *pattern*: every activation of a capture
has ``device, strides, bytes, storage, stats``) are stored together, one column per key.
:func:`pack_maps` turns a list of maps (or ``None``) into one msgpack-able map::

    {"n": N,                                  # entries
     "order": PACKED,                         # per entry: 0 for None, k + 1 for pattern k
     "patterns": [[[KEY, ...], [COLUMN, ...]], ...]}

where the columns of pattern ``k`` hold, in entry order, the values of the entries of
that pattern, and a column is, by the type of every value it holds: ``["i", PACKED]``
integers, ``["f", DOUBLES]`` floats, ``["s", PACKED]`` strings (indices into the file's
string table, -1 for None), ``["l", OFFSETS, PACKED]`` lists of integers (strides,
aliases), ``["m", MAPS]`` maps (statistics: the same form, nested) or ``["r", [VALUE,
...]]`` anything else, as plain msgpack. Keys keep each map's own order, values their
exact types (an integer never comes back a float, ``True`` never ``1``), so a map read
back equals, and prints like, the one written. Packing reads every map once, in C-level
passes, and types and packs each column in C-level passes: no Python runs per map.

:func:`unpack_maps` checks a stored form as the graph-file reader checks everything
(any problem raises :class:`~capture.graph.packed.Invalid` naming the field), decodes
every column (C-level passes) and gives a :class:`MapColumns`: the maps themselves are
built when they are asked for (one, or all at once by :meth:`MapColumns.maps`), and
:meth:`MapColumns.values_of` reads one key of every map without building any.
Standard library only: the worker imports it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import accumulate, chain, compress, count, islice, repeat
from operator import countOf
from typing import Any, Callable, cast

from .packed import Invalid, need, pack_floats, pack_ints, packed_floats, packed_ints

#: Maps nested in maps deeper than this are stored as plain msgpack (``"r"`` columns).
MAX_NESTING = 4
_NONE = type(None)


# --------------------------------------------------------------------------- writing


def pack_maps(maps: Sequence[dict | None], string: Callable[[str], int], nesting: int = 0) -> dict:
    """``maps`` in columns (see the module docstring); ``string`` interns a string in the
    file's string table and returns its index. Every step is a C-level pass over the
    maps (their key tuples, the pattern of each, their values): no Python code runs per
    map. Maps read from a file (a :class:`MapColumns`) hand over
    their columns as they are."""
    if isinstance(maps, MapColumns):
        return {"n": maps.n, "order": pack_ints(maps._order), "patterns": [
            [list(keys), [_column(col if isinstance(col, MapColumns) else list(col), string, nesting) for col in cols]]
            for keys, cols in maps._patterns]}
    present = [m for m in maps if m is not None]
    keysets = list(map(tuple, present))
    patterns = {keys: k for k, keys in enumerate(dict.fromkeys(keysets), 1)}
    kinds = list(map(patterns.__getitem__, keysets))  # the pattern of each present map
    if len(present) == len(maps):
        order = kinds
    else:  # entries without a map are pattern 0
        it = iter(kinds)
        order = [0 if m is None else next(it) for m in maps]
    out = []
    for keys, k in patterns.items():
        group = present if len(patterns) == 1 else list(compress(present, map(k.__eq__, kinds)))
        # One pass over the maps (scattered in memory: each one read once), then each
        # column a strided slice of that compact list.
        flat = list(chain.from_iterable(map(dict.values, group)))
        width = len(keys)
        out.append([list(keys), [_column(flat[j::width], string, nesting) for j in range(width)]])
    return {"n": len(maps), "order": pack_ints(order), "patterns": out}


def _column(values: Any, string: Callable[[str], int], nesting: int) -> list:
    if isinstance(values, MapColumns):  # a file's column of maps, as it was read
        return ["m", pack_maps(values, string, nesting + 1)]
    types = set(map(type, values))
    try:
        if types == {int}:
            return ["i", pack_ints(values)]
        if types == {float}:
            return ["f", pack_floats(values)]
        if str in types and types <= {str, _NONE}:
            index = {x: -1 if x is None else string(x) for x in dict.fromkeys(values)}  # first-seen order
            return ["s", pack_ints(list(map(index.__getitem__, values)))]
        if types == {list}:
            flat = list(chain.from_iterable(values))
            if set(map(type, flat)) <= {int}:
                return ["l", pack_ints([0, *accumulate(map(len, values))]), pack_ints(flat)]
        if types == {dict} and nesting < MAX_NESTING and all(type(k) is str for m in values for k in m):
            return ["m", pack_maps(values, string, nesting + 1)]
    except ValueError:  # an integer beyond 64 bits: kept as msgpack writes it (or refuses it)
        pass
    return ["r", values]


# --------------------------------------------------------------------------- reading


#: Entries of a :class:`MapColumns` built before it ranks every entry at once.
ONE_BY_ONE_RANKS = 32


class MapColumns(Sequence):
    """Maps read from columns (validated by :func:`unpack_maps`); ``self[i]`` builds map
    ``i`` (``None`` where none was stored), a fresh one at each access."""

    __slots__ = ("n", "_order", "_patterns", "_rank", "_asked")

    def __init__(self, n: int, order: list[int], patterns: list[tuple[tuple, list[Sequence]]]) -> None:
        self.n = n
        self._order = order
        self._patterns = patterns  # (keys, a decoded column per key)
        self._rank: list[int] | None = None  # entry -> its index among its pattern's entries
        self._asked = 0  # entries built before the ranks were made (each ranked on its own)

    def __len__(self) -> int:
        return self.n

    def _ranks(self) -> list[int]:
        rank = self._rank
        if rank is None:
            # one counter per pattern, advanced by C-level passes: an entry's rank is how
            # many entries of its pattern came before it (a Python loop over the 185k
            # values of a 100k-op capture was 25 ms, for the first map asked for)
            counters = [count() for _ in range(len(self._patterns) + 1)]
            rank = self._rank = list(map(next, map(counters.__getitem__, self._order)))
        return rank

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        k = self._order[i]
        if k == 0:
            return None
        keys, cols = self._patterns[k - 1]
        if self._rank is None and self._asked < ONE_BY_ONE_RANKS:
            # the first few entries asked for (a summary's inputs and outputs) ranked on
            # their own, by a C-level count: not the whole column's ranks for one map
            self._asked += 1
            r = countOf(islice(self._order, i), k)
        else:
            r = self._ranks()[i]
        return {key: _fresh(col[r]) for key, col in zip(keys, cols)}

    def maps(self) -> list[dict | None]:
        """Every map, built at once (C-level passes per pattern)."""
        built = [list(map(dict, map(zip, repeat(keys), zip(*map(_fresh_column, cols))))) if keys
                 else [{} for _ in range(self._count(k))]
                 for k, (keys, cols) in enumerate(self._patterns, 1)]
        if len(built) == 1 and 0 not in self._order:
            return cast(list[dict | None], built[0])
        its = [iter(())] + [iter(b) for b in built]
        return [next(its[k]) if k else None for k in self._order]

    def _count(self, k: int) -> int:
        return self._order.count(k)

    def __iter__(self) -> Iterator[dict | None]:
        return iter(self.maps())

    def any_present(self) -> bool:
        """Whether any entry holds a map."""
        return any(self._order)

    def keys(self) -> list[str]:
        """Every key some map holds (the top level)."""
        return list(dict.fromkeys(chain.from_iterable(keys for keys, _ in self._patterns)))

    def values_of(self, key: str) -> list:
        """Every entry's value of ``key`` (``None`` where the entry holds no such key),
        without building the maps."""
        columns = [cols[keys.index(key)] if key in keys else None for keys, cols in self._patterns]
        if not any(c is not None for c in columns):
            return [None] * self.n
        its = [repeat(None)] + [iter(c) if c is not None else repeat(None) for c in columns]
        got = map(next, map(its.__getitem__, self._order))  # C-level: no Python per entry
        if any(_holds_lists(c) for c in columns if c is not None):
            return list(map(_fresh, got))
        return list(got)


class Slices(Sequence):
    """A column of integer lists (strides, aliases) as CSR offsets over one flat list:
    entry ``i`` is ``flat[off[i]:off[i + 1]]``, a fresh list at each access. Slicing
    200,000 lists up front was most of reading a 100,000-op capture's measured maps, which
    a first view hardly reads."""

    __slots__ = ("_off", "_flat")

    def __init__(self, off: list[int], flat: list[int]) -> None:
        self._off, self._flat = off, flat

    def __len__(self) -> int:
        return len(self._off) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self._off) - 1
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self._flat[self._off[i]:self._off[i + 1]]

    def __iter__(self) -> Iterator[list[int]]:
        off, flat = self._off, self._flat
        return map(flat.__getitem__, map(slice, off, islice(off, 1, None)))


class Strings(Sequence):
    """A column of strings (or None) as indices into the file's string table (with None
    last): entry ``i`` is ``table[index[i]]``, looked up when read."""

    __slots__ = ("_index", "_table")

    def __init__(self, index: Sequence[int], table: list) -> None:
        self._index, self._table = index, table

    def __len__(self) -> int:
        return len(self._index)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list(map(self._table.__getitem__, self._index[i]))
        return self._table[self._index[i]]

    def __iter__(self) -> Iterator[str | None]:
        return map(self._table.__getitem__, self._index)


def _fresh(x: Any) -> Any:
    """A list value (strides) is handed out as a copy: a caller may keep and change it."""
    return list(x) if type(x) is list else x


def _holds_lists(col: Sequence) -> bool:
    """Whether a decoded column may hand out lists (which :func:`_fresh` copies)."""
    return isinstance(col, Slices) or (type(col) is list and list in set(map(type, col)))


def _fresh_column(col: Sequence) -> Any:
    return map(_fresh, col) if col and type(col[0]) is list else col


def unpack_maps(obj: Any, strings: list[str], where: str, length: int | None = None, nesting: int = 0,
                check_raw: Callable[[list, str], None] | None = None, _table: list | None = None) -> MapColumns:
    """The maps stored by :func:`pack_maps` in ``obj``, checked: ``strings`` is the file's
    string table, ``length`` the number of entries expected (``None``: any),
    ``check_raw(values, where)`` checks the plain msgpack values of an ``"r"`` column
    (nesting depth, types; raises :class:`Invalid`)."""
    need(type(obj) is dict, where, "expected a map of columns")
    table = _table if _table is not None else [*strings, None]  # index -1: None
    n = obj.get("n")
    need(type(n) is int and n >= 0, f"{where}.n", "expected a count")
    if length is not None:
        need(n == length, f"{where}.n", f"expected {length} entries, found {n}")
    patterns = obj.get("patterns")
    need(type(patterns) is list, f"{where}.patterns", "expected a list")
    order = packed_ints(obj.get("order"), f"{where}.order", n, 0, len(patterns) + 1, few=True)
    counts = [0] * (len(patterns) + 1)
    for k in set(order):
        counts[k] = order.count(k)
    decoded = []
    for k, pattern in enumerate(patterns):
        here = f"{where}.patterns[{k}]"
        need(type(pattern) is list and len(pattern) == 2, here, "expected keys and columns")
        keys, cols = pattern
        need(type(keys) is list and all(type(x) is str for x in keys) and len(set(keys)) == len(keys),
             f"{here}.keys", "expected distinct string keys")
        need(type(cols) is list and len(cols) == len(keys), f"{here}.columns", f"expected {len(keys)} columns")
        count = counts[k + 1]
        decoded.append((tuple(keys), [_decode(c, count, table, f"{where}.{key}", nesting, check_raw)
                                      for key, c in zip(keys, cols)]))
    return MapColumns(n, order, decoded)


def _decode(col: Any, count: int, table: list, where: str, nesting: int,
            check_raw: Callable[[list, str], None] | None) -> Sequence:
    """One column of ``count`` values, decoded and checked (``table``: the string table
    with None last). A column of maps stays a :class:`MapColumns`, built on access."""
    need(type(col) is list and len(col) >= 2 and type(col[0]) is str, where, "expected a column")
    kind = col[0]
    if kind == "i" and len(col) == 2:
        return packed_ints(col[1], where, count, -(1 << 63), 1 << 64, as_list=False)
    if kind == "f" and len(col) == 2:
        return packed_floats(col[1], where, count, as_list=False)
    if kind == "s" and len(col) == 2:
        return Strings(packed_ints(col[1], where, count, -1, len(table) - 1, few=True, as_list=False), table)
    if kind == "l" and len(col) == 3:
        off = packed_ints(col[1], f"{where}.offsets", count + 1, 0, 1 << 62)
        need(off[0] == 0 and sorted(off) == off, f"{where}.offsets", "must start at 0 and not decrease")
        flat = packed_ints(col[2], where, off[-1], -(1 << 63), 1 << 64)
        return Slices(off, flat)
    if kind == "m" and len(col) == 2:
        need(nesting < MAX_NESTING, where, "maps nested too deeply")
        return unpack_maps(col[1], table[:-1], where, count, nesting + 1, check_raw, table)
    if kind == "r" and len(col) == 2:
        need(type(col[1]) is list and len(col[1]) == count, where, f"expected {count} values")
        if check_raw is not None:
            check_raw(col[1], where)
        return col[1]
    raise Invalid(f"{where}: unknown column {kind!r}")
