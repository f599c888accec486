"""What changed between two captures: groups and nodes added, removed or changed.

Nothing is matched by id (ids are dense indices that any change upstream shifts):

* a **group** is matched by its path. A ``module`` group's path is its ``attrs.path``
  (``lm.transformer.h.2``; a second call of the same module is ``path#1``); any other
  group's path is its parent's path and its own name (``main/layer_3/mlp``), with
  ``#k`` for the k-th later sibling of the same name. The path is also how the result
  names a group.
* a **node** is matched by its place among its group's direct nodes: the two op
  sequences are aligned (common prefix and suffix, then :class:`difflib.SequenceMatcher`
  on the middle), so one inserted op is one added node and the ops after it still
  match. Matched nodes with a different op (a ``replace`` in the alignment) are
  reported as changed.

A matched pair is compared on its op, output shapes and dtypes, how its outputs are split
across devices (``shardings``: the mesh by its axes, the mesh axes of each dimension, the
per-device shape, pending partial sums), ``params`` (retained metadata, a collective's
axes and bytes among them), literal operands, and the parameter tensors it consumes (Torch
parameters and buffers, JAX variables: name, shape, dtype, sharding).

Kernels are what is compared: a Torch *function group* (``kind = "function"``, the
``torch.*`` call a run of kernels ran under, see ``capture.torch.functions``) is
transparent here. Its kernels count as direct nodes of the group around it, and a
node's ``params["function"]`` (the call a single kernel ran under) is not compared, so
a capture that records function calls and one that does not (an older file) differ
only where their kernels do. The result lists only the topmost group of
an added or removed subtree (its node, group and parameter counts say what it holds),
and a "changed" group is one whose own direct nodes, kind or class changed or that
gained or lost a child group.

Stdlib only (the worker's side of the package boundary): callers read the two files with
:mod:`capture.graph.graphfile`. :func:`diff` raises :class:`DiffError` for a failed capture.
"""

from __future__ import annotations

import hashlib

import difflib
import json
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any, cast

from .model import Capture, describe_tree, format_shape, state_keys, tree_leaves
from .sharding import mesh_text
from .tables import NodeTable, ValueTable

DIFF_FORMAT = "tensorviz-diff"
DIFF_VERSION = 1
_TOP = None  # the key of the pseudo group holding nodes outside every group
_ROOT_NAME = "(top level)"


class DiffError(Exception):
    """The two captures cannot be compared; ``str()`` is one line for a person."""


# --------------------------------------------------------------------------- result


@dataclass(slots=True)
class GroupChange:
    """A group added, removed or changed. ``path`` names it (``""``: the root module).
    ``a`` / ``b`` are its ids in either capture (``None`` on the side without it)."""

    path: str
    status: str  # "added" | "removed" | "changed"
    kind: str
    name: str
    cls: str | None = None
    a: int | None = None
    b: int | None = None
    # added/removed: what the subtree holds; changed: what changed on the group itself.
    subtree: dict[str, int] = field(default_factory=dict)
    changes: dict[str, Any] = field(default_factory=dict)
    nodes: dict[str, int] = field(default_factory=dict)  # changed: direct nodes added/removed/changed
    groups: dict[str, int] = field(default_factory=dict)  # changed: child groups added/removed
    # removed: the id in B of the group that lost it (-1: the top level), where to show it.
    holder: int | None = None


@dataclass(slots=True)
class NodeChange:
    """A node added, removed or changed, named by its group's path and its index among
    that group's direct nodes (``index_a`` / ``index_b``, ``None`` on the side without it)."""

    group: str | None  # the group path (None: outside every group)
    status: str
    op: str  # the op in B (A for a removed node)
    index_a: int | None
    index_b: int | None
    a: int | None
    b: int | None
    changes: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class CaptureDiff:
    groups: list[GroupChange]
    nodes: list[NodeChange]
    capture: dict[str, Any]  # capture-level changes: framework, backend, inputs, outputs
    parameters: dict[str, list]
    sides: dict[str, dict]  # "a" / "b": a short description of each capture

    @property
    def same(self) -> bool:
        return not (self.groups or self.nodes or self.capture or any(self.parameters.values()))

    def counts(self) -> dict[str, int]:
        out = {f"{what}_{status}": 0 for what in ("groups", "nodes") for status in ("added", "removed", "changed")}
        for g in self.groups:
            out[f"groups_{g.status}"] += 1
        for n in self.nodes:
            out[f"nodes_{n.status}"] += 1
        for status in ("added", "removed", "changed"):
            out[f"parameters_{status}"] = len(self.parameters.get(status, []))
        return out


def to_json(d: CaptureDiff, *, ids: bool = False) -> dict[str, Any]:
    """The diff as plain JSON with stable key names. Groups are named by path, nodes by
    group path and index; ``ids=True`` adds each item's ids in A and B (the viewer's use;
    ids mean nothing outside the two files)."""
    groups = []
    for g in d.groups:
        item: dict[str, Any] = {"path": g.path, "status": g.status, "kind": g.kind, "name": g.name}
        if g.cls is not None:
            item["class"] = g.cls
        if g.subtree:
            item["subtree"] = dict(g.subtree)
        if g.changes:
            item["changes"] = g.changes
        if g.nodes:
            item["nodes"] = dict(g.nodes)
        if g.groups:
            item["groups"] = dict(g.groups)
        if ids:
            item["a"], item["b"] = g.a, g.b
        groups.append(item)
    nodes = []
    for n in d.nodes:
        item = {"group": n.group, "status": n.status, "op": n.op, "index_a": n.index_a, "index_b": n.index_b}
        if n.changes:
            item["changes"] = n.changes
        if ids:
            item["a"], item["b"] = n.a, n.b
        nodes.append(item)
    return {
        "format": DIFF_FORMAT,
        "version": DIFF_VERSION,
        "same": d.same,
        "a": d.sides["a"],
        "b": d.sides["b"],
        "counts": d.counts(),
        "capture": d.capture,
        "groups": groups,
        "nodes": nodes,
        "parameters": d.parameters,
    }


# --------------------------------------------------------------------------- one side


class _Side:
    """The per-capture index a diff needs: group paths, each group's direct nodes and
    child groups, and cheap per-node facts (from the columns when the capture was read
    from a file, so a 50,000-node capture builds no ``Node`` rows)."""

    def __init__(self, capture: Capture, label: str) -> None:
        if capture.failure is not None:
            f = capture.failure
            raise DiffError(
                f"{label} is a failed capture ([{f.stage}] {f.type}: {f.message}); "
                "a failure record has no graph to compare"
            )
        self.capture = capture
        nodes = NodeTable.of(capture.nodes)
        cols = nodes.columns()
        self.op, self.group = cols.op, cols.group
        self.in_off, self.in_ref = cols.input_offsets, cols.input_refs
        self.out_off, self.out_ids = cols.output_offsets, cols.output_ids
        self._params = nodes.params_map()
        self._lit = nodes.literals()
        values = ValueTable.of(capture.values)
        off, dims = values.shape_columns()
        self.shapes = [tuple(dims[off[i]:off[i + 1]]) for i in range(len(values))]
        self.dtypes = values.dtype_column()
        self.n_values = len(self.dtypes)
        # How each value is split across devices, comparable between captures (mesh axes
        # by name and size, not by index): None for a value nothing splits.
        column = values.sharding_column()
        self.splits = _splits(column, capture.meshes) if column and any(x is not None for x in column) \
            else [None] * self.n_values
        if any("function" in p for p in self._params.values() if isinstance(p, dict)):
            self._params = {i: q for i, p in self._params.items() if (q := _kernel_params(p))}
        self._index_groups()
        self._index_nodes()
        self.weights = _weight_names(capture, self.n_values)
        self._signatures: list[tuple] | None = None

    # -- groups

    def _index_groups(self) -> None:
        groups = self.capture.groups
        n = len(groups)
        # Each group's place for the diff: itself, or for a function group the nearest
        # group around it that is not one (-1: the top level).
        self.holder: list[int] = list(range(n))
        for g in groups:  # parents come before their children
            if is_function_group(g):
                p = g.parent if g.parent is not None and 0 <= g.parent < g.id else -1
                self.holder[g.id] = self.holder[p] if p >= 0 else -1
        self.children: list[list[int]] = [[] for _ in range(n + 1)]  # slot 0: top level
        for g in groups:
            if self.holder[g.id] != g.id:
                continue
            p = g.parent if g.parent is not None and 0 <= g.parent < n else -1
            if p >= 0:
                p = self.holder[p]
            self.children[p + 1].append(g.id)
        self.path: list[str] = [""] * n
        self.by_path: dict[str, int] = {}
        # Parents before children: a breadth-first walk from the top level.
        order, i = list(self.children[0]), 0
        while i < len(order):
            order.extend(self.children[order[i] + 1])
            i += 1
        seen_names: dict[tuple[int, str], int] = {}
        dups: dict[str, int] = {}  # the next #dup number of each path met twice (a scan per group was quadratic)
        for gid in order:
            grp = groups[gid]
            parent = grp.parent if grp.parent is not None and 0 <= grp.parent < n else -1
            path = _module_path(grp)
            if path is None:
                k = seen_names.get((parent, grp.name), 0)
                seen_names[(parent, grp.name)] = k + 1
                base = _bounded(self.path[parent]) if parent >= 0 else ""
                own = grp.name if k == 0 else f"{grp.name}#{k}"
                path = f"{base}/{own}" if base else own
            if path in self.by_path:  # a file with two groups of one path: keep both apart
                k = dups.get(path, 1)
                while f"{path}#dup{k}" in self.by_path:
                    k += 1
                dups[path] = k + 1
                path = f"{path}#dup{k}"
            self.path[gid] = path
            self.by_path[path] = gid

    def parent(self, g: int) -> int:
        p = self.capture.groups[g].parent
        return p if p is not None and 0 <= p < len(self.path) else -1

    def key(self, g: int) -> str | None:
        return _TOP if g < 0 else self.path[g]

    # -- nodes

    def _index_nodes(self) -> None:
        self.direct: list[list[int]] = [[] for _ in range(len(self.path) + 1)]
        n_groups = len(self.path)
        holder = self.holder
        for i, g in enumerate(self.group):
            self.direct[(holder[g] if 0 <= g < n_groups else -1) + 1].append(i)

    def direct_nodes(self, g: int) -> list[int]:
        return self.direct[g + 1]

    def child_groups(self, g: int) -> list[int]:
        return self.children[g + 1]

    def outputs(self, i: int) -> list[tuple]:
        return [(self.dtypes[v], self.shapes[v], self.splits[v]) for v in self.out_ids[self.out_off[i]:self.out_off[i + 1]]]

    def literals(self, i: int) -> list:
        return [self._lit[-1 - r] for r in self.in_ref[self.in_off[i]:self.in_off[i + 1]] if r < 0]

    def params(self, i: int) -> dict:
        return self._params.get(i) or {}

    def node_weights(self, i: int) -> dict[str, tuple]:
        names = self.weights
        if not names:
            return {}
        out = {}
        for r in self.in_ref[self.in_off[i]:self.in_off[i + 1]]:
            name = names.get(r) if r >= 0 else None
            if name is not None:
                out[name] = (self.dtypes[r], self.shapes[r], self.splits[r])
        return out

    def signatures(self) -> list[tuple]:
        """Per node, everything compared about it (op, outputs' dtypes and shapes, params,
        literal operands, parameter tensors consumed) as one tuple, so that a matched pair
        is one equality test; details are only worked out for pairs that differ. Built
        once, in one loop (a 50,000-node capture: tens of milliseconds)."""
        if self._signatures is not None:
            return self._signatures
        n = len(self.op)
        in_off, in_ref, out_off, out_ids = self.in_off, self.in_ref, self.out_off, self.out_ids
        lit, names, dtypes, shapes, splits = self._lit, self.weights, self.dtypes, self.shapes, self.splits
        # Column at a time: the sparse parts (params, literals, weights) are placed by owner.
        params: list = [None] * n
        for i, p in self._params.items():
            params[i] = p
        lits: list = [None] * n
        ws: list = [None] * n
        for pos, r in enumerate(in_ref):
            if r < 0 or (names and r in names):
                i = bisect_right(in_off, pos) - 1
                while in_off[i + 1] == in_off[i]:  # nodes without operands share an offset
                    i += 1
                column, item = (lits, lit[-1 - r]) if r < 0 else (ws, (names[r], dtypes[r], shapes[r], splits[r]))
                if column[i] is None:
                    column[i] = []
                column[i].append(item)
        if out_off[-1] == n and out_off == list(range(n + 1)):
            outs: list = [(dtypes[v], shapes[v], splits[v]) for v in out_ids]  # one output each: the common case
        else:
            outs = [[(dtypes[v], shapes[v], splits[v]) for v in out_ids[out_off[i]:out_off[i + 1]]] for i in range(n)]
        out = list(zip(self.op, outs, params, lits, ws))
        self._signatures = out
        return out

    def subtree(self, g: int) -> dict[str, int]:
        """Groups, nodes and parameter tensors under ``g`` (itself included)."""
        stack, groups, nodes = [g], 0, 0
        params: set[int] = set()
        while stack:
            h = stack.pop()
            groups += 1
            for i in self.direct_nodes(h):
                nodes += 1
                if self.weights:
                    params.update(r for r in self.in_ref[self.in_off[i]:self.in_off[i + 1]] if r in self.weights)
            stack.extend(self.child_groups(h))
        return {"groups": groups, "nodes": nodes, "parameters": len(params)}

    def describe(self, label: str) -> dict[str, Any]:
        c = self.capture
        return {"label": label, "framework": c.framework, "framework_version": c.framework_version,
                "backend": c.backend, "nodes": len(self.op), "groups": len(self.path)}


def is_function_group(g: Any) -> bool:
    """A Torch function group (the ``torch.*`` call its kernels ran under), as opposed
    to the root group of a captured plain function (``attrs.function`` its own name)."""
    if g.kind != "function" or not isinstance(g.attrs, dict):
        return False
    fn = g.attrs.get("function")
    return isinstance(fn, str) and fn.startswith("torch.")


def _kernel_params(p: Any) -> Any:
    """A node's params without ``function`` (which call it ran under is grouping)."""
    if isinstance(p, dict) and "function" in p:
        return {k: v for k, v in p.items() if k != "function"}
    return p


#: The longest group path kept whole as the prefix of its children's paths: past it, the
#: prefix is its digest (``…`` and 24 hex digits), the same in both captures, so paths of
#: a chain nested 20,000 deep stay short (whole, they took 2.4 GB).
MAX_PATH_PREFIX = 1024


def _bounded(path: str) -> str:
    if len(path) <= MAX_PATH_PREFIX:
        return path
    return "…" + hashlib.blake2b(path.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def _module_path(g: Any) -> str | None:
    """A module group's path (``attrs.path``, ``#N`` for its N-th later call), or ``None``
    when the group is not a module call with a path (then its chain names it)."""
    if g.kind != "module":
        return None
    path = g.attrs.get("path") if isinstance(g.attrs, dict) else None
    if not isinstance(path, str):
        return None
    call = g.attrs.get("call")
    return f"{path}#{call}" if type(call) is int and call > 0 else path


def _weight_names(capture: Capture, n_values: int) -> dict[int, str]:
    """Parameter tensors by value id: Torch parameters and buffers (the tracer's
    ``measured`` label), JAX state (leaves under ``variables`` / ``state`` of the call
    structure, named as ``meta.input_names`` records them, else by their path)."""
    out: dict[int, str] = {}
    values = ValueTable.of(capture.values)  # two keys read, no map built
    for v, names in enumerate(zip(values.measured_key("param"), values.measured_key("buffer"))):
        name = next((x for x in names if isinstance(x, str) and x), None)
        if name is not None:
            out[v] = name
    tree = capture.inputs
    pairs = tree.get("dict") if isinstance(tree, dict) else None
    if isinstance(pairs, list):
        recorded: dict[Any, Any] = {}
        entries = capture.meta.get("input_names") if isinstance(capture.meta, dict) else None
        for e in entries if isinstance(entries, list) else ():
            if isinstance(e, (list, tuple)) and len(e) == 2 and type(e[0]) is int and isinstance(e[1], str):
                recorded.setdefault(e[0], e[1])
        keys = state_keys(capture.meta)
        for kv in pairs:
            if isinstance(kv, (list, tuple)) and len(kv) == 2 and kv[0] in keys:
                for v, path in _leaf_paths(kv[1], str(kv[0])):
                    if 0 <= v < n_values:
                        out.setdefault(v, recorded.get(v, path))
    return out


def _leaf_paths(tree: Any, prefix: str) -> list[tuple[int, str]]:
    out, stack = [], [(tree, prefix)]
    while stack:
        t, p = stack.pop()
        if not isinstance(t, dict):
            continue
        if type(t.get("value")) is int:
            out.append((t["value"], p))
        for kind in ("list", "tuple"):
            if isinstance(t.get(kind), list):
                stack.extend((c, f"{p}[{i}]") for i, c in enumerate(t[kind]))
        if isinstance(t.get("dict"), list):
            stack.extend((kv[1], f"{p}.{kv[0]}") for kv in t["dict"] if isinstance(kv, (list, tuple)) and len(kv) == 2)
    return out


# --------------------------------------------------------------------------- the diff


def diff(a: Capture, b: Capture, *, label_a: str = "A", label_b: str = "B") -> CaptureDiff:
    """Compare capture ``a`` (before) with ``b`` (after). Raises :class:`DiffError` when
    either is a failed capture."""
    sa, sb = _Side(a, label_a), _Side(b, label_b)
    groups: list[GroupChange] = []
    nodes: list[NodeChange] = []
    changed: dict[str | None, GroupChange] = {}

    def change_of(g_a: int, g_b: int, slot: int) -> GroupChange | None:
        """The "changed" entry of a matched pair, placed before its children's entries."""
        key = sb.key(g_b)
        got = changed.get(key)
        if got is None and g_b >= 0:
            gb = b.groups[g_b]
            got = changed[key] = GroupChange(sb.path[g_b], "changed", gb.kind, gb.name, _cls(gb), g_a, g_b)
            groups.insert(slot, got)
        return got

    # Groups: walk B's tree from the top, pairing each group with A's group of its path.
    stack = [(-1, -1)]  # depth first, so that a group's entries follow its parent's
    while stack:
        g_a, g_b = stack.pop()
        matched = []
        kids_a = {sa.path[c]: c for c in sa.child_groups(g_a)}
        kids_b = sb.child_groups(g_b)
        added_here = removed_here = 0
        slot = len(groups)
        for c in kids_b:
            path = sb.path[c]
            other = sa.by_path.get(path)
            if other is None:
                gb = b.groups[c]
                groups.append(GroupChange(path, "added", gb.kind, gb.name, _cls(gb), None, c, sb.subtree(c)))
                added_here += 1
            else:
                matched.append((other, c))
                kids_a.pop(path, None)
        for path, c in kids_a.items():
            if path in sb.by_path:
                continue  # moved under another parent: matched where B has it
            ga = a.groups[c]
            groups.append(GroupChange(path, "removed", ga.kind, ga.name, _cls(ga), c, None, sa.subtree(c),
                                      holder=g_b))
            removed_here += 1
        own: dict[str, Any] = {}
        if g_b >= 0:
            ga, gb = a.groups[g_a], b.groups[g_b]
            if ga.kind != gb.kind:
                own["kind"] = {"a": ga.kind, "b": gb.kind}
            if _cls(ga) != _cls(gb):
                own["class"] = {"a": _cls(ga), "b": _cls(gb)}
        found = _diff_nodes(sa, sb, g_a, g_b)
        # A child group added or removed is its own entry: the parent is not "changed" by it.
        if own or found:
            target = change_of(g_a, g_b, slot)
            if target is not None:
                target.changes.update(own)
                if added_here or removed_here:
                    target.groups = {"added": added_here, "removed": removed_here}
                if found:
                    target.nodes = {s: sum(1 for n in found if n.status == s) for s in ("added", "removed", "changed")}
            nodes.extend(found)
        stack.extend(reversed(matched))
    return CaptureDiff(
        groups=groups,
        nodes=nodes,
        capture=_capture_changes(a, b, sa, sb),
        parameters=_parameter_changes(sa, sb, groups),
        sides={"a": sa.describe(label_a), "b": sb.describe(label_b)},
    )


def _cls(g: Any) -> str | None:
    c = g.attrs.get("class") if isinstance(g.attrs, dict) else None
    return c if isinstance(c, str) else None


def _diff_nodes(sa: _Side, sb: _Side, g_a: int, g_b: int) -> list[NodeChange]:
    na, nb = sa.direct_nodes(g_a), sb.direct_nodes(g_b)
    path = sb.key(g_b)
    out: list[NodeChange] = []
    if not na and not nb:
        return out
    ops_a = [sa.op[i] for i in na]
    ops_b = [sb.op[i] for i in nb]
    pairs, removed, added = align(ops_a, ops_b)
    for k in removed:
        out.append(NodeChange(path, "removed", sa.op[na[k]], k, None, na[k], None))
    for k in added:
        out.append(NodeChange(path, "added", sb.op[nb[k]], None, k, None, nb[k]))
    sig_a, sig_b = sa.signatures(), sb.signatures()
    for ka, kb in pairs:
        ia, ib = na[ka], nb[kb]
        if sig_a[ia] == sig_b[ib]:
            continue
        changes = _node_changes(sa, sb, ia, ib)
        if changes:  # empty: the signatures differed only by NaN != NaN
            out.append(NodeChange(path, "changed", sb.op[ib], ka, kb, ia, ib, changes))
    out.sort(key=lambda n: n.index_b if n.index_b is not None else cast(int, n.index_a))
    return out


# Above this many cells (len(a) * len(b) of the part that differs), difflib's alignment
# is replaced by a bounded look-ahead walk (linear time): a flat group of 50,000 ops.
_MATCHER_CELLS = 4_000_000
_LOOKAHEAD = 64
_RUN = 3  # ops that must match in a row to resynchronise the walk


def align(a: list[str], b: list[str]) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Pair the positions of two op sequences: ``(pairs, removed from a, added in b)``.

    The common prefix and suffix pair first. A middle of the same length that mostly
    agrees position by position (ops replaced, nothing inserted: a changed hidden size, an
    activation swapped) pairs position by position: on repetitive programs an alignment
    would slide a period over and report runs of additions and removals. Otherwise the
    middle is aligned with :class:`difflib.SequenceMatcher` (a ``replace`` pairs its
    first positions as changed ops), or, when it is very large, with a look-ahead walk."""
    pairs: list[tuple[int, int]] = []
    removed: list[int] = []
    added: list[int] = []
    lo, hi_a, hi_b = 0, len(a), len(b)
    while lo < hi_a and lo < hi_b and a[lo] == b[lo]:
        lo += 1
    while hi_a > lo and hi_b > lo and a[hi_a - 1] == b[hi_b - 1]:
        hi_a -= 1
        hi_b -= 1
    pairs.extend((k, k) for k in range(lo))
    n_a, n_b = hi_a - lo, hi_b - lo
    if n_a == n_b and sum(x != y for x, y in zip(a[lo:hi_a], b[lo:hi_b])) <= max(1, n_a // 4):
        pairs.extend((lo + k, lo + k) for k in range(n_a))
    elif n_a and n_b and n_a * n_b <= _MATCHER_CELLS:
        matcher = difflib.SequenceMatcher(None, a[lo:hi_a], b[lo:hi_b], autojunk=False)
        for tag, a0, a1, b0, b1 in matcher.get_opcodes():
            a0, a1, b0, b1 = a0 + lo, a1 + lo, b0 + lo, b1 + lo
            common = (a1 - a0) if tag == "equal" else min(a1 - a0, b1 - b0) if tag == "replace" else 0
            pairs.extend((a0 + k, b0 + k) for k in range(common))
            removed.extend(range(a0 + common, a1))
            added.extend(range(b0 + common, b1))
    else:
        _walk(a, b, lo, hi_a, hi_b, pairs, removed, added)
    pairs.extend((hi_a + k, hi_b + k) for k in range(len(a) - hi_a))
    return pairs, removed, added


def _walk(a, b, i, end_a, end_b, pairs, removed, added) -> None:
    """Linear-time alignment: pair equal ops; at a difference, skip the fewest ops on one
    side that brings ``_RUN`` equal ops back in step (within ``_LOOKAHEAD``), else pair
    the two as one changed op."""
    j = i

    def in_step(x: int, y: int) -> bool:
        n = min(_RUN, end_a - x, end_b - y)
        return n > 0 and all(a[x + t] == b[y + t] for t in range(n))

    while i < end_a and j < end_b:
        if a[i] == b[j]:
            pairs.append((i, j))
            i += 1
            j += 1
            continue
        skip = None
        for d in range(1, _LOOKAHEAD + 1):
            if j + d <= end_b and in_step(i, j + d):
                skip = ("b", d)
                break
            if i + d <= end_a and in_step(i + d, j):
                skip = ("a", d)
                break
        if skip is None:
            pairs.append((i, j))
            i += 1
            j += 1
        elif skip[0] == "b":
            added.extend(range(j, j + skip[1]))
            j += skip[1]
        else:
            removed.extend(range(i, i + skip[1]))
            i += skip[1]
    removed.extend(range(i, end_a))
    added.extend(range(j, end_b))


def _node_changes(sa: _Side, sb: _Side, ia: int, ib: int) -> dict[str, Any]:
    ch: dict[str, Any] = {}
    if sa.op[ia] != sb.op[ib]:
        ch["op"] = {"a": sa.op[ia], "b": sb.op[ib]}
    oa, ob = sa.outputs(ia), sb.outputs(ib)
    if [s for _, s, _ in oa] != [s for _, s, _ in ob]:
        ch["shapes"] = {"a": [list(s) for _, s, _ in oa], "b": [list(s) for _, s, _ in ob]}
    if [d for d, _, _ in oa] != [d for d, _, _ in ob]:
        ch["dtypes"] = {"a": [d for d, _, _ in oa], "b": [d for d, _, _ in ob]}
    if [x for _, _, x in oa] != [x for _, _, x in ob]:
        ch["shardings"] = {"a": [_split_text(x) for _, _, x in oa], "b": [_split_text(x) for _, _, x in ob]}
    pa, pb = sa.params(ia), sb.params(ib)
    if pa != pb and _canon(pa) != _canon(pb):
        ch["params"] = {k: {"a": pa.get(k), "b": pb.get(k)} for k in sorted(set(pa) | set(pb), key=str)
                        if (k in pa) != (k in pb) or _canon(pa.get(k)) != _canon(pb.get(k))}
    la, lb = sa.literals(ia), sb.literals(ib)
    if la != lb and _canon(la) != _canon(lb):
        ch["literals"] = {"a": la, "b": lb}
    wa, wb = sa.node_weights(ia), sb.node_weights(ib)
    if wa != wb:
        ch["weights"] = [
            {"name": name, "a": _tensor(wa.get(name)), "b": _tensor(wb.get(name))}
            for name in list(dict.fromkeys([*wa, *wb]))
            if wa.get(name) != wb.get(name)
        ]
    return ch


def _canon(x: Any) -> str:
    """Plain data as comparable text: NaN equals NaN here (a NaN literal or param is the
    same in both captures), and map key order does not count."""
    return json.dumps(x, sort_keys=True, default=repr)


def _tensor(t: tuple | None) -> dict | None:
    if t is None:
        return None
    out = {"dtype": t[0], "shape": list(t[1])}
    if len(t) > 2 and t[2] is not None:
        out["sharding"] = _split_text(t[2])
    return out


def _splits(column: list, meshes: list) -> list:
    """Per value a comparable form of its sharding: ``(mesh axes, spec, per-device shape,
    partial, local)``, the mesh by its axes (``data=4 × model=2``); None when not split."""
    mesh_words = [mesh_text(m) for m in meshes]
    out: list = []
    memo: dict[int, tuple] = {}
    for sh in column:
        if not isinstance(sh, dict):
            out.append(None)
            continue
        got = memo.get(id(sh))
        if got is None:
            m = sh.get("mesh")
            got = (mesh_words[m] if type(m) is int and 0 <= m < len(mesh_words) else "?",
                   tuple(tuple(x) if isinstance(x, list) else None for x in sh.get("spec") or ()),
                   tuple(sh.get("per_device_shape") or ()), tuple(sh.get("partial") or ()), bool(sh.get("local")))
            memo[id(sh)] = got
        out.append(got)
    return out


def _split_text(x: tuple | None) -> str:
    """``data×model on data=4 × model=2: [data,-] per device [2,16]`` for a comparable split."""
    if x is None:
        return "not split"
    mesh, spec, per_device, partial, local = x
    dims = ",".join("*".join(d) if d else ("?" if d is None else "-") for d in spec)
    text = f"[{dims}] on {mesh}, per device {format_shape(list(per_device))}"
    if partial:
        text += f", partial over {','.join(partial)}"
    return text + (" (one device's value)" if local else "")


def _parameter_changes(sa: _Side, sb: _Side, groups: list[GroupChange]) -> dict[str, list]:
    """Parameter tensors by name. One whose every user sits inside an added (removed)
    group is left to that group's ``subtree.parameters`` count."""
    ta = {name: v for v, name in sa.weights.items()}
    tb = {name: v for v, name in sb.weights.items()}
    inside_a = _subtree_nodes(sa, [g.a for g in groups if g.status == "removed"])
    inside_b = _subtree_nodes(sb, [g.b for g in groups if g.status == "added"])
    users_a, users_b = _users(sa, set(ta.values())), _users(sb, set(tb.values()))

    def owned(users: list[int], inside: set[int]) -> bool:
        return bool(users) and all(u in inside for u in users)

    added = [{"name": n, "dtype": sb.dtypes[v], "shape": list(sb.shapes[v])} for n, v in tb.items()
             if n not in ta and not owned(users_b.get(v, []), inside_b)]
    removed = [{"name": n, "dtype": sa.dtypes[v], "shape": list(sa.shapes[v])} for n, v in ta.items()
               if n not in tb and not owned(users_a.get(v, []), inside_a)]
    changed = []
    for n, va in ta.items():
        vb = tb.get(n)
        if vb is not None and (sa.dtypes[va], sa.shapes[va], sa.splits[va]) != (sb.dtypes[vb], sb.shapes[vb],
                                                                                sb.splits[vb]):
            changed.append({"name": n, "a": _tensor((sa.dtypes[va], sa.shapes[va], sa.splits[va])),
                            "b": _tensor((sb.dtypes[vb], sb.shapes[vb], sb.splits[vb]))})
    return {k: sorted(v, key=lambda t: t["name"]) for k, v in
            (("added", added), ("removed", removed), ("changed", changed))}


def _subtree_nodes(side: _Side, roots: list[int | None]) -> set[int]:
    out: set[int] = set()
    stack = [g for g in roots if g is not None]
    while stack:
        g = stack.pop()
        out.update(side.direct_nodes(g))
        stack.extend(side.child_groups(g))
    return out


def _users(side: _Side, wanted: set[int]) -> dict[int, list[int]]:
    users: dict[int, list[int]] = {}
    if not wanted:
        return users
    off, refs = side.in_off, side.in_ref
    for i in range(len(side.op)):
        for r in refs[off[i]:off[i + 1]]:
            if r in wanted:
                users.setdefault(r, []).append(i)
    return users


def _capture_changes(a: Capture, b: Capture, sa: _Side, sb: _Side) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("framework", "backend"):
        if getattr(a, key) != getattr(b, key):
            out[key] = {"a": getattr(a, key), "b": getattr(b, key)}
    for key in ("inputs", "outputs"):
        ta, tb = _tree_text(getattr(a, key), sa, key), _tree_text(getattr(b, key), sb, key)
        if ta != tb:
            out[key] = {"a": ta, "b": tb}
    return out


class _Leaf:
    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple, dtype: str) -> None:
        self.shape, self.dtype = list(shape), dtype


def _tree_text(tree: Any, side: _Side, which: str = "inputs") -> str:
    """The structure with leaf shapes, leaving out the inputs' JAX state (reported as
    parameters)."""
    pairs = tree.get("dict") if isinstance(tree, dict) else None
    keys = state_keys(side.capture.meta) if which == "inputs" else ()
    if isinstance(pairs, list) and keys:
        tree = {"dict": [kv for kv in pairs if not (isinstance(kv, (list, tuple)) and kv and kv[0] in keys)]}
    values = {v: _Leaf(side.shapes[v], side.dtypes[v]) for v in tree_leaves(tree) if 0 <= v < side.n_values}
    return describe_tree(tree, values)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- text


def summary(d: CaptureDiff, *, max_nodes_per_group: int = 40) -> str:
    """The diff for a terminal: one line per group change, its node changes under it."""
    lines = []
    for side in ("a", "b"):
        s = d.sides[side]
        lines.append(f"{side.upper()}: {s['label']} ({s['framework']} {s['framework_version']}, "
                     f"{s['nodes']:,} nodes, {s['groups']:,} groups)".replace(" ,", ","))
    if d.same:
        lines.append("no differences: the same groups, ops, shapes, dtypes, shardings, params and parameter tensors")
        return "\n".join(lines) + "\n"
    for key, ch in d.capture.items():
        lines.append(f"~ {key}: {ch['a']} → {ch['b']}")
    by_group: dict[str | None, list[NodeChange]] = {}
    for n in d.nodes:
        by_group.setdefault(n.group, []).append(n)
    mark = {"added": "+", "removed": "-", "changed": "~"}
    listed = set()
    for g in d.groups:
        what = f"{g.kind}" + (f" {g.cls}" if g.cls else "")
        line = f"{mark[g.status]} group {_show_path(g.path, g.name)} ({what})"
        if g.status in ("added", "removed"):
            s = g.subtree
            line += f": {_n(s['nodes'], 'node')}, {_n(s['groups'], 'group')}"
            if s.get("parameters"):
                line += f", {_n(s['parameters'], 'parameter tensor')}"
        else:
            bits = [f"{k} {v['a']} → {v['b']}" for k, v in g.changes.items()]
            bits += [f"{c} {s} node{'s' if c != 1 else ''}" for s, c in g.nodes.items() if c]
            bits += [f"{c} child group{'s' if c != 1 else ''} {s}" for s, c in g.groups.items() if c]
            line += ": " + ", ".join(bits)
        lines.append(line)
        if g.status == "changed":
            listed.add(g.path)
            lines.extend(_node_lines(by_group.get(g.path, []), max_nodes_per_group))
    top = by_group.get(_TOP, [])
    if top:
        lines.append(f"~ {_ROOT_NAME}: {_n(len(top), 'node change')}")
        lines.extend(_node_lines(top, max_nodes_per_group))
    p = d.parameters
    for status in ("added", "removed"):
        for t in p.get(status, []):
            lines.append(f"{mark[status]} parameter {t['name']} {_tensor_text(t)}")
    for t in p.get("changed", []):
        lines.append(f"~ parameter {t['name']} {_tensor_text(t['a'])} → {_tensor_text(t['b'])}")
    c = d.counts()
    lines.append(
        "summary: groups " + ", ".join(f"{c['groups_' + s]} {s}" for s in ("added", "removed", "changed"))
        + "; nodes " + ", ".join(f"{c['nodes_' + s]} {s}" for s in ("added", "removed", "changed"))
        + "; parameters " + ", ".join(f"{c['parameters_' + s]} {s}" for s in ("added", "removed", "changed"))
    )
    return "\n".join(lines) + "\n"


def _node_lines(changes: list[NodeChange], limit: int) -> list[str]:
    out = []
    for n in changes[:limit]:
        where = f"#{n.index_b}" if n.index_b is not None else f"#{n.index_a} (in A)"
        if n.status == "added":
            out.append(f"    + {n.op} {where}")
        elif n.status == "removed":
            out.append(f"    - {n.op} {where}")
        else:
            out.append(f"    ~ {n.op} {where}: {change_text(n.changes)}")
    if len(changes) > limit:
        out.append(f"    … {len(changes) - limit} more (--json lists every one)")
    return out


def change_text(ch: dict) -> str:
    bits = []
    if "op" in ch:
        bits.append(f"op {ch['op']['a']} → {ch['op']['b']}")
    if "shapes" in ch:
        bits.append("shape " + _shapes(ch["shapes"]["a"]) + " → " + _shapes(ch["shapes"]["b"]))
    if "dtypes" in ch:
        bits.append(f"dtype {', '.join(ch['dtypes']['a'])} → {', '.join(ch['dtypes']['b'])}")
    if "shardings" in ch:
        bits.append(f"sharding {'; '.join(ch['shardings']['a'])} → {'; '.join(ch['shardings']['b'])}")
    if "params" in ch:
        bits.append("params " + ", ".join(f"{k}: {_short(v['a'])} → {_short(v['b'])}" for k, v in ch["params"].items()))
    if "literals" in ch:
        bits.append(f"literals {_short(ch['literals']['a'])} → {_short(ch['literals']['b'])}")
    for w in ch.get("weights", []):
        bits.append(f"weight {w['name']} {_tensor_text(w['a'])} → {_tensor_text(w['b'])}")
    return "; ".join(bits)


def _shapes(shapes: list) -> str:
    return ", ".join(format_shape(s) for s in shapes) or "()"


def _tensor_text(t: dict | None) -> str:
    if t is None:
        return "(none)"
    return f"{t['dtype']}{format_shape(t['shape'])}" + (f" split {t['sharding']}" if t.get("sharding") else "")


def _short(x: Any, limit: int = 60) -> str:
    text = repr(x)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _n(k: int, word: str) -> str:
    return f"{k:,} {word}{'' if k == 1 else 's'}"


def _show_path(path: str | None, name: str) -> str:
    if path is None:
        return _ROOT_NAME
    return path if path else f"(root {name})"


__all__ = ["CaptureDiff", "DiffError", "GroupChange", "NodeChange", "align", "change_text", "diff", "summary", "to_json"]
