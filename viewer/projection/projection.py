"""Graph projection: from a canonical capture to what the browser draws.

A :class:`Projection` is built once per capture. Its index holds, in flat integer
columns, the producer and the uses of every value, the direct children of every
group, and the boundary (values entering / leaving) of every group. Every answer is
then a small page computed from the index: the children of one group (or of one
chunk of a large group) with the edges between them, one node, one value, one group,
a page of node summaries, or a bounded list of search results. Nothing here ever
returns the whole graph.

The index is built by :mod:`viewer.projection.index`, values are named (and group kinds
and roles worded) by :mod:`viewer.projection.names`, and search lives in
:mod:`viewer.projection.search`; :class:`Projection` combines them, and the names other
modules import are re-exported here.

Only the standard library and :mod:`capture` are imported (DESIGN.md boundaries).
"""

from __future__ import annotations

import hashlib
import threading
from bisect import bisect_left
from collections import OrderedDict
from typing import Any, NamedTuple

from capture.graph import frame_repeats
from capture.graph.model import Capture, Frame
from capture.graph.graphfile import ValueTable

from .bodies import body_summary, template_line
from .library_sources import short_path
from .index import CHUNK, MAX_ITEMS, ROOT, UPPER_CHUNK, GraphIndex, _chunk_keys  # noqa: F401
from .names import (  # noqa: F401
    CHUNK_WORDING, ROLE_SENTENCES, WEIGHT_ROLES, ValueNames, group_sublabel, group_wording, short_dtype,
    value_label, vocabulary,
)
from .search import DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT, Search  # noqa: F401
from .summaries import ValueSummaries

MAX_PAGE = 1000
LIST_CAP = 64  # outputs listed on an item card; uses listed per value in details
USES_CAP = 1000
_VIEW_CACHE = 24
_DEPS_CACHE = 32

SUBTREE_ITEMS = 60_000  # items one api/subtree answer may carry (Expand all fetches in one request)
PARAM_ROLES = frozenset({"param", "variable"})  # what a group card counts as its parameters


class ProjectionError(Exception):
    """A request the projection cannot answer; ``status`` is the HTTP status to use."""

    status = 400


class NotFound(ProjectionError):
    status = 404


# Bytes per element, for a group card's parameter bytes ("7.09 M params · 28.4 MB").
_DTYPE_BITS = {
    "float64": 64, "float32": 32, "float16": 16, "bfloat16": 16, "int64": 64, "int32": 32,
    "int16": 16, "int8": 8, "int4": 4, "uint64": 64, "uint32": 32, "uint16": 16, "uint8": 8,
    "uint4": 4, "complex64": 64, "complex128": 128, "bool": 8, "float8_e4m3fn": 8, "float8_e5m2": 8,
}


def frame_json(f: Frame | None) -> dict | None:
    if f is None:
        return None
    out = {"file": f.file, "line": f.line, "column": f.column, "function": f.function}
    if f.library:  # an installed file by absolute path; ``label`` is the short form shown
        out["library"] = True
        out["label"] = f"{short_path(f.file)}:{f.line} (library)"
    return out


def frame_label(f: Frame) -> str:
    """``file:line``; a library frame as ``transformers/…/modeling_gpt2.py:312 (library)``."""
    return f"{short_path(f.file)}:{f.line} (library)" if f.library else f"{f.file}:{f.line}"


class _Deps(NamedTuple):
    """The flow into the children of one group, positions in program order: entry k is
    value ``val[k]`` going from child ``src[k]`` (-1: from outside the group) to child
    ``dst[k]``; ``dst`` is sorted, ``by_src`` orders entries by source. ``outs`` pairs
    each value leaving the group with the position of the child producing it."""

    src: list[int]
    dst: list[int]
    val: list[int]
    by_src: list[int]
    sorted_src: list[int]
    outs: list[tuple[int, int]]


# --------------------------------------------------------------------------- projection


class Projection:
    """The pages of one capture, computed from its parts (thread-safe reads): the
    :class:`GraphIndex` (``index``), the value names (``names``), value summaries
    (``values``) and search (``searcher``)."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture
        self.index = GraphIndex(capture)
        self.names = ValueNames(capture, self.index)
        self.values = ValueSummaries(capture, self.names)
        self.searcher = Search(capture, self.index, self.names, self.values)
        self._lock = threading.Lock()
        self._views: OrderedDict[tuple, dict] = OrderedDict()
        self._deps_cache: OrderedDict[int, _Deps] = OrderedDict()
        self._structure: tuple[list[str], list[tuple[int, int]]] | None = None
        self._group_weights: dict[int, dict] = {}

    @property
    def node_count(self) -> list[int]:
        """Nodes in each group's subtree (slot ``g + 1``; slot 0: the whole program)."""
        return self.index.node_count

    def item_path(self, i: int) -> list[str]:
        """Item keys from the root to node ``i``: what to expand to see it."""
        return self.index.item_path(i)

    def uses(self, v: int) -> list[int]:
        """Nodes using value ``v``, in program order."""
        return self.index.uses(v)

    def search(self, q: str, limit: int = DEFAULT_SEARCH_LIMIT) -> dict:
        return self.searcher.search(q, limit)

    # ------------------------------------------------------------------ lookups

    def _check_group(self, g: int) -> None:
        if not (g == ROOT or 0 <= g < len(self.index.parent)):
            raise NotFound(f"no group {g}")

    def _check_node(self, i: int) -> None:
        if not 0 <= i < self.index.n_nodes:
            raise NotFound(f"no node {i}")

    def _check_value(self, v: int) -> None:
        if not 0 <= v < self.index.n_values:
            raise NotFound(f"no value {v}")

    # ------------------------------------------------------------------ children

    def children(self, group: int, chunk: int | str | None = None) -> dict:
        """The direct children of ``group`` (or of one chunk of it), ready to lay out."""
        group = int(group)
        self._check_group(group)
        chunk_id = None if chunk is None or chunk == "" else _int(chunk, "chunk")
        key = (group, chunk_id)
        with self._lock:
            got = self._views.get(key)
            if got is not None:
                self._views.move_to_end(key)
                return got
        view = self._view(group, chunk_id)
        with self._lock:
            self._views[key] = view
            while len(self._views) > _VIEW_CACHE:
                self._views.popitem(last=False)
        return view

    def bodies(self, node: int) -> dict:
        """The unexecuted bodies of boundary node ``node``, side by side (a view like
        :meth:`children`; container key ``n<node>``): one template card per body, no
        edges (a template's inputs are its own parameters, not the boundary's operands)."""
        node = int(node)
        self._check_node(node)
        if node not in self.index.bodies_of:
            raise NotFound(f"node {node} has no control-flow bodies")
        items = [self._item(~b) for b in self.index.bodies_of[node]]
        return {
            "group": None, "node": node, "chunk": None, "items": items, "edges": [],
            "inputs": [], "outputs": [], "chunked": False, "child_count": len(items),
            "range": [0, len(items)], "opaque_count": sum(it["opaque_count"] for it in items),
            "bodies": self._body_summaries(node), "side_by_side": True,
        }

    def _body_summaries(self, node: int) -> list[dict]:
        gs = self.capture.groups
        return [body_summary(b, gs[b].attrs, gs[b].name) for b in self.index.bodies_of[node]]

    def _chunk_range(self, n: int, chunk: int) -> tuple[int, int]:
        if chunk >= 0:
            lo, span = chunk * CHUNK, CHUNK
        else:
            lo, span = (-chunk - 1) * UPPER_CHUNK, UPPER_CHUNK
        if n <= CHUNK or lo >= n or (chunk < 0 and n <= UPPER_CHUNK):
            raise NotFound(f"no chunk {chunk}")
        return lo, min(n, lo + span)

    def _view(self, g: int, chunk: int | None) -> dict:
        _, refs, _ = self.index.ordered(g)
        n = len(refs)
        lo, hi = (0, n) if chunk is None else self._chunk_range(n, chunk)
        size = hi - lo
        # items: the children themselves, or leaf chunks, or upper chunks
        if size <= CHUNK:
            span = 1
        elif size <= UPPER_CHUNK:
            span = CHUNK
        else:
            span = UPPER_CHUNK
        whole = lo == 0 and hi == n
        edges: dict[tuple, list[int]] = {}
        in_vals: dict[int, int] = {}  # value -> producer (-1 for none)
        out_vals: dict[int, None] = {}
        item_outs: dict[int, dict[int, None]] = {}  # chunk item -> what it hands on
        producer = self.index.producer
        outputs = self.index.output_set
        deps = self._deps(g)
        src, dst, val = deps.src, deps.dst, deps.val

        # what enters each item: from another item of the view, or across the boundary
        for k in range(bisect_left(dst, lo), bisect_left(dst, hi)):
            s, v = src[k], val[k]
            ti = (dst[k] - lo) // span
            if lo <= s < hi:
                si = (s - lo) // span
                if si != ti:
                    edges.setdefault((si, ti), []).append(v)
                    if span > 1:
                        item_outs.setdefault(si, {})[v] = None
            else:
                in_vals[v] = producer[v]
                edges.setdefault((("in", v), ti), []).append(v)
        # what leaves the view: to later siblings outside it, or out of the group
        sorted_src = deps.sorted_src
        leaving = (deps.by_src[j] for j in range(bisect_left(sorted_src, lo), bisect_left(sorted_src, hi)))
        crossings = [(src[k], val[k]) for k in leaving if not lo <= dst[k] < hi]
        crossings += [(s, v) for s, v in deps.outs if lo <= s < hi]
        for s, v in crossings:
            si = (s - lo) // span
            out_vals[v] = None
            edges.setdefault((si, ("out", v)), []).append(v)
            if span > 1:
                item_outs.setdefault(si, {})[v] = None
        if g == ROOT and whole:
            for v in self.index.output_values:
                if producer[v] < 0:
                    in_vals[v] = -1
                    out_vals[v] = None
                    edges.setdefault((("in", v), ("out", v)), []).append(v)

        if span == 1:
            items = [self._item(refs[pos]) for pos in range(lo, hi)]
            keys_of = [it["key"] for it in items]
        else:
            items = [self._chunk_item(g, lo, hi, span, k, item_outs.get(k, {})) for k in range((size + span - 1) // span)]
            keys_of = [it["key"] for it in items]

        labels: dict[int, str] = {}

        def label(v: int) -> str:
            s = labels.get(v)
            if s is None:
                s = labels[v] = self.values.label(v)
            return s

        def endpoint(e) -> str:
            return f"{e[0]}:{e[1]}" if isinstance(e, tuple) else keys_of[e]

        edge_list = []
        for (s, t), vals in edges.items():
            if span == 1:
                for v in dict.fromkeys(vals):
                    edge_list.append({"source": endpoint(s), "target": endpoint(t), "value": v, "label": label(v)})
            else:
                vals = list(dict.fromkeys(vals))
                text = label(vals[0]) + (f" +{len(vals) - 1}" if len(vals) > 1 else "")
                edge_list.append({"source": endpoint(s), "target": endpoint(t), "value": vals[0],
                                  "label": text, "count": len(vals)})

        def boundary(v: int, extra: dict) -> dict:
            d = self.values.brief(v)
            d["value"] = d.pop("id")
            d["key"] = ("in:" if "from" in extra else "out:") + str(v)
            d.update(extra)
            return d

        inputs = [boundary(v, {"from": {"type": "node", "id": p} if p >= 0 else {"type": "input"}})
                  for v, p in in_vals.items()]
        for b in inputs:
            if self.names.is_weight(b["value"]):
                b["weight"] = True  # drawn inside its consumers' cards unless pills are asked for
        for e in edge_list:
            if e["source"].startswith("in:") and self.names.is_weight(e["value"]):
                e["weight"] = True
        outs = [boundary(v, {"capture_output": v in outputs}) for v in out_vals]
        return {
            "group": g,
            "chunk": None if chunk is None else f"{g}:{chunk}",
            "items": items,
            "edges": edge_list,
            "inputs": inputs,
            "outputs": outs,
            "chunked": span > 1,
            "child_count": n,
            "range": [lo, hi],
            "opaque_count": self.index.opaque_count[g + 1] if whole else self._range_counts(refs, lo, hi)[1],
        }

    def _deps(self, g: int) -> "_Deps":
        """Every value flowing into a child of ``g``, as positions among its children."""
        with self._lock:
            got = self._deps_cache.get(g)
            if got is not None:
                self._deps_cache.move_to_end(g)
                return got
        keys, refs, _ = self.index.ordered(g)
        producer, grp, position = self.index.producer, self.index.cols.group, self.index.position
        in_off, in_ref = self.index.cols.in_off, self.index.cols.in_ref
        src: list[int] = []
        dst: list[int] = []
        val: list[int] = []
        for pos, ref in enumerate(refs):
            incoming = in_ref[in_off[ref]:in_off[ref + 1]] if ref >= 0 else (self.index.bin[~ref + 1] or ())
            for v in incoming:
                if v < 0:
                    continue  # a literal
                p = producer[v]
                src.append(-1 if p < 0 else bisect_left(keys, p) if grp[p] == g else position(p, g))
                dst.append(pos)
                val.append(v)
        by_src = sorted(range(len(src)), key=src.__getitem__)
        outs = [(position(producer[v], g), v) for v in (self.index.bout[g + 1] or ()) if producer[v] >= 0]
        got = _Deps(src, dst, val, by_src, [src[k] for k in by_src], outs)
        with self._lock:
            self._deps_cache[g] = got
            while len(self._deps_cache) > _DEPS_CACHE:
                self._deps_cache.popitem(last=False)
        return got

    def _item(self, ref: int) -> dict:
        if ref >= 0:
            opaque = ref in self.index.cols.opaque
            outs = self.index.outputs_of(ref)
            item = {
                "type": "node", "id": ref, "key": f"n{ref}", "label": self.index.cols.op[ref],
                "sublabel": self.index.where(ref), "kind": "opaque" if opaque else "op", "opaque": opaque,
                "child_count": 0, "outputs": [self.values.brief(v) for v in outs[:LIST_CAP]],
                "outputs_total": len(outs),
            }
            weights = self._node_weights(ref)
            if weights:
                item["weights"] = weights[:LIST_CAP]
                item["weights_total"] = len(weights)
            if ref in self.index.bodies_of:
                item["bodies"] = self._body_summaries(ref)
            return item
        c = ~ref
        grp = self.capture.groups[c]
        outs = sorted(self.index.bout[c + 1] or ())
        ins = [v for v in sorted(self.index.bin[c + 1] or ()) if not self.names.is_weight(v)]
        sigs, same = self._structure_index()
        extra: dict[str, Any] = {
            "inputs": [self.values.brief(v) for v in ins[:LIST_CAP]], "inputs_total": len(ins),
            "params": self._group_params(c), "structure": sigs[c],
        }
        attrs = grp.attrs if isinstance(grp.attrs, dict) else {}
        for k in ("class", "path"):
            if isinstance(attrs.get(k), str) and attrs[k]:
                extra[k] = attrs[k]
        count, index = same[c]
        if count > 1:
            extra["identical"] = {"count": count, "index": index}
        if c in self.index.body_node:
            extra["body"] = body_summary(c, attrs, grp.name)
            extra["template"] = template_line(extra["body"])
        return {
            **extra,
            "type": "group", "id": c, "key": f"g{c}", "label": grp.name,
            "sublabel": group_sublabel(grp.kind),
            "kind": grp.kind, "honest": group_wording(grp.kind)[0], "opaque": False,
            "opaque_count": self.index.opaque_count[c + 1],
            "child_count": len(self.index.direct_nodes[c + 1]) + len(self.index.child_groups[c + 1]),
            "node_count": self.index.node_count[c + 1],
            "first": self.index.first[c + 1] if self.index.node_count[c + 1] else None,
            "last": self.index.last[c + 1] if self.index.node_count[c + 1] else None,
            "outputs": [self.values.brief(v) for v in outs[:LIST_CAP]], "outputs_total": len(outs),
        }

    def _chunk_item(self, g: int, lo: int, hi: int, span: int, k: int, outs: dict) -> dict:
        a, b = lo + k * span, min(hi, lo + (k + 1) * span)
        _, refs, _ = self.index.ordered(g)
        chunk_id = a // CHUNK if span == CHUNK else -(a // UPPER_CHUNK) - 1
        first_ref, last_ref = refs[a], refs[b - 1]
        first = first_ref if first_ref >= 0 else self.index.first[~first_ref + 1]
        last = last_ref if last_ref >= 0 else self.index.last[~last_ref + 1]
        nodes, opaque = self._range_counts(refs, a, b)
        out_list = list(outs)
        return {
            "type": "chunk", "id": f"{g}:{chunk_id}", "key": f"c{g}:{chunk_id}",
            "label": f"{a + 1:,}–{b:,} of {len(refs):,}",
            "sublabel": self._span_text(first_ref, last_ref),
            "kind": "chunk", "honest": CHUNK_WORDING[1],
            "opaque": False, "opaque_count": opaque, "child_count": (b - a) if span == CHUNK else -(-(b - a) // CHUNK),
            "node_count": nodes, "range": [a, b],
            "first": first if first < self.index.n_nodes else None, "last": last if last >= 0 else None,
            "outputs": [self.values.brief(v) for v in out_list[:LIST_CAP]], "outputs_total": len(out_list),
        }

    def _range_counts(self, refs: list[int], a: int, b: int) -> tuple[int, int]:
        """(nodes, opaque nodes) under the children ``refs[a:b]``."""
        nodes = opaque = 0
        op_set, counts, opaques = self.index.cols.opaque, self.index.node_count, self.index.opaque_count
        for r in refs[a:b]:
            if r >= 0:
                nodes += 1
                opaque += r in op_set
            else:
                nodes += counts[~r + 1]
                opaque += opaques[~r + 1]
        return nodes, opaque

    def _span_text(self, first_ref: int, last_ref: int) -> str:
        """Where a chunk's code lives: ``layer0.py:12 … layer3.py:40``."""
        def where(ref: int, end: bool) -> str:
            if ref < 0:
                c = ~ref
                i = self.index.last[c + 1] if end else self.index.first[c + 1]
                if not 0 <= i < self.index.n_nodes:
                    return self.capture.groups[c].name
                return self.index.where(i) or self.capture.groups[c].name
            return self.index.where(ref)
        a, b = where(first_ref, False), where(last_ref, True)
        if not a and not b:
            return ""
        return a if a == b or not b else f"{a} … {b}" if a else b

    # ------------------------------------------------------------------ weights and structure

    def _node_weights(self, i: int) -> list[dict]:
        """The weights node ``i`` consumes, each once, in operand order. ``shared``: more
        than one node uses it (tied embeddings), so it appears on each of them."""
        c = self.index.cols
        out = []
        for v in dict.fromkeys(c.in_ref[c.in_off[i]:c.in_off[i + 1]]):
            if v < 0 or not self.names.is_weight(v):
                continue
            d = self.values.brief(v)
            d["value"] = d.pop("id")
            uses = len(self.index.uses(v))
            if uses > 1:
                d["shared"] = uses
            out.append(d)
        return out

    def _group_params(self, g: int) -> dict:
        """Parameters used inside group ``g``: tensors, elements and bytes of the values
        with a parameter role (Torch parameters, JAX variables) entering its subtree."""
        got = self._group_weights.get(g)
        if got is not None:
            return got
        tensors = count = bits = 0
        values = self.capture.values
        for v in self.index.bin[g + 1] or ():
            named = self.names.names.get(v)
            if named is None or named[1] not in PARAM_ROLES or self.index.producer[v] >= 0:
                continue
            val = values[v]
            n = 1
            for d in val.shape:
                if isinstance(d, int):  # a symbolic dimension counts as 1
                    n *= d
            tensors += 1
            count += n
            bits += n * _DTYPE_BITS.get(val.dtype, 32)
        got = self._group_weights[g] = {"tensors": tensors, "count": count, "bytes": (bits + 7) // 8}
        return got

    def _structure_index(self) -> tuple[list[str], list[tuple[int, int]]]:
        """A structural signature per group (kind, class, the op sequence and child
        structures in program order, boundary shapes) and, per group, (how many siblings
        share it, its index among them): "×N identical" blocks (GPT-2's 12 ``h.N``)."""
        got = self._structure
        if got is not None:
            return got
        groups = self.capture.groups
        ng = len(groups)
        values = self.capture.values
        ops = self.index.cols.op

        def shapes(table: dict | None) -> tuple:
            out = []
            for v in sorted(table or ()):
                if self.names.is_weight(v):
                    continue  # parameters are listed by shape below, in use order
                val = values[v]
                out.append((tuple(val.shape), val.dtype))
            return tuple(out)

        sigs = [""] * ng
        for g in sorted(range(ng), key=lambda x: len(self.index.chain[x]), reverse=True):
            _, refs, _ = self.index.ordered(g)
            body = tuple(ops[r] if r >= 0 else sigs[~r] for r in refs)
            grp = groups[g]
            cls = grp.attrs.get("class") if isinstance(grp.attrs, dict) else None
            weights = tuple((tuple(values[v].shape), values[v].dtype) for v in sorted(self.index.bin[g + 1] or ()) if self.names.is_weight(v))
            text = repr((grp.kind, cls, body, shapes(self.index.bin[g + 1]), shapes(self.index.bout[g + 1]), weights))
            sigs[g] = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
        same: list[tuple[int, int]] = [(1, 0)] * ng
        for kids in self.index.child_groups:
            by_sig: dict[str, list[int]] = {}
            for c in kids:
                by_sig.setdefault(sigs[c], []).append(c)
            for members in by_sig.values():
                if len(members) > 1:
                    for k, c in enumerate(members):
                        same[c] = (len(members), k)
        got = self._structure = (sigs, same)
        return got

    def subtree(self, group: int, max_items: int = SUBTREE_ITEMS) -> dict:
        """The ``children`` views of ``group`` and of every group and chunk below it,
        breadth first, in one answer (Expand all): ``views`` maps each container's item key
        (``"g-1"``, ``"g3"``, ``"c3:0"``) to its view. Stops before ``max_items`` items;
        ``complete`` says whether everything below was included."""
        group = int(group)
        self._check_group(group)
        max_items = max(1, min(int(max_items), SUBTREE_ITEMS))
        views: dict[str, dict] = {}
        frontier: list[tuple[str, int, int | None]] = [(f"g{group}", group, None)]
        total = 0
        complete = True
        while frontier:
            nxt: list[tuple[str, int, int | None]] = []
            for key, g, chunk in frontier:
                view = self.children(g, chunk)
                if total + len(view["items"]) > max_items and views:
                    complete = False
                    nxt = []
                    break
                views[key] = view
                total += len(view["items"])
                for it in view["items"]:
                    if it["type"] == "group" and it["child_count"]:
                        nxt.append((it["key"], it["id"], None))
                    elif it["type"] == "chunk":
                        cg, ck = it["id"].split(":")
                        nxt.append((it["key"], int(cg), int(ck)))
            frontier = nxt
        return {"group": group, "views": views, "items": total, "complete": complete}

    # ------------------------------------------------------------------ details

    def node(self, i: int) -> dict:
        i = int(i)
        self._check_node(i)
        node = self.capture.nodes[i]
        inputs = []
        for o in node.inputs:
            if o.value is None:
                inputs.append({"position": o.position, "literal": o.literal})
                continue
            d = self.values.full(o.value)
            p = self.index.producer[o.value]
            d["producer"] = p if p >= 0 else None
            if p >= 0:
                d["producer_op"] = self.index.cols.op[p]
            uses = self.index.uses(o.value)
            d["uses"], d["uses_total"] = uses[:USES_CAP], len(uses)
            inputs.append({"position": o.position, "value": d})
        outputs = []
        for v in node.outputs:
            d = self.values.full(v)
            uses = self.index.uses(v)
            d["uses"], d["uses_total"] = uses[:USES_CAP], len(uses)
            d["capture_output"] = v in self.index.output_set
            outputs.append(d)
        g = ROOT if node.group is None else node.group
        return {
            "id": i, "op": node.op, "params": node.params, "opaque": node.opaque,
            "group": None if g == ROOT else g, "group_path": self.index.group_path(g),
            "item_path": self.index.item_path(i), "inputs": inputs, "outputs": outputs,
            "frame": frame_json(self.index.frame(i)),
            "measured": any("measured" in o for o in outputs),
            **({"bodies": self._body_summaries(i)} if i in self.index.bodies_of else {}),
            **({"template": self.index.body_node[self.index.chain[g][0]]} if g != ROOT and self.index.chain[g][0] in self.index.body_node else {}),
        }

    def value(self, v: int) -> dict:
        v = int(v)
        self._check_value(v)
        d = self.values.full(v)
        p = self.index.producer[v]
        d["producer"] = None if p < 0 else {"id": p, "op": self.index.cols.op[p], "item_path": self.index.item_path(p)}
        uses = self.index.uses(v)
        d["uses"] = [{"id": u, "op": self.index.cols.op[u], "positions": self._positions(u, v)} for u in uses[:USES_CAP]]
        d["uses_total"] = len(uses)
        d["capture_input"] = v in self.index.input_set
        d["capture_output"] = v in self.index.output_set
        return d

    def _positions(self, i: int, v: int) -> list[int]:
        node = self.capture.nodes[i]
        return [o.position for o in node.inputs if o.value == v]

    def group(self, g: int) -> dict:
        g = int(g)
        if g == ROOT:
            raise NotFound("the root is not a group; ask for its children")
        self._check_group(g)
        grp = self.capture.groups[g]
        short, long = group_wording(grp.kind)
        bin_, bout = sorted(self.index.bin[g + 1] or ()), sorted(self.index.bout[g + 1] or ())
        return {
            "id": g, "kind": grp.kind, "name": grp.name, "attrs": grp.attrs,
            "frame": self._group_frame(grp.attrs, "frame"), "class_frame": self._group_frame(grp.attrs, "class_frame"),
            "honest": long, "honest_short": short,
            "parent": grp.parent, "path": self.index.group_path(g),
            "counts": {
                "children": len(self.index.direct_nodes[g + 1]) + len(self.index.child_groups[g + 1]),
                "direct_nodes": len(self.index.direct_nodes[g + 1]),
                "groups": len(self.index.child_groups[g + 1]),
                "nodes": self.index.node_count[g + 1],
                "opaque": self.index.opaque_count[g + 1],
            },
            "inputs": [self.values.full(v) for v in bin_[:USES_CAP]], "inputs_total": len(bin_),
            "outputs": [self.values.full(v) for v in bout[:USES_CAP]], "outputs_total": len(bout),
        }

    def _group_frame(self, attrs: Any, key: str) -> dict | None:
        """A module group's call-site (``frame``) or class-definition (``class_frame``) frame."""
        f = attrs.get(key) if isinstance(attrs, dict) else None
        frames = self.capture.frames
        return frame_json(frames[f]) if type(f) is int and 0 <= f < len(frames) else None

    def nodes_page(self, offset: int = 0, limit: int = 100) -> dict:
        offset, limit = int(offset), int(limit)
        if offset < 0 or limit < 1:
            raise ProjectionError("offset must be >= 0 and limit >= 1")
        limit = min(limit, MAX_PAGE)
        hi = min(self.index.n_nodes, offset + limit)
        return {
            "offset": offset, "limit": limit, "total": self.index.n_nodes,
            "nodes": [self._summary(i) for i in range(offset, hi)],
        }

    def _summary(self, i: int) -> dict:
        g = self.index.cols.group[i]
        f = self.index.frame(i)
        return {
            "id": i, "op": self.index.cols.op[i], "group": None if g == ROOT else g,
            "opaque": i in self.index.cols.opaque,
            "outputs": [self.values.full(v) for v in self.index.outputs_of(i)[:LIST_CAP]],
            "frame": None if f is None else frame_label(f),
        }

    def summary(self) -> dict:
        """What ``api/capture`` says about the capture (without server-side fields)."""
        cap = self.capture
        cov = cap.coverage
        failure = None
        if cap.failure is not None:
            f = cap.failure
            failure = {"type": f.type, "message": f.message, "stage": f.stage,
                       "frames": [frame_json(fr) for fr in f.frames], "details": f.details,
                       # Deep recursion's collapsed frames, worded as Python's traceback words them.
                       "repeated_frames": [{"after": after, "text": frame_repeats.marker(k, times)}
                                           for after, (k, times) in sorted(frame_repeats.repeated(f.details).items())]}
        return {
            "backend": cap.backend, "framework": cap.framework,
            "framework_version": cap.framework_version,
            "coverage": {"scope": cov.scope, "status": cov.status, "reasons": list(cov.reasons),
                         "effects": cov.effects},
            "counts": {"nodes": self.index.n_nodes, "values": self.index.n_values, "groups": len(cap.groups),
                       "frames": len(cap.frames), "opaque": len(self.index.cols.opaque),
                       # nodes of unexecuted control-flow bodies, when there are any
                       **({"template_nodes": sum(self.index.node_count[b + 1] for b in self.index.body_node)}
                          if self.index.body_node else {})},
            "inputs": self._tree(cap.inputs), "outputs": self._tree(cap.outputs),
            "sources": [{"path": s.path, "sha256": s.sha256} for s in cap.sources],
            "recipe": cap.recipe, "failure": failure, "meta": cap.meta,
            "measured": self._measured(), "vocabulary": vocabulary(),
        }

    def _measured(self) -> bool:
        values = self.capture.values
        if isinstance(values, ValueTable):  # a file's values: one column, maybe absent
            column = values.measured_column()
            return column is not None and any(m is not None for m in column)
        return any(v.measured is not None for v in values)

    def _tree(self, tree: Any) -> Any:
        if "value" in tree:
            v = tree["value"]
            return {"value": v, **{k: x for k, x in self.values.full(v).items() if k != "id"}} if 0 <= v < self.index.n_values else tree
        for kind in ("list", "tuple"):
            if kind in tree:
                return {kind: [self._tree(t) for t in tree[kind]]}
        if "dict" in tree:
            return {"dict": [[k, self._tree(t)] for k, t in tree["dict"]]}
        return tree


def _int(text: Any, name: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        raise ProjectionError(f"{name} must be an integer") from None
