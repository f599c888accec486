"""Graph projection: from a canonical capture to what the browser draws.

A :class:`Projection` is built once per capture. Its index holds, in flat integer
columns, the producer and the uses of every value, the direct children of every
group, and the boundary (values entering / leaving) of every group. Every answer is
then a small page computed from the index: the children of one group (or of one
chunk of a large group) with the edges between them, one node, one value, one group,
a page of node summaries, or a bounded list of search results. Nothing here ever
returns the whole graph.

Only the standard library and :mod:`capture` are imported (DESIGN.md boundaries).
"""

from __future__ import annotations

import hashlib
import re
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from itertools import compress
from operator import ne
from typing import Any, Iterable, NamedTuple

from capture import frame_repeats
from capture.model import Capture, Frame, format_shape, tree_leaves
from capture.graphfile import NodeTable, ValueTable

from .bodies import (BODY_KIND, BODY_RESULT_ROLE, BODY_ROLE, BODY_WORDING, body_groups, body_summary,
                     parameter_names, result_names, template_line)
from .value_names import ROLE_WORDS, input_names, measured_name
from .library_sources import short_path

ROOT = -1  # the pseudo group holding top-level groups and nodes
MAX_ITEMS = 400  # no layout problem exceeds this many items (plus boundary pseudo items)
CHUNK = MAX_ITEMS  # children per leaf chunk
UPPER_CHUNK = MAX_ITEMS * MAX_ITEMS  # children per upper chunk (groups over 160,000 children)
MAX_PAGE = 1000
DEFAULT_SEARCH_LIMIT = 50
MAX_SEARCH_LIMIT = 1000
LIST_CAP = 64  # outputs listed on an item card; uses listed per value in details
USES_CAP = 1000
_VIEW_CACHE = 24
_DEPS_CACHE = 32

SUBTREE_ITEMS = 60_000  # items one api/subtree answer may carry (Expand all fetches in one request)
WEIGHT_ROLES = frozenset({"param", "buffer", "variable", "const"})  # drawn inside their ops
PARAM_ROLES = frozenset({"param", "variable"})  # what a group card counts as its parameters

_OUT = -2  # "group" of a value nobody in the capture produced (inputs, constants)
_LIT = -3  # "group" of a literal operand

_KIND_WORDING = {
    "jit": ("tracing scope", "tracing scope: the body of a jit call (not a Flax layer hierarchy)"),
    "remat": ("tracing scope", "tracing scope: a checkpoint (remat) body (not a Flax layer hierarchy)"),
    "custom_jvp": ("tracing scope", "tracing scope: a custom_jvp call body (not a Flax layer hierarchy)"),
    "custom_vjp": ("tracing scope", "tracing scope: a custom_vjp call body (not a Flax layer hierarchy)"),
    "scope": ("tracing scope", "tracing scope: a named scope (not a Flax layer hierarchy)"),
    "module": ("module instance", "module instance: one call of a module (a PyTorch nn.Module, or a Flax module recorded while tracing)"),
    "function": ("function call", "function call: the eager run of the captured function"),
    "loss": ("training step", "training step: the loss computed from the forward's output"),
    "backward": ("training step", "training step: backward ops recorded while autograd ran"),
    "optimizer": ("training step", "training step: one optimizer step"),
    BODY_KIND: BODY_WORDING,
}

_SHORT_DTYPES = {
    "float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16",
    "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "int4": "i4",
    "uint64": "u64", "uint32": "u32", "uint16": "u16", "uint8": "u8", "uint4": "u4",
    "complex64": "c64", "complex128": "c128", "bool": "bool",
    "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2",
}


class ProjectionError(Exception):
    """A request the projection cannot answer; ``status`` is the HTTP status to use."""

    status = 400


class NotFound(ProjectionError):
    status = 404


def short_dtype(dtype: str) -> str:
    d = dtype[6:] if dtype.startswith("torch.") else dtype
    return _SHORT_DTYPES.get(d, d)


# Bytes per element, for a group card's parameter bytes ("7.09 M params · 28.4 MB").
_DTYPE_BITS = {
    "float64": 64, "float32": 32, "float16": 16, "bfloat16": 16, "int64": 64, "int32": 32,
    "int16": 16, "int8": 8, "int4": 4, "uint64": 64, "uint32": 32, "uint16": 16, "uint8": 8,
    "uint4": 4, "complex64": 64, "complex128": 128, "bool": 8, "float8_e4m3fn": 8, "float8_e5m2": 8,
}


def value_label(shape: list, dtype: str) -> str:
    """``f32[2,4]``: the text of an edge label."""
    return short_dtype(dtype) + format_shape(shape)


def group_wording(kind: str) -> tuple[str, str]:
    """(short, long) honest wording for a group kind."""
    return _KIND_WORDING.get(kind, ("group", f"group of kind {kind!r}"))


def group_sublabel(kind: str) -> str:
    """``jit · tracing scope``, ``module instance``: what a group card says under its name."""
    short = group_wording(kind)[0]
    return short if short.startswith(kind) else f"{kind} · {short}"


# What a value role means, in one sentence (the inspector and the pill tooltips).
ROLE_SENTENCES = {
    "input": "capture input: an argument of the captured call",
    "param": "parameter: a module parameter (nn.Parameter)",
    "buffer": "buffer: a registered module buffer (e.g. running statistics)",
    "variable": "variable: JAX state passed to the call (Linen variables, NNX state)",
    "const": "constant: a closed-over or literal array, or a tensor from outside the module",
    "body": BODY_ROLE,
    "body_result": BODY_RESULT_ROLE,
}
CHUNK_WORDING = ("program order", "sequential chunk (a viewer split, not a program scope)")


def vocabulary() -> dict:
    """The words the browser app uses for group kinds and value roles, sent with
    ``api/capture`` so that they are defined once, here (the app keeps no copy)."""
    kinds = {k: {"short": short, "long": long, "sublabel": group_sublabel(k)} for k, (short, long) in _KIND_WORDING.items()}
    kinds["chunk"] = {"short": CHUNK_WORDING[0], "long": CHUNK_WORDING[1], "sublabel": f"chunk · {CHUNK_WORDING[0]}"}
    return {"kinds": kinds, "roles": dict(ROLE_SENTENCES), "weight_roles": sorted(WEIGHT_ROLES)}


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


# --------------------------------------------------------------------------- columns


class _Columns:
    """The node columns the index is built from.

    Files read by :mod:`capture.graphfile` already hold nodes as columns (``NodeTable``);
    those are used as they are. Captures built in memory (lists of ``Node``) are
    turned into the same columns once.
    """

    __slots__ = ("op", "group", "frame", "in_off", "in_ref", "out_off", "out_ids", "opaque")

    def __init__(self, nodes: Any) -> None:
        if isinstance(nodes, NodeTable):
            (self.op, self.group, self.frame, self.in_off, self.in_ref, self.out_off,
             self.out_ids, self.opaque) = nodes.columns()
            return
        self.op = [n.op for n in nodes]
        self.group = [-1 if n.group is None else n.group for n in nodes]
        self.frame = [-1 if n.frame is None else n.frame for n in nodes]
        self.in_off, self.in_ref, self.out_off, self.out_ids = [0], [], [0], []
        lit = 0
        for n in nodes:
            for o in n.inputs:
                if o.value is None:
                    lit += 1
                    self.in_ref.append(-lit)
                else:
                    self.in_ref.append(o.value)
            self.in_off.append(len(self.in_ref))
            self.out_ids += n.outputs
            self.out_off.append(len(self.out_ids))
        self.opaque = frozenset(n.id for n in nodes if n.opaque)


def _owners(offsets: list[int]) -> list[int] | range:
    """For CSR offsets, the row of every entry."""
    n = len(offsets) - 1
    if offsets[-1] == n and offsets == list(range(n + 1)):
        return range(n)  # one entry per row: the common case for outputs
    return [i for i in range(n) for _ in range(offsets[i + 1] - offsets[i])]


def _rows_by(keys: Iterable) -> dict[Any, list[int]]:
    """The rows holding each key, in row order."""
    index: dict[Any, list[int]] = {}
    for i, k in enumerate(keys):
        rows = index.get(k)
        if rows is None:
            rows = index[k] = []
        rows.append(i)
    return index


def _chunk_keys(g: int, n: int, pos: int) -> list[str]:
    """The chunk items (upper, then leaf) holding child ``pos`` of group ``g``'s ``n``."""
    keys = []
    if n > UPPER_CHUNK:
        keys.append(f"c{g}:{-(pos // UPPER_CHUNK) - 1}")
    if n > CHUNK:
        keys.append(f"c{g}:{pos // CHUNK}")
    return keys


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
    """The index of one capture and the pages computed from it (thread-safe reads)."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture
        self._lock = threading.Lock()
        self._views: OrderedDict[tuple, dict] = OrderedDict()
        self._orders: dict[int, tuple] = {}
        self._deps_cache: OrderedDict[int, _Deps] = OrderedDict()
        self._ops_index: dict[str, list[int]] | None = None
        self._frames_index: dict[int, list[int]] | None = None
        self._shapes_index: dict[tuple, list[int]] | None = None
        self._paths: dict[int, list[dict]] = {}
        self._names: dict[int, tuple[str, str]] = {}
        self._name_aliases: dict[int, str] = {}
        self._structure: tuple[list[str], list[tuple[int, int]]] | None = None
        self._group_weights: dict[int, dict] = {}
        self._labels: dict[int, str] = {}
        self._build()
        self._name_values()

    # ------------------------------------------------------------------ index

    def _build(self) -> None:
        cap = self.capture
        cols = self.cols = _Columns(cap.nodes)
        n = self.n_nodes = len(cols.op)
        n_values = self.n_values = len(cap.values)
        groups = cap.groups
        ng = len(groups)
        grp = cols.group

        # group tree: parent, ancestor chain (top-level first, self last), children.
        # An unexecuted body (viewer/bodies.py) is a tree of its own, opened from its
        # boundary node: not a child of its parent group, not in its ancestors' counts.
        self.body_node = body_groups(groups, n)
        self.bodies_of: dict[int, list[int]] = {}
        for g, i in self.body_node.items():
            self.bodies_of.setdefault(i, []).append(g)
        self.parent = [ROOT if g.parent is None or i in self.body_node else g.parent for i, g in enumerate(groups)]
        chains: list[list[int] | None] = [None] * ng
        for g in range(ng):
            stack = []
            x = g
            while x != ROOT and chains[x] is None:
                stack.append(x)
                x = self.parent[x]
            base = [] if x == ROOT else chains[x]
            for y in reversed(stack):
                base = base + [y]
                chains[y] = base
        self.chain: list[list[int]] = chains  # type: ignore[assignment]
        self.child_groups: list[list[int]] = [[] for _ in range(ng + 1)]
        for g in range(ng):
            if g not in self.body_node:
                self.child_groups[self.parent[g] + 1].append(g)
        self.direct_nodes: list[list[int]] = [[] for _ in range(ng + 1)]
        for i, g in enumerate(grp):
            self.direct_nodes[g + 1].append(i)

        # per group (slot g+1, slot 0 = root): subtree node count, opaque count, first/last node
        count = [len(d) for d in self.direct_nodes]
        opaque = [0] * (ng + 1)
        for i in cols.opaque:
            opaque[grp[i] + 1] += 1
        first = [d[0] if d else n + j for j, d in enumerate(self.direct_nodes)]
        last = [d[-1] if d else -1 for d in self.direct_nodes]
        for g in sorted(range(ng), key=lambda g: len(chains[g]), reverse=True):
            if g in self.body_node:
                continue
            p = self.parent[g] + 1
            count[p] += count[g + 1]
            opaque[p] += opaque[g + 1]
            if first[g + 1] < n and (first[p] >= n or first[g + 1] < first[p]):
                first[p] = first[g + 1]
            if last[g + 1] > last[p]:
                last[p] = last[g + 1]
        # empty groups sort after every node, in id order
        self.first = [f if f < n else n + j for j, f in enumerate(first)]
        self.last, self.node_count, self.opaque_count = last, count, opaque

        # values: producer of each value; uses (sorted CSR by value id)
        prod = self.producer = [-1] * n_values
        out_owner = _owners(cols.out_off)
        for v, i in zip(cols.out_ids, out_owner):
            prod[v] = i
        in_ref = cols.in_ref
        in_owner = self.in_owner = _owners(cols.in_off)
        order = sorted(range(len(in_ref)), key=in_ref.__getitem__)
        self._use_refs = [in_ref[k] for k in order]
        self._use_order = order

        # boundaries: values entering / leaving each group (ordered sets, slot g+1)
        self.bin: list[dict[int, None] | None] = [None] * (ng + 1)
        self.bout: list[dict[int, None] | None] = [None] * (ng + 1)
        n_lit = -min(in_ref, default=0) if in_ref else 0
        gprod = [grp[p] if p >= 0 else _OUT for p in prod] + [_LIT] * max(n_lit, 0)
        gval = list(map(gprod.__getitem__, in_ref))
        gin = list(map(grp.__getitem__, in_owner))
        paths: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
        for k in compress(range(len(in_ref)), map(ne, gin, gval)):
            gv = gval[k]
            if gv == _LIT:
                continue
            key = (gin[k], gv)
            enter_leave = paths.get(key)
            if enter_leave is None:
                enter_leave = paths[key] = self._crossing(*key)
            v = in_ref[k]
            for g in enter_leave[0]:
                self._add(self.bin, g, v)
            for g in enter_leave[1]:
                self._add(self.bout, g, v)
        self.output_values = list(dict.fromkeys(tree_leaves(cap.outputs)))
        self._output_set = frozenset(self.output_values)
        self._input_set = frozenset(tree_leaves(cap.inputs))
        for v in self.output_values:
            p = prod[v]
            if p < 0:
                continue  # an input handed straight back: drawn at the root (see _view)
            for x in self._full_chain(grp[p]):
                self._add(self.bout, x, v)
        for b in self.body_node:  # a body's results leave it, as a capture's outputs do
            for r in groups[b].attrs.get("results") or ():
                v = r.get("value") if isinstance(r, dict) else None
                if type(v) is int and 0 <= v < n_values and prod[v] >= 0:
                    for x in self.chain[grp[prod[v]]]:
                        self._add(self.bout, x, v)

    @staticmethod
    def _add(table: list, g: int, v: int) -> None:
        d = table[g + 1]
        if d is None:
            d = table[g + 1] = {}
        d[v] = None

    def _full_chain(self, g: int) -> list[int]:
        return [ROOT] + (self.chain[g] if g != ROOT else [])

    def _crossing(self, g_use: int, g_prod: int) -> tuple[list[int], list[int]]:
        """Groups a value enters (from its producer's group to its user's) and leaves."""
        a = self._full_chain(g_use)
        b = [] if g_prod == _OUT else self._full_chain(g_prod)
        c = 0
        while c < len(a) and c < len(b) and a[c] == b[c]:
            c += 1
        return a[c:], b[c:]

    # ------------------------------------------------------------------ value names

    def _name_values(self) -> None:
        """A human name and a role for every value entering the graph from outside.

        Only values no node produced are named (capture inputs, parameters, buffers,
        variables, constants). Sources, first wins: the Torch tracer's ``measured`` label
        (``param`` / ``buffer`` / ``input``: what it saw first), the ``capture.inputs``
        structure path (``x``, ``args[0]``, ``variables.params.Dense_0.kernel``), a new
        version of a named tensor (``version_of``) keeps its name, then constants
        (``meta["constants"]`` for JAX, ``external`` tensors for Torch)."""
        outside = [v for v, p in enumerate(self.producer) if p < 0]
        if not outside:
            return
        names, aliases = self._names, self._name_aliases
        structural: dict[int, tuple[str, str, str]] = {}
        for v, name, path, role in input_names(self.capture.inputs, self.capture.meta):
            if 0 <= v < self.n_values and v not in structural:
                structural[v] = (name, path, role)
        values = self.capture.values
        column = values.measured_column() if isinstance(values, ValueTable) else None

        def measured(v: int) -> Any:
            if isinstance(values, ValueTable):
                return column[v] if column is not None else None
            return values[v].measured

        later: dict[int, int] = {}  # a new version of an outside tensor -> the version before
        constants: set[int] = set()
        for v in outside:
            m = measured(v)
            got = measured_name(m) if isinstance(m, dict) else None
            s = structural.get(v)
            if got is not None:
                names[v] = got
                if s is not None and s[1] != got[0]:
                    aliases[v] = s[1]
            elif s is not None:
                names[v] = (s[0], s[2])
                if s[1] != s[0]:
                    aliases[v] = s[1]
            elif isinstance(m, dict) and type(m.get("version_of")) is int:
                later[v] = m["version_of"]
            elif isinstance(m, dict) and m.get("external") is True:
                constants.add(v)
        for v, origin in later.items():
            for _ in range(64):  # a chain of versions (some produced in place); a file may loop
                if origin in names or not 0 <= origin < self.n_values:
                    break
                m = measured(origin)
                if not isinstance(m, dict) or type(m.get("version_of")) is not int:
                    break
                origin = m["version_of"]
            if origin in names:
                names[v] = names[origin]
        consts = self.capture.meta.get("constants") if isinstance(self.capture.meta, dict) else None
        if isinstance(consts, list):
            for c in consts:
                v = c.get("value") if isinstance(c, dict) else None
                if type(v) is int and 0 <= v < self.n_values and self.producer[v] < 0:
                    constants.add(v)
        for v in constants:
            if v not in names:
                names[v] = ("external" if self.capture.framework == "torch" else "const", "const")
        if self.body_node:
            for v, named in parameter_names(self.capture.groups, self.body_node,
                                            lambda o: names.get(o, ("", "")), WEIGHT_ROLES).items():
                if 0 <= v < self.n_values and self.producer[v] < 0:
                    names[v] = named
            for v, text in result_names(self.capture.groups, self.body_node).items():
                if 0 <= v < self.n_values and v not in names:  # (a parameter handed on keeps its name)
                    names[v] = (text, "body_result")

    # ------------------------------------------------------------------ lookups

    def _check_group(self, g: int) -> None:
        if not (g == ROOT or 0 <= g < len(self.parent)):
            raise NotFound(f"no group {g}")

    def _check_node(self, i: int) -> None:
        if not 0 <= i < self.n_nodes:
            raise NotFound(f"no node {i}")

    def _check_value(self, v: int) -> None:
        if not 0 <= v < self.n_values:
            raise NotFound(f"no value {v}")

    def uses(self, v: int) -> list[int]:
        """Nodes using value ``v`` as an operand, in program order, each once."""
        lo = bisect_left(self._use_refs, v)
        hi = bisect_right(self._use_refs, v, lo)
        owner = self.in_owner
        return list(dict.fromkeys(owner[k] for k in self._use_order[lo:hi]))

    def _ordered(self, g: int) -> tuple[list[int], list[int], dict[int, int]]:
        """Direct children of ``g`` in program order: (keys, refs, position of each child
        group). A ref is a node id, or ``~c`` for child group ``c``; a key is the node id or
        the first node id of the child group's subtree, so node positions are bisections."""
        got = self._orders.get(g)
        if got is not None:
            return got
        nodes = self.direct_nodes[g + 1]
        subs = self.child_groups[g + 1]
        if not subs:
            keys = refs = nodes
            gpos: dict[int, int] = {}
        else:
            pairs = sorted([(k, k) for k in nodes] + [(self.first[c + 1], ~c) for c in subs])
            keys = [k for k, _ in pairs]
            refs = [r for _, r in pairs]
            gpos = {~r: i for i, r in enumerate(refs) if r < 0}
        got = self._orders[g] = (keys, refs, gpos)
        return got

    def _child_under(self, g: int, parent: int) -> int | None:
        """The direct child group of ``parent`` whose subtree holds group ``g``."""
        if g == ROOT:
            return None
        chain = self.chain[g]
        d = len(self.chain[parent]) if parent != ROOT else 0
        if len(chain) > d and (d == 0 or chain[d - 1] == parent):
            return chain[d]
        return None

    def _position(self, i: int, g: int) -> int:
        """Position, among the ordered children of ``g``, of the child holding node ``i``
        (-1 when node ``i`` lies outside ``g``)."""
        gi = self.cols.group[i]
        keys, _, gpos = self._ordered(g)
        if gi == g:
            return bisect_left(keys, i)
        c = self._child_under(gi, g)
        return -1 if c is None else gpos[c]

    def _label(self, v: int, val: Any) -> str:
        """``f32[2,4]`` for value ``v``, made once per value (a whole subtree asks often)."""
        got = self._labels.get(v)
        if got is None:
            got = self._labels[v] = value_label(val.shape, val.dtype)
        return got

    def _value(self, v: int) -> dict:
        val = self.capture.values[v]
        out = {"id": v, "shape": list(val.shape), "dtype": val.dtype, "label": self._label(v, val)}
        if val.measured is not None:
            out["measured"] = val.measured
        named = self._names.get(v)
        if named is not None:
            out["name"], out["role"] = named
        return out

    def _brief(self, v: int) -> dict:
        """A value as an item card lists it: no measured fields (the inspector asks for
        them), so a whole subtree stays small on the wire."""
        d = self._value(v)
        d.pop("measured", None)
        return d

    def _frame(self, i: int) -> Frame | None:
        f = self.cols.frame[i]
        return self.capture.frames[f] if f >= 0 else None

    def _where(self, i: int) -> str:
        f = self._frame(i)
        return "" if f is None else f"{f.file.rsplit('/', 1)[-1]}:{f.line}"

    def _outputs_of(self, i: int) -> list[int]:
        c = self.cols
        return c.out_ids[c.out_off[i]:c.out_off[i + 1]]

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
        if node not in self.bodies_of:
            raise NotFound(f"node {node} has no control-flow bodies")
        items = [self._item(~b) for b in self.bodies_of[node]]
        return {
            "group": None, "node": node, "chunk": None, "items": items, "edges": [],
            "inputs": [], "outputs": [], "chunked": False, "child_count": len(items),
            "range": [0, len(items)], "opaque_count": sum(it["opaque_count"] for it in items),
            "bodies": self._body_summaries(node), "side_by_side": True,
        }

    def _body_summaries(self, node: int) -> list[dict]:
        gs = self.capture.groups
        return [body_summary(b, gs[b].attrs, gs[b].name) for b in self.bodies_of[node]]

    def _chunk_range(self, n: int, chunk: int) -> tuple[int, int]:
        if chunk >= 0:
            lo, span = chunk * CHUNK, CHUNK
        else:
            lo, span = (-chunk - 1) * UPPER_CHUNK, UPPER_CHUNK
        if n <= CHUNK or lo >= n or (chunk < 0 and n <= UPPER_CHUNK):
            raise NotFound(f"no chunk {chunk}")
        return lo, min(n, lo + span)

    def _view(self, g: int, chunk: int | None) -> dict:
        _, refs, _ = self._ordered(g)
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
        producer = self.producer
        outputs = self._output_set
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
            for v in self.output_values:
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
                s = labels[v] = self._label(v, self.capture.values[v])
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
            d = self._brief(v)
            d["value"] = d.pop("id")
            d["key"] = ("in:" if "from" in extra else "out:") + str(v)
            d.update(extra)
            return d

        inputs = [boundary(v, {"from": {"type": "node", "id": p} if p >= 0 else {"type": "input"}})
                  for v, p in in_vals.items()]
        for b in inputs:
            if self.is_weight(b["value"]):
                b["weight"] = True  # drawn inside its consumers' cards unless pills are asked for
        for e in edge_list:
            if e["source"].startswith("in:") and self.is_weight(e["value"]):
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
            "opaque_count": self.opaque_count[g + 1] if whole else self._range_counts(refs, lo, hi)[1],
        }

    def _deps(self, g: int) -> "_Deps":
        """Every value flowing into a child of ``g``, as positions among its children."""
        with self._lock:
            got = self._deps_cache.get(g)
            if got is not None:
                self._deps_cache.move_to_end(g)
                return got
        keys, refs, _ = self._ordered(g)
        producer, grp, position = self.producer, self.cols.group, self._position
        in_off, in_ref = self.cols.in_off, self.cols.in_ref
        src: list[int] = []
        dst: list[int] = []
        val: list[int] = []
        for pos, ref in enumerate(refs):
            incoming = in_ref[in_off[ref]:in_off[ref + 1]] if ref >= 0 else (self.bin[~ref + 1] or ())
            for v in incoming:
                if v < 0:
                    continue  # a literal
                p = producer[v]
                src.append(-1 if p < 0 else bisect_left(keys, p) if grp[p] == g else position(p, g))
                dst.append(pos)
                val.append(v)
        by_src = sorted(range(len(src)), key=src.__getitem__)
        outs = [(position(producer[v], g), v) for v in (self.bout[g + 1] or ()) if producer[v] >= 0]
        got = _Deps(src, dst, val, by_src, [src[k] for k in by_src], outs)
        with self._lock:
            self._deps_cache[g] = got
            while len(self._deps_cache) > _DEPS_CACHE:
                self._deps_cache.popitem(last=False)
        return got

    def _item(self, ref: int) -> dict:
        if ref >= 0:
            opaque = ref in self.cols.opaque
            outs = self._outputs_of(ref)
            item = {
                "type": "node", "id": ref, "key": f"n{ref}", "label": self.cols.op[ref],
                "sublabel": self._where(ref), "kind": "opaque" if opaque else "op", "opaque": opaque,
                "child_count": 0, "outputs": [self._brief(v) for v in outs[:LIST_CAP]],
                "outputs_total": len(outs),
            }
            weights = self._node_weights(ref)
            if weights:
                item["weights"] = weights[:LIST_CAP]
                item["weights_total"] = len(weights)
            if ref in self.bodies_of:
                item["bodies"] = self._body_summaries(ref)
            return item
        c = ~ref
        grp = self.capture.groups[c]
        outs = sorted(self.bout[c + 1] or ())
        ins = [v for v in sorted(self.bin[c + 1] or ()) if not self.is_weight(v)]
        sigs, same = self._structure_index()
        extra: dict[str, Any] = {
            "inputs": [self._brief(v) for v in ins[:LIST_CAP]], "inputs_total": len(ins),
            "params": self._group_params(c), "structure": sigs[c],
        }
        attrs = grp.attrs if isinstance(grp.attrs, dict) else {}
        for k in ("class", "path"):
            if isinstance(attrs.get(k), str) and attrs[k]:
                extra[k] = attrs[k]
        count, index = same[c]
        if count > 1:
            extra["identical"] = {"count": count, "index": index}
        if c in self.body_node:
            extra["body"] = body_summary(c, attrs, grp.name)
            extra["template"] = template_line(extra["body"])
        return {
            **extra,
            "type": "group", "id": c, "key": f"g{c}", "label": grp.name,
            "sublabel": group_sublabel(grp.kind),
            "kind": grp.kind, "honest": group_wording(grp.kind)[0], "opaque": False,
            "opaque_count": self.opaque_count[c + 1],
            "child_count": len(self.direct_nodes[c + 1]) + len(self.child_groups[c + 1]),
            "node_count": self.node_count[c + 1],
            "first": self.first[c + 1] if self.node_count[c + 1] else None,
            "last": self.last[c + 1] if self.node_count[c + 1] else None,
            "outputs": [self._brief(v) for v in outs[:LIST_CAP]], "outputs_total": len(outs),
        }

    def _chunk_item(self, g: int, lo: int, hi: int, span: int, k: int, outs: dict) -> dict:
        a, b = lo + k * span, min(hi, lo + (k + 1) * span)
        _, refs, _ = self._ordered(g)
        chunk_id = a // CHUNK if span == CHUNK else -(a // UPPER_CHUNK) - 1
        first_ref, last_ref = refs[a], refs[b - 1]
        first = first_ref if first_ref >= 0 else self.first[~first_ref + 1]
        last = last_ref if last_ref >= 0 else self.last[~last_ref + 1]
        nodes, opaque = self._range_counts(refs, a, b)
        out_list = list(outs)
        return {
            "type": "chunk", "id": f"{g}:{chunk_id}", "key": f"c{g}:{chunk_id}",
            "label": f"{a + 1:,}–{b:,} of {len(refs):,}",
            "sublabel": self._span_text(first_ref, last_ref),
            "kind": "chunk", "honest": CHUNK_WORDING[1],
            "opaque": False, "opaque_count": opaque, "child_count": (b - a) if span == CHUNK else -(-(b - a) // CHUNK),
            "node_count": nodes, "range": [a, b],
            "first": first if first < self.n_nodes else None, "last": last if last >= 0 else None,
            "outputs": [self._brief(v) for v in out_list[:LIST_CAP]], "outputs_total": len(out_list),
        }

    def _range_counts(self, refs: list[int], a: int, b: int) -> tuple[int, int]:
        """(nodes, opaque nodes) under the children ``refs[a:b]``."""
        nodes = opaque = 0
        op_set, counts, opaques = self.cols.opaque, self.node_count, self.opaque_count
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
                i = self.last[c + 1] if end else self.first[c + 1]
                if not 0 <= i < self.n_nodes:
                    return self.capture.groups[c].name
                return self._where(i) or self.capture.groups[c].name
            return self._where(ref)
        a, b = where(first_ref, False), where(last_ref, True)
        if not a and not b:
            return ""
        return a if a == b or not b else f"{a} … {b}" if a else b

    # ------------------------------------------------------------------ weights and structure

    def is_weight(self, v: int) -> bool:
        """A value entering from outside that a card shows inside its consumers: a
        parameter, buffer, variable or constant (capture inputs stay as pills)."""
        named = self._names.get(v)
        return named is not None and named[1] in WEIGHT_ROLES and self.producer[v] < 0

    def _node_weights(self, i: int) -> list[dict]:
        """The weights node ``i`` consumes, each once, in operand order. ``shared``: more
        than one node uses it (tied embeddings), so it appears on each of them."""
        c = self.cols
        out = []
        for v in dict.fromkeys(c.in_ref[c.in_off[i]:c.in_off[i + 1]]):
            if v < 0 or not self.is_weight(v):
                continue
            d = self._brief(v)
            d["value"] = d.pop("id")
            uses = len(self.uses(v))
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
        for v in self.bin[g + 1] or ():
            named = self._names.get(v)
            if named is None or named[1] not in PARAM_ROLES or self.producer[v] >= 0:
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
        ops = self.cols.op

        def shapes(table: dict | None) -> tuple:
            out = []
            for v in sorted(table or ()):
                if self.is_weight(v):
                    continue  # parameters are listed by shape below, in use order
                val = values[v]
                out.append((tuple(val.shape), val.dtype))
            return tuple(out)

        sigs = [""] * ng
        for g in sorted(range(ng), key=lambda x: len(self.chain[x]), reverse=True):
            _, refs, _ = self._ordered(g)
            body = tuple(ops[r] if r >= 0 else sigs[~r] for r in refs)
            grp = groups[g]
            cls = grp.attrs.get("class") if isinstance(grp.attrs, dict) else None
            weights = tuple((tuple(values[v].shape), values[v].dtype) for v in sorted(self.bin[g + 1] or ()) if self.is_weight(v))
            text = repr((grp.kind, cls, body, shapes(self.bin[g + 1]), shapes(self.bout[g + 1]), weights))
            sigs[g] = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
        same: list[tuple[int, int]] = [(1, 0)] * ng
        for kids in self.child_groups:
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

    # ------------------------------------------------------------------ paths

    def group_path(self, g: int) -> list[dict]:
        """The groups from the top down to ``g`` (inclusive)."""
        if g == ROOT:
            return []
        got = self._paths.get(g)
        if got is None:
            gs = self.capture.groups
            got = self._paths[g] = [{"id": x, "kind": gs[x].kind, "name": gs[x].name} for x in self.chain[g]]
        return got

    def item_path(self, i: int) -> list[str]:
        """Item keys from the root to node ``i``, chunks included: what to expand to see it."""
        gi = self.cols.group[i]
        keys, refs, _ = self._ordered(gi)
        return self._group_item_path(gi) + _chunk_keys(gi, len(refs), bisect_left(keys, i)) + [f"n{i}"]

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
            d = self._value(o.value)
            p = self.producer[o.value]
            d["producer"] = p if p >= 0 else None
            if p >= 0:
                d["producer_op"] = self.cols.op[p]
            uses = self.uses(o.value)
            d["uses"], d["uses_total"] = uses[:USES_CAP], len(uses)
            inputs.append({"position": o.position, "value": d})
        outputs = []
        for v in node.outputs:
            d = self._value(v)
            uses = self.uses(v)
            d["uses"], d["uses_total"] = uses[:USES_CAP], len(uses)
            d["capture_output"] = v in self._output_set
            outputs.append(d)
        g = ROOT if node.group is None else node.group
        return {
            "id": i, "op": node.op, "params": node.params, "opaque": node.opaque,
            "group": None if g == ROOT else g, "group_path": self.group_path(g),
            "item_path": self.item_path(i), "inputs": inputs, "outputs": outputs,
            "frame": frame_json(self._frame(i)),
            "measured": any("measured" in o for o in outputs),
            **({"bodies": self._body_summaries(i)} if i in self.bodies_of else {}),
            **({"template": self.body_node[self.chain[g][0]]} if g != ROOT and self.chain[g][0] in self.body_node else {}),
        }

    def value(self, v: int) -> dict:
        v = int(v)
        self._check_value(v)
        d = self._value(v)
        p = self.producer[v]
        d["producer"] = None if p < 0 else {"id": p, "op": self.cols.op[p], "item_path": self.item_path(p)}
        uses = self.uses(v)
        d["uses"] = [{"id": u, "op": self.cols.op[u], "positions": self._positions(u, v)} for u in uses[:USES_CAP]]
        d["uses_total"] = len(uses)
        d["capture_input"] = v in self._input_set
        d["capture_output"] = v in self._output_set
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
        bin_, bout = sorted(self.bin[g + 1] or ()), sorted(self.bout[g + 1] or ())
        return {
            "id": g, "kind": grp.kind, "name": grp.name, "attrs": grp.attrs,
            "frame": self._group_frame(grp.attrs, "frame"), "class_frame": self._group_frame(grp.attrs, "class_frame"),
            "honest": long, "honest_short": short,
            "parent": grp.parent, "path": self.group_path(g),
            "counts": {
                "children": len(self.direct_nodes[g + 1]) + len(self.child_groups[g + 1]),
                "direct_nodes": len(self.direct_nodes[g + 1]),
                "groups": len(self.child_groups[g + 1]),
                "nodes": self.node_count[g + 1],
                "opaque": self.opaque_count[g + 1],
            },
            "inputs": [self._value(v) for v in bin_[:USES_CAP]], "inputs_total": len(bin_),
            "outputs": [self._value(v) for v in bout[:USES_CAP]], "outputs_total": len(bout),
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
        hi = min(self.n_nodes, offset + limit)
        return {
            "offset": offset, "limit": limit, "total": self.n_nodes,
            "nodes": [self._summary(i) for i in range(offset, hi)],
        }

    def _summary(self, i: int) -> dict:
        g = self.cols.group[i]
        f = self._frame(i)
        return {
            "id": i, "op": self.cols.op[i], "group": None if g == ROOT else g,
            "opaque": i in self.cols.opaque,
            "outputs": [self._value(v) for v in self._outputs_of(i)[:LIST_CAP]],
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
            "counts": {"nodes": self.n_nodes, "values": self.n_values, "groups": len(cap.groups),
                       "frames": len(cap.frames), "opaque": len(self.cols.opaque),
                       # nodes of unexecuted control-flow bodies, when there are any
                       **({"template_nodes": sum(self.node_count[b + 1] for b in self.body_node)}
                          if self.body_node else {})},
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
            return {"value": v, **{k: x for k, x in self._value(v).items() if k != "id"}} if 0 <= v < self.n_values else tree
        for kind in ("list", "tuple"):
            if kind in tree:
                return {kind: [self._tree(t) for t in tree[kind]]}
        if "dict" in tree:
            return {"dict": [[k, self._tree(t)] for k, t in tree["dict"]]}
        return tree

    # ------------------------------------------------------------------ search

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
                add((self._node_result(i, f"source function {frames[self.cols.frame[i]].function}") for i in ids), len(ids))
        return {"results": results, "truncated": total > len(results), "total": total}

    def _name_matches(self, ql: str) -> list[int]:
        """Named values whose name (or structure path, ``kwargs.x``) holds ``ql``: exact
        names first, then in value order."""
        aliases = self._name_aliases
        hits = [(n.lower() != ql and aliases.get(v, "").lower() != ql, v) for v, (n, _) in self._names.items()
                if ql in n.lower() or ql in aliases.get(v, "").lower()]
        return [v for _, v in sorted(hits)]

    def _ops(self) -> dict[str, list[int]]:
        if self._ops_index is None:
            self._ops_index = _rows_by(self.cols.op)
        return self._ops_index

    def _frames(self) -> dict[int, list[int]]:
        if self._frames_index is None:
            index = _rows_by(self.cols.frame)
            index.pop(-1, None)  # nodes without a frame
            self._frames_index = index
        return self._frames_index

    def _shapes(self) -> dict[tuple, list[int]]:
        if self._shapes_index is None:
            values = self.capture.values
            if isinstance(values, ValueTable):
                off, dims = values.shape_columns()
                shapes = (tuple(dims[off[v]:off[v + 1]]) for v in range(self.n_values))
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
        g = self.cols.group[i]
        outs = self._outputs_of(i)
        sub = ", ".join(self._value(v)["label"] for v in outs[:3])
        where = self._where(i)
        if g != ROOT and self.chain[g][0] in self.body_node:
            where = f"{where} · in a body, not executed".lstrip(" ·")
        return {
            "type": "node", "id": i, "key": f"n{i}", "label": self.cols.op[i],
            "sublabel": f"{sub}  {where}".strip(),
            "path": [x["id"] for x in self.group_path(g)], "item_path": self.item_path(i), "why": why,
        }

    def _group_result(self, g: int, why: str) -> dict:
        grp = self.capture.groups[g]
        path = [x["id"] for x in self.group_path(g)]
        return {
            "type": "group", "id": g, "key": f"g{g}", "label": grp.name,
            "sublabel": group_sublabel(grp.kind),
            "path": path[:-1], "item_path": self._group_item_path(g), "why": why,
        }

    def _group_item_path(self, g: int) -> list[str]:
        """Item keys from the root to group ``g`` (chunks included); none for the root."""
        out: list[str] = []
        levels = self._full_chain(g)
        first = 0
        if len(levels) > 1 and levels[1] in self.body_node:  # through its boundary node
            out = self.item_path(self.body_node[levels[1]]) + [f"g{levels[1]}"]
            first = 1
        for depth in range(first, len(levels) - 1):
            parent, child = levels[depth], levels[depth + 1]
            _, refs, gpos = self._ordered(parent)
            out += _chunk_keys(parent, len(refs), gpos[child])
            out.append(f"g{child}")
        return out

    def _value_result(self, v: int, why: str) -> dict:
        d = self._value(v)
        p = self.producer[v]
        if p >= 0:
            g = self.cols.group[p]
            path, item_path = [x["id"] for x in self.group_path(g)], self.item_path(p)
            sub = f"output of {self.cols.op[p]} #{p}"
        else:
            # Drawn as a boundary pill ("in:V") where it is first used: open the way there.
            uses = self.uses(v)
            if uses:
                g = self.cols.group[uses[0]]
                path, item_path = [x["id"] for x in self.group_path(g)], self.item_path(uses[0])[:-1] + [f"in:{v}"]
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


def _int(text: Any, name: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        raise ProjectionError(f"{name} must be an integer") from None
