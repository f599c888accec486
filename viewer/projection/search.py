"""Search over a capture (:class:`Search`): modules by path and class, op names, value
names, value shapes (``f32[2,4]``), source locations (``model.py:12``) and, in a program
split across devices, collectives by the mesh axis they run over (``data``, or
``collective`` for all of them), narrowed by filters (op, class, shape, dtype, axis), as
a bounded list of results grouped by the layer that holds them.

A query is at most :data:`MAX_QUERY` characters and every pattern that reads it runs in
linear time (no regular expression with nested or adjacent quantifiers over the same
characters: a crafted 64,000-character query once took 12.5 s in one). Filters are
given as parameters or inline, ``op:addmm class:Block dtype:f32 shape:8,128 ln``: each
``KEY:VALUE`` word with a filter key is a filter, the rest is the query. The search's
own indexes of ops, frames and shapes are made on the first query that needs them.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from capture.graph.tables import ValueTable

from capture.analysis.index import ROOT
from capture.analysis.names import group_sublabel, group_title, short_dtype
from capture.analysis.value_names import ROLE_WORDS

from .answers import Facets, FiltersEcho, SearchAnswer, SearchLayer, SearchResult

DEFAULT_SEARCH_LIMIT = 50
MAX_SEARCH_LIMIT = 1000
MAX_QUERY = 256  # characters of a query or of one filter
FILTER_KEYS = {"op": "op", "class": "cls", "shape": "shape", "dtype": "dtype", "axis": "axis"}
COLLECTIVE_WORDS = ("collective", "collectives")


class SearchError(ValueError):
    """A query the search refuses (too long, a filter that cannot be read)."""


def _rows_by(keys: Iterable[Any]) -> dict[Any, list[int]]:
    """The rows holding each key, in row order."""
    index: dict[Any, list[int]] = {}
    for i, k in enumerate(keys):
        rows = index.get(k)
        if rows is None:
            rows = index[k] = []
        rows.append(i)
    return index


class _Filters:
    """What every result must satisfy: its op (or its producer's), a class among the
    groups holding it, an output (or its own) shape and dtype."""

    def __init__(self, op: str | None, cls: str | None, shape: str | None, dtype: str | None,
                 axis: str | None = None) -> None:
        self.axis = axis if axis else None
        self.op = op.lower() if op else None
        self.cls = cls.lower() if cls else None
        self.dims: tuple[Any, ...] | None = None
        self.dtype: str | None = short_dtype(dtype.lower()) if dtype else None
        if shape:
            parsed = _parse_shape(shape)
            if parsed is None:
                raise SearchError(f"shape filter {shape!r} is not a shape such as 8,128 or f32[8,128]")
            self.dims, shape_dtype = parsed
            if shape_dtype is not None:
                self.dtype = self.dtype or shape_dtype

    def __bool__(self) -> bool:
        return any(x is not None for x in (self.op, self.cls, self.dims, self.dtype, self.axis))

    def echo(self) -> FiltersEcho:
        return {"op": self.op, "class": self.cls, "shape": list(self.dims) if self.dims is not None else None,
                "dtype": self.dtype, "axis": self.axis}


class Search:
    """Search over one capture's index, names, value summaries and presentation."""

    def __init__(self, capture: Any, index: Any, names: Any, values: Any, present: Any,
                 structure: Callable[[], Any], lines: Callable[[], Any] | None = None, *,
                 templates: Callable[[], frozenset[int]]) -> None:
        self.capture, self.index, self.names, self.values = capture, index, names, values
        self.present, self.structure = present, structure
        self.lines = lines  # the line → calls index: a line's module calls, as its hint shows them
        self._ops_index: dict[str, list[int]] | None = None
        self._frames_index: dict[int, list[int]] | None = None
        self._shapes_index: dict[tuple[Any, ...], list[int]] | None = None
        self._axes_index: dict[str, list[int]] | None = None
        self._class_of: dict[int, str | None] = {}
        self.templates = templates  # the template bodies, made once per capture (Analysis.templates)

    def _in_template(self, g: int) -> bool:
        """Whether group ``g`` lies in an unexecuted body (a template; a shard_map body ran)."""
        ix = self.index
        if g == ROOT or ix.top[g] not in ix.body_node:
            return False
        return ix.top[g] in self.templates()

    def search(self, q: str, limit: int = DEFAULT_SEARCH_LIMIT, *, op: str | None = None, cls: str | None = None,
               shape: str | None = None, dtype: str | None = None, axis: str | None = None) -> SearchAnswer:
        """Results for ``q`` narrowed by the filters (see the module docstring)."""
        for name, text in (("query", q), ("op", op), ("class", cls), ("shape", shape), ("dtype", dtype),
                           ("axis", axis)):
            if text and len(text) > MAX_QUERY:
                raise SearchError(f"a search {name} is at most {MAX_QUERY} characters (this one has {len(text):,})")
        text, inline = split_filters(q or "")
        given = {"op": op, "cls": cls, "shape": shape, "dtype": dtype, "axis": axis}
        for key, value in inline.items():
            given[key] = given[key] or value
        filters = _Filters(**given)
        limit = max(1, min(int(limit), MAX_SEARCH_LIMIT))
        results: list[SearchResult] = []
        total = 0

        def add(kind: str, ids: Iterable[int], why: Callable[[int], str]) -> None:
            nonlocal total
            keep = self._accepts(kind, filters)
            for x in ids:
                if keep is not None and not keep(x):
                    continue
                total += 1
                if len(results) < limit:
                    results.append(self._result(kind, x, why(x)))

        if text:
            self._matches(text, add)
        elif filters:
            ids: Iterable[int]
            if filters.axis:
                ids = self._axes().get(filters.axis, [])
            else:
                ids = self._op_matches(filters.op) if filters.op else range(self.index.n_nodes)
            add("node", ids, lambda i: "filter")
        return {"results": results, "truncated": total > len(results), "total": total,
                "layers": self._layers(results), "filters": filters.echo()}

    def _matches(self, q: str, add: Callable[..., None]) -> None:
        """Every match of query text ``q``, best kinds first."""
        shape = _parse_shape(q)
        if shape is not None:
            add("value", self._shape_matches(*shape), lambda v: "value shape")
        loc = _parse_location(q)
        if loc is not None:
            # The module calls the line made (``x = self.layer(x)``: the hint the editor
            # shows on it), then the ops whose own line it is.
            add("group", self._location_calls(*loc), lambda g: f"source {q} (called there)")
            add("node", self._location_matches(*loc), lambda i: f"source {q}")
        if shape is not None or loc is not None:
            return
        ql = q.lower()
        if self.capture.meshes:  # collectives by the mesh axis they run over
            axes = self._axes()
            every = ql in COLLECTIVE_WORDS
            for axis in sorted(axes):
                if every or axis.lower() == ql:
                    add("node", axes[axis], lambda i, a=axis: f"collective over {a}")
        groups = self._group_matches(ql)
        add("group", [g for g, _ in groups], dict(groups).__getitem__)
        add("value", self._name_matches(ql), lambda v: "value name")
        ops = self._ops()
        for name in sorted((o for o in ops if ql in o.lower()), key=lambda o: (o.lower() != ql, o)):
            why = "op name" if name.lower() == ql else f"op name ({name})"
            add("node", ops[name], lambda i, why=why: why)
        frames = self.capture.frames
        fns = [fi for fi, f in enumerate(frames) if ql in f.function.lower()]
        if fns:
            index = self._frames()
            ids = sorted(i for fi in fns for i in index.get(fi, ()))
            add("node", ids, lambda i: f"source function {frames[self.index.cols.frame[i]].function}")

    def _group_matches(self, ql: str) -> list[tuple[int, str]]:
        """Groups whose name, module path or class holds ``ql``, with why: an exact path,
        name or class first, then by id."""
        hits = []
        for g in self.capture.groups:
            attrs = g.attrs if isinstance(g.attrs, dict) else {}
            path, cls = attrs.get("path"), attrs.get("class")
            path = path.lower() if isinstance(path, str) else ""
            cls = cls.lower() if isinstance(cls, str) else ""
            name = g.name.lower()
            if ql in name:
                hits.append(((name != ql and path != ql, 0, g.id), g.id, "group name"))
            elif ql in path:
                hits.append(((path != ql, 0, g.id), g.id, "module path"))
            elif ql in cls:
                hits.append(((cls != ql, 1, g.id), g.id, "module class"))
        hits.sort()
        return [(g, why) for _, g, why in hits]

    def _name_matches(self, ql: str) -> list[int]:
        """Named values whose name (or structure path, ``kwargs.x``) holds ``ql``: exact
        names first, then in value order."""
        aliases = self.names.aliases
        hits = [(n.lower() != ql and aliases.get(v, "").lower() != ql, v) for v, (n, _) in self.names.names.items()
                if ql in n.lower() or ql in aliases.get(v, "").lower()]
        return [v for _, v in sorted(hits)]

    def _axes(self) -> dict[str, list[int]]:
        """Collective nodes by the mesh axes they name (``params["collective"]["axes"]``)."""
        if self._axes_index is None:
            index: dict[str, list[int]] = {}
            nodes = self.capture.nodes
            for i in range(self.index.n_nodes):
                c = nodes[i].params.get("collective") if self.capture.meshes else None
                if isinstance(c, dict):
                    for a in c.get("axes") or ["(no axis)"]:
                        index.setdefault(str(a), []).append(i)
            self._axes_index = index
        return self._axes_index

    def _op_matches(self, op: str) -> list[int]:
        ops = self._ops()
        return sorted(i for name in ops if op in name.lower() for i in ops[name])

    # ------------------------------------------------------------------ filters

    def _accepts(self, kind: str, f: _Filters) -> Callable[[int], bool] | None:
        """A test results of ``kind`` must pass (``None``: no filter)."""
        if not f:
            return None
        ix = self.index
        values = self.capture.values

        def shape_ok(vs: Iterable[int]) -> bool:
            for v in vs:
                val = values[v]
                if (f.dims is None or tuple(val.shape) == f.dims) and (f.dtype is None or short_dtype(val.dtype) == f.dtype):
                    return True
            return False

        class_below: list[bool] | None = None

        def in_class(g: int) -> bool:
            nonlocal class_below
            if g == ROOT or f.cls is None:
                return False
            if class_below is None:  # one linear pass over the groups, not a chain walk per op
                own = []
                for grp in self.capture.groups:
                    cls = grp.attrs.get("class") if isinstance(grp.attrs, dict) else None
                    own.append(isinstance(cls, str) and f.cls in cls.lower())
                class_below = ix.inherited(own)
            return class_below[g]

        shapes = f.dims is not None or f.dtype is not None
        on_axis = set(self._axes().get(f.axis, ())) if f.axis else None
        ok: Callable[[int], bool]
        if kind == "node":
            def ok(i: int) -> bool:
                return ((f.op is None or f.op in ix.cols.op[i].lower()) and (f.cls is None or in_class(ix.cols.group[i]))
                        and (not shapes or shape_ok(ix.outputs_of(i))) and (on_axis is None or i in on_axis))
        elif on_axis is not None:  # only collectives run over an axis
            return lambda x: False
        elif kind == "value":
            def ok(v: int) -> bool:
                p = ix.producer[v]
                where = ix.cols.group[p] if p >= 0 else (ix.cols.group[u[0]] if (u := ix.uses(v)) else ROOT)
                return ((f.op is None or (p >= 0 and f.op in ix.cols.op[p].lower()))
                        and (f.cls is None or in_class(where)) and (not shapes or shape_ok([v])))
        else:
            def ok(g: int) -> bool:
                return (f.op is None and (f.cls is None or in_class(g))
                        and (not shapes or shape_ok(ix.bout[g + 1] or ())))
        return ok

    # ------------------------------------------------------------------ results

    def _result(self, kind: str, x: int, why: str) -> SearchResult:
        if kind == "node":
            return self._node_result(x, why)
        if kind == "group":
            return self._group_result(x, why)
        return self._value_result(x, why)

    def _layer(self, g: int, inclusive: bool) -> int:
        """The layer a result inside group ``g`` is listed under: the innermost repeated
        block holding it (``h.3`` of twelve), else the innermost frame holding it (a
        function card or a one-op module is an op, not a frame); ``-1`` at the top."""
        if g == ROOT:
            return ROOT
        chain: list[int] = self.index.chain[g] if inclusive else self.index.chain[g][:-1]
        same = self.structure().siblings
        for x in reversed(chain):
            if same[x][0] > 1:
                return x
        for x in reversed(chain):
            if not self.present.is_function_card(x) and self.present.single(x, False) is None:
                return x
        return ROOT

    def _layers(self, results: list[SearchResult]) -> list[SearchLayer]:
        out: dict[int, SearchLayer] = {}
        gs = self.capture.groups
        for r in results:
            g = r.pop("_layer")
            r["layer"] = None if g == ROOT else f"g{g}"
            entry = out.get(g)
            if entry is None:
                entry = out[g] = {"key": r["layer"], "id": None if g == ROOT else g,
                                  "title": "top level" if g == ROOT else group_title(gs[g]), "count": 0}
            entry["count"] += 1
        return list(out.values())

    def _container_label(self, g: int) -> str:
        """Where a node sits, as a person names it: the innermost module path, else the
        group's name (``""`` at the top level)."""
        gs = self.capture.groups
        for x in reversed(self.index.chain[g] if g != ROOT else []):
            path = gs[x].attrs.get("path") if isinstance(gs[x].attrs, dict) else None
            if isinstance(path, str) and path:
                return path
        return gs[g].name if g != ROOT else ""

    def _node_result(self, i: int, why: str) -> SearchResult:
        ix = self.index
        g = ix.cols.group[i]
        outs = ix.outputs_of(i)
        sub = ", ".join(self.values.label(v) for v in outs[:3])
        where = " · ".join(x for x in (self._container_label(g), ix.where(i)) if x)
        if self._in_template(g):
            where = f"{where} · in a body, not executed".lstrip(" ·")
        out: SearchResult = {
            "type": "node", "id": i, "key": f"n{i}", "label": ix.cols.op[i],
            "sublabel": f"{sub}  {where}".strip(), "where": where,
            "path": [x["id"] for x in ix.group_path(g)], "item_path": ix.item_path(i), "why": why,
            "facets": self._facets(ix.cols.op[i], g, outs[:3]),
            "_layer": self._layer(g, True),
        }
        if i in self.present.elided:
            out["elided"] = True
        return out

    def _group_result(self, g: int, why: str) -> SearchResult:
        grp = self.capture.groups[g]
        attrs = grp.attrs if isinstance(grp.attrs, dict) else {}
        path, cls = attrs.get("path"), attrs.get("class")
        ids = [x["id"] for x in self.index.group_path(g)]
        sub = group_sublabel(grp.kind)
        return {
            "type": "group", "id": g, "key": f"g{g}",
            "label": path if isinstance(path, str) and path else grp.name,
            "sublabel": f"{cls} · {sub}" if isinstance(cls, str) and cls else sub,
            "title": group_title(grp), "path": ids[:-1], "item_path": self.index.group_item_path(g), "why": why,
            "facets": self._facets(None, g, list(self.index.bout[g + 1] or ())[:3]),
            "_layer": self._layer(g, False),
        }

    def _value_result(self, v: int, why: str) -> SearchResult:
        ix = self.index
        d = self.values.full(v)
        p = ix.producer[v]
        g = ROOT
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
                "item_path": item_path, "why": why, "facets": self._facets(ix.cols.op[p] if p >= 0 else None, g, [v]),
                "_layer": self._layer(g, True)}

    def _facets(self, op: str | None, g: int, vs: Iterable[int]) -> Facets:
        """What a result's filters would read (the values the app offers as filters): its
        op (a value's producer's), the innermost class holding it (a group's own), its
        shapes and dtypes (a node's or a group's first outputs, a value's own)."""
        values = self.capture.values
        shapes: list[str] = []
        dtypes: list[str] = []
        for v in vs:
            label = self.values.label(v)
            if label not in shapes:
                shapes.append(label)
            dt = short_dtype(values[v].dtype)
            if dt not in dtypes:
                dtypes.append(dt)
        return {"op": op, "class": self._innermost_class(g), "shape": shapes, "dtype": dtypes}

    def _innermost_class(self, g: int) -> str | None:
        if g == ROOT:
            return None
        if g not in self._class_of:
            gs = self.capture.groups
            found = None
            for x in reversed(self.index.chain[g]):
                cls = gs[x].attrs.get("class") if isinstance(gs[x].attrs, dict) else None
                if isinstance(cls, str) and cls:
                    found = cls
                    break
            self._class_of[g] = found
        return self._class_of[g]

    # ------------------------------------------------------------------ indexes

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

    def _shapes(self) -> dict[tuple[Any, ...], list[int]]:
        if self._shapes_index is None:
            off, dims = ValueTable.of(self.capture.values).shape_columns()
            shapes = (tuple(dims[off[v]:off[v + 1]]) for v in range(self.index.n_values))
            self._shapes_index = _rows_by(shapes)
        return self._shapes_index

    def _shape_matches(self, dims: tuple[Any, ...], dtype: str | None) -> list[int]:
        ids = self._shapes().get(dims, [])
        if dtype is None:
            return ids
        values = self.capture.values
        return [v for v in ids if short_dtype(values[v].dtype) == dtype]

    def _location_calls(self, file: str, line: int | None) -> list[int]:
        """The groups called on ``file:line`` (by the line index that gives the editor's
        hints), outermost call first; [] without a line or an index."""
        if line is None or self.lines is None:
            return []
        f = file.replace("\\", "/").lstrip("./") if not file.startswith("/") else file
        entry = self.lines().at(f, line)
        if entry is None:
            return []
        return list(dict.fromkeys(g for call in entry.calls for g in call.groups))

    def _location_matches(self, file: str, line: int | None) -> list[int]:
        f = file.replace("\\", "/").lstrip("./") if not file.startswith("/") else file
        hits = [fi for fi, fr in enumerate(self.capture.frames)
                if (fr.file == f or fr.file.endswith("/" + f)) and (line is None or fr.line == line)]
        if not hits:
            return []
        index = self._frames()
        return sorted(i for fi in hits for i in index.get(fi, ()))


# --------------------------------------------------------------------------- query parsing
#
# Plain string operations, each a constant number of passes over the query: no regular
# expression, so nothing can backtrack.


def split_filters(q: str) -> tuple[str, dict[str, str]]:
    """``"op:addmm ln class:Block"`` -> ``("ln", {"op": "addmm", "cls": "Block"})``: words
    ``KEY:VALUE`` with a filter key are filters (the last of a key wins), the rest the query."""
    text, filters = [], {}
    for word in q.split():
        key, sep, value = word.partition(":")
        name = FILTER_KEYS.get(key.lower()) if sep else None
        if name is not None and value:
            filters[name] = value
        else:
            text.append(word)
    return " ".join(text), filters


def _is_dim(text: str) -> bool:
    """A dimension as a query writes it: digits, a name (``batch``) or ``?``."""
    return bool(text) and all(c.isalnum() or c in "_?" for c in text)


def _dims_of(inner: str) -> tuple[Any, ...] | None:
    """``"2, 4"`` -> ``(2, 4)``; a trailing comma is allowed (``(4,)``), an empty list is
    a scalar; ``None`` when a part is not a dimension."""
    parts = [p.strip() for p in inner.split(",")]
    if parts and parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if parts == [""]:
        return ()
    if not all(_is_dim(p) for p in parts):
        return None
    return tuple(int(p) if p.isdigit() else p for p in parts)


def _parse_shape(q: str) -> tuple[tuple[Any, ...], str | None] | None:
    """``2,4`` / ``[2,4]`` / ``(2, 4)`` / ``f32[2,4]`` / ``float32[2,4]`` / ``f32[]``."""
    q = q.strip()
    if q and q[-1] in "])":
        starts = [x for x in (q.find("["), q.find("(")) if x >= 0]
        if not starts:
            return None
        opened = min(starts)
        head, inner = q[:opened].strip(), q[opened + 1:-1]
        if "]" in inner or ")" in inner or "[" in inner or "(" in inner:
            return None
        if head and not (head[0].isalpha() and all(c.isalnum() or c == "_" for c in head)):
            return None
        dims = _dims_of(inner) if inner.strip() else ()
        if dims is None:
            return None
        return dims, short_dtype(head.lower()) if head else None
    if "," in q:
        dims = _dims_of(q)
        if dims:
            return dims, None
    return None


def _parse_location(q: str) -> tuple[str, int | None] | None:
    """``model.py:12`` / ``model.py`` / ``pkg/model.py:12`` / ``anything:12``."""
    head, sep, tail = q.rpartition(":")
    if sep and tail.isdigit() and head:
        if head.endswith(".py") or "/" in head or "." in head:
            return head, int(tail)
        return None
    if q.endswith(".py") and len(q) > 3:
        return q, None
    return None
