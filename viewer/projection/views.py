"""The pages of a container: what ``api/children`` and ``api/subtree`` answer (:class:`Pages`).

A page is the direct children of one group (or of one chunk of a large group) as items
ready to lay out, with the edges between them and the group's boundary, as
``viewer/API.md`` describes. Items are presented as :mod:`viewer.projection.presentation`
decides (function cards, elided bookkeeping, one-op groups, idle groups) unless the page
is asked for every kernel (``kernels=True``), and each leaf page says which of its
items repeat (:func:`capture.analysis.structure.find_repeats`).
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import OrderedDict
from itertools import chain, compress, filterfalse, repeat
from operator import not_
from typing import Any, Callable, NamedTuple, cast

from capture.frameworks import capabilities
from capture.graph import gc_pause
from capture.graph.model import Capture
from capture.analysis.body_templates import body_summary, template_line
from capture.graph.device_memory import KEY as MEMORY_KEY

from capture.analysis.rank_flops import rank_flops
from capture.analysis.scope import devices_running
from .compiled_view import compiled_brief, compiled_by_node_and_group, group_compiled
from capture.analysis.index import CHUNK, ROOT, UPPER_CHUNK
from capture.analysis.body_templates import body_wording
from capture.analysis.names import CHUNK_WORDING, group_sublabel, group_title, group_wording, run_label
from capture.analysis.analysis import Analysis
from .card_costs import set_scope, stack_cost
from .expert_cards import experts_words, lane_folds, router_words
from .loop_steps import is_step, loop_words
from .plumbing import container_plumbing_fold, plumbing_fold
from .page_flow import _Flow, _Wiring
from .answers import (BodiesPage, Boundary, CardCost, Edge, ElidedNode, ElidedOps, GroupRef, Item, PageView,
                      Stack, SubtreeAnswer)
from capture.analysis.structure import find_repeats

LIST_CAP = 64  # outputs / weights / elided ops listed on one item or page
WRAPPERS_CAP = 8  # groups a one-op card lists it stands for (a hostile chain of them may be 20,000 deep)
# What a routed group and a stack of layers routed differently say (structure.py).
ROUTED_WORDING = "routed: which ops run depends on the data"
ROUTING_DIFFERS = "routing differs per layer"
KERNELS_LISTED = 16  # op names a function card lists
SUBTREE_ITEMS = 60_000  # items one api/subtree answer may carry (Expand all fetches in one request)
_VIEW_CACHE = 24
_DEPS_CACHE = 32

class PageError(Exception):
    """A page that does not exist (an unknown chunk)."""


class _Deps(NamedTuple):
    """The flow into the children of one group, as drawn, positions in program order:
    entry k is value ``val[k]`` going from child ``src[k]`` (-1: from outside the group)
    to child ``dst[k]``; ``dst`` is sorted, ``by_src`` orders the entries from a child by source. ``outs``
    pairs each value leaving the group with the position of the child drawn making it.
    ``through``: ``(position, outer value, value leaving)`` for a value an elided op at
    ``position`` passes from outside straight out. ``near``: for each elided op's
    position, the position of the item it is listed with. ``weights``: the entries
    (ascending) whose value is a weight (always from outside), ``others``: the rest: a page
    drawn without weight pills only counts the weights (a deep model's stack page: 57k of
    its 71k entries)."""

    src: list[int]
    dst: list[int]
    val: list[int]
    by_src: list[int]
    sorted_src: list[int]
    outs: list[tuple[int, int]]
    through: list[tuple[int, int, int]]
    near: dict[int, int]
    weights: list[int]
    others: list[int]


class Pages:
    """Pages of one capture (thread-safe; answers are cached, most recent first)."""

    def __init__(self, analysis: Analysis, presentation: Any) -> None:
        self.analysis = analysis
        self.index, self.names, self.values = analysis.index, analysis.names, analysis.values
        self.capture: Capture = analysis.capture  # as analysed (its loops folded into step groups)
        self.framework = self.capture.framework
        self.present = presentation
        self.structure = analysis.structure
        self._lock = threading.Lock()
        self._views: OrderedDict[tuple[int, int | None, bool, bool], PageView] = OrderedDict()
        self._deps_cache: OrderedDict[tuple[int, bool], _Deps] = OrderedDict()
        #: What each layer costs (the analysis's ``costs``), or None: items carry no ``cost``.
        self.costs: Callable[[], Any] | None = analysis.costs
        #: The parameters each group uses (:class:`~capture.analysis.params.GroupParams`).
        self._group_params = analysis.params
        self._compiled: tuple[dict[int, list[Any]], dict[int, list[Any]]] | None = None

    # ------------------------------------------------------------------ pages

    def children(self, g: int, chunk: int | None, kernels: bool, weights: bool = False) -> PageView:
        """The page of ``g`` (or of one chunk of it); ``weights``: with the boundary
        inputs of weights and their edges (else left out, counted in ``weights_hidden``)."""
        key = (g, chunk, kernels, weights)
        with self._lock:
            got = self._views.get(key)
            if got is not None:
                self._views.move_to_end(key)
                return got
        with gc_pause.paused():  # a page of a big group is tens of thousands of small dicts
            view = self._view(g, chunk, kernels, weights)
        with self._lock:
            self._views[key] = view
            while len(self._views) > _VIEW_CACHE:
                self._views.popitem(last=False)
        return view

    def bodies(self, node: int) -> BodiesPage:
        items = [self.item(~b, False) for b in self.index.bodies_of[node]]
        return {
            "group": None, "node": node, "chunk": None, "items": items, "edges": [],
            "inputs": [], "outputs": [], "chunked": False, "child_count": len(items),
            "range": [0, len(items)], "opaque_count": sum(it["opaque_count"] for it in items),
            "bodies": self.body_summaries(node), "side_by_side": True,
        }

    def body_summaries(self, node: int) -> list[dict[str, Any]]:
        gs = self.capture.groups
        templates = self.analysis.templates()
        return [body_summary(b, gs[b].attrs, gs[b].name, b not in templates, devices_running(self.capture, b))
                for b in self.index.bodies_of[node]]

    def subtree(self, group: int, max_items: int, kernels: bool, weights: bool = False) -> SubtreeAnswer:
        # One pause for the whole walk: resumed between its pages, the collector ran over
        # every page built so far again and again (1.5 s of a 96-layer Llama's 13 s).
        with gc_pause.paused():
            return self._subtree(group, max_items, kernels, weights)

    def _subtree(self, group: int, max_items: int, kernels: bool, weights: bool) -> SubtreeAnswer:
        views: dict[str, PageView] = {}
        frontier: list[tuple[str, int, int | None]] = [(f"g{group}", group, None)]
        total = 0
        complete = True
        while frontier:
            nxt: list[tuple[str, int, int | None]] = []
            for key, g, chunk in frontier:
                view = self.children(g, chunk, kernels, weights)
                if total + len(view["items"]) > max_items and views:
                    complete = False
                    nxt = []
                    break
                views[key] = view
                total += len(view["items"])
                for it in view["items"]:
                    if it["type"] == "group" and it["child_count"] and (kernels or it["card"] != "function"):
                        nxt.append((it["key"], it["id"], None))
                    elif it["type"] == "chunk":
                        cg, ck = it["id"].split(":")
                        nxt.append((it["key"], int(cg), int(ck)))
            frontier = nxt
        return {"group": group, "views": views, "items": total, "complete": complete, "kernels": kernels}

    def near(self, i: int) -> str | None:
        """The key of the item an elided op ``i`` is listed with on its container's
        page (``None``: it hands nothing to an item there)."""
        g = self.index.cols.group[i]
        keys, refs, _ = self.index.ordered(g)
        got = self._deps(g, False).near.get(bisect_left(keys, i))
        return None if got is None else _ref_key(refs[got])

    def _chunk_range(self, n: int, chunk: int) -> tuple[int, int]:
        if chunk >= 0:
            lo, span = chunk * CHUNK, CHUNK
        else:
            lo, span = (-chunk - 1) * UPPER_CHUNK, UPPER_CHUNK
        if n <= CHUNK or lo >= n or (chunk < 0 and n <= UPPER_CHUNK):
            raise PageError(f"no chunk {chunk}")
        return lo, min(n, lo + span)

    def _view(self, g: int, chunk: int | None, kernels: bool, weights: bool) -> PageView:
        ix = self.index
        _, refs, _ = ix.ordered(g)
        n = len(refs)
        lo, hi = (0, n) if chunk is None else self._chunk_range(n, chunk)
        size = hi - lo
        # items: the children themselves, or leaf chunks, or upper chunks
        span = 1 if size <= CHUNK else CHUNK if size <= UPPER_CHUNK else UPPER_CHUNK
        whole = lo == 0 and hi == n
        flow = self._flow(g, lo, hi, span, kernels, weights)
        elided: list[int] = []
        idle: list[int] = []
        if span == 1:
            items, keys_of = self._child_items(refs, lo, hi, kernels, elided, idle)
        else:
            items = [self._chunk_item(g, lo, hi, span, k, flow.item_outs.get(k, {}))
                     for k in range((size + span - 1) // span)]
            keys_of = {k: it["key"] for k, it in enumerate(items)}
        # weights drawn as pills: at the op cards that read them, where they replace the
        # card's weight lines (a group or chunk card lists none: its pills are inside it)
        ops = frozenset(it["key"] for it in items if it["card"] in ("op", "function")) if weights else frozenset()
        edge_list, pills = self._edge_list(flow.edges, span, keys_of, ops)
        inputs, hidden = self._inputs(flow.in_vals, pills, flow.hidden_weights)
        outs = [self._boundary(v, {"capture_output": v in ix.output_set}) for v in flow.out_vals]
        view: PageView = {
            "group": g,
            "chunk": None if chunk is None else f"{g}:{chunk}",
            "items": items,
            "edges": edge_list,
            "inputs": inputs,
            "outputs": outs,
            "chunked": span > 1,
            "child_count": n,
            "range": [lo, hi],
            "opaque_count": ix.opaque_count[g + 1] if whole else self._range_counts(refs, lo, hi)[1],
            "kernels": kernels,
            "elided": self._elided(refs, elided, flow.near, lo, keys_of),
            "idle": [self._group_ref(~refs[pos]) for pos in idle],
            "stacks": self._stacks(items, edge_list, g) if span == 1 else self._chunk_stack(g, refs, lo, hi, items),
        }
        if weights:
            view["weights_asked"] = True
        if hidden:
            view["weights_hidden"] = hidden  # weight inputs left out (no pills asked, or none at an op)
        return view

    def _flow(self, g: int, lo: int, hi: int, span: int, kernels: bool, weights: bool = False) -> "_Flow":
        """The values entering, crossing and leaving the children ``lo:hi`` of ``g``
        drawn as items of ``span`` children each; without ``weights`` (pills), a weight
        entering is only counted (``hidden_weights``): a deep model's first page has 57k."""
        ix = self.index
        deps = self._deps(g, kernels)
        flow = _Flow(span, deps.near)
        producer, source = ix.producer, self.present.source
        src, dst, val = deps.src, deps.dst, deps.val
        skip = None if weights else self.names.is_weight
        hidden_weights = flow.hidden_weights

        def outside(v: int) -> None:
            # a value entering the view, named by what made it (past elided copies)
            s = source(v, kernels)
            flow.in_vals[v] = producer[s] if s >= 0 else -1

        # what enters each item: from another item of the view, or across the boundary
        a, b = bisect_left(dst, lo), bisect_left(dst, hi)
        entries: Any = range(a, b)
        if skip is not None:  # the weights entering only counted (by C-level passes), the rest looked at
            wk, others = deps.weights, deps.others
            hidden_weights.update(dict.fromkeys(map(val.__getitem__, wk[bisect_left(wk, a):bisect_left(wk, b)])))
            entries = others[bisect_left(others, a):bisect_left(others, b)]
        for k in entries:
            s, v = src[k], val[k]
            ti = (dst[k] - lo) // span
            if lo <= s < hi:
                flow.between((s - lo) // span, ti, v)
            elif skip is not None and skip(v):
                hidden_weights[v] = None
            else:
                outside(v)
                flow.add(("in", v), ti, v)
        # what leaves the view: to later siblings outside it, or out of the group
        sorted_src = deps.sorted_src
        leaving = (deps.by_src[j] for j in range(bisect_left(sorted_src, lo), bisect_left(sorted_src, hi)))
        crossings = [(src[k], val[k]) for k in leaving if not lo <= dst[k] < hi]
        crossings += [(s, v) for s, v in deps.outs if lo <= s < hi]
        for s, v in crossings:
            flow.leaves((s - lo) // span, v)
        for h, u, v in deps.through:  # an elided copy of something from outside, handed straight out
            if lo <= h < hi:
                outside(u)
                flow.out_vals[v] = None
                flow.add(("in", u), ("out", v), u)
        if g == ROOT and lo == 0 and hi == len(ix.ordered(g)[1]):
            for v in ix.output_values:
                if producer[v] < 0:
                    flow.in_vals[v] = -1
                    flow.out_vals[v] = None
                    flow.add(("in", v), ("out", v), v)
        return flow

    def _child_items(self, refs: list[int], lo: int, hi: int, kernels: bool, elided: list[int],
                     idle: list[int]) -> tuple[list[Item], dict[int, str]]:
        """The items of the children ``lo:hi`` drawn one each (positions of the elided
        ops and idle groups among them appended to ``elided`` and ``idle``)."""
        present = self.present
        items: list[Item] = []
        keys_of: dict[int, str] = {}
        for pos in range(lo, hi):
            r = refs[pos]
            if present.elided_op(r, kernels):
                elided.append(pos)
                continue
            if r < 0 and present.is_idle(~r):
                idle.append(pos)  # listed, not an item: nothing of it is drawn
                continue
            it = self.item(r, kernels)
            keys_of[pos - lo] = it["key"]
            items.append(it)
        return items, keys_of

    def _edge_list(self, edges: dict[tuple[Any, Any], list[int]], span: int, keys_of: dict[int, str],
                   ops: frozenset[str]) -> tuple[list[Edge], set[int]]:
        """The page's edges: one per value between two items (``span`` 1), else one per
        pair of items with the count of values; and the weights drawn as pills. An edge
        from a weight's input (flagged ``weight``) is on the page only when it reaches an
        op card among ``ops`` (the weight pills asked for)."""
        label, per_device, is_weight = self.values.label, self.values.device_label, self.names.is_weight

        def endpoint(e: Any) -> str:
            return f"{e[0]}:{e[1]}" if isinstance(e, tuple) else keys_of[e]

        edge_list: list[Edge] = []
        pills: set[int] = set()
        for (s, t), vals in edges.items():
            weight = isinstance(s, tuple) and s[0] == "in" and is_weight(s[1])
            if weight:
                if span > 1 or not isinstance(t, int) or keys_of[t] not in ops:
                    continue
                pills.add(s[1])
            if span == 1:
                for v in dict.fromkeys(vals):
                    edge: Edge = {"source": endpoint(s), "target": endpoint(t), "value": v, "label": label(v)}
                    device = per_device(v)
                    if device is not None:  # a split value: what one device holds (the shapes toggle)
                        edge["device_label"] = device
                    if weight:
                        edge["weight"] = True
                    edge_list.append(edge)
            else:
                vals = list(dict.fromkeys(vals))
                more = f" +{len(vals) - 1}" if len(vals) > 1 else ""
                edge = {"source": endpoint(s), "target": endpoint(t), "value": vals[0],
                        "label": label(vals[0]) + more, "count": len(vals)}
                device = per_device(vals[0])
                if device is not None:
                    edge["device_label"] = device + more
                edge_list.append(edge)
        return edge_list, pills

    def _inputs(self, in_vals: dict[int, int], pills: set[int],
                hidden_weights: dict[int, None] | None = None) -> tuple[list[Boundary], int]:
        """The page's input pills: the values entering it, a weight only among ``pills``
        (flagged ``weight``); and how many weights were left out (all of them unless
        pills are asked for: 57k of a deep model's first page), ``hidden_weights`` those
        the flow only counted."""
        is_weight = self.names.is_weight
        inputs: list[Boundary] = []
        hidden = len(hidden_weights or ())
        for v, p in in_vals.items():
            weight = is_weight(v)
            if weight and v not in pills:
                if not hidden_weights or v not in hidden_weights:
                    hidden += 1
                continue
            b = self._boundary(v, {"from": {"type": "node", "id": p} if p >= 0 else {"type": "input"}})
            if weight:
                b["weight"] = True
            inputs.append(b)
        return inputs, hidden

    def _boundary(self, v: int, extra: dict[str, Any]) -> Boundary:
        d: Boundary = self.values.brief(v)
        d["value"] = d.pop("id")
        d["key"] = ("in:" if "from" in extra else "out:") + str(v)
        d.update(extra)
        return d

    # ------------------------------------------------------------------ flow

    def _deps(self, g: int, kernels: bool) -> _Deps:
        """Every value flowing into a child of ``g`` as drawn, as positions among its children."""
        key = (g, kernels)
        with self._lock:
            got = self._deps_cache.get(key)
            if got is not None:
                self._deps_cache.move_to_end(key)
                return got
        got = self._build_deps(g, kernels)
        with self._lock:
            self._deps_cache[key] = got
            while len(self._deps_cache) > _DEPS_CACHE:
                self._deps_cache.popitem(last=False)
        return got

    def _build_deps(self, g: int, kernels: bool) -> _Deps:
        w = _Wiring(self.index, self.present, g, kernels)
        refs, hidden, made_at, producer = w.refs, w.hidden, w.made_at, self.index.producer
        near: dict[int, int] = {}
        # every operand of every child drawn, in order, by C-level passes: what was made
        # outside the capture (a deep stack page's 57k weights) comes from outside (-1);
        # the rest is looked up one by one
        positions = self._drawn_positions(refs, kernels)
        lists = list(map(w.operands, map(refs.__getitem__, positions)))
        val = list(chain.from_iterable(lists))
        dst = list(chain.from_iterable(map(repeat, positions, map(len, lists))))
        if val and min(val) < 0:  # literals left out
            keep = list(map((0).__le__, val))
            val, dst = list(compress(val, keep)), list(compress(dst, keep))
        src = [-1] * len(val)
        dropped: list[int] = []
        for k in compress(range(len(val)), map((0).__le__, map(producer.__getitem__, val))):
            s = made_at(val[k])
            if s >= 0 and hidden(refs[s]):
                near.setdefault(s, dst[k])
                via = w.drawn(val[k])
                if via is None:
                    dropped.append(k)
                    continue
                s, val[k] = via
            src[k] = s
        if dropped:  # made from nothing by an elided op: no entry
            keep = [True] * len(val)
            for k in dropped:
                keep[k] = False
            src, dst, val = list(compress(src, keep)), list(compress(dst, keep)), list(compress(val, keep))
        outs, through = self._group_outs(w)
        if not kernels:
            self._near_elided(w, near)
        weight = list(map(self.names.is_weight, val))
        others = list(filterfalse(weight.__getitem__, range(len(val))))
        # by source, those from a child only (what leaves a range of children: none from outside)
        by_src = sorted(compress(others, map((0).__le__, map(src.__getitem__, others))), key=src.__getitem__)
        return _Deps(src, dst, val, by_src, list(map(src.__getitem__, by_src)), outs, through, near,
                     list(compress(range(len(val)), weight)), others)

    def _drawn_positions(self, refs: list[int], kernels: bool) -> list[int]:
        """The positions of the children drawn (not an elided op), by C-level passes."""
        if kernels or not self.present.elided:
            return list(range(len(refs)))
        elided = self.present.elided
        ops = compress(refs, map((0).__le__, refs))
        if not any(map(elided.__contains__, ops)):
            return list(range(len(refs)))
        # an elided op is a node ref (>= 0) in the elided set; group refs (< 0) never are
        return list(compress(range(len(refs)), map(not_, map(elided.__contains__, refs))))

    def _group_outs(self, w: "_Wiring") -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
        """What leaves the group, each with the position drawn making it; and what an
        elided op hands straight out from outside (``through``)."""
        outs: list[tuple[int, int]] = []
        through: list[tuple[int, int, int]] = []
        producer = self.index.producer
        for v in self.index.bout[w.g + 1] or ():
            if producer[v] < 0:
                continue
            s = w.made_at(v)
            if s >= 0 and w.hidden(w.refs[s]):
                via = w.drawn(v)
                if via is None:
                    continue
                if via[0] < 0:
                    through.append((s, via[1], v))
                    continue
                s = via[0]
            outs.append((s, v))
        return outs, through

    def _near_elided(self, w: "_Wiring", near: dict[int, int]) -> None:
        """An elided op nothing drawn reads from is listed with the item that made what it copies."""
        present = self.present
        for s, r in enumerate(w.refs):
            if r >= 0 and r in present.elided and s not in near:
                u = present.passed_on(r)
                via = w.drawn(u) if u is not None else None
                if via is not None and via[0] >= 0:
                    near[s] = via[0]

    # ------------------------------------------------------------------ items

    def item(self, ref: int, kernels: bool) -> Item:
        """One child as an item card."""
        if ref >= 0:
            return self._node_item(ref, kernels)
        return self._group_item(~ref, kernels)

    def _node_item(self, i: int, kernels: bool) -> Item:
        ix = self.index
        opaque = i in ix.cols.opaque
        outs = ix.outputs_of(i)
        item: Item = {
            "type": "node", "id": i, "key": f"n{i}", "label": ix.cols.op[i],
            "sublabel": ix.where(i), "kind": "opaque" if opaque else "op", "opaque": opaque,
            "child_count": 0, "outputs": [self.values.brief(v) for v in outs[:LIST_CAP]],
            "outputs_total": len(outs), "card": "op",
        }
        weights = self._weights([i], kernels)
        if weights:
            item["weights"] = weights[:LIST_CAP]
            item["weights_total"] = len(weights)
        call_param = capabilities(self.framework).call_param  # Torch's "function"
        called = self.capture.nodes[i].params.get(call_param) if call_param else None
        if isinstance(called, str) and called:
            item["function"] = called  # a one-kernel library call (Torch's): no group, its name on the kernel
        if i in ix.bodies_of:
            item["bodies"] = self.body_summaries(i)
        collective = self.capture.nodes[i].params.get("collective") if self.capture.meshes else None
        if isinstance(collective, dict):
            item["collective"] = collective  # drawn to stand out: its mesh axes and bytes per device
        compiled = self.compiled_collectives()[0].get(i)
        if compiled:  # what XLA runs for this equation (capture.graph.compiled): a badge on the card
            item["compiled"] = [compiled_brief(c, collective) for c in compiled[:8]]
            item["compiled_total"] = len(compiled)
        cost = self._node_cost(i)
        if cost is not None:
            item["cost"] = cost
        return item

    def compiled_collectives(self) -> tuple[dict[int, list[Any]], dict[int, list[Any]]]:
        """The compiled program's collectives per node and per group (``compiled_view``)."""
        got = self._compiled
        if got is None:
            got = self._compiled = compiled_by_node_and_group(self.capture)
        return got

    def _node_cost(self, i: int) -> CardCost | None:
        """What an op card says it costs: FLOPs (None: uncounted), bytes moved, estimate."""
        costs = self.costs() if self.costs is not None else None
        if costs is None or not costs.available:
            return None
        c = costs.cost
        f, r, w = c.flops[i], c.bytes_read[i], c.bytes_written[i]
        out: CardCost = {"flops": f if f >= 0 else None, "bytes": max(r, 0) + max(w, 0)}
        if f < 0:
            out["uncounted"] = 1
        d = c.of(i)
        if d.get("estimate"):
            out["estimate"] = True
        set_scope(out, self.capture, self.capture.nodes[i].group)
        ranks = rank_flops(costs)
        if ranks is not None:  # a split Torch program: global for a DTensor op (and its per-rank figure), else per rank
            out.update(cast(CardCost, ranks.node_cost(i)))  # its keys are a card's
        return out

    def _group_cost(self, g: int) -> CardCost | None:
        costs = self.costs() if self.costs is not None else None
        if costs is None or not costs.available:
            return None
        s = g + 1
        out: CardCost = {"flops": costs.flops[s], "bytes": costs.read[s] + costs.written[s]}
        if costs.uncounted[s]:
            out["uncounted"] = costs.uncounted[s]
        if costs.estimate[s]:
            out["estimate"] = True
        if costs.template[s]:
            out["template"] = True  # one iteration or branch, as traced (a shard_map body's: per device)
        set_scope(out, self.capture, g)
        ranks = rank_flops(costs)
        if ranks is not None:  # a split Torch program: a group's FLOPs per rank, never the two scopes summed
            out.pop("uncounted", None)
            out.update(cast(CardCost, ranks.group_cost(g)))  # its keys are a card's
            return out
        kinds = costs.by_kind[s]
        if kinds:
            out["flops_by_kind"] = kinds
        return out

    def _group_item(self, c: int, kernels: bool) -> Item:
        ix, present = self.index, self.present
        grp = self.capture.groups[c]
        structure = self.structure()
        outs = sorted(ix.bout[c + 1] or ())
        ins = sorted(filterfalse(self.names.is_weight, ix.bin[c + 1] or ()))  # (the weights, 57k at a deep root, left out first)
        extra: dict[str, Any] = {
            "inputs": [self.values.brief(v) for v in ins[:LIST_CAP]], "inputs_total": len(ins),
            "params": self._group_params(c), "structure": structure.signature[c],
        }
        if structure.routing[c]:
            extra["routing"] = structure.routing[c]  # what routing chose below it (capture/analysis/structure.py)
        if c in structure.routed:
            extra["routed"] = ROUTED_WORDING
        role = (router_words(self.capture, ix, present, c)
                or experts_words(self.capture, ix, present, c, self.names.is_weight)) if grp.kind == "module" else None
        moe = self.analysis.moe()[1].get(c)  # how the experts ran: sparse top-k or all N (experts.py)
        if moe is not None:
            extra["experts"] = {k: moe[k] for k in ("convention", "experts", "top_k", "text", "rows_per_token") if k in moe}
            role = f"{role} · {moe['text']}" if role else moe["text"]
        if role:
            extra["role"] = role  # router: top-2 of 8, softmax scores (experts.py)
        attrs = grp.attrs if isinstance(grp.attrs, dict) else {}
        for k in ("class", "path"):
            if isinstance(attrs.get(k), str) and attrs[k]:
                extra[k] = attrs[k]
        extra["title"] = group_title(grp)
        count, index = structure.sibling(c)
        if count > 1:
            extra["identical"] = {"count": count, "index": index}
        twin = structure.twins.get(c)
        if twin is not None:
            extra["twin"] = {"id": twin[0], "count": twin[1], "index": twin[2]}
        if c in ix.body_node:
            extra["body"] = body_summary(c, attrs, grp.name, c not in self.analysis.templates(),
                                         devices_running(self.capture, c))
            extra["template"] = template_line(extra["body"])
        extra.update(group_compiled(self.compiled_collectives()[1].get(c)))  # the compiler's collectives inside
        memory = attrs.get(MEMORY_KEY)
        if self.capture.meshes and isinstance(memory, dict):
            extra["per_device_memory"] = memory  # what one device holds (capture.graph.device_memory)
        card = "group"
        if not kernels and present.is_function_card(c):
            card = "function"
            extra.update(self._function_fields(c, attrs, kernels))
        else:
            single = present.single(c, kernels)
            if single is not None:
                card = "op"
                extra["single"] = self.item(single, kernels)
                extra["wrappers"] = [self._group_ref(w) for w in present.wrappers(c, kernels, WRAPPERS_CAP)]
        cost = self._group_cost(c)
        if cost is not None:
            extra["cost"] = cost
        idle = [x for x in ix.child_groups[c + 1] if present.is_idle(x)]  # in the order they were called
        if idle:
            extra["idle"] = [self._group_ref(x) for x in idle[:LIST_CAP]]
            extra["idle_total"] = len(idle)
        return {
            **extra,
            "type": "group", "id": c, "key": f"g{c}", "label": grp.name,
            "sublabel": group_sublabel(grp.kind),
            "kind": grp.kind, "honest": (body_wording(attrs) or group_wording(grp.kind))[0], "opaque": False,
            "opaque_count": ix.opaque_count[c + 1],
            "child_count": len(ix.direct_nodes[c + 1]) + len(ix.child_groups[c + 1]),
            "node_count": ix.node_count[c + 1],
            "first": ix.first[c + 1] if ix.node_count[c + 1] else None,
            "last": ix.last[c + 1] if ix.node_count[c + 1] else None,
            "outputs": [self.values.brief(v) for v in outs[:LIST_CAP]], "outputs_total": len(outs),
            "card": card,
        }

    def _function_fields(self, c: int, attrs: dict[str, Any], kernels: bool) -> dict[str, Any]:
        ix = self.index
        nodes = ix.direct_nodes[c + 1]
        qualified = attrs.get("function")
        frames = self.capture.frames
        f = attrs.get("frame")
        if type(f) is int and 0 <= f < len(frames):
            where = f"{frames[f].file.rsplit('/', 1)[-1]}:{frames[f].line}"
        else:
            where = ix.where(nodes[0]) if nodes else ""
        out: dict[str, Any] = {
            "function": qualified if isinstance(qualified, str) and qualified else self.capture.groups[c].name,
            "where": where,
            "kernels": {"count": ix.node_count[c + 1], "ops": [ix.cols.op[i] for i in nodes[:KERNELS_LISTED]]},
        }
        weights = self._weights(nodes, kernels)
        if weights:
            out["weights"] = weights[:LIST_CAP]
            out["weights_total"] = len(weights)
        return out

    def _group_ref(self, g: int) -> GroupRef:
        """A group named where another item lists it (wrappers, idle groups)."""
        grp = self.capture.groups[g]
        d: GroupRef = {"id": g, "key": f"g{g}", "kind": grp.kind, "name": grp.name, "title": group_title(grp)}
        attrs = grp.attrs if isinstance(grp.attrs, dict) else {}
        cls, path = attrs.get("class"), attrs.get("path")
        if isinstance(cls, str) and cls:
            d["class"] = cls
        if isinstance(path, str) and path:
            d["path"] = path
        return d

    def _elided(self, refs: list[int], positions: list[int], near: dict[int, int], lo: int,
                keys_of: dict[int, str]) -> ElidedOps:
        ops: dict[str, int] = {}
        nodes: list[ElidedNode] = []
        label = self.values.label
        for pos in positions:
            i = refs[pos]
            op = self.index.cols.op[i]
            ops[op] = ops.get(op, 0) + 1
            if len(nodes) < LIST_CAP:
                outs = self.index.outputs_of(i)
                at = near.get(pos)
                nodes.append({"id": i, "key": f"n{i}", "op": op, "label": label(outs[0]) if outs else "",
                              "near": keys_of.get(at - lo) if at is not None else None})
        return {"count": len(positions), "ops": ops, "nodes": nodes}

    def _op_name(self, i: int) -> str | None:
        """An op as a fold lists it: the function it ran in (``sdpa_mask``), or ``None``
        when that is a forward (the container's own code)."""
        f = self.index.frame(i)
        fn = f.function.rsplit(".", 1)[-1] if f is not None else ""
        if fn and fn not in ("forward", "__call__", "<module>") and not fn.startswith("<"):
            return fn
        return None

    def _stacks(self, items: list[Item], edges: list[Edge], g: int | None = None) -> list[Stack]:
        """The runs of items that repeat, each folding into one stack ``× count``, and the
        plumbing that feeds the layers of the largest, folded into one card
        (:mod:`viewer.projection.plumbing`)."""
        out = self._runs(items)
        if g is not None and g in self.structure().routed:
            taken = {k for st in out for rep in st["members"] for k in rep}
            lanes = lane_folds(self.capture, self.index, items, self.names.is_weight)
            if lanes and not taken & {k for f in lanes for k in f["members"][0]}:
                by_key = {it["key"]: it for it in items}
                for f in lanes:
                    for j, k in enumerate(f["members"][0]):
                        by_key[k]["stack"] = {"key": f["key"], "repetition": 0, "offset": j}
                out.extend(lanes)
        fold = plumbing_fold(items, edges, out, self._op_name)
        if fold is None and g is not None and not any(st.get("fold") is None for st in out):
            fold = self._container_plumbing(items, edges)
        if fold is not None:
            position = {it["key"]: i for i, it in enumerate(items)}
            fold["start"] = position[fold["members"][0][0]]
            for j, k in enumerate(fold["members"][0]):
                items[position[k]]["stack"] = {"key": fold["key"], "repetition": 0, "offset": j}
            out.append(fold)
        return out

    def _container_plumbing(self, items: list[Item], edges: list[Edge]) -> Stack | None:
        """The plumbing fold of a page without stacks whose layers sit in one of its
        group items (BERT's encoder, beside the mask ops of BertModel): found by that
        group's page, where some values enter every layer of its stack."""
        signature = self.structure().signature
        for it in items:
            if it["type"] != "group" or it.get("card") != "group":
                continue
            kids = self.index.child_groups[it["id"] + 1]
            if len(kids) < 2 or len({signature[k] for k in kids}) == len(kids):
                continue  # no two children alike: not a container of layers
            page = self.children(it["id"], None, False)
            for st in page["stacks"]:
                if st.get("fold") is not None or st.get("loop") or st["count"] < 2:
                    continue
                rep_of = {k: r for r, rep in enumerate(st["members"]) for k in rep}
                reached: dict[int, set[int]] = {}
                for e in page["edges"]:
                    if e["source"].startswith("in:") and not e.get("weight") and e["target"] in rep_of:
                        reached.setdefault(e["value"], set()).add(rep_of[e["target"]])
                feeds = {v for v, reps in reached.items() if len(reps) == st["count"]}
                if feeds:
                    return container_plumbing_fold(items, edges, it["key"], feeds, st["count"] * st["period"],
                                                   self._op_name)
        return None

    def _runs(self, items: list[Item]) -> list[Stack]:
        """The runs of items that repeat, each folding into one stack ``× count``."""
        shown = list(enumerate(items))
        if len(shown) < 2:
            return []
        tokens = [("g", it["structure"]) if it["type"] == "group" else
                  ("n", it["label"], tuple(o["label"] for o in it["outputs"])) for _, it in shown]
        # a repetition starts with a frame: op cards (function calls, one-op modules) side
        # by side are ops, like q/k/v projections reading the same input
        blocks = [it["card"] == "group" for _, it in shown]
        out: list[Stack] = []
        for start, period, count in find_repeats(tokens, blocks):
            members = [[shown[start + r * period + j][1]["key"] for j in range(period)] for r in range(count)]
            first = [it for _, it in shown[start:start + period]]
            last = [it for _, it in shown[start + (count - 1) * period:start + count * period]]
            block_labels = [it["label"] for it in first if it["card"] == "group"]
            last_labels = [it["label"] for it in last if it["card"] == "group"]
            key = "s" + members[0][0]
            inner = [{"start": s, "period": p, "count": c}
                     for s, p, c in find_repeats(tokens[start:start + period], blocks[start:start + period])]
            run: Stack = {
                "key": key, "start": shown[start][0], "period": period, "count": count, "members": members,
                "label": run_label(block_labels[0], last_labels[-1], count),
                "pattern": [it.get("class") or it["label"] for it in first if it["card"] == "group"],
                "inner": inner,
            }
            if period == 1 and is_step(first[0]):  # a Python loop's steps (loop_steps.py)
                run.update(loop_words(self.capture, self.index, self.values.brief, self.names.is_weight,
                                      [shown[start + r][1]["id"] for r in range(count)]))
            # alike by structure, apart in what routing chose: the stack says so
            reps = [[shown[start + r * period + j][1].get("routing", "") for j in range(period)] for r in range(count)]
            if any(reps[0]) and any(rep != reps[0] for rep in reps):
                run["routing"] = ROUTING_DIFFERS
            cost = stack_cost([it for _, it in shown[start:start + period * count]], first)
            if cost is not None:
                if "loop" in run:  # every step reads the same weights: counted once
                    cost["params"] = cost["per_block"]["params"]
                run["cost"] = cost
            out.append(run)
            for r, keys in enumerate(members):
                for j, _ in enumerate(keys):
                    shown[start + r * period + j][1]["stack"] = {"key": key, "repetition": r, "offset": j}
        return out

    # ------------------------------------------------------------------ chunks

    def _chunk_stack(self, g: int, refs: list[int], lo: int, hi: int, chunks: list[Item]) -> list[Stack]:
        """A chunked page whose children are all one block (a ``ModuleList`` of 14,285
        identical layers: 36 chunk cards): its chunks fold into one stack card, worded
        by one representative block (``block``: its item) and the count of blocks, so
        that the page reads as ``blocks.0–14284 ×14,285`` rather than as chunks."""
        if len(chunks) < 2 or any(r >= 0 for r in refs[lo:hi]):
            return []
        first, last = ~refs[lo], ~refs[hi - 1]
        structure = self.structure()
        count = hi - lo
        sig, signature = structure.signature[first], structure.signature
        if structure.routing[first] or any(signature[~r] != sig for r in refs[lo:hi]):
            return []  # not every child alike (or alike but for what routing chose)
        block = self.item(refs[lo], False)
        if block["card"] != "group":
            return []  # op cards side by side are ops, not a stack of blocks
        members = [[it["key"]] for it in chunks]
        key = "s" + members[0][0]
        groups = self.capture.groups
        stack: Stack = {
            "key": key, "start": 0, "period": 1, "count": count, "members": members,
            "label": run_label(groups[first].name, groups[last].name, count),
            "pattern": [block.get("class") or block["label"]], "inner": [], "block": block, "chunks": len(chunks),
        }
        cost = self._group_cost(g) if lo == 0 and hi == len(refs) and "cost" in block else None
        if cost is not None:
            per = block["cost"]
            params = (block.get("params") or {}).get("count", 0)  # alike blocks: alike weights
            stack["cost"] = {"flops": cost["flops"] or 0, "bytes": cost["bytes"], "params": params * count,
                             "per_block": {"flops": per["flops"] or 0, "bytes": per["bytes"], "params": params},
                             **({"estimate": True} if cost.get("estimate") else {})}
        for r, it in enumerate(chunks):
            it["stack"] = {"key": key, "repetition": r, "offset": 0}
        return [stack]

    def _chunk_item(self, g: int, lo: int, hi: int, span: int, k: int, outs: dict[int, None]) -> Item:
        ix = self.index
        a, b = lo + k * span, min(hi, lo + (k + 1) * span)
        _, refs, _ = ix.ordered(g)
        chunk_id = a // CHUNK if span == CHUNK else -(a // UPPER_CHUNK) - 1
        first_ref, last_ref = refs[a], refs[b - 1]
        first = first_ref if first_ref >= 0 else ix.first[~first_ref + 1]
        last = last_ref if last_ref >= 0 else ix.last[~last_ref + 1]
        nodes, opaque = self._range_counts(refs, a, b)
        out_list = list(outs)
        return {
            "type": "chunk", "id": f"{g}:{chunk_id}", "key": f"c{g}:{chunk_id}",
            "label": f"{a + 1:,}–{b:,} of {len(refs):,}",
            "sublabel": self._span_text(first_ref, last_ref),
            "kind": "chunk", "honest": CHUNK_WORDING[1],
            "opaque": False, "opaque_count": opaque, "child_count": (b - a) if span == CHUNK else -(-(b - a) // CHUNK),
            "node_count": nodes, "range": [a, b],
            "first": first if first < ix.n_nodes else None, "last": last if last >= 0 else None,
            "outputs": [self.values.brief(v) for v in out_list[:LIST_CAP]], "outputs_total": len(out_list),
            "card": "chunk",
            # the calls of modules and functions among its children (0: a flat run of ops, which
            # the first view opens; a chunk of calls stays closed, model/first-view.js)
            "groups": sum(r < 0 for r in refs[a:b]),
        }

    def _range_counts(self, refs: list[int], a: int, b: int) -> tuple[int, int]:
        """(nodes, opaque nodes) under the children ``refs[a:b]``."""
        nodes = opaque = 0
        ix = self.index
        op_set, counts, opaques = ix.cols.opaque, ix.node_count, ix.opaque_count
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
        ix = self.index

        def where(ref: int, end: bool) -> str:
            if ref < 0:
                c = ~ref
                i = ix.last[c + 1] if end else ix.first[c + 1]
                if not 0 <= i < ix.n_nodes:
                    return self.capture.groups[c].name
                return ix.where(i) or self.capture.groups[c].name
            return ix.where(ref)
        a, b = where(first_ref, False), where(last_ref, True)
        if not a and not b:
            return ""
        return a if a == b or not b else f"{a} … {b}" if a else b

    # ------------------------------------------------------------------ weights

    def _weights(self, nodes: list[int], kernels: bool) -> list[dict[str, Any]]:
        """The weights ``nodes`` consume (past elided copies: a ``lift_fresh`` of a
        constant shows the constant), each once, in operand order. ``shared``: more than
        one node uses it (tied embeddings), so it appears on each of them."""
        ix, present, is_weight = self.index, self.present, self.names.is_weight
        seen: dict[int, None] = {}
        for i in nodes:
            for v in ix.operands_of(i):
                if v >= 0:
                    s = present.source(v, kernels)
                    if s >= 0 and is_weight(s):
                        seen[s] = None
        out: list[dict[str, Any]] = []
        for v in seen:
            d = self.values.brief(v)
            d["value"] = d.pop("id")
            uses = len(ix.uses(v))
            if uses > 1:
                d["shared"] = uses
            out.append(d)
        return out


def _ref_key(ref: int) -> str:
    return f"n{ref}" if ref >= 0 else f"g{~ref}"
