"""What a page of :class:`viewer.projection.views.Pages` is wired from: :class:`_Wiring`
(the children of one group as drawn, past the elided ops between them) and :class:`_Flow`
(the values its items exchange, enter and leave with)."""

from __future__ import annotations

from bisect import bisect_left
from typing import Any


class _Flow:
    """What a page's items exchange, gathered from :class:`_Deps`: ``edges`` (endpoint
    pair -> values; an endpoint is an item's index or ``("in"|"out", value)``),
    ``in_vals`` (a value entering -> its producer, -1 for none), ``out_vals`` (the values
    leaving), ``item_outs`` (a chunk item -> what it hands on) and ``hidden_weights``
    (the weights entering, when the page draws none: only counted)."""

    __slots__ = ("span", "near", "edges", "in_vals", "out_vals", "item_outs", "hidden_weights")

    def __init__(self, span: int, near: dict[int, int]) -> None:
        self.span, self.near = span, near
        self.edges: dict[tuple[Any, Any], list[int]] = {}
        self.hidden_weights: dict[int, None] = {}
        self.in_vals: dict[int, int] = {}
        self.out_vals: dict[int, None] = {}
        self.item_outs: dict[int, dict[int, None]] = {}

    def add(self, s: Any, t: Any, v: int) -> None:
        self.edges.setdefault((s, t), []).append(v)

    def between(self, si: int, ti: int, v: int) -> None:
        """``v`` goes from item ``si`` to item ``ti`` (nothing within one item)."""
        if si != ti:
            self.add(si, ti, v)
            if self.span > 1:
                self.item_outs.setdefault(si, {})[v] = None

    def leaves(self, si: int, v: int) -> None:
        """``v`` leaves the page from item ``si``."""
        self.out_vals[v] = None
        self.add(si, ("out", v), v)
        if self.span > 1:
            self.item_outs.setdefault(si, {})[v] = None


class _Wiring:
    """The children of one group as drawn: where a value was made among them, past the
    elided ops (bookkeeping copies) between."""

    def __init__(self, index: Any, present: Any, g: int, kernels: bool) -> None:
        self.index, self.present, self.g, self.kernels = index, present, g, kernels
        self.keys, self.refs, _ = index.ordered(g)
        self.producer, self.grp = index.producer, index.cols.group
        self._left: dict[int, int] | None = None  # a value leaving a child group -> that child's position

    def _leaving(self) -> dict[int, int]:
        """The values leaving the child groups, each with its child's position: what the
        children of a 14,285-block stack read of each other, looked up instead of walking
        up from the node that made each (a value leaves only the groups holding its maker)."""
        if self._left is None:
            bout = self.index.bout
            self._left = {v: pos for pos, r in enumerate(self.refs) if r < 0 for v in bout[~r + 1] or ()}
        return self._left

    def hidden(self, ref: int) -> bool:
        """Whether the child ``ref`` is an elided op."""
        return ref >= 0 and self.present.elided_op(ref, self.kernels)

    def operands(self, ref: int) -> Any:
        """What the child ``ref`` reads (a group: what enters it)."""
        ix = self.index
        if ref >= 0:
            return ix.cols.in_ref[ix.cols.in_off[ref]:ix.cols.in_off[ref + 1]]
        return ix.bin[~ref + 1] or ()

    def made_at(self, v: int) -> int:
        """The position among the children of the child that made ``v`` (-1: outside)."""
        p = self.producer[v]
        if p < 0:
            return -1
        if self.grp[p] == self.g:
            return bisect_left(self.keys, p)
        got = self._leaving().get(v)
        return got if got is not None else self.index.position(p, self.g)

    def drawn(self, v: int) -> tuple[int, int] | None:
        """(the position drawn making ``v``, the value the edge carries), past elided
        ops among the children; ``None`` when an elided op made it from nothing."""
        s = self.made_at(v)
        u = v
        copies = 0
        refs = self.refs
        while s >= 0 and self.hidden(refs[s]) and copies < 64:
            copies += 1
            u = self.present.passed_on(refs[s])
            if u is None:
                return None
            s = self.made_at(u)
        return (s, v) if s >= 0 or not copies else (s, u)
