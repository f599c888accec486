"""Search over a :class:`viewer.projection.projection.Projection`: op names, group names, value
names, value shapes (``f32[2,4]``) and source locations (``model.py:12``), as a bounded
list of results, with the query parsing (:class:`Search`, built once per capture; its
own indexes of ops, frames and shapes are made on the first query that needs them).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from capture.graph.graphfile import ValueTable

from .index import ROOT
from .names import group_sublabel, short_dtype
from .value_names import ROLE_WORDS

DEFAULT_SEARCH_LIMIT = 50
MAX_SEARCH_LIMIT = 1000


def _rows_by(keys: Iterable) -> dict[Any, list[int]]:
    """The rows holding each key, in row order."""
    index: dict[Any, list[int]] = {}
    for i, k in enumerate(keys):
        rows = index.get(k)
        if rows is None:
            rows = index[k] = []
        rows.append(i)
    return index


class Search:
    """Search over one capture's index, names and value summaries."""

    def __init__(self, capture: Any, index: Any, names: Any, values: Any) -> None:
        self.capture, self.index, self.names, self.values = capture, index, names, values
        self._ops_index: dict[str, list[int]] | None = None
        self._frames_index: dict[int, list[int]] | None = None
        self._shapes_index: dict[tuple, list[int]] | None = None

    def search(self, q: str, limit: int = DEFAULT_SEARCH_LIMIT) -> dict:
        """Op names, group names, value shapes and source locations matching ``q``."""
        q = (q or "").strip()
        limit = max(1, min(int(limit), MAX_SEARCH_LIMIT))
        if not q:
            return {"results": [], "truncated": False, "total": 0}
        results: list[dict] = []
        total = 0

        def add(found: Iterable[dict], count: int) -> None:
            nonlocal total
            total += count
            for r in found:
                if len(results) >= limit:
                    return
                results.append(r)

        shape = _parse_shape(q)
        if shape is not None:
            ids = self._shape_matches(*shape)
            add((self._value_result(v, "value shape") for v in ids), len(ids))
        loc = _parse_location(q)
        if loc is not None:
            nodes = self._location_matches(*loc)
            add((self._node_result(i, f"source {q}") for i in nodes), len(nodes))
        if shape is None and loc is None:
            ql = q.lower()
            gs = [g for g in self.capture.groups if ql in g.name.lower()]
            gs.sort(key=lambda g: (g.name.lower() != ql, g.id))
            add((self._group_result(g.id, "group name") for g in gs), len(gs))
            named = self._name_matches(ql)
            add((self._value_result(v, "value name") for v in named), len(named))
            ops = self._ops()
            matched = sorted((op for op in ops if ql in op.lower()), key=lambda op: (op.lower() != ql, op))
            for op in matched:
                ids = ops[op]
                add((self._node_result(i, "op name" if op.lower() == ql else f"op name ({op})") for i in ids), len(ids))
            frames = self.capture.frames
            fns = [fi for fi, f in enumerate(frames) if ql in f.function.lower()]
            if fns:
                index = self._frames()
                ids = sorted(i for fi in fns for i in index.get(fi, ()))
                add((self._node_result(i, f"source function {frames[self.index.cols.frame[i]].function}") for i in ids), len(ids))
        return {"results": results, "truncated": total > len(results), "total": total}

    def _name_matches(self, ql: str) -> list[int]:
        """Named values whose name (or structure path, ``kwargs.x``) holds ``ql``: exact
        names first, then in value order."""
        aliases = self.names.aliases
        hits = [(n.lower() != ql and aliases.get(v, "").lower() != ql, v) for v, (n, _) in self.names.names.items()
                if ql in n.lower() or ql in aliases.get(v, "").lower()]
        return [v for _, v in sorted(hits)]

    def _ops(self) -> dict[str, list[int]]:
        if self._ops_index is None:
            self._ops_index = _rows_by(self.index.cols.op)
        return self._ops_index

    def _frames(self) -> dict[int, list[int]]:
        if self._frames_index is None:
            index = _rows_by(self.index.cols.frame)
            index.pop(-1, None)  # nodes without a frame
            self._frames_index = index
        return self._frames_index

    def _shapes(self) -> dict[tuple, list[int]]:
        if self._shapes_index is None:
            values = self.capture.values
            if isinstance(values, ValueTable):
                off, dims = values.shape_columns()
                shapes = (tuple(dims[off[v]:off[v + 1]]) for v in range(self.index.n_values))
            else:
                shapes = (tuple(v.shape) for v in values)
            self._shapes_index = _rows_by(shapes)
        return self._shapes_index

    def _shape_matches(self, dims: tuple, dtype: str | None) -> list[int]:
        ids = self._shapes().get(dims, [])
        if dtype is None:
            return ids
        values = self.capture.values
        return [v for v in ids if short_dtype(values[v].dtype) == dtype]

    def _location_matches(self, file: str, line: int | None) -> list[int]:
        f = file.replace("\\", "/").lstrip("./") if not file.startswith("/") else file
        hits = [fi for fi, fr in enumerate(self.capture.frames)
                if (fr.file == f or fr.file.endswith("/" + f)) and (line is None or fr.line == line)]
        if not hits:
            return []
        index = self._frames()
        return sorted(i for fi in hits for i in index.get(fi, ()))

    def _node_result(self, i: int, why: str) -> dict:
        ix = self.index
        g = ix.cols.group[i]
        outs = ix.outputs_of(i)
        sub = ", ".join(self.values.label(v) for v in outs[:3])
        where = ix.where(i)
        if g != ROOT and ix.chain[g][0] in ix.body_node:
            where = f"{where} · in a body, not executed".lstrip(" ·")
        return {
            "type": "node", "id": i, "key": f"n{i}", "label": ix.cols.op[i],
            "sublabel": f"{sub}  {where}".strip(),
            "path": [x["id"] for x in ix.group_path(g)], "item_path": ix.item_path(i), "why": why,
        }

    def _group_result(self, g: int, why: str) -> dict:
        grp = self.capture.groups[g]
        path = [x["id"] for x in self.index.group_path(g)]
        return {
            "type": "group", "id": g, "key": f"g{g}", "label": grp.name,
            "sublabel": group_sublabel(grp.kind),
            "path": path[:-1], "item_path": self.index.group_item_path(g), "why": why,
        }

    def _value_result(self, v: int, why: str) -> dict:
        ix = self.index
        d = self.values.full(v)
        p = ix.producer[v]
        if p >= 0:
            g = ix.cols.group[p]
            path, item_path = [x["id"] for x in ix.group_path(g)], ix.item_path(p)
            sub = f"output of {ix.cols.op[p]} #{p}"
        else:
            # Drawn as a boundary pill ("in:V") where it is first used: open the way there.
            uses = ix.uses(v)
            if uses:
                g = ix.cols.group[uses[0]]
                path, item_path = [x["id"] for x in ix.group_path(g)], ix.item_path(uses[0])[:-1] + [f"in:{v}"]
            else:
                path, item_path = [], []
            sub = "capture input or constant"
        label = d["label"]
        if "name" in d:
            label, sub = d["name"], f"{label} · {ROLE_WORDS.get(d['role'], d['role'])}"
        return {"type": "value", "id": v, "key": f"n{p}" if p >= 0 else f"in:{v}", "label": label,
                "sublabel": sub, "producer": p if p >= 0 else None, "path": path,
                "item_path": item_path, "why": why}


# --------------------------------------------------------------------------- query parsing

_SHAPE_RE = re.compile(r"^(?:([A-Za-z][A-Za-z0-9_]*)\s*)?[\[(]\s*([^\])]*)[\])]$")
_DIMS_RE = re.compile(r"^\s*[\w?]+(\s*,\s*[\w?]+)*\s*,?\s*$")
_LOC_RE = re.compile(r"^(.+?\.py)(?::(\d+))?$")
_LINE_RE = re.compile(r"^(.+?):(\d+)$")


def _parse_shape(q: str) -> tuple[tuple, str | None] | None:
    """``2,4`` / ``[2,4]`` / ``(2, 4)`` / ``f32[2,4]`` / ``float32[2,4]`` / ``f32[]``."""
    m = _SHAPE_RE.match(q)
    if m:
        dtype, inner = m.group(1), m.group(2).strip()
        if dtype is not None:
            dtype = short_dtype(dtype.lower())
        if inner and not _DIMS_RE.match(inner):
            return None
        return _dims(inner), dtype
    if "," in q and _DIMS_RE.match(q):
        return _dims(q), None
    return None


def _dims(text: str) -> tuple:
    """Dimensions as a capture stores them: sizes are ints, named dimensions strings."""
    return tuple(int(x) if x.isdigit() else x for x in (p.strip() for p in text.split(",")) if x)


def _parse_location(q: str) -> tuple[str, int | None] | None:
    """``model.py:12`` / ``model.py`` / ``pkg/model.py:12`` / ``anything:12``."""
    m = _LOC_RE.match(q)
    if m:
        return m.group(1), int(m.group(2)) if m.group(2) else None
    m = _LINE_RE.match(q)
    if m and ("/" in m.group(1) or "." in m.group(1)):
        return m.group(1), int(m.group(2))
    return None
