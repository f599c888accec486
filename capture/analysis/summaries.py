"""How a value is summarised in the projection's answers: its label (``f32[2,4]``), its
name and role when it enters from outside, and its measured fields where details are
asked for (:class:`ValueSummaries`)."""

from __future__ import annotations

from itertools import count, islice, repeat
from typing import Any

from capture.graph import gc_pause
from capture.graph.tables import ValueTable

from .names import ValueNames, device_label, value_label


class ValueSummaries:
    """Value summaries of one capture; labels are made once per value (a whole subtree
    asks for the same ones often)."""

    def __init__(self, capture: Any, names: ValueNames) -> None:
        self.values = capture.values
        self.names = names
        self._labels: dict[int, str] = {}
        self._all: list[str] | None = None
        self._key_ids: tuple[list[int], dict[int, tuple[Any, Any]]] | None = None
        # Per value its sharding (a file's column, shared maps), or None: nothing is split.
        if isinstance(self.values, ValueTable):
            self._shardings = self.values.sharding_column()
        else:
            column = [v.sharding for v in self.values]
            self._shardings = column if any(x is not None for x in column) else None

    def label(self, v: int) -> str:
        if self._all is not None:
            return self._all[v]
        got = self._labels.get(v)
        if got is None:
            shape, dtype, sharding = self.plain(v)
            got = self._labels[v] = value_label(shape, dtype, sharding)
        return got

    def plain(self, v: int) -> tuple[Any, str, Any]:
        """Value ``v``'s shape, dtype and sharding, without its measured map (a version-3
        file's table builds that map at each row access: a subtree's cards list each
        value many times and never show it)."""
        values = self.values
        if isinstance(values, ValueTable):
            off, dims = values.shape_columns()
            return (dims[off[v]:off[v + 1]], values.dtype_column()[v],
                    self._shardings[v] if self._shardings is not None else None)
        val = values[v]
        return val.shape, val.dtype, val.sharding

    def device_label(self, v: int) -> str | None:
        """What one device holds of value ``v`` (``f32[2,16]``); None when it is not split."""
        if self._shardings is None or self._shardings[v] is None:
            return None
        shape, dtype, sharding = self.plain(v)
        return device_label(shape, dtype, sharding)

    def labels(self) -> list[str]:
        """Every value's label, by value id: made in one pass (a file's rows are built
        by C-level passes over its columns), each distinct shape formatted once. For
        whole-capture work such as the structural signatures."""
        if self._all is None:
            formatted: dict[tuple[Any, ...], str] = {}
            out = []
            values = self.values
            if isinstance(values, ValueTable):  # its columns: no row, no measured map built
                off, dims = values.shape_columns()
                # each shape a tuple, by C-level passes (slices of the dimensions column)
                shapes: Any = map(tuple, map(dims.__getitem__, map(slice, off, islice(off, 1, None))))
                if self._shardings is None:
                    self._all = self._keyed(zip(shapes, values.dtype_column()))
                    return self._all
                rows: Any = zip(shapes, values.dtype_column(),
                                self._shardings if self._shardings is not None else repeat(None))
            else:
                rows = ((tuple(val.shape), val.dtype, val.sharding) for val in values)
            with gc_pause.paused():
                for shape, dtype, sharding in rows:
                    if sharding is not None:
                        out.append(value_label(list(shape), dtype, sharding))
                        continue
                    key = (shape, dtype)
                    text = formatted.get(key)
                    if text is None:
                        text = formatted[key] = value_label(list(shape), dtype)
                    out.append(text)
            self._all = out
        return self._all

    def _keyed(self, keys: Any) -> list[str]:
        """The labels of values without sharding, from their ``(shape tuple, dtype)``
        keys: each value's key numbered by C-level passes (the number of the first value
        with that key), each distinct key formatted once. The numbers are kept
        (:meth:`shape_keys`): a group's parameters are counted by them."""
        with gc_pause.paused():
            numbered: dict[tuple[Any, Any], int] = {}
            ids = list(map(numbered.setdefault, keys, count()))
            texts = {k: value_label(list(key[0]), key[1]) for key, k in numbered.items()}
            self._key_ids = (ids, {k: key for key, k in numbered.items()})
            return list(map(texts.__getitem__, ids))

    def shape_keys(self) -> tuple[list[int], dict[int, tuple[Any, Any]]] | None:
        """Once :meth:`labels` has made them for a file's values (none split): per value
        the number of its ``(shape tuple, dtype)``, and each number's key; else None."""
        return self._key_ids

    def full(self, v: int) -> dict[str, Any]:
        """``{id, shape, dtype, label, measured?, name?, role?}``: what details show."""
        val = self.values[v]
        out = {"id": v, "shape": list(val.shape), "dtype": val.dtype, "label": self.label(v)}
        if val.measured is not None:
            out["measured"] = val.measured
        if val.sharding is not None:
            out["device_label"] = device_label(val.shape, val.dtype, val.sharding)
            out["sharding"] = val.sharding
        named = self.names.get(v)
        if named is not None:
            out["name"], out["role"] = named
        return out

    def brief(self, v: int) -> dict[str, Any]:
        """A value as an item card lists it: no measured fields (the inspector asks for
        them), so a whole subtree stays small on the wire. The same as :meth:`full`
        without ``measured`` and ``sharding``."""
        shape, dtype, sharding = self.plain(v)
        out = {"id": v, "shape": list(shape), "dtype": dtype, "label": self.label(v)}
        if sharding is not None:
            out["device_label"] = device_label(shape, dtype, sharding)
        named = self.names.get(v)
        if named is not None:
            out["name"], out["role"] = named
        return out
