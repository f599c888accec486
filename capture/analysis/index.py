"""The index of a capture: flat integer columns built once (:class:`GraphIndex`).

The group tree (parent, ancestor chain, children, node counts, first/last node), the
producer and the uses of every value, and the boundary (values entering / leaving) of
every group, with the lookups that read them (:meth:`GraphIndex.uses`, the ordered
children of a group, the position of a node among them, the item path down to a node or
group) and the chunk keys of large groups. Built in time linear in the capture (with the
cyclic collector paused, see :mod:`capture.graph.gc_pause`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import chain, compress, islice, repeat
from itertools import count as count_from
from operator import attrgetter, lt, ne, sub
from typing import Any, Sequence, cast

from capture.graph.tables import NodeTable
from capture.graph.model import Node, tree_leaves

from .body_templates import body_groups
from .errors import ProjectionError
from capture.graph import gc_pause

ROOT = -1  # the pseudo group holding top-level groups and nodes
#: The boundary sets (values entering and leaving each group) hold at most this many
#: entries per operand, value and group of the file, plus BOUNDARY_ENTRIES_BASE: a real
#: capture's values cross a few levels each (under 8 in the real models of the tests); a
#: hostile file of 20,000 values each crossing a 20,000-deep chain would be 4e8.
BOUNDARY_ENTRIES_PER_ITEM = 32
BOUNDARY_ENTRIES_BASE = 250_000


class TooDeep(ProjectionError):
    """A graph whose values cross more nesting levels than the index keeps (one line)."""

    status = 413

    def __init__(self, per_item: int, groups: int, depth: int) -> None:
        super().__init__(f"this graph's values cross more nesting levels than the viewer indexes "
                         f"({groups:,} groups nested up to {depth:,} deep; the values entering and leaving each "
                         f"group are kept up to {per_item} entries per value, operand and group of the file)")
MAX_ITEMS = 400  # no layout problem exceeds this many items (plus boundary pseudo items)
CHUNK = MAX_ITEMS  # children per leaf chunk
UPPER_CHUNK = MAX_ITEMS * MAX_ITEMS  # children per upper chunk (groups over 160,000 children)

_OUT = -2  # "group" of a value nobody in the capture produced (inputs, constants)
_LIT = -3  # "group" of a literal operand


# --------------------------------------------------------------------------- columns


class _Columns:
    """The node columns the index is built from.

    Files read by :mod:`capture.graph.graphfile` already hold nodes as columns (``NodeTable``);
    those are used as they are. Captures built in memory (lists of ``Node``) are
    turned into the same columns once (:meth:`NodeTable.of`).
    """

    __slots__ = ("op", "group", "frame", "in_off", "in_ref", "out_off", "out_ids", "opaque")

    def __init__(self, nodes: Sequence[Node]) -> None:
        (self.op, self.group, self.frame, self.in_off, self.in_ref, self.out_off,
         self.out_ids, self.opaque) = NodeTable.of(nodes).columns()


def _owners(offsets: list[int]) -> list[int] | range:
    """For CSR offsets, the row of every entry."""
    n = len(offsets) - 1
    if offsets[-1] == n and offsets == list(range(n + 1)):
        return range(n)  # one entry per row: the common case for outputs
    return list(chain.from_iterable(map(repeat, range(n), map(sub, islice(offsets, 1, None), offsets))))


def _chunk_keys(g: int, n: int, pos: int) -> list[str]:
    """The chunk items (upper, then leaf) holding child ``pos`` of group ``g``'s ``n``."""
    keys = []
    if n > UPPER_CHUNK:
        keys.append(f"c{g}:{-(pos // UPPER_CHUNK) - 1}")
    if n > CHUNK:
        keys.append(f"c{g}:{pos // CHUNK}")
    return keys


class GraphIndex:
    """The index of one capture (read-only once built; safe to share between threads
    except for the lazily filled ``ordered`` cache, whose entries are equal whoever fills
    them)."""

    def __init__(self, capture: Any) -> None:
        self.capture = capture
        self._orders: dict[int, tuple[list[int], list[int], dict[int, int]]] = {}
        self._paths: dict[int, list[dict[str, Any]]] = {}
        self._jumps: list[list[int]] | None = None  # binary-lifting parents (ancestor), built on first use
        with gc_pause.paused():
            self._build()

    def _build(self) -> None:
        cap = self.capture
        cols = self.cols = _Columns(cap.nodes)
        n = self.n_nodes = len(cols.op)
        n_values = self.n_values = len(cap.values)
        self._group_tree(cap.groups, n)
        self._subtree_counts(n, len(cap.groups))
        self._values(n_values)
        self._boundaries(len(cap.groups), n_values)

    def _group_tree(self, groups: list[Any], n: int) -> None:
        """Parent, ancestor chain (top-level first, self last), children, direct nodes.
        An unexecuted body (capture/analysis/body_templates.py) is a tree of its own, opened
        from its boundary node: not a child of its parent group, not in its ancestors' counts."""
        ng = len(groups)
        #: Every group's kind (read once: the presentation, parameters and structure read them).
        self.kinds: list[Any] = list(map(attrgetter("kind"), groups))
        self.body_node = body_groups(groups, n, self.kinds)
        self.bodies_of: dict[int, list[int]] = {}
        for g, i in self.body_node.items():
            self.bodies_of.setdefault(i, []).append(g)
        parents = list(map(attrgetter("parent"), groups))
        # None: ROOT (by a C-level pass: ``get`` with the parent itself as the default)
        self.parent: list[int] = cast("list[int]", list(map({None: ROOT}.get, parents, parents)))
        for i in self.body_node:
            self.parent[i] = ROOT
        # Depth and top-level ancestor per group, in one linear pass (iterative: a hostile
        # file may nest 20,000 deep). The ancestor chains themselves are not kept: each is
        # walked from the parents when asked (``chain``), so memory stays linear in the
        # groups however deep they nest (a 20,000-deep chain kept whole took 1.55 GB).
        depth, top = _depths(self.parent)
        self.depth: list[int] = depth  # groups from the top down to g, g included
        self.top: list[int] = top  # the top-level group above g (g itself at the top)
        self.top_down: list[int] = sorted(range(ng), key=depth.__getitem__)  # parents before children
        self.chain = _Chains(self.parent)
        self.child_groups: list[list[int]] = [[] for _ in range(ng + 1)]
        for g in range(ng):
            if g not in self.body_node:
                self.child_groups[self.parent[g] + 1].append(g)
        self.direct_nodes: list[list[int]] = [[] for _ in range(ng + 1)]
        for i, g in enumerate(self.cols.group):
            self.direct_nodes[g + 1].append(i)

    def _subtree_counts(self, n: int, ng: int) -> None:
        """Per group (slot g+1, slot 0 = root): subtree node count, opaque count, first/last node."""
        cols, grp = self.cols, self.cols.group
        direct = self.direct_nodes
        count = list(map(len, direct))
        opaque = [0] * (ng + 1)
        for i in cols.opaque:
            opaque[grp[i] + 1] += 1
        # by C-level passes: a slot's first direct node, else n + its slot; its last, else -1
        first = list(map(next, map(iter, direct), count_from(n)))
        last = list(map(next, map(reversed, direct), repeat(-1)))
        for g in reversed(self.top_down):
            if g in self.body_node:
                continue
            p = self.parent[g] + 1
            count[p] += count[g + 1]
            opaque[p] += opaque[g + 1]
            if first[g + 1] < n and (first[p] >= n or first[g + 1] < first[p]):
                first[p] = first[g + 1]
            if last[g + 1] > last[p]:
                last[p] = last[g + 1]
        # empty groups sort after every node, in id order (n + their slot: a slot's first is
        # only ever set to a node's id)
        self.first = first
        self.last, self.node_count, self.opaque_count = last, count, opaque

    def _values(self, n_values: int) -> None:
        """The producer of each value and the node of each operand; the uses (operand
        refs sorted by value) are sorted on the first :meth:`uses` (the warm-up asks none)."""
        cols = self.cols
        prod = self.producer = [-1] * n_values
        list(map(prod.__setitem__, cols.out_ids, _owners(cols.out_off)))
        self._in_owner: list[int] | range | None = None
        self._use_order: list[int] | None = None

    @property
    def in_owner(self) -> list[int] | range:
        """The node of each operand (made on first use: the boundaries read the group of
        each, made straight from the group column)."""
        got = self._in_owner
        if got is None:
            got = self._in_owner = _owners(self.cols.in_off)
        return got

    @property
    def use_refs(self) -> list[int]:
        """Every operand ref, sorted by value (the CSR of :meth:`uses`)."""
        return self._uses()[0]

    def _uses(self) -> tuple[list[int], list[int]]:
        order = self._use_order
        in_ref = self.cols.in_ref
        if order is None:  # two threads asking at once sort the same thing
            order = sorted(range(len(in_ref)), key=in_ref.__getitem__)
            self._use_refs = list(map(in_ref.__getitem__, order))
            self._use_order = order
        return self._use_refs, order

    def _boundaries(self, ng: int, n_values: int) -> None:
        """The values entering / leaving each group (ordered sets, slot g+1): each operand
        whose producer lies in another group walks up from its user's group and from its
        producer's, by depth, to where they meet, entering the groups on the first walk
        and leaving those on the second (a value from outside the capture enters every
        group above its user, and the root). A set's order is its operands' order."""
        grp, in_ref = self.cols.group, self.cols.in_ref
        n_lit = -min(in_ref, default=0) if in_ref else 0
        # the group of each value's producer (_OUT: none), then of each literal (_LIT)
        gprod = list(map([*grp, _OUT].__getitem__, self.producer)) + [_LIT] * max(n_lit, 0)
        gval = list(map(gprod.__getitem__, in_ref))
        in_off = self.cols.in_off
        gin = list(chain.from_iterable(map(repeat, grp, map(sub, islice(in_off, 1, None), in_off))))
        # indexed by group, the root (-1) last: a walk's ROOT reads the last entry. One
        # dict each while filling (no test per entry), the empty ones None after.
        bin_: list[dict[int, None]] = [{} for _ in range(ng + 1)]
        bout: list[dict[int, None]] = [{} for _ in range(ng + 1)]
        parent = self.parent + [ROOT]
        depth = self.depth + [0]
        root_in = bin_[ROOT]
        # What the boundary sets may hold: each operand enters and leaves the groups between
        # its producer and its user, so a file of values crossing a deep chain holds
        # crossings x depth entries; past this bound (linear in the file) the index refuses
        # (checked after each operand's walk: at most one walk, 2 x depth, past it).
        left = BOUNDARY_ENTRIES_PER_ITEM * (len(in_ref) + n_values + ng) + BOUNDARY_ENTRIES_BASE
        for k in compress(range(len(in_ref)), map(ne, gin, gval)):
            y = gval[k]
            x = gin[k]
            v = in_ref[k]
            if y < ROOT:
                if y == _LIT:
                    continue
                left -= depth[x] + 1  # _OUT: it enters the root and every group above its user
                root_in[v] = None
                while x != ROOT:
                    bin_[x][v] = None
                    x = parent[x]
            else:
                dx, dy = depth[x], depth[y]
                left -= dx + dy
                while dx > dy:
                    bin_[x][v] = None
                    x, dx = parent[x], dx - 1
                while dy > dx:
                    bout[y][v] = None
                    y, dy = parent[y], dy - 1
                while x != y:
                    bin_[x][v] = None
                    bout[y][v] = None
                    x, y = parent[x], parent[y]
                    dx -= 1
                left += 2 * dx  # where they met: no entry there or above
            if left < 0:
                raise TooDeep(BOUNDARY_ENTRIES_PER_ITEM, ng, max(self.depth, default=0))
        self.bin: list[dict[int, None] | None] = [root_in or None, *[d or None for d in bin_[:-1]]]
        self.bout: list[dict[int, None] | None] = [bout[ROOT] or None, *[d or None for d in bout[:-1]]]
        self._results_leave(n_values, left)

    def _results_leave(self, n_values: int, left: int) -> None:
        """The capture's outputs leave every group above their producer; a body's results
        leave the body's groups."""
        cap, grp, prod, groups = self.capture, self.cols.group, self.producer, self.capture.groups
        self.output_values = list(dict.fromkeys(tree_leaves(cap.outputs)))
        self.output_set = frozenset(self.output_values)
        self.input_set = frozenset(tree_leaves(cap.inputs))
        for v in self.output_values:
            p = prod[v]
            if p < 0:
                continue  # an input handed straight back: drawn at the root (see _view)
            left -= self.depth[grp[p]] + 1 if grp[p] != ROOT else 1
            if left < 0:
                raise TooDeep(BOUNDARY_ENTRIES_PER_ITEM, len(groups), max(self.depth, default=0))
            for x in self.full_chain(grp[p]):
                self._add(self.bout, x, v)
        for b in self.body_node:  # a body's results leave it, as a capture's outputs do
            for r in groups[b].attrs.get("results") or ():
                rv = r.get("value") if isinstance(r, dict) else None
                if type(rv) is int and 0 <= rv < n_values and prod[rv] >= 0:
                    left -= self.depth[grp[prod[rv]]] if grp[prod[rv]] != ROOT else 0
                    if left < 0:
                        raise TooDeep(BOUNDARY_ENTRIES_PER_ITEM, len(groups), max(self.depth, default=0))
                    for x in self.chain[grp[prod[rv]]]:
                        self._add(self.bout, x, rv)

    @staticmethod
    def _add(table: list[Any], g: int, v: int) -> None:
        d = table[g + 1]
        if d is None:
            d = table[g + 1] = {}
        d[v] = None

    def inherited(self, own: list[bool]) -> list[bool]:
        """Per group, whether it or any group above it has ``own`` set (one linear pass)."""
        out = list(own)
        for g in self.top_down:
            p = self.parent[g]
            if p != ROOT and out[p]:
                out[g] = True
        return out

    def full_chain(self, g: int) -> list[int]:
        """The root pseudo group, then the groups from the top down to ``g``."""
        return [ROOT] + (self.chain[g] if g != ROOT else [])

    # ------------------------------------------------------------------ lookups

    def uses(self, v: int) -> list[int]:
        """Nodes using value ``v`` as an operand, in program order, each once."""
        refs, order = self._uses()
        lo = bisect_left(refs, v)
        hi = bisect_right(refs, v, lo)
        owner = self.in_owner
        return list(dict.fromkeys(owner[k] for k in order[lo:hi]))

    def ordered(self, g: int) -> tuple[list[int], list[int], dict[int, int]]:
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

    def child_under(self, g: int, parent: int) -> int | None:
        """The direct child group of ``parent`` whose subtree holds group ``g``."""
        if g == ROOT:
            return None
        d = self.depth[parent] if parent != ROOT else 0
        if self.depth[g] <= d:
            return None
        x = self.ancestor(g, self.depth[g] - d - 1)
        return x if d == 0 or self.parent[x] == parent else None

    def ancestor(self, g: int, up: int) -> int:
        """The group ``up`` levels above ``g`` (ROOT past the top), by binary lifting:
        O(log depth) a question, with a table of parents 2^k levels up built on first use
        (depth × log2 depth ints at most: a hostile 20,000-deep chain is 15 levels)."""
        if self._jumps is None:
            # ROOT (-1) maps to itself: index -1 of each level is the ROOT entry appended last
            level = self.parent + [ROOT]
            jumps = [level]
            top = max(self.depth, default=0)
            while (1 << len(jumps)) <= top:
                level = [level[p] for p in level[:-1]] + [ROOT]
                jumps.append(level)
            self._jumps = jumps
        k = 0
        while up and g != ROOT:
            if up & 1:
                g = self._jumps[k][g] if k < len(self._jumps) else ROOT
            up >>= 1
            k += 1
        return g

    def position(self, i: int, g: int) -> int:
        """Position, among the ordered children of ``g``, of the child holding node ``i``
        (-1 when node ``i`` lies outside ``g``)."""
        gi = self.cols.group[i]
        keys, _, gpos = self.ordered(g)
        if gi == g:
            return bisect_left(keys, i)
        c = self.child_under(gi, g)
        return -1 if c is None else gpos[c]

    # ------------------------------------------------------------------ paths

    def group_path(self, g: int) -> list[dict[str, Any]]:
        """The groups from the top down to ``g`` (inclusive), as ``{id, kind, name}``."""
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
        keys, refs, _ = self.ordered(gi)
        return self.group_item_path(gi) + _chunk_keys(gi, len(refs), bisect_left(keys, i)) + [f"n{i}"]

    def group_item_path(self, g: int) -> list[str]:
        """Item keys from the root to group ``g`` (chunks included); none for the root."""
        out: list[str] = []
        levels = self.full_chain(g)
        first = 0
        if len(levels) > 1 and levels[1] in self.body_node:  # through its boundary node
            out = self.item_path(self.body_node[levels[1]]) + [f"g{levels[1]}"]
            first = 1
        for depth in range(first, len(levels) - 1):
            parent, child = levels[depth], levels[depth + 1]
            _, refs, gpos = self.ordered(parent)
            out += _chunk_keys(parent, len(refs), gpos[child])
            out.append(f"g{child}")
        return out

    # ------------------------------------------------------------------ nodes

    def frame(self, i: int) -> Any:
        """Node ``i``'s source frame, or ``None``."""
        f = self.cols.frame[i]
        return self.capture.frames[f] if f >= 0 else None

    def where(self, i: int) -> str:
        """Node ``i``'s source as a card shows it: ``file.py:LINE`` (basename), or ``""``."""
        f = self.frame(i)
        return "" if f is None else f"{f.file.rsplit('/', 1)[-1]}:{f.line}"

    def outputs_of(self, i: int) -> list[int]:
        c = self.cols
        return c.out_ids[c.out_off[i]:c.out_off[i + 1]]

    def operands_of(self, i: int) -> list[int]:
        """Node ``i``'s operand refs in order (a ref below 0 is a literal)."""
        c = self.cols
        return c.in_ref[c.in_off[i]:c.in_off[i + 1]]


def _depths(parent: list[int]) -> tuple[list[int], list[int]]:
    """Per group, its depth (1 at the top) and its top-level ancestor (itself at the top).
    Where every parent comes before its children (groups are recorded as they are entered),
    one pass in id order; else each group's unvisited ancestors walked once, top down."""
    ng = len(parent)
    if all(map(lt, parent, range(ng))) and min(parent, default=ROOT) >= ROOT:
        depth = [0] * (ng + 1)  # the last slot: ROOT's (-1), depth 0
        top = [*range(ng), 0]
        for g, p in enumerate(parent):
            depth[g] = depth[p] + 1
            if p >= 0:
                top[g] = top[p]
        del depth[ng], top[ng]
        return depth, top
    depth = [0] * ng
    top = [0] * ng
    for g in range(ng):
        if depth[g]:
            continue
        stack = []
        x = g
        while x != ROOT and not depth[x]:
            stack.append(x)
            x = parent[x]
        d, t = (0, -1) if x == ROOT else (depth[x], top[x])
        for y in reversed(stack):
            d += 1
            depth[y] = d
            t = y if t < 0 else t
            top[y] = t
    return depth, top


class _Chains:
    """The ancestor chain of each group (top-level first, itself last), walked from the
    parents on each access: O(depth) time, nothing kept."""

    __slots__ = ("_parent",)

    def __init__(self, parent: list[int]) -> None:
        self._parent = parent

    def __len__(self) -> int:
        return len(self._parent)

    def __getitem__(self, g: int) -> list[int]:
        out = []
        parent = self._parent
        while g != ROOT:
            out.append(g)
            g = parent[g]
        out.reverse()
        return out
