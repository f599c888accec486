"""The parameters each group uses: tensors, elements and bytes of the values with a
parameter role (Torch parameters, JAX variables) entering its subtree (:class:`GroupParams`).

What a group card, the layer table, a line's hover and the memory plan count as a
group's parameters: one rule, here."""

from __future__ import annotations

from collections import Counter
from itertools import compress
from operator import and_, itemgetter
from typing import Any, Callable

from capture import units
from capture.graph.tables import ValueTable

from .scope import within
from .types import ParamCounts

#: The value roles counted as parameters.
PARAM_ROLES = frozenset({"param", "variable"})


def body_stand_ins(capture: Any, kinds: list[Any]) -> dict[int, int]:
    """Body parameter values (a template's stand-ins for the weights it receives: one slice
    of a scanned stack) -> their body group (``kinds``: every group's kind, ``GraphIndex.kinds``)."""
    got: dict[int, int] = {}
    groups = capture.groups
    # the body groups found by a C-level pass over the kinds (a deep model has 57k groups, no body)
    for gid in compress(range(len(groups)), map("body".__eq__, kinds)):
        grp = groups[gid]
        params = grp.attrs.get("parameters") if isinstance(grp.attrs, dict) else None
        for p in params if isinstance(params, list) else ():
            if isinstance(p, dict) and type(p.get("value")) is int and type(p.get("outer")) is int:
                got[p["value"]] = gid
    return got


class GroupParams:
    """Per group, the parameters used inside it (made once per group, on first use).

    ``names`` is the capture's :class:`~capture.analysis.names.ValueNames`; ``plain`` gives
    a value's shape, dtype and sharding without its measured map
    (:meth:`~capture.analysis.summaries.ValueSummaries.plain`)."""

    def __init__(self, capture: Any, index: Any, names: Any, plain: Any,
                 shape_keys: Callable[[], tuple[list[int], dict[int, tuple[Any, Any]]] | None] | None = None) -> None:
        self.capture, self.index, self.names, self.plain = capture, index, names, plain
        #: The values' numbered (shape, dtype) keys once the labels are made
        #: (:meth:`~capture.analysis.summaries.ValueSummaries.shape_keys`), or None.
        self.shape_keys = shape_keys
        self._got: dict[int, ParamCounts] = {}
        self._stand_ins: dict[int, int] | None = None
        self._params: frozenset[int] = frozenset()  # the values with a parameter role, from outside
        #: (shape, dtype) -> (elements, bytes): a model's weights share few shapes.
        self._figures: dict[Any, tuple[int | None, int | None]] = {}

    def __call__(self, g: int) -> ParamCounts:
        got = self._got.get(g)
        if got is not None:
            return got
        if self._stand_ins is None:  # made once; the set first: another thread reads it once the stand-ins are there
            producer = self.index.producer
            names = self.names.names  # by C-level passes (a deep model's 57k parameters)
            keys = list(names)
            roles = map(PARAM_ROLES.__contains__, map(itemgetter(1), names.values()))
            self._params = frozenset(compress(keys, map(and_, roles, map((0).__gt__, map(producer.__getitem__, keys)))))
            self._stand_ins = body_stand_ins(self.capture, self.index.kinds)
        # the parameters entering the subtree, by a C-level pass (a deep model's root: 57k)
        params = list(filter(self._params.__contains__, self.index.bin[g + 1] or ()))
        stand_ins = self._stand_ins
        if stand_ins:
            groups = self.capture.groups
            # a weight's stand-in in a control-flow body (one slice of a scanned stack): the
            # weight itself is counted where it enters; counted again, a scanned model's
            # weights would be counted twice
            params = [v for v in params if (b := stand_ins.get(v)) is None or within(groups, g, b)]
        counts: list[int | None] = []
        sizes: list[int | None] = []
        for (shape, dtype), n in self._by_shape(params).items():
            fig = self._figure(shape, dtype)
            counts.append(None if fig[0] is None else fig[0] * n)
            sizes.append(None if fig[1] is None else fig[1] * n)
        # a symbolic dimension or an unknown dtype makes the sum unknown (None), never 1 or 32 bits
        got = self._got[g] = {"tensors": len(params), "count": units.add(counts), "bytes": units.add(sizes)}
        return got

    def _by_shape(self, params: list[int]) -> Counter[tuple[Any, Any]]:
        """How many of ``params`` have each ``(shape, dtype)`` (a shape as a tuple, or
        the value's own shape object where it cannot be one)."""
        values = self.capture.values
        keyed = self.shape_keys() if self.shape_keys is not None and isinstance(values, ValueTable) else None
        if keyed is not None:  # each value's key numbered already: counted by number (a deep model's root: 57k)
            ids, keys = keyed
            return Counter({keys[k]: n for k, n in Counter(map(ids.__getitem__, params)).items()})
        if isinstance(values, ValueTable):  # the columns, read by C-level passes
            off, dims = values.shape_columns()
            shapes = map(tuple, map(dims.__getitem__, map(slice, map(off.__getitem__, params),
                                                        map(off.__getitem__, map((1).__add__, params)))))
            return Counter(zip(shapes, map(values.dtype_column().__getitem__, params)))
        out: Counter[tuple[Any, Any]] = Counter()
        for v in params:
            shape, dtype, _ = self.plain(v)
            try:
                out[(tuple(shape), dtype)] += 1
            except TypeError:  # not a list of hashable dimensions, or a dtype that is no key
                out[(_Unhashable(shape, dtype), None)] += 1
        return out

    def _figure(self, shape: Any, dtype: Any) -> tuple[int | None, int | None]:
        """(elements, bytes) of one tensor of ``shape`` and ``dtype``."""
        if isinstance(shape, _Unhashable):
            return units.element_count(shape.shape), units.nbytes(shape.shape, shape.dtype)
        key = (shape, dtype)
        fig = self._figures.get(key)
        if fig is None:
            fig = self._figures[key] = (units.element_count(shape), units.nbytes(shape, dtype))
        return fig


class _Unhashable:
    """A shape and dtype that cannot be a key (a hostile file's): counted on its own."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: Any, dtype: Any) -> None:
        self.shape, self.dtype = shape, dtype
