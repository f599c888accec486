"""A capture's nodes and values as columns, with ``Node``/``Value`` rows built on access.

A graph file holds these columns (:mod:`capture.graph.graphfile` reads them into a
:class:`NodeTable` and a :class:`ValueTable`); a capture a worker builds in memory holds
lists of rows. ``Capture.nodes`` / ``Capture.values`` are either, as sequences of rows.
A reader that works on whole columns (the viewer's index, the diff, the cost readers,
``tensorviz inspect``) takes them through :meth:`NodeTable.of` / :meth:`ValueTable.of`:
a table is used as it is, a list of rows is turned into columns there, once per call.
The columns are read-only by contract: rows are built from them."""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from itertools import compress, islice, repeat
from typing import Any, NamedTuple, cast, overload

from .map_columns import MapColumns
from .model import Node, Operand, Value

#: Per-value measured maps: a list, or a version-3 file's :class:`MapColumns` (each map
#: built when it is asked for).
Measured = Sequence[dict[str, Any] | None]


class NodeColumns(NamedTuple):
    """Nodes as columns. ``group``/``frame`` use -1 for none; operands of node ``i``
    are ``input_refs[input_offsets[i]:input_offsets[i+1]]`` (a ref ``r < 0`` is a
    literal), outputs likewise; ``opaque`` is the set of opaque node ids."""

    op: list[str]
    group: list[int]
    frame: list[int]
    input_offsets: list[int]
    input_refs: list[int]
    output_offsets: list[int]
    output_ids: list[int]
    opaque: frozenset[int]


class ValueTable(Sequence[Value]):
    """Values as columns (a file's, validated, or a list's, converted by :meth:`of`),
    ``Value`` rows built on access."""

    __slots__ = ("_off", "_dims", "_dtype", "_measured", "_sharding")

    def __init__(self, off: list[int], dims: list[int | str], dtype: list[str],
                 measured: Measured | None,
                 sharding: list[dict[str, Any] | None] | None = None) -> None:
        self._off, self._dims, self._dtype, self._measured = off, dims, dtype, measured
        self._sharding = sharding

    @classmethod
    def of(cls, values: Sequence[Value]) -> ValueTable:
        """``values`` as a table: itself when it is one, else its rows' columns."""
        if isinstance(values, ValueTable):
            return values
        off, dims = [0], []
        for v in values:
            dims += v.shape
            off.append(len(dims))
        measured = [v.measured for v in values]
        sharding = [v.sharding for v in values]
        return cls(off, dims, [v.dtype for v in values],
                   measured if any(m is not None for m in measured) else None,
                   sharding if any(x is not None for x in sharding) else None)

    def __len__(self) -> int:
        return len(self._dtype)

    def shape_columns(self) -> tuple[list[int], list[int | str]]:
        """``(offsets, dims)``: value ``i``'s shape is ``dims[offsets[i]:offsets[i+1]]``."""
        return self._off, self._dims

    def measured_column(self) -> Measured | None:
        """Per-value measured maps (a list, or a version-3 file's :class:`MapColumns`, which
        builds each map when it is asked for), or ``None`` when no value was measured."""
        return self._measured

    def measured_any(self) -> bool:
        """Whether any value was measured, without building a map."""
        m = self._measured
        if m is None:
            return False
        return m.any_present() if isinstance(m, MapColumns) else any(x is not None for x in m)

    def measured_key(self, key: str) -> list[Any]:
        """Every value's measured ``key`` (``None`` where absent), without building maps."""
        m = self._measured
        if m is None:
            return [None] * len(self)
        if isinstance(m, MapColumns):
            return m.values_of(key)
        return [x.get(key) if type(x) is dict else None for x in m]

    def sharding_column(self) -> list[dict[str, Any] | None] | None:
        """Per-value sharding maps (read-only, shared by equal ones), or ``None`` when no
        value is split."""
        return self._sharding

    def dtype_column(self) -> list[str]:
        """Per-value dtype names (read-only by contract)."""
        return self._dtype

    def __iter__(self) -> Iterator[Value]:
        """Every row in order, each a fresh object, built by C-level passes over the columns."""
        off, dims = self._off, self._dims
        return map(
            Value,
            range(len(self._dtype)),
            [dims[a:b] for a, b in zip(off, islice(off, 1, None))],
            self._dtype,
            repeat(None) if self._measured is None else self._measured,
            repeat(None) if self._sharding is None else self._sharding,
        )

    @overload
    def __getitem__(self, i: int) -> Value: ...

    @overload
    def __getitem__(self, i: slice) -> list[Value]: ...

    def __getitem__(self, i: int | slice) -> Value | list[Value]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = _row(i, len(self))
        m = self._measured[i] if self._measured is not None else None
        sh = self._sharding[i] if self._sharding is not None else None
        return Value(i, self._dims[self._off[i]:self._off[i + 1]], self._dtype[i], m, sh)


class NodeTable(Sequence[Node]):
    """Nodes as columns (a file's, validated, or a list's, converted by :meth:`of`),
    ``Node`` rows built on access. Each access builds fresh rows (operands, outputs); a
    node's params map is the table's own (read-only by contract), which nodes with equal
    params share in a version-2 file."""

    __slots__ = ("_op", "_in_off", "_in_pos", "_in_ref", "_lit", "_out_off", "_out", "_params",
                 "_group", "_frame", "_opaque")

    def __init__(self, op: list[str], in_off: list[int], in_pos: list[int], in_ref: list[int], lit: list[Any],
                 out_off: list[int], out: list[int], params: dict[int, dict[str, Any]], group: list[int],
                 frame: list[int], opaque: frozenset[int]) -> None:
        self._op, self._in_off, self._in_pos, self._in_ref, self._lit = op, in_off, in_pos, in_ref, lit
        self._out_off, self._out, self._params = out_off, out, params
        self._group, self._frame, self._opaque = group, frame, opaque

    @classmethod
    def of(cls, nodes: Sequence[Node]) -> NodeTable:
        """``nodes`` as a table: itself when it is one, else its rows' columns (a
        literal operand becomes the next entry of :meth:`literals`)."""
        if isinstance(nodes, NodeTable):
            return nodes
        in_off, in_pos, in_ref, lit, out_off, out = [0], [], [], [], [0], []
        for n in nodes:
            for o in n.inputs:
                in_pos.append(o.position)
                if o.value is None:
                    lit.append(o.literal)
                    in_ref.append(-len(lit))
                else:
                    in_ref.append(o.value)
            in_off.append(len(in_ref))
            out += n.outputs
            out_off.append(len(out))
        return cls(
            [n.op for n in nodes], in_off, in_pos, in_ref, lit, out_off, out,
            {n.id: n.params for n in nodes if n.params},
            [-1 if n.group is None else n.group for n in nodes],
            [-1 if n.frame is None else n.frame for n in nodes],
            frozenset(n.id for n in nodes if n.opaque),
        )

    def __len__(self) -> int:
        return len(self._op)

    def op(self, i: int) -> str:
        """The op of node ``i`` without building the row (fast scans)."""
        return self._op[i]

    def columns(self) -> NodeColumns:
        """The columns themselves, for whole-graph indexing without rows.
        Read-only by contract: the rows are built from them."""
        return NodeColumns(self._op, self._group, self._frame, self._in_off, self._in_ref,
                           self._out_off, self._out, self._opaque)

    def with_groups(self, group: list[int]) -> NodeTable:
        """The same nodes with another ``group`` column (-1 for none): a view that
        regroups them (:mod:`capture.analysis.loops`) shares every other column."""
        if len(group) != len(self._op):
            raise ValueError(f"a group column of {len(group)} entries for {len(self._op)} nodes")
        return NodeTable(self._op, self._in_off, self._in_pos, self._in_ref, self._lit, self._out_off, self._out,
                         self._params, group, self._frame, self._opaque)

    def input_positions(self) -> list[int]:
        """Each operand's argument position, in the order of ``columns().input_refs``."""
        return self._in_pos

    def literals(self) -> list[Any]:
        """The literal operands: an input ref ``r < 0`` is ``literals()[-1 - r]``."""
        return self._lit

    def params_map(self) -> dict[int, dict[str, Any]]:
        """The params of each node that has any, by node id (read-only by contract)."""
        return self._params

    def __iter__(self) -> Iterator[Node]:
        """Every row in order: the same rows as indexing (fresh rows, operands and outputs).
        Built by C-level passes over whole columns (``map`` over the columns into the row
        class) rather than a Python loop per row: whole-graph readers iterate."""
        n = len(self._op)
        in_off, in_ref, lit = self._in_off, self._in_ref, self._lit
        operands = list(map(Operand, self._in_pos, in_ref))
        if lit:  # a ref -1, -2, ... names literal 0, 1, ...
            for o in compress(operands, map(operator.lt, in_ref, repeat(0))):
                o.value, o.literal = None, lit[-1 - cast(int, o.value)]
        out, out_off = self._out, self._out_off
        # a fresh map for a node without params, as indexing gives
        params: list[dict[str, Any]] = [{} for _ in range(n)]
        for i, p in self._params.items():
            params[i] = p
        opaque = [False] * n
        for i in self._opaque:
            opaque[i] = True
        return map(
            Node,
            range(n),
            self._op,
            [operands[a:b] for a, b in zip(in_off, islice(in_off, 1, None))],
            [out[a:b] for a, b in zip(out_off, islice(out_off, 1, None))],
            params,
            [None if g < 0 else g for g in self._group],
            [None if f < 0 else f for f in self._frame],
            opaque,
        )

    @overload
    def __getitem__(self, i: int) -> Node: ...

    @overload
    def __getitem__(self, i: slice) -> list[Node]: ...

    def __getitem__(self, i: int | slice) -> Node | list[Node]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = _row(i, len(self))
        a, b = self._in_off[i], self._in_off[i + 1]
        operands = [
            Operand(p, r, None) if r >= 0 else Operand(p, None, self._lit[-1 - r])
            for p, r in zip(self._in_pos[a:b], self._in_ref[a:b])
        ]
        g, f = self._group[i], self._frame[i]
        return Node(
            i, self._op[i], operands, self._out[self._out_off[i]:self._out_off[i + 1]],
            self._params.get(i, {}), None if g < 0 else g, None if f < 0 else f, i in self._opaque,
        )


def _row(i: int, n: int) -> int:
    """Row ``i`` of ``n`` as a list indexes it (``-1`` the last), else an IndexError."""
    if i < 0:
        i += n
    if not 0 <= i < n:
        raise IndexError(i)
    return i
