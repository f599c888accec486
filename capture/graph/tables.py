"""A capture's nodes and values as columns: what a graph file holds (read by
:mod:`capture.graph.graphfile`), with ``Node``/``Value`` rows built on access."""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from itertools import compress, islice, repeat
from typing import NamedTuple

from .model import Node, Operand, Value


class NodeColumns(NamedTuple):
    """Nodes as columns. ``group``/``frame`` use -1 for none; operands of node ``i``
    are ``input_refs[input_offsets[i]:input_offsets[i+1]]`` (a ref ``r < 0`` is a
    literal), outputs likewise; ``opaque`` is the set of opaque node ids."""

    op: list
    group: list
    frame: list
    input_offsets: list
    input_refs: list
    output_offsets: list
    output_ids: list
    opaque: frozenset


class ValueTable(Sequence[Value]):
    """Values read from a file: validated columns, ``Value`` rows built on access."""

    __slots__ = ("_off", "_dims", "_dtype", "_measured")

    def __init__(self, off: list, dims: list, dtype: list, measured: list | None) -> None:
        self._off, self._dims, self._dtype, self._measured = off, dims, dtype, measured

    def __len__(self) -> int:
        return len(self._dtype)

    def shape_columns(self) -> tuple[list, list]:
        """``(offsets, dims)``: value ``i``'s shape is ``dims[offsets[i]:offsets[i+1]]``."""
        return self._off, self._dims

    def measured_column(self) -> list | None:
        """Per-value measured maps, or ``None`` when no value was measured."""
        return self._measured

    def dtype_column(self) -> list:
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
        )

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        m = self._measured[i] if self._measured is not None else None
        return Value(i, self._dims[self._off[i]:self._off[i + 1]], self._dtype[i], m)


class NodeTable(Sequence[Node]):
    """Nodes read from a file: validated columns, ``Node`` rows built on access. Each
    access builds fresh rows (operands, outputs); a node's params map is the table's own
    (read-only by contract), which nodes with equal params share in a version-2 file."""

    __slots__ = ("_op", "_in_off", "_in_pos", "_in_ref", "_lit", "_out_off", "_out", "_params",
                 "_group", "_frame", "_opaque")

    def __init__(self, op, in_off, in_pos, in_ref, lit, out_off, out, params, group, frame, opaque):
        self._op, self._in_off, self._in_pos, self._in_ref, self._lit = op, in_off, in_pos, in_ref, lit
        self._out_off, self._out, self._params = out_off, out, params
        self._group, self._frame, self._opaque = group, frame, opaque

    def __len__(self) -> int:
        return len(self._op)

    def op(self, i: int) -> str:
        """The op of node ``i`` without building the row (fast scans)."""
        return self._op[i]

    def columns(self) -> NodeColumns:
        """The validated columns themselves, for whole-graph indexing without rows.
        Read-only by contract: the rows are built from them."""
        return NodeColumns(self._op, self._group, self._frame, self._in_off, self._in_ref,
                           self._out_off, self._out, self._opaque)

    def __iter__(self) -> Iterator[Node]:
        """Every row in order: the same rows as indexing (fresh rows, operands and outputs).
        Built by C-level passes over whole columns (``map`` over the columns into the row
        class) rather than a Python loop per row: whole-graph readers iterate."""
        n = len(self._op)
        in_off, in_ref, lit = self._in_off, self._in_ref, self._lit
        operands = list(map(Operand, self._in_pos, in_ref))
        if lit:  # a ref -1, -2, ... names literal 0, 1, ...
            for o in compress(operands, map(operator.lt, in_ref, repeat(0))):
                o.value, o.literal = None, lit[-1 - o.value]
        out, out_off = self._out, self._out_off
        params = [{} for _ in range(n)]  # a fresh map for a node without params, as indexing gives
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

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
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
