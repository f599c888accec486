"""The layer table (:func:`layer_rows`): one row per listed group, in program order, with
runs of identical blocks folded into stacks; what ``tensorviz summary`` prints. Its
figures are :class:`capture.analysis.cost.LayerCosts`'."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from capture import units

from .cost import BACKWARD_KINDS, LayerCosts, _add, _ordered_kinds
from .index import ROOT
from .names import group_title, run_label
from .scope import devices_running
from .types import LayerRow, ParamCounts

if TYPE_CHECKING:
    from .analysis import Analysis


#: Group kinds a layer table lists by default: layers and the parts of a training step.
#: (Framework calls, JAX tracing scopes and jit bodies are inside them; ``all_groups``
#: lists those too. A capture with none of these lists every group.)
TABLE_KINDS = frozenset({"module", "body", "loss", "backward", "optimizer"})
#: Sort keys of :func:`layer_rows` (``order``: program order, as a tree).
SORT_KEYS = ("order", "flops", "bytes", "params", "time", "activations")


def layer_rows(analysis: Analysis, depth: int | None = None, device: Any = None,
               all_groups: bool = False) -> list[LayerRow]:
    """The layer table of ``analysis`` (a capture's :class:`~capture.analysis.analysis.Analysis`):
    one row per listed group down to ``depth`` levels (``None``: all), in program order,
    each a group or a *stack* of consecutive identical groups (a run of blocks with the
    same structure, as the viewer folds them: GPT-2's ``h.0 … h.11``), whose figures are
    the run's sums with ``per_block`` the first repetition's; below a stack, the rows of
    its first repetition (``per_block: True``). Body groups are listed under the group of
    their boundary node, unexecuted control-flow templates marked ``template`` (a
    shard_map body, executed per device, is not; its ``share`` is its FLOPs × its devices)."""
    table = _LayerTable(analysis, depth, device, all_groups)
    table.walk(ROOT, 1, False)
    return table.rows


class _LayerTable:
    """The rows of :func:`layer_rows`, walked down the listed groups."""

    def __init__(self, analysis: Analysis, depth: int | None, device: Any, all_groups: bool) -> None:
        self.analysis, self.depth, self.device = analysis, depth, device
        self.costs: LayerCosts = analysis.costs()
        self.ix = analysis.index
        groups = self.groups = analysis.capture.groups
        self.structure = analysis.structure()
        self.listed_kinds = None if all_groups or not any(g.kind in TABLE_KINDS for g in groups) else TABLE_KINDS
        self.times = self.costs.times(device) if device is not None and self.costs.available else None
        self.total = max(self.costs.flops[0], 1)
        self.rows: list[LayerRow] = []
        self.backward = self.ix.inherited([grp.kind in BACKWARD_KINDS for grp in groups])
        self.calls = _call_numbers(groups)

    def shown(self, g: int) -> bool:
        return self.listed_kinds is None or self.groups[g].kind in self.listed_kinds

    def children(self, g: int) -> list[int]:
        """The listed groups under ``g`` (through unlisted ones), in program order; bodies
        of the boundary nodes directly under it included."""
        out: list[int] = []
        stack = list(reversed(_ordered_children(self.ix, g)))
        while stack:
            c = stack.pop()
            if self.shown(c):
                out.append(c)
            else:
                stack.extend(reversed(_ordered_children(self.ix, c)))
        return out

    def params(self, gs: list[int]) -> ParamCounts:
        """The parameters of groups ``gs``, a module called again counted once."""
        groups, analysis = self.groups, self.analysis
        tensors = 0
        count: int | None = 0
        size: int | None = 0
        counted: set[str] = set()
        for g in gs:
            path = groups[g].attrs.get("path") if isinstance(groups[g].attrs, dict) else None
            if isinstance(path, str) and groups[g].kind == "module":
                if path in counted:
                    continue  # the same module called again: its parameters once
                counted.add(path)
            p = analysis.params(g)
            tensors += p["tensors"]
            count, size = units.add((count, p["count"])), units.add((size, p["bytes"]))
        return {"count": count, "bytes": size, "tensors": tensors}

    def row(self, gs: list[int], level: int, per_block: bool, stack: tuple[int, int] | None) -> LayerRow:
        """One row (built in the order its keys are printed; typed as :class:`LayerRow`)."""
        costs, groups, analysis, times, backward = self.costs, self.groups, self.analysis, self.times, self.backward
        device = self.device
        first = gs[0]
        grp = groups[first]
        slots = [g + 1 for g in gs]
        r: dict[str, Any] = {
            "id": first, "key": f"g{first}", "depth": level, "kind": grp.kind, "name": grp.name,
            "phase": "backward" if backward[first] else "forward",
            "title": group_title(grp), "class": grp.attrs.get("class") if isinstance(grp.attrs, dict) else None,
            "path": grp.attrs.get("path") if isinstance(grp.attrs, dict) else None,
            "output": _output_label(analysis, first),
        }
        if stack is None and first in self.calls:  # a module called more than once: which call
            r["call"], r["calls"] = self.calls[first]
        params = self.params(gs)
        r["params"] = params
        if costs.available:
            r.update(
                flops=sum(costs.flops[s] for s in slots), bytes_read=sum(costs.read[s] for s in slots),
                bytes_written=sum(costs.written[s] for s in slots),
                activations=int(sum(costs.activations[s] for s in slots)),
                peak_live=int(max(costs.peak[s] for s in slots)),
                uncounted=sum(costs.uncounted[s] for s in slots),
                estimate=any(costs.estimate[s] for s in slots),
            )
            r["bytes"] = r["bytes_read"] + r["bytes_written"]
            kinds: dict[str, int] = {}
            for s in slots:
                _add(kinds, costs.by_kind[s])
            if kinds:
                r["flops_by_kind"] = _ordered_kinds(kinds)
            r["share"] = self.share(r["flops"], first, slots[0])
            saved = sum(costs.saved[s] for s in slots)
            if saved:
                r["saved_for_backward"] = int(saved)
            if times is not None:
                r["time"] = sum(times[s] for s in slots)
                r["bound"] = costs.bound(device, slots[0])
        if costs.template[slots[0]]:  # not a shard_map body: every device runs it (per device)
            attrs = grp.attrs if isinstance(grp.attrs, dict) else {}
            r["template"] = attrs.get("role") or "body"
            if "iterations" in attrs:
                r["iterations"] = attrs.get("iterations")
        if per_block:
            r["per_block"] = True
        if stack is not None:
            period, count = stack
            r["stack"] = {"count": count, "period": period, "members": gs,
                          "last": groups[gs[-1]].name, "title": _stack_title(groups, gs, count)}
            one = [g + 1 for g in gs[:period]]
            if costs.available:
                r["stack"]["per_block"] = {
                    "flops": sum(costs.flops[s] for s in one),
                    "bytes": sum(costs.read[s] + costs.written[s] for s in one),
                    "params": units.add(analysis.params(g)["count"] for g in gs[:period]),
                }
                if times is not None:
                    r["stack"]["per_block"]["time"] = sum(times[s] for s in one)
        return cast(LayerRow, r)

    def share(self, flops: int, g: int, slot: int) -> float | None:
        """Of the program's FLOPs: None for a template (one iteration or branch, as traced);
        a shard_map body's (one device's) times the devices running it, its global figure
        (as its boundary node's), None when that count is not known."""
        costs = self.costs
        if costs.template[slot]:
            return None
        if not costs.in_body[slot]:
            return flops / self.total
        devices = devices_running(self.analysis.capture, g)
        return flops * devices / self.total if devices is not None else None

    def walk(self, g: int, level: int, per_block: bool) -> None:
        costs, structure, depth, rows = self.costs, self.structure, self.depth, self.rows
        kids = self.children(g)
        sigs = [structure.signature[c] for c in kids]
        repeats = {start: (period, count) for start, period, count in
                   _repeats(sigs, [not costs.in_body[c + 1] for c in kids])}
        i = 0
        while i < len(kids):
            rep = repeats.get(i)
            if rep is not None:
                period, count = rep
                members = kids[i:i + period * count]
                rows.append(self.row(members, level, per_block, rep))
                if depth is None or level < depth:
                    for c in kids[i:i + period]:  # the first repetition, per block
                        rows.append(self.row([c], level + 1, True, None))
                        if depth is None or level + 1 < depth:
                            self.walk(c, level + 2, True)
                i += period * count
                continue
            c = kids[i]
            rows.append(self.row([c], level, per_block, None))
            if depth is None or level < depth:
                self.walk(c, level + 1, per_block)
            i += 1


def _stack_title(groups: Any, gs: list[int], count: int) -> str:
    """``h.0 … h.11 ×12``; a run that goes down (the backward pass runs the last block
    first: ``blocks.5`` then ``4``, ``3``) reads up, and says so: ``blocks.3 … 5 ×3, last first``."""
    first, last = groups[gs[0]], groups[gs[-1]]
    a, b = _numbers(_path_of(first)), _numbers(_path_of(last))
    if a and len(a) == len(b) and a > b:
        return f"{group_title(last)} … {first.name} ×{count}, last first"
    fa = first.attrs if isinstance(first.attrs, dict) else {}
    pa, pb = fa.get("path"), (last.attrs if isinstance(last.attrs, dict) else {}).get("path")
    if isinstance(pa, str) and isinstance(pb, str) and pa and pb:
        # Issue 49: ``GPT2Block · transformer.h.0–11 ×12``; ``Linear · head ×2 calls``.
        label = run_label(pa, pb, count)
        cls = fa.get("class")
        head = f"{cls} · {label}" if isinstance(cls, str) and cls else label
        return head if label.endswith(" calls") else f"{head} ×{count}"
    return f"{group_title(first)} … {last.name} ×{count}"


def _path_of(grp: Any) -> str:
    attrs = grp.attrs if isinstance(grp.attrs, dict) else {}
    return str(attrs.get("path") or group_title(grp))


def _numbers(title: str) -> tuple[int, ...]:
    """The integer parts of a dotted name (``blocks.5.3``: (5, 3))."""
    return tuple(int(p) for p in title.replace(" ", ".").split(".") if p.isdigit())


def _repeats(sigs: list[str], blocks: list[bool]) -> list[tuple[int, int, int]]:
    from .structure import find_repeats

    return find_repeats(sigs, blocks)


def _ordered_children(ix: Any, g: int) -> list[int]:
    """Child groups of ``g`` in program order, each boundary node's bodies right after the
    group holding it (a body is a tree of its own in the index)."""
    _, refs, _ = ix.ordered(g)
    out = []
    for r in refs:
        if r < 0:
            out.append(~r)
        elif r in ix.bodies_of:
            out.extend(ix.bodies_of[r])
    return out


def _call_numbers(groups: Any) -> dict[int, tuple[int, int]]:
    """Group → ``(which call, of how many)`` for the module calls of a module called more
    than once in the forward (a ``head`` applied to two inputs), by its path, in program
    order (group ids are in call order)."""
    by_path: dict[tuple[str, str], list[int]] = {}
    for i, g in enumerate(groups):
        path = g.attrs.get("path") if isinstance(g.attrs, dict) else None
        if g.kind == "module" and isinstance(path, str):
            by_path.setdefault((path, str(g.attrs.get("phase", ""))), []).append(i)
    return {g: (n + 1, len(ids)) for ids in by_path.values() if len(ids) > 1 for n, g in enumerate(ids)}


def _output_label(analysis: Analysis, g: int) -> str:
    """What a group hands on: its first output's label (``+N`` for more): a module call's
    result (``attrs.outputs``), else the values leaving the group."""
    from capture.graph.model import tree_leaves

    attrs = analysis.capture.groups[g].attrs
    tree = attrs.get("outputs") if isinstance(attrs, dict) else None
    outs: list[int] = []
    if isinstance(tree, dict):
        try:
            outs = [v for v in tree_leaves(tree) if type(v) is int and 0 <= v < analysis.index.n_values]
        except (TypeError, KeyError, AttributeError):
            outs = []
    if not outs:
        leaving = set(analysis.index.bout[g + 1] or ())
        # What the call returned comes first, in the order it returned it (the model's
        # logits before a dict of auxiliary outputs), then any other value leaving.
        returned: list[int] = []
        try:
            returned = [v for v in tree_leaves(analysis.capture.outputs) if v in leaving]
        except (TypeError, KeyError, AttributeError):
            returned = []
        outs = list(dict.fromkeys(returned)) + sorted(leaving - set(returned))
    if not outs:
        return ""
    text = analysis.values.label(outs[0])
    return text + (f" +{len(outs) - 1}" if len(outs) > 1 else "")
