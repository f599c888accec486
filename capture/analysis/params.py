"""The parameters each group uses: tensors, elements and bytes of the values with a
parameter role (Torch parameters, JAX variables) entering its subtree (:class:`GroupParams`).

What a group card, the layer table, a line's hover and the memory plan count as a
group's parameters: one rule, here."""

from __future__ import annotations

from typing import Any

from capture import units

from .scope import within
from .types import ParamCounts

#: The value roles counted as parameters.
PARAM_ROLES = frozenset({"param", "variable"})


def body_stand_ins(capture: Any) -> dict[int, int]:
    """Body parameter values (a template's stand-ins for the weights it receives: one slice
    of a scanned stack) -> their body group."""
    got: dict[int, int] = {}
    for gid, grp in enumerate(capture.groups):
        params = grp.attrs.get("parameters") if grp.kind == "body" and isinstance(grp.attrs, dict) else None
        for p in params if isinstance(params, list) else ():
            if isinstance(p, dict) and type(p.get("value")) is int and type(p.get("outer")) is int:
                got[p["value"]] = gid
    return got


class GroupParams:
    """Per group, the parameters used inside it (made once per group, on first use).

    ``names`` is the capture's :class:`~capture.analysis.names.ValueNames`; ``plain`` gives
    a value's shape, dtype and sharding without its measured map
    (:meth:`~capture.analysis.summaries.ValueSummaries.plain`)."""

    def __init__(self, capture: Any, index: Any, names: Any, plain: Any) -> None:
        self.capture, self.index, self.names, self.plain = capture, index, names, plain
        self._got: dict[int, ParamCounts] = {}
        self._stand_ins: dict[int, int] | None = None
        #: (shape, dtype) -> (elements, bytes): a model's weights share few shapes.
        self._figures: dict[Any, tuple[int | None, int | None]] = {}

    def __call__(self, g: int) -> ParamCounts:
        got = self._got.get(g)
        if got is not None:
            return got
        tensors = 0
        counts: list[int | None] = []
        sizes: list[int | None] = []
        figures = self._figures
        if self._stand_ins is None:
            self._stand_ins = body_stand_ins(self.capture)
        stand_ins = self._stand_ins
        for v in self.index.bin[g + 1] or ():
            named = self.names.get(v)
            if named is None or named[1] not in PARAM_ROLES or self.index.producer[v] >= 0:
                continue
            body = stand_ins.get(v)
            if body is not None and not within(self.capture.groups, g, body):
                # a weight's stand-in in a control-flow body (one slice of a scanned stack):
                # the weight itself is counted where it enters; counted again, a scanned
                # model's weights would be counted twice
                continue
            shape, dtype, _ = self.plain(v)
            tensors += 1
            try:
                key: Any = (tuple(shape), dtype)
                fig = figures.get(key)
            except TypeError:  # not a list of hashable dimensions: figured each time
                key, fig = None, None
            if fig is None:
                fig = (units.element_count(shape), units.nbytes(shape, dtype))
                if key is not None:
                    figures[key] = fig
            counts.append(fig[0])
            sizes.append(fig[1])
        # a symbolic dimension or an unknown dtype makes the sum unknown (None), never 1 or 32 bits
        got = self._got[g] = {"tensors": tensors, "count": units.add(counts), "bytes": units.add(sizes)}
        return got
