"""Graph projection: from a canonical capture to what the browser draws.

A :class:`Projection` is built once per capture and composes its parts: the index
(:class:`~capture.analysis.index.GraphIndex`: producers, uses, the children and the
boundary of every group, in flat integer columns), the value names
(:class:`~capture.analysis.names.ValueNames`), value summaries, the presentation rules
(:class:`~viewer.projection.presentation.Presentation`: function cards, elided
bookkeeping, one-op and idle groups), the structural signatures
(:class:`~capture.analysis.structure.Structure`, made on the first page), the pages
(:class:`~viewer.projection.views.Pages`), the trunk the first view opens and search
(:class:`~viewer.projection.search.Search`). Every answer is a small page: the children
of one group (or of one chunk of a large group) with the edges between them, one node,
one value, one group, a page of node summaries, or a bounded list of search results.
Nothing here ever returns the whole graph.

Only the standard library and :mod:`capture` are imported (docs/architecture.md's folder table).
"""

from __future__ import annotations

from capture.graph.compiled import words as compiled_words
from capture.analysis.rank_flops import rank_flops

import re
from typing import Any

from capture.graph import frame_repeats
from capture.graph.device_memory import KEY as MEMORY_KEY
from capture.graph.device_memory import figures_text
from capture.graph.failure_text import readable_message
from capture.graph.sharding import devices_text, mesh_text
from capture.graph.tables import ValueTable
from capture.graph.model import Capture, Frame

from capture.graph import gc_pause
from capture.analysis.analysis import Analysis
from capture.analysis.lines import LineIndex
from capture.analysis.types import CostTotals

from .answers import (BodiesPage, CostTimes, FrameJson, NodeBrief, NodesPage, PageView, SearchAnswer, SubtreeAnswer,
                      SymbolNote, TrunkEntry)
from capture.analysis.index import CHUNK, MAX_ITEMS, ROOT, UPPER_CHUNK, GraphIndex  # noqa: F401
from capture.analysis.body_templates import body_wording
from capture.analysis.cost import LayerCosts
from .library_sources import short_path
from capture.analysis.names import (  # noqa: F401
    CHUNK_WORDING, ROLE_SENTENCES, WEIGHT_ROLES, ValueNames, group_sublabel, group_title, group_wording,
    short_dtype, value_label, vocabulary,
)
from .presentation import Presentation, counterpart
from .search import DEFAULT_SEARCH_LIMIT, MAX_QUERY, MAX_SEARCH_LIMIT, Search, SearchError  # noqa: F401
from capture.analysis.structure import Structure
from capture.analysis.errors import NotFound, ProjectionError  # noqa: F401 (the server's and tests' names)
from .trunk import trunk
from .views import LIST_CAP, SUBTREE_ITEMS, PageError, Pages  # noqa: F401

MAX_PAGE = 1000
USES_CAP = 1000  # uses listed per value in details


def frame_json(f: Frame | None) -> FrameJson | None:
    if f is None:
        return None
    out: FrameJson = {"file": f.file, "line": f.line, "column": f.column, "function": f.function}
    if f.library:  # an installed file by absolute path; ``label`` is the short form shown
        out["library"] = True
        out["label"] = f"{short_path(f.file)}:{f.line} (library)"
    return out


def frame_label(f: Frame) -> str:
    """``file:line``; a library frame as ``transformers/…/modeling_gpt2.py:312 (library)``."""
    return f"{short_path(f.file)}:{f.line} (library)" if f.library else f"{f.file}:{f.line}"


# --------------------------------------------------------------------------- projection


class Projection:
    """The pages of one capture, computed from its parts (thread-safe reads)."""

    def __init__(self, capture: Capture) -> None:
        #: The shared analysis (capture/analysis): index, names, parameters, costs, structure, lines.
        self.analysis = Analysis(capture, can_twin=self._can_twin)
        # the capture as the analysis reads it (Python loops folded into step groups)
        self.capture = capture = self.analysis.capture
        self.index = self.analysis.index
        self.names = self.analysis.names
        self.values = self.analysis.values
        with gc_pause.paused():
            self.present = Presentation(capture, self.index)
        self.searcher = Search(capture, self.index, self.names, self.values, self.present, self.structure,
                               self.line_index, templates=self.analysis.templates)
        self.pages = Pages(self.analysis, self.present)
        self._trunk: list[int] | None = None
        self._alike: tuple[list[tuple[int, int, int]], list[int]] | None = None  # runs drawn alike, their starts (_can_twin)
        self._frames: dict[int, bool] = {}  # _can_twin's answers

    def _can_twin(self, g: int) -> bool:
        """Groups a page may pair as twins: not a function card, not drawn as its one op
        (asked of the blocks of a repeated run once, of the first block's counterpart:
        :meth:`~viewer.projection.presentation.Presentation.alike_blocks`)."""
        alike = self._alike
        if alike is None:
            runs = self.present.alike_blocks(self.structure().clones.runs)
            alike = self._alike = (runs, [run[0] for run in runs])
        g = counterpart(alike[0], alike[1], g)
        got = self._frames.get(g)
        if got is None:
            present = self.present
            got = self._frames[g] = not present.is_function_card(g) and present.single(g, False) is None
        return got

    def templates(self) -> frozenset[int]:
        """The body groups that are templates, not executed (a ``shard_map`` body is none:
        :func:`~capture.analysis.body_templates.template_bodies`); made once, on first use."""
        return self.analysis.templates()

    def line_index(self) -> LineIndex:
        """The capture's line → calls index (:class:`~capture.analysis.lines.LineIndex`),
        made once, on first use: what the editor's hints read, and search by ``file:line``."""
        return self.analysis.line_index()

    def costs(self) -> LayerCosts:
        """What each layer costs (:mod:`capture.analysis.cost`; made once, on first use)."""
        return self.analysis.costs()

    def structure(self) -> Structure:
        """The structural signatures, identical siblings and twins (made once, on first use)."""
        return self.analysis.structure()

    def prepare(self) -> None:
        """Make now what the first page would otherwise wait for: every value's label,
        the structural signatures, the trunk, the cost sums and the pages the first view
        opens (the server's warm-up calls it, while the browser starts)."""
        self.values.labels()
        self.structure()
        self.trunk()
        if self.capture.failure is None:
            self.costs()
            self.first_pages()

    def first_pages(self) -> list[tuple[int, int | None]]:
        """Make (and cache) the pages the browser's first view asks for, in its order
        (viewer/static/model/first-view.js): the root's, each trunk group's, and the
        first chunk of the innermost one when it is chunked and a flat run of ops (the
        first view opens it whatever its size; a chunk holding calls, or chunks folded
        into a stack of alike blocks, stay closed). Returns them as ``(group, chunk)``."""
        made: list[tuple[int, int | None]] = [(ROOT, None)]
        page = self.pages.children(ROOT, None, False)
        for g in self.trunk():
            page = self.pages.children(g, None, False)
            made.append((g, None))
        first = next((it for it in page["items"] if it["type"] == "chunk"), None)
        if first is not None and not first.get("groups") and "stack" not in first:
            g, chunk = (int(x) for x in first["id"].split(":"))
            self.pages.children(g, chunk, False)
            made.append((g, chunk))
        return made

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

    # ------------------------------------------------------------------ pages

    def children(self, group: int, chunk: int | str | None = None, *, kernels: bool = False,
                 weights: bool = False) -> PageView:
        """The direct children of ``group`` (or of one chunk of it), ready to lay out;
        ``kernels``: every kernel, no function cards, nothing elided; ``weights``: with the
        boundary inputs of parameters, buffers and constants and their edges (drawn only
        as pills when a person asks; else left out and counted in ``weights_hidden``)."""
        group = int(group)
        self._check_group(group)
        chunk_id = None if chunk is None or chunk == "" else _int(chunk, "chunk")
        try:
            return self.pages.children(group, chunk_id, bool(kernels), bool(weights))
        except PageError as exc:
            raise NotFound(str(exc)) from None

    def bodies(self, node: int) -> BodiesPage:
        """The unexecuted bodies of boundary node ``node``, side by side (a view like
        :meth:`children`; container key ``n<node>``): one template card per body, no
        edges (a template's inputs are its own parameters, not the boundary's operands)."""
        node = int(node)
        self._check_node(node)
        if node not in self.index.bodies_of:
            raise NotFound(f"node {node} has no control-flow bodies")
        return self.pages.bodies(node)

    def subtree(self, group: int, max_items: int = SUBTREE_ITEMS, *, kernels: bool = False,
                weights: bool = False) -> SubtreeAnswer:
        """The ``children`` views of ``group`` and of every group and chunk below it,
        breadth first, in one answer (Expand all): ``views`` maps each container's item key
        (``"g-1"``, ``"g3"``, ``"c3:0"``) to its view. Function cards are not opened unless
        ``kernels``. Stops before ``max_items`` items; ``complete`` says whether everything
        below was included."""
        group = int(group)
        self._check_group(group)
        max_items = max(1, min(int(max_items), SUBTREE_ITEMS))
        return self.pages.subtree(group, max_items, bool(kernels), bool(weights))

    def search(self, q: str, limit: int = DEFAULT_SEARCH_LIMIT, **filters: str | None) -> SearchAnswer:
        """Search results for ``q`` (see :mod:`viewer.projection.search`); ``filters``:
        ``op``, ``cls``, ``shape``, ``dtype``, ``axis`` (collectives over that mesh axis)."""
        try:
            return self.searcher.search(q, limit, **filters)
        except SearchError as exc:
            raise ProjectionError(str(exc)) from None

    def trunk(self) -> list[int]:
        """The groups the first view opens, top down (:mod:`viewer.projection.trunk`)."""
        if self._trunk is None:
            self._trunk = trunk(self.index, self.present)
        return self._trunk

    # ------------------------------------------------------------------ details

    def node(self, i: int) -> dict[str, Any]:
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
            **({"bodies": self.pages.body_summaries(i)} if i in self.index.bodies_of else {}),
            **({"elided": True, "near": self.pages.near(i)} if i in self.present.elided else {}),
            **({"cost": self.costs().node(i)} if self.capture.cost is not None else {}),
            # inside an unexecuted body (a template): its boundary node; a shard_map body's ops ran
            **({"template": self.index.body_node[self.index.top[g]]} if g != ROOT and self.index.top[g] in self.templates() else {}),
        }

    def value(self, v: int) -> dict[str, Any]:
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
        symbols = symbols_in(d["shape"], self.capture.meta)
        if symbols:
            d["symbols"] = symbols
        return d

    def _positions(self, i: int, v: int) -> list[int]:
        node = self.capture.nodes[i]
        return [o.position for o in node.inputs if o.value == v]

    def group(self, g: int) -> dict[str, Any]:
        g = int(g)
        if g == ROOT:
            raise NotFound("the root is not a group; ask for its children")
        self._check_group(g)
        grp = self.capture.groups[g]
        short, long = body_wording(grp.attrs) or group_wording(grp.kind)
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
            **({"memory": figures_text(grp.attrs.get(MEMORY_KEY))}
               if isinstance(grp.attrs, dict) and figures_text(grp.attrs.get(MEMORY_KEY)) else {}),
            **({"cost": {**(self.costs().group(g) or {}), "params": self.analysis.params(g)}}
               if self.capture.cost is not None else {}),
        }

    def _group_frame(self, attrs: Any, key: str) -> FrameJson | None:
        """A module group's call-site (``frame``) or class-definition (``class_frame``) frame."""
        f = attrs.get(key) if isinstance(attrs, dict) else None
        frames = self.capture.frames
        return frame_json(frames[f]) if type(f) is int and 0 <= f < len(frames) else None

    def nodes_page(self, offset: int = 0, limit: int = 100) -> NodesPage:
        offset, limit = int(offset), int(limit)
        if offset < 0 or limit < 1:
            raise ProjectionError("offset must be >= 0 and limit >= 1")
        limit = min(limit, MAX_PAGE)
        hi = min(self.index.n_nodes, offset + limit)
        return {
            "offset": offset, "limit": limit, "total": self.index.n_nodes,
            "nodes": [self._summary(i) for i in range(offset, hi)],
        }

    def _summary(self, i: int) -> NodeBrief:
        g = self.index.cols.group[i]
        f = self.index.frame(i)
        return {
            "id": i, "op": self.index.cols.op[i], "group": None if g == ROOT else g,
            "opaque": i in self.index.cols.opaque,
            "outputs": [self.values.full(v) for v in self.index.outputs_of(i)[:LIST_CAP]],
            "frame": None if f is None else frame_label(f),
        }

    def summary(self) -> dict[str, Any]:
        """What ``api/capture`` says about the capture (without server-side fields)."""
        cap = self.capture
        cov = cap.coverage
        failure = None
        if cap.failure is not None:
            f = cap.failure
            short = readable_message(f.message)
            failure = {"type": f.type, "message": f.message, "stage": f.stage,
                       # What a person reads first (the server cuts it; the page offers the whole text).
                       "readable": {"text": short.text, "cut": short.cut, "lines": short.lines},
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
                       **self._body_counts()},
            "inputs": self._tree(cap.inputs), "outputs": self._tree(cap.outputs),
            "sources": [{"path": s.path, "sha256": s.sha256} for s in cap.sources],
            "recipe": cap.recipe, "failure": failure, "meta": cap.meta,
            "meshes": cap.meshes, "devices": cap.devices, **self._mesh_words(),
            **({"compiled": compiled_words(cap.compiled)} if cap.compiled is not None else {}),
            "measured": self._measured(), "vocabulary": vocabulary(),
            "trunk": self._trunk_summary() if cap.failure is None else [],
            # whether there are costs; their totals and memory are api/cost's, worked out
            # when first asked (the first page needs none of them)
            "cost": {"available": cap.failure is None and cap.cost is not None},
        }

    def _body_counts(self) -> dict[str, int]:
        """``template_nodes``: the nodes of unexecuted bodies (control-flow templates, and
        whatever lies inside one); ``per_device_nodes``: those of ``shard_map`` bodies, which
        every device runs (no template); ``template_bodies`` and ``per_device_bodies``: how
        many such bodies were converted (one left closed is neither). Each only when there
        are any."""
        bodies = self.index.body_node
        if not bodies:
            return {}
        templates = self.templates()
        count = self.index.node_count
        groups = self.capture.groups
        opened = [b for b in bodies if not (isinstance(groups[b].attrs, dict) and "closed" in groups[b].attrs)]
        out = {"template_nodes": sum(count[b + 1] for b in bodies if b in templates),
               "per_device_nodes": sum(count[b + 1] for b in bodies if b not in templates),
               "template_bodies": sum(1 for b in opened if b in templates),
               "per_device_bodies": sum(1 for b in opened if b not in templates)}
        return {k: v for k, v in out.items() if v}

    def _mesh_words(self) -> dict[str, Any]:
        """The mesh legend's text, worded once here for the browser (``mesh_text``)."""
        cap = self.capture
        if not cap.meshes:
            return {}
        return {"mesh_legend": {"meshes": [{"id": i, "text": mesh_text(m), "devices": m.get("devices"),
                                            "kind": m.get("kind"), "origin": m.get("origin")}
                                           for i, m in enumerate(cap.meshes)],
                                "devices": devices_text(cap.devices),
                                "simulated": bool(isinstance(cap.devices, dict) and cap.devices.get("simulated")),
                                "memory": cap.meta.get(MEMORY_KEY) if isinstance(cap.meta.get(MEMORY_KEY), dict)
                                else None}}
    def cost_summary(self) -> CostTotals:
        """What the whole capture costs (``api/capture``'s ``cost``): totals, memory, the
        uncounted ops by name, and the conventions in words."""
        costs = self.costs()
        out = costs.totals()
        if costs.available:
            out["uncounted_ops"] = costs.uncounted_ops()
            out["notes"] = costs.notes()
            ranks = rank_flops(costs)
            if ranks is not None:  # a split Torch program: what one rank computes (cards and rows say it)
                out["flops_per_rank"] = ranks.total
            elif self.capture.meshes and self.capture.framework == "jax":  # every figure names its scope
                out["flops_scope"] = "global"
            from capture.analysis.fit import input_bytes, memory_plan, per_device

            plan = memory_plan(out, input_bytes(self.analysis))  # the cost panel's fit line per device
            split = per_device(self.analysis) if plan is not None else None
            if plan is not None and split is not None:
                plan["per_device"] = split
            out["memory_plan"] = plan
        return out

    def cost_times(self, device: Any) -> CostTimes:
        """Roofline seconds on ``device`` per group (``g<id>``, the program as ``total``) and
        per node (``n<id>``, counted ops only): estimated, not measured."""
        costs = self.costs()
        if not costs.available:
            return {"available": False}
        times = costs.times(device)
        groups = {f"g{g}": _sig(times[g + 1]) for g in range(len(self.capture.groups))}
        nodes = costs.node_times(device)
        return {"available": True, "total": _sig(times[0]), "groups": groups,
                "nodes": {f"n{i}": _sig(t) for i, t in enumerate(nodes) if t is not None}}

    def _trunk_summary(self) -> list[TrunkEntry]:
        gs, count = self.capture.groups, self.index.node_count
        total = max(1, count[0])
        return [{"id": g, "key": f"g{g}", "title": group_title(gs[g]), "nodes": count[g + 1],
                 "share": round(count[g + 1] / total, 4), "item_path": self.index.group_item_path(g)}
                for g in self.trunk()]

    def _measured(self) -> bool:
        return ValueTable.of(self.capture.values).measured_any()  # no map built

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


_SYMBOL = re.compile(r"\b(?:u|zuf)\d+\b")


def symbols_in(shape: Any, meta: Any) -> list[SymbolNote]:
    """The data-dependent symbols a shape holds (``u0`` in ``[u0, 64]``), each as the
    abstract capture recorded it in ``meta["symbols"]`` (outside input: only well-formed
    entries), in words: ``u0: 0 ≤ u0 ≤ 32, a size aten::nonzero made (node 9)``."""
    names = {n for d in shape if isinstance(d, str) for n in _SYMBOL.findall(d)}
    if not names:
        return []
    table = meta.get("symbols") if isinstance(meta, dict) else None
    known = {e["name"]: e for e in table if isinstance(e, dict) and isinstance(e.get("name"), str)} \
        if isinstance(table, list) else {}
    out: list[SymbolNote] = []
    for name in sorted(names):
        e = known.get(name, {})
        lo, hi, op, node = e.get("min"), e.get("max"), e.get("op"), e.get("node")
        bounds = f"{lo if type(lo) is int else '?'} ≤ {name} ≤ {hi if type(hi) is int else '∞'}"
        made = f", made by {op}" if isinstance(op, str) else ""
        note: SymbolNote = {"name": name, "text": f"{name}: known only from the data; {bounds}{made}"}
        if type(node) is int:
            note["node"] = node
        out.append(note)
    return out


def _sig(x: float) -> float:
    """Four significant digits (a roofline estimate claims no more)."""
    return float(f"{x:.4g}")


def _int(text: Any, name: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        raise ProjectionError(f"{name} must be an integer") from None
