"""Which blocks are the same: structural signatures, identical siblings, twins, repeats.

A group's signature (:class:`Structure`) says what it computes, not where its inputs came
from: its kind and class, the op sequence of its children in program order with the
wiring between them, the shapes of what enters it (parameters by shape) and which of its
children hand on what leaves it. An input is named by the order in which the block first
*uses* it, never by its value id or by the order it was produced in outside the block:
Llama's layer 0 receives ``[hidden, cos, sin]`` produced in that order, the later layers
``[cos, sin, hidden]``, and all four run the same 70 ops on them, so all four are alike.
A child group enters its parent's signature by its own signature and the wiring of its
inputs, so a signature covers the whole subtree; computing all of them is one pass over
the index, deepest groups first (linear in the capture).

**Routing.** A mixture-of-experts layer runs the experts its router chose: an eager
capture of Mixtral's expert loop runs one iteration per expert hit, a different number
in each layer, on a different number of tokens. A *routed* group is the innermost module
whose own ops (its function calls' included) read data to decide sizes or control flow
(:data:`DATA_DEPENDENT_OPS`: ``nonzero``, ``.item()``, ``unique``, ``masked_select``…).
Its signature is its boundary: kind, class, what enters (shapes, parameters) and the
shapes of what leaves, so layers that differ only in which experts routing chose are
alike and fold; ``routing[g]`` (the content of the routed groups below ``g``, in order)
tells such layers apart, so a stack can say that routing differs per layer.

On top of the signatures: ``siblings[g]`` (how many siblings share ``g``'s signature and
its index among them: "×N identical"), ``twins[g]`` (every group in the capture with the
same signature, adjacent or not, under one twin id: Model Explorer's identical groups)
and :func:`find_repeats`, the period-k runs of a container's items ((Attention,
FeedForward) × 12, (local × 5, global) × n) that fold into one stack.
"""

from __future__ import annotations

import hashlib
import marshal
from itertools import chain, compress, cycle, filterfalse, repeat
from operator import length_hint, sub as sub_
from typing import Any, Callable, Hashable, Sequence

from capture.graph import gc_pause
from capture.graph.group_table import attr_values
from capture.analysis.loops import DATA_DEPENDENT_OPS, STEP_KIND

#: The longest period of a repeat (items per repetition) looked for: a Gemma-style
#: (local × 5, global) block pattern with the residual ops between its blocks fits.
MAX_PERIOD = 16
#: A group needs this many ops to have twins: one-op and empty groups are op cards or
#: not drawn, and marking every ``Linear`` of one width identical says nothing.
TWIN_MIN_OPS = 2
#: A run of repeated blocks is checked as one (:class:`_Clones`) when the blocks after
#: the first hold this many nodes: the check costs about as much as the signatures of a
#: few small blocks.
CLONE_MIN_NODES = 32
#: The most children a group may have for its content to be kept as a key of the
#: signatures already made (:func:`_signed`): blocks are small, the few containers of
#: thousands are each their own.
KNOWN_BODY_MAX = 1024
#: A group's class where its attrs is no map (see :func:`_classes`).
_NOT_MAP = object()


class Structure:
    """Signatures, identical siblings and twins of every group of one capture."""

    def __init__(self, capture: Any, index: Any, is_weight: Callable[[int], bool], labels: list[str],
                 can_twin: Callable[[int], bool]) -> None:
        with gc_pause.paused():
            self.routed = routed_groups(capture, index)
            classes = _classes(capture.groups)
            #: The runs of blocks repeating a first one exactly (:class:`_Clones`).
            self.clones = _clones(capture, index, labels, is_weight, self.routed, classes)
            self.signature, self.routing = _signatures(capture, index, is_weight, labels, self.routed,
                                                       self.clones, classes)
            self.twins = Twins(index, self.signature, can_twin)
        self._index = index
        self._siblings: list[tuple[int, int]] | None = None
        self._by_parent: dict[int, dict[int, tuple[int, int]]] = {}  # a parent's slot -> its children's

    def repeated_runs(self) -> list[tuple[int, int, int]]:
        """The runs of sibling blocks proved to repeat their first exactly, each as (its
        first block's group, group ids per block, the run's end), those inside a later
        block of another left out (that one's copies hold them)."""
        skip = self.clones.clone_of
        return [run for run in self.clones.runs if run[0] not in skip]

    @property
    def siblings(self) -> list[tuple[int, int]]:
        """Per group, how many of its siblings share its signature and its index among
        them (``(1, 0)``: none does), every group's, made on first use."""
        got = self._siblings
        if got is None:
            got = self._siblings = _siblings(self._index, self.signature)
        return got

    def sibling(self, g: int) -> tuple[int, int]:
        """``siblings[g]``, from the children of ``g``'s parent alone (a page asks about the
        groups it shows: the whole list is 57k groups' worth of work)."""
        full = self._siblings
        if full is not None:
            return full[g]
        slot = self._index.parent[g] + 1
        got = self._by_parent.get(slot)
        if got is None:
            got = self._by_parent[slot] = _alike(self._index.child_groups[slot], self.signature)
        return got.get(g, (1, 0))


def routed_groups(capture: Any, index: Any) -> frozenset[int]:
    """The innermost module groups whose own ops (their function calls' included) are
    data-dependent (:data:`DATA_DEPENDENT_OPS`)."""
    ops = index.cols.op
    present = {op for op in set(ops) if op in DATA_DEPENDENT_OPS}
    if not present:
        return frozenset()
    groups = capture.groups
    group_of = index.cols.group
    out = set()
    for i in compress(range(len(ops)), map(present.__contains__, ops)):
        g = group_of[i]
        while g is not None and g >= 0 and groups[g].kind != "module":
            g = groups[g].parent
        if g is not None and g >= 0 and g not in index.body_node:
            out.add(g)
    return frozenset(out)


def _classes(groups: Sequence[Any]) -> list[Any]:
    """Every group's ``attrs["class"]`` (``None`` where absent, :data:`_NOT_MAP` where its
    attrs is no map), read by column: a file's groups build no attrs map for it."""
    return attr_values(groups, "class", _NOT_MAP)


def _signatures(capture: Any, index: Any, is_weight: Callable[[int], bool], labels: list[str],
                routed: frozenset[int] = frozenset(), clones: "_Clones | None" = None,
                classes: list[Any] | None = None) -> tuple[list[str], list[str]]:
    """Every group's signature and routing content; ``clones``: the capture's repeated
    blocks (:func:`_clones`, found here when not given); ``classes``: :func:`_classes`."""
    if classes is None:
        classes = _classes(capture.groups)
    if clones is None:
        clones = _clones(capture, index, labels, is_weight, routed, classes)
    return _signed(capture, index, is_weight, labels, routed, clones, classes)


def _signed(capture: Any, index: Any, is_weight: Callable[[int], bool], labels: list[str], routed: frozenset[int],
            clones: "_Clones", classes: list[Any]) -> tuple[list[str], list[str]]:
    groups = capture.groups
    ng = len(groups)
    routing = [""] * ng  # the content of the routed groups below each group, "" for none
    cols = index.cols
    ops, in_off, in_ref, out_off, out_ids = cols.op, cols.in_off, cols.in_ref, cols.out_off, cols.out_ids
    sigs = [""] * ng
    # a group's inputs, in the order it first uses them, and what leaves it, in the order
    # it is made: each entry set (never changed) before its parent reads it
    none: list[int] = []
    uses_in: list[Sequence[int]] = [none] * ng
    hands_on: list[Sequence[int]] = [none] * ng
    label_of = labels.__getitem__
    bout, ordered = index.bout, index.ordered
    dumps, blake = marshal.dumps, hashlib.blake2b
    # signature content -> signature: equal content (the blocks of a stack) is encoded
    # and hashed once; a key of tuples hashes in C, far cheaper than encoding and hashing it
    known: dict[tuple[Any, ...], str] = {}
    any_routing = False  # no routed group below yet: no group has routing content to gather
    # blocks repeating a first one (a stack of layers): made from it, not computed again
    skip, model = clones.clone_of, clones.model
    # deepest first (within one depth, any order)
    for g in filterfalse(skip.__contains__, reversed(index.top_down)):
        _, refs, _ = ordered(g)
        made: dict[int, tuple[int, int]] = {}  # value -> (position of the child that made it, its index there)
        first_use: dict[int, int] = {}  # an input -> its number, by first use
        made_get, first_get = made.get, first_use.get
        body: list[Any] = []
        add = body.append
        for pos, r in enumerate(refs):
            if r >= 0:
                reads = in_ref[in_off[r]:in_off[r + 1]]
                a, b = out_off[r], out_off[r + 1]
            else:
                reads = uses_in[~r]
                outs = hands_on[~r]
            wires = []
            for v in reads:  # each operand: a literal, a sibling's output, or an input by first use
                got = made_get(v) if v >= 0 else -1
                if got is None:
                    got = first_get(v)
                    if got is None:
                        got = first_use[v] = len(first_use)
                wires.append(got)
            if r >= 0:
                if b == a + 1:  # one output: most ops
                    o = out_ids[a]
                    add((ops[r], tuple(wires), (label_of(o),)))
                    made[o] = (pos, 0)
                    continue
                outs = out_ids[a:b]
                add((ops[r], tuple(wires), tuple(map(label_of, outs))))
            else:
                add((sigs[~r], tuple(wires)))
            for k, o in enumerate(outs):
                made[o] = (pos, k)
        out_vals = bout[g + 1]
        leaving = sorted([(made[v], v) for v in out_vals if v in made]) if out_vals else []
        uses_in[g] = list(first_use)
        hands_on[g] = [v for _, v in leaving]
        grp = groups[g]
        cls = _class(classes[g])
        inputs = tuple(zip(map(label_of, first_use), map(is_weight, first_use)))
        # a loop's last step hands on no carried value (the loop ended), its code is the same
        key = (grp.kind, cls, tuple(body), inputs, tuple([w for w, _ in leaving]) if grp.kind != STEP_KIND else ())
        below = [routing[~r] for r in refs if r < 0 and routing[~r]] if any_routing else []
        if g not in routed:
            # equal keys encode equally: a class that is not a string (a hostile file's
            # ``True`` equals ``1``) is encoded on its own; a container of thousands of
            # children (a deep stack's) too: its content is its own, and hashing it as a key
            # costs as much as encoding it
            sigs[g] = _signature(key, cls, len(body), known)
            if below:
                routing[g] = blake(dumps(below, 2), digest_size=8).hexdigest()
            if g in model:
                _repeat(g, model[g], sigs, uses_in, hands_on)
            continue
        # what routing chose is not the block's structure: its boundary is
        content = blake(_encoded(key), digest_size=8).hexdigest()
        routing[g] = blake(dumps((content, below), 2), digest_size=8).hexdigest()
        data = dumps(("routed", grp.kind, cls, list(inputs), [labels[v] for _, v in leaving]), 2)
        any_routing = True
        sigs[g] = blake(data, digest_size=8).hexdigest()
    # each block after the first of a run from the first, innermost runs first: a run's
    # first block may hold runs of its own (a run later in id order, done before it); a
    # run inside a later block of another is done again, from its own first block, when
    # that other one copies its first block over it
    for c0, step, end in sorted(clones.runs, reverse=True):
        sigs[c0 + step:end] = sigs[c0:c0 + step] * ((end - c0) // step - 1)
    return sigs, routing


def _repeat(g: int, blocks: list[tuple[int, int, int, dict[int, int]]], sigs: list[str],
            uses_in: list[Sequence[int]], hands_on: list[Sequence[int]]) -> None:
    """The blocks repeating block ``g`` (see :class:`_Clones`): its signature, its inputs
    and outputs moved on, for the whole run at once (the blocks ``r = 1, 2, …`` a fixed
    step of group ids apart; input ``j`` of block ``r`` is block 0's moved by its stride
    ``r`` times, output ``j`` by ``V`` ``r`` times: each a column, the blocks its rows)."""
    if not blocks:
        return
    c1, _, v_step, moves = blocks[0]  # one ``moves`` and one ``V`` for the run
    step, k = c1 - g, len(blocks)
    end = c1 + k * step
    sigs[c1:end:step] = [sigs[g]] * k
    ins = [range(v + d, v + d * (k + 1), d) if d else repeat(v, k) for v, d in zip(uses_in[g], map(moves.__getitem__, uses_in[g]))]
    uses_in[c1:end:step] = list(zip(*ins)) if ins else [()] * k
    outs = [range(o + v_step, o + v_step * (k + 1), v_step) for o in hands_on[g]]
    hands_on[c1:end:step] = list(zip(*outs)) if outs else [()] * k


def _signature(key: tuple[Any, ...], cls: Any, children: int, known: dict[tuple[Any, ...], str]) -> str:
    """The signature of a group's content ``key`` (class ``cls``, ``children`` children),
    from ``known`` (the contents signed so far) where it may be kept there."""
    cached = (cls is None or type(cls) is str) and children <= KNOWN_BODY_MAX
    sig = known.get(key) if cached else None
    if sig is None:
        sig = hashlib.blake2b(_encoded(key), digest_size=8).hexdigest()
        if cached:
            known[key] = sig
    return sig


def _encoded(key: tuple[Any, ...]) -> bytes:
    """The bytes a signature hashes: ``(kind, class, body, inputs, leaving)`` with the body,
    its wires and output labels, the inputs and the leaving wires as lists, in marshal
    format 2 (which writes every string by content: 3 and later write a repeated object as
    a reference, so equal blocks built from different string objects would differ; it is
    an order of magnitude faster than repr)."""
    kind, cls, body, inputs, leaving = key
    items = [(e[0], list(e[1]), list(e[2])) if len(e) == 3 else (e[0], list(e[1])) for e in body]
    return marshal.dumps((kind, cls, items, list(inputs), list(leaving)), 2)


def _siblings(index: Any, sigs: list[str]) -> list[tuple[int, int]]:
    same: list[tuple[int, int]] = [(1, 0)] * len(sigs)
    for kids in index.child_groups:
        for c, got in _alike(kids, sigs).items():
            same[c] = got
    return same


def _alike(kids: list[int], sigs: list[str]) -> dict[int, tuple[int, int]]:
    """Among one parent's child groups ``kids``, each that shares its signature with
    another: (how many share it, its index among them)."""
    by_sig: dict[str, list[int]] = {}
    for c in kids:
        by_sig.setdefault(sigs[c], []).append(c)
    return {c: (len(members), k) for members in by_sig.values() if len(members) > 1 for k, c in enumerate(members)}


class Twins:
    """Group -> (twin id: the first group with its signature, how many, its index), for
    groups of at least :data:`TWIN_MIN_OPS` ops that share a signature with another
    (``get``, as a dict's). The groups of one signature are looked at when one of them is
    first asked about: whether a page may pair a group (``can_twin``: not a function card,
    not drawn as its one op) is the costly part, 100 ms for the 43k groups of a deep
    100k-op capture, and a first view asks about a few signatures. Safe to share between
    threads: an entry is the same whoever fills it."""

    def __init__(self, index: Any, sigs: list[str], can_twin: Callable[[int], bool]) -> None:
        self._can_twin = can_twin
        self._sigs = sigs
        by_sig: dict[str, list[int]] = {}
        count, bodies = index.node_count, index.body_node
        for g, s in enumerate(sigs):
            if count[g + 1] >= TWIN_MIN_OPS and g not in bodies:
                by_sig.setdefault(s, []).append(g)
        self._by_sig = by_sig
        self._got: dict[str, dict[int, tuple[int, int, int]]] = {}

    def get(self, g: int, default: Any = None) -> Any:
        if not 0 <= g < len(self._sigs):
            return default
        sig = self._sigs[g]
        got = self._got.get(sig)
        if got is None:
            got = self._got[sig] = _twins_of(self._by_sig.get(sig, ()), self._can_twin)
        return got.get(g, default)

    def all(self) -> dict[int, tuple[int, int, int]]:
        """Every group with twins (each signature looked at)."""
        out: dict[int, tuple[int, int, int]] = {}
        for s in self._by_sig:
            if s not in self._got:
                self._got[s] = _twins_of(self._by_sig[s], self._can_twin)
            out.update(self._got[s])
        return dict(sorted(out.items()))


def _twins_of(candidates: Sequence[int], can_twin: Callable[[int], bool]) -> dict[int, tuple[int, int, int]]:
    if len(candidates) < 2:
        return {}
    members = [g for g in candidates if can_twin(g)]
    if len(members) < 2:
        return {}
    return {g: (members[0], len(members), k) for k, g in enumerate(members)}


# --------------------------------------------------------------------------- repeats


def find_repeats(tokens: Sequence[Hashable], is_block: Sequence[bool], max_period: int = MAX_PERIOD) -> list[tuple[int, int, int]]:
    """Runs of a repeating pattern in a container's items: ``(start, period, count)``
    with ``count >= 2`` repetitions of ``tokens[start:start+period]``.

    Left to right, each run is the one covering the most items from where it starts (a
    tie goes to the shorter period: ``A A A A`` is ``A × 4``, not ``(A, A) × 2``). A
    repetition starts with a block (``is_block``: a group, not an op), so ``(block,
    add) × 12`` folds but a run of ops alone does not. Time ``O(len(tokens) · max_period)``.
    """
    n = len(tokens)
    if n < 2 or not any(is_block):
        return []
    top = min(max_period, n // 2)
    # same[k][j]: how many items from j on equal the item k further on (from the end)
    same: list[list[int]] = [[]]
    for k in range(1, top + 1):
        run = [0] * (n + 1)
        for j in range(n - k - 1, -1, -1):
            run[j] = run[j + 1] + 1 if tokens[j] == tokens[j + k] else 0
        same.append(run)
    out = []
    i = 0
    while i < n - 1:
        best = None
        if is_block[i]:
            for k in range(1, min(top, (n - i) // 2) + 1):
                reps = 1 + same[k][i] // k
                if reps >= 2 and (best is None or k * reps > best[0] * best[1]):
                    best = (k, reps)
        if best is None:
            i += 1
            continue
        out.append((i, best[0], best[1]))
        i += best[0] * best[1]
    return out


# --------------------------------------------------------------------------- repeated blocks


class _Clones:
    """Runs of sibling blocks that repeat a first one exactly, found on the flat columns
    (a deep ModuleList's 14,285 blocks, a transformer's layers): block ``i`` of a run is
    block 0 with every node ``i·N`` further, every group ``i·G`` further, every value it
    makes ``i·V`` further, and each operand reading the value block 0 reads there moved
    by that operand's own stride times ``i`` (the block before's output: ``V``; a weight
    made by earlier blocks: their stride; a rotary table or a mask: 0). Then each group
    of block ``i`` has the signature of its counterpart in block 0, and its inputs and
    outputs are block 0's moved on: the signatures pass computes block 0 only.

    Checked whole-run by C-level passes over the columns, each against itself a period
    on: the ops; the group of each node; each node's operand and output counts; the
    values (outputs ``V`` on, each operand by its stride, literals where block 0 has
    them; values read at different strides never meet, and only those at ``V`` may be
    made in the run); the labels of both; which operands are weights; the kinds, classes
    and parents of the groups; the values leaving each group. A run that fails any is
    left to the signatures pass."""

    def __init__(self) -> None:
        # block 0 -> (block i, i, V, how far each value block 0 reads moves a block on)
        self.model: dict[int, list[tuple[int, int, int, dict[int, int]]]] = {}
        self.clone_of: dict[int, int] = {}  # a group of block i >= 1 -> its counterpart in block 0
        self.runs: list[tuple[int, int, int]] = []  # (block 0's group, group ids per block, the run's end)


def _clones(capture: Any, index: Any, labels: list[str], is_weight: Callable[[int], bool],
            routed: frozenset[int] = frozenset(), classes: list[Any] | None = None) -> _Clones:
    """``classes``: :func:`_classes` of the capture's groups (read here when not given)."""
    out = _Clones()
    if classes is None:
        classes = _classes(capture.groups)
    first, count = index.first[1:], index.node_count[1:]  # by group id
    at = first.__getitem__
    groups = capture.groups
    child_groups = index.child_groups
    for slot in compress(range(len(child_groups)), map((2).__le__, map(len, child_groups))):
        kids = child_groups[slot]
        if len(kids) == 2 and count[kids[0]] != count[kids[1]]:
            continue
        kids = sorted(kids, key=at)
        i = 0
        while i < len(kids) - 1:
            j = _run_end(kids, i, first, count, groups, classes)
            if j - i >= 2 and (j - i - 1) * count[kids[i]] >= CLONE_MIN_NODES:
                # the first block may read what came before the run from elsewhere than
                # the others read it (a stack's input, then each layer's output): from the second
                if not _check_run(out, capture, index, labels, is_weight, kids[i:j], slot - 1, routed,
                                  classes) and j - i >= 3:
                    _check_run(out, capture, index, labels, is_weight, kids[i + 1:j], slot - 1, routed, classes)
            i = max(j, i + 1)
    return out


def _run_end(kids: list[int], i: int, first: list[int], count: list[int], groups: list[Any],
             classes: list[Any]) -> int:
    """The end of the longest run from ``kids[i]`` whose blocks are alike by their
    counts: the same number of nodes, a constant stride in nodes and in group ids, the
    same kind and class (``first``, ``count``, ``classes``: by group id)."""
    c0, c1 = kids[i], kids[i + 1]
    m = count[c0]
    g_step, n_step = c1 - c0, first[c1] - first[c0]
    if m < 1 or g_step < 1 or n_step < m or count[c1] != m:
        return i + 1
    j = i + 1
    while j < len(kids) and kids[j] - kids[j - 1] == g_step and first[kids[j]] - first[kids[j - 1]] == n_step \
            and count[kids[j]] == m:
        j += 1
    kind, cls = groups[c0].kind, _class(classes[c0])
    for r in range(i + 1, j):
        g = kids[r]
        if groups[g].kind != kind or _class(classes[g]) != cls:
            return r
    return j


def _class(cls: Any) -> Any:
    """A group's class from :func:`_classes`: ``None`` where its attrs is no map."""
    return None if cls is _NOT_MAP else cls


def _check_run(out: _Clones, capture: Any, index: Any, labels: list[str], is_weight: Callable[[int], bool],
               run: list[int], parent: int, routed: frozenset[int], classes: list[Any]) -> bool:
    """Whether the blocks of ``run`` (children of ``parent`` alike by their counts)
    repeat the first; if so, they are entered in ``out``. Its first three blocks are
    checked first: a run that fails, fails there most often (a stack's first block reading
    its input from elsewhere), at the cost of three blocks rather than of all."""
    if len(run) > 3 and _repeats(capture, index, labels, is_weight, run[:3], parent, routed, classes) is None:
        return False
    got = _repeats(capture, index, labels, is_weight, run, parent, routed, classes)
    if got is None:
        return False
    c0, g_step = run[0], run[1] - run[0]
    g_end = c0 + len(run) * g_step
    v_step, moves = got
    out.model[c0] = [(c, r, v_step, moves) for r, c in enumerate(run) if r]
    out.clone_of.update(zip(range(c0 + g_step, g_end), cycle(range(c0, c0 + g_step))))
    out.runs.append((c0, g_step, g_end))
    return True


def _repeats(capture: Any, index: Any, labels: list[str], is_weight: Callable[[int], bool], run: list[int],
             parent: int, routed: frozenset[int], classes: list[Any]) -> tuple[int, dict[int, int]] | None:
    """``(V, moves)`` (see :func:`_same_values`) when the blocks of ``run`` repeat the first
    (``classes``: :func:`_classes` of the capture's groups)."""
    cols = index.cols
    k, c0 = len(run), run[0]
    g_step = run[1] - c0
    m = index.node_count[c0 + 1]
    s = index.first[c0 + 1]
    n_step = index.first[run[1] + 1] - s
    e = index.first[run[-1] + 1] + m
    if set(map(sub_, index.last[c0 + 1:c0 + 1 + k * g_step:g_step], index.first[c0 + 1:c0 + 1 + k * g_step:g_step])) != {m - 1}:
        return None  # a block's nodes are not one stretch of the program
    # block 0's groups are the ids c0 .. c0+G-1, each holding nodes; the others' are a
    # period on (their parents too), with no other child group
    sub = [c0]
    for g in sub:
        sub.extend(index.child_groups[g + 1])
    g_end = c0 + k * g_step
    if sorted(sub) != list(range(c0, c0 + g_step)) or 0 in index.node_count[c0 + 1:g_end + 1]:
        return None
    if sum(map(len, index.child_groups[c0 + 1:g_end + 1])) != k * (g_step - 1):
        return None
    if any(c0 <= g < g_end for g in routed):
        return None  # what routing chose differs per block (its content is no signature's)
    par = index.parent[c0:g_end]
    if list(map(sub_, par[g_step:], par[:-g_step])) != ([0] + [g_step] * (g_step - 1)) * (k - 1):
        return None
    kinds = index.kinds[c0:g_end]
    run_classes = classes[c0:g_end]
    if kinds[g_step:] != kinds[:-g_step] or any(c is _NOT_MAP for c in run_classes):
        return None
    if run_classes[g_step:] != run_classes[:-g_step] or any(c is not None and type(c) is not str
                                                             for c in run_classes[:g_step]):
        return None
    if not _same_nodes(cols, s, e, n_step, m, g_step, parent):
        return None
    return _same_values(cols, index, labels, is_weight, s, e, n_step, c0, g_end, g_step)


def _same_nodes(cols: Any, s: int, e: int, n_step: int, m: int, g_step: int, parent: int) -> bool:
    """The nodes of the stretch repeat a period on: ops, operand and output counts, and
    groups (``G`` on inside a block; between blocks, nodes of the parent itself)."""
    ops, grp = cols.op, cols.group
    if ops[s + n_step:e] != ops[s:e - n_step]:
        return False
    gap = [grp[x] for x in range(s + m, s + n_step)]
    if any(g != parent for g in gap):
        return False
    if list(map(sub_, grp[s + n_step:e], grp[s:e - n_step])) != ([g_step] * m + [0] * (n_step - m)) * ((e - s) // n_step - 1) + [g_step] * ((e - s) % n_step):
        return False
    for off in (cols.in_off, cols.out_off):
        # operand (output) counts a period apart equal: the offsets a period apart differ by one constant
        if len(set(map(sub_, off[s + n_step:e + 1], off[s:e + 1 - n_step]))) > 1:
            return False
    return True


def _same_values(cols: Any, index: Any, labels: list[str], is_weight: Callable[[int], bool], s: int, e: int,
                 n_step: int, c0: int, g_end: int, g_step: int) -> tuple[int, dict[int, int]] | None:
    """``(V, moves)`` when the values repeat (see :class:`_Clones`), else None: ``moves``,
    for each value block 0 reads, how far the value read in its place moves a block on."""
    in_off, in_ref, out_off, out_ids = cols.in_off, cols.in_ref, cols.out_off, cols.out_ids
    outs = out_ids[out_off[s]:out_off[e]]
    o_step = out_off[s + n_step] - out_off[s]
    if not o_step:
        return None
    v_step = outs[o_step] - outs[0]
    if v_step <= 0 or set(map(sub_, outs[o_step:], outs[:-o_step])) != {v_step}:
        return None
    reads = in_ref[in_off[s]:in_off[e]]
    r_step = in_off[s + n_step] - in_off[s]
    moves: dict[int, int] = {}
    values, strides = reads, []
    if r_step:
        # each operand moves by its own stride a block on (an output of the block before
        # by V, a weight by the stride of the blocks that made it, a mask by 0), the same
        # for every block; a literal (a ref below 0) stays one, a value a value
        moved = list(map(sub_, reads[r_step:], reads[:-r_step]))
        if moved[r_step:] != moved[:-r_step]:
            return None
        strides = moved[:r_step]
        is_value = [v >= 0 for v in reads[:r_step]]
        if any((d < 0) if isv else (d > 0) for d, isv in zip(strides, is_value)):
            return None
        mask = cycle(is_value)
        values = list(compress(reads, mask)) if not all(is_value) else reads
        strides = list(compress(strides, is_value))
        first = values[:len(strides)]
        moves = dict(zip(first, strides))
        if len(moves) != len(set(zip(first, strides))):
            return None  # one value read in two places, moving apart
        if not _strides_apart(values, strides, v_step, outs):
            return None
    label = labels.__getitem__
    lab = list(map(label, outs))
    if lab[o_step:] != lab[:-o_step]:
        return None
    step = len(strides)
    if step:
        lab = list(map(label, values))
        weight = list(map(is_weight, values))
        if lab[step:] != lab[:-step] or weight[step:] != weight[:-step]:
            return None
    # the values leaving each group: a period on, moved by V
    leaving = index.bout[c0 + 1:g_end + 1]
    sizes = list(map(length_hint, leaving))  # None (nothing leaves): 0
    if sizes[g_step:] != sizes[:-g_step]:
        return None
    flat = list(chain.from_iterable(filter(None, leaving)))
    f_step = sum(sizes[:g_step])
    if f_step and set(map(sub_, flat[f_step:], flat[:-f_step])) != {v_step}:
        return None
    return v_step, moves


def _strides_apart(reads: list[int], strides: list[int], v_step: int, made: list[int]) -> bool:
    """Whether the values read at operands of each stride other than ``V``, over every
    block, are made by none of the blocks (``made``: what they make) and meet no value read
    at another stride: then two operands of one block read one value exactly when they do
    in block 0, and one the block made exactly when block 0 made it. Every operand at
    stride ``V`` (a deep stack's): nothing to keep apart."""
    kinds = set(strides)
    if len(kinds) > 4:
        return False
    if kinds == {v_step}:
        return True
    made_set = set(made)
    seen: set[int] = set()
    for d in kinds:
        values = set(compress(reads, cycle([x == d for x in strides])))
        if (d != v_step and not made_set.isdisjoint(values)) or not seen.isdisjoint(values):
            return False
        seen |= values
    return True
