"""Python loops over repeated steps, folded like repeated layers.

A Python loop in a forward (mamba's selective scan, ``x = deltaA[:, i] * x + deltaB_u[:, i]``
once per time step; an RNN cell called once per time step) runs unrolled in an eager
capture and is traced unrolled into a jaxpr: ``L`` copies of the same ops side by side in
the module that ran them, each reading what the one before made. :func:`fold_loops` finds
such runs and wraps each iteration into a group of kind ``"loop"`` (``step 0`` …
``step L-1``), so that the viewer folds them as it folds repeated layers: one stack
``× L steps`` that unfolds into the steps, each opening into its ops.

A run of iterations, among one container's children (its ops and child groups in program
order), is ``count >= 2`` repetitions of ``period`` children where:

* the children repeat: the same op from the same source line (a group: the same kind,
  name, module path, class, call line and number of ops);
* each repetition is a contiguous stretch of the program holding at least
  :data:`MIN_STEP_OPS` ops, and not one group alone (one module called again and again
  is a stack of calls already, a run of layers a stack of layers);
* each repetition reads a value the one before made (the carried value: ``x``, ``h``);
* none of its ops is data-dependent (:data:`DATA_DEPENDENT_OPS`): a mixture-of-experts
  loop over the experts the routing hit is the viewer's lanes, not steps.

Each step's ``attrs["loop"]`` says which step it is of how many, the lines its ops came
from, the values carried into it from the step before (``carried``) and the values from
outside the run that every step reads (``shared``: the sequences a step takes its slice
of); ``attrs["frame"]`` is its first op's line (go-to-source). Loops nest: the steps of
an outer loop are searched in turn.

Bounded: periods of up to :data:`MAX_PERIOD` children, :data:`MAX_CANDIDATES` candidate
periods per position, and at most :data:`BUDGET_PER_ITEM` token comparisons per node and
group of the capture, so a 100k-op graph is folded in linear time.

Standard library only (part of ``capture``): the viewer's projection applies it to the
capture it shows; the capture file itself is not changed.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from itertools import compress, count, islice, repeat
from operator import add, attrgetter, mul
from typing import Any, Protocol

from capture.graph.group_table import attr_values
from capture.graph.model import Capture, Group
from capture.graph.tables import NodeTable

#: The group kind of one iteration.
STEP_KIND = "loop"  # a frame reads "loop  step 3": its kind, then its name
#: The longest repetition looked for, in children of one container.
MAX_PERIOD = 512
#: Candidate periods tried per position: the distances to the next occurrences of the
#: same child (an op that occurs twice in one iteration needs its second candidate).
MAX_CANDIDATES = 12
#: Token comparisons allowed per node and group of the capture (plus a fixed base).
BUDGET_PER_ITEM = 64
BUDGET_BASE = 100_000
#: A step holds at least this many ops (a loop of one op per iteration is a chain).
MIN_STEP_OPS = 2
#: Values kept per step in ``carried`` and per run in ``shared``.
VALUES_KEPT = 16
#: Ops whose output sizes, or the Python control flow after them, depend on the data
#: (``nonzero``, ``.item()``, ``unique``, ``masked_select``…): the experts loop of a
#: mixture of experts runs them; the viewer's structure reads the same set.
DATA_DEPENDENT_OPS = frozenset({
    "aten::nonzero", "aten::nonzero_numpy", "aten::_local_scalar_dense", "aten::_unique2", "aten::unique_dim",
    "aten::unique_consecutive", "aten::masked_select", "aten::repeat_interleave.Tensor", "aten::bincount",
})


class LoopIndex(Protocol):
    """What the fold reads of a capture's index (``capture.analysis.index.GraphIndex``
    builds one in linear time; slot ``g + 1`` is group ``g``, slot 0 the root)."""

    n_nodes: int
    cols: Any  # op, group, frame, in_off, in_ref columns
    parent: list[int]  # -1: a top-level group or an unexecuted body
    first: list[int]  # by slot: a subtree's first node (n_nodes + j when it has none)
    last: list[int]  # by slot: its last node
    node_count: list[int]  # by slot: its nodes
    direct_nodes: list[list[int]]  # by slot: the nodes directly in it, in program order
    child_groups: list[list[int]]  # by slot: its child groups
    producer: list[int]  # by value: the node that made it, -1 for none

    def ordered(self, g: int) -> tuple[list[int], list[int], dict[int, int]]: ...


def fold_loops(capture: Capture, index: LoopIndex) -> Capture:
    """``capture`` with each run of loop iterations wrapped into ``step`` groups (see
    the module docstring), found with ``index`` (the capture's): a new capture sharing
    everything but its node table's group column and its group list (the groups it has
    keep their ids, steps come after them), or ``capture`` itself when it has no such
    run (then ``index`` still describes it; else the caller indexes the new one)."""
    if capture.failure is not None or not index.n_nodes:
        return capture
    folder = _Folder(capture, index)
    if not folder.fold():
        return capture
    table = NodeTable.of(capture.nodes).with_groups(folder.group)
    return dataclasses.replace(capture, nodes=table, groups=folder.groups)


class _Folder:
    def __init__(self, capture: Capture, index: LoopIndex) -> None:
        self.capture, self.index = capture, index
        cols = index.cols
        self.op, self.frame = cols.op, cols.frame
        self.in_off, self.in_ref = cols.in_off, cols.in_ref
        self.n = index.n_nodes
        self.groups: list[Group] = list(capture.groups)
        self.ng = len(capture.groups)  # the capture's own groups; steps come after
        self._group: list[int] | None = None  # the group column, copied on the first step
        self.spans: dict[int, tuple[int, int, int]] = {}  # a step's (first, last, count)
        self.budget = BUDGET_PER_ITEM * (self.n + self.ng) + BUDGET_BASE
        lines: dict[tuple[str, int], int] = {}
        # each frame's (file, line) as a number: two ops of one line are alike
        self.line_of = [lines.setdefault((f.file, f.line), len(lines)) for f in capture.frames]
        self.line_of.append(-1)  # frame -1 (none) reads the last entry
        self._tokens: defaultdict[Any, int] = defaultdict(count().__next__)
        self._run_spans: list[tuple[int, int]] = []  # the spans of the run _accept looked at last
        #: tokens of a container searched without a step made -> (the budget its search spent
        #: besides its checks against the nodes, those checks: (i, k, reps, kept, budget))
        self._searched: dict[tuple[int, ...], tuple[int, list[tuple[int, int, int, int, int]]]] = {}
        self._checks: list[tuple[int, int, int, int, int]] | None = None  # the search's checks, as made
        self._op_tokens: list[int] | None = None  # each op's token, made when children mixed with groups are first tokenized
        self._attr_cols: list[list[Any]] | None = None  # the capture's groups' frame, path, class, function

    @property
    def group(self) -> list[int]:
        if self._group is None:
            self._group = list(self.index.cols.group)
        return self._group

    # ------------------------------------------------------------------ children

    def _candidates(self) -> list[int]:
        """The containers where a run may be: one that runs the same op from one frame
        twice among four direct ops or more, or has two child groups of one name; the
        rest are not searched."""
        cols = self.index.cols
        frame_of, op_of = cols.frame.__getitem__, cols.op.__getitem__
        direct, child_groups = self.index.direct_nodes, self.index.child_groups
        out = []
        # the answer for containers alike by their ops and frames, made once (the 14,285
        # ``linear`` calls of a deep ModuleList: view, t, addmm, view)
        known: dict[tuple[tuple[int, ...], tuple[str, ...], bool], bool] = {}
        for slot in compress(range(len(direct)), map((2 * MIN_STEP_OPS - 1).__lt__, map(len, direct))):
            d = direct[slot]
            key = (tuple(map(frame_of, d)), tuple(map(op_of, d)), not child_groups[slot])
            got = known.get(key)
            if got is None:
                got = known[key] = self._may_run(*key)
            if got:
                out.append(slot - 1)
        calls = Counter(zip(self.index.parent, map(attrgetter("name"), self.groups)))
        out += [p for (p, _), c in calls.items() if c > 1]
        return sorted({g for g in out if -1 <= g < self.ng})

    def _may_run(self, frames: tuple[int, ...], ops: tuple[str, ...], ops_alone: bool) -> bool:
        """Whether a container whose direct nodes ran ``ops`` from ``frames`` is searched:
        it runs one op from one frame twice; and when they are its only children
        (``ops_alone``), two adjacent children are alike twice (the same op from the same
        line: their tokens), else :meth:`_runs` finds no run there without spending any
        budget (no pair of its tokens comes again)."""
        if len(set(zip(frames, ops))) == len(ops):
            return False
        if not ops_alone:
            return True
        tokens = list(zip(ops, map(self.line_of.__getitem__, frames)))  # frame -1: the last entry, -1
        pairs = list(zip(tokens, islice(tokens, 1, None)))
        return len(set(pairs)) < len(pairs)

    def _children(self, c: int) -> list[int]:
        """Container ``c``'s children that ran ops, in program order: a node id, or
        ``~g`` for a child group."""
        if not self.index.child_groups[c + 1]:
            return self.index.direct_nodes[c + 1]  # its nodes alone, in program order (read, never changed)
        count = self.index.node_count
        return [r for r in self.index.ordered(c)[1] if r >= 0 or count[~r + 1]]

    def _span(self, ref: int) -> tuple[int, int, int]:
        if ref >= 0:
            return ref, ref, 1
        g = ~ref
        if g >= self.ng:
            return self.spans[g]
        ix = self.index
        return ix.first[g + 1], ix.last[g + 1], ix.node_count[g + 1]

    def _line(self, f: int) -> int:
        return self.line_of[f] if 0 <= f < len(self.line_of) - 1 else -1

    def _tokens_of(self, refs: list[int]) -> list[int]:
        """Each child's token: equal for the same op from the same line, or for group
        calls alike (see :meth:`_token`). Ops alone are numbered by C-level passes."""
        if refs and min(refs) >= 0:
            lines = map(self.line_of.__getitem__, map(self.frame.__getitem__, refs))  # frame -1: the last entry, -1
            return list(map(self._tokens.__getitem__, zip(map(self.op.__getitem__, refs), lines)))
        if self._op_tokens is None:  # every op's token, by C-level passes (children mixed: an attention's)
            lines = map(self.line_of.__getitem__, map(self.frame.__getitem__, range(self.n)))
            self._op_tokens = list(map(self._tokens.__getitem__, zip(self.op, lines)))
        op_tokens = self._op_tokens
        return [op_tokens[r] if r >= 0 else self._token(r) for r in refs]

    def _token(self, ref: int) -> int:
        if ref >= 0:
            key: tuple[Any, ...] = (self.op[ref], self._line(self.frame[ref]))
        else:
            g = ~ref
            grp = self.groups[g]
            f, path, cls, function = self._attrs_of(g, grp)
            first, _, count = self._span(ref)
            line = self._line(f) if type(f) is int else self._line(self.frame[first])
            key = ("g", grp.kind, grp.name, path, cls, function, line, count)
        return self._tokens[key]

    def _attrs_of(self, g: int, grp: Group) -> tuple[Any, Any, Any, Any]:
        """Group ``g``'s frame, path, class and function (``None`` where absent). The
        capture's groups' are read by column on the first call (a file's groups build no
        attrs map for it; a group replaced here keeps its attrs); a step's from its map."""
        if g >= self.ng:
            attrs = grp.attrs if isinstance(grp.attrs, dict) else {}
            return attrs.get("frame"), attrs.get("path"), attrs.get("class"), attrs.get("function")
        if self._attr_cols is None:
            groups = self.capture.groups
            self._attr_cols = [attr_values(groups, key) for key in ("frame", "path", "class", "function")]
        frames, paths, classes, functions = self._attr_cols
        return frames[g], paths[g], classes[g], functions[g]

    def _framed(self, ref: int) -> bool:
        return self._line(self.frame[self._span(ref)[0]]) >= 0

    # ------------------------------------------------------------------ runs

    def fold(self) -> bool:
        """Fold every container that may hold a run, the steps made on the way
        included; whether any step was made."""
        work = [(g, self._children(g)) for g in self._candidates()]
        while work and self.budget > 0:
            c, refs = work.pop()
            for step, items in self._fold_container(c, refs):
                work.append((step, items))
        return len(self.groups) > self.ng

    def _fold_container(self, c: int, refs: list[int]) -> list[tuple[int, list[int]]]:
        if len(refs) < 2 * MIN_STEP_OPS:
            return []  # two steps of two children at least
        tokens = self._tokens_of(refs)
        # Containers alike (the 14,285 ``linear`` calls of a deep ModuleList; a 96-layer
        # Llama's 1,344 attention calls, each with q and k rotated alike) are searched once:
        # the search reads the tokens alone but where it checks a run against the nodes
        # (_accept), so a container whose tokens came before, without a step made, is
        # searched again by checking the same runs against its own nodes: when each
        # check answers as it did then, it finds no step again, at the same budget
        key = tuple(tokens)
        seen = self._searched.get(key)
        if seen is not None:
            budget = self.budget
            spent, before = seen
            if all(self._accept(refs, *check[:3]) == check[3] for check in before) and self.budget - spent > 0:
                self.budget -= spent  # every check of the budget passes, as it did then
                return []
            self.budget = budget  # searched in full, as if not seen
        checks: list[tuple[int, int, int, int, int]] = []
        budget, self._checks = self.budget, checks
        made = self._runs(c, refs, tokens)
        self._checks = None
        if not made and self.budget > 0:
            # the budget the search spent besides its checks against the nodes
            self._searched[key] = (budget - self.budget - sum(check[4] for check in checks), checks)
        return made

    def _runs(self, c: int, refs: list[int], tokens: list[int]) -> list[tuple[int, list[int]]]:
        """The steps made of the runs among container ``c``'s children (``tokens``: theirs)."""
        n = len(refs)
        # A run of steps of two children or more (one child is never a step: one op, or
        # one group again, a stack already) repeats each pair of children a period on: the
        # candidate periods at i are the distances to the next occurrences of its pair.
        width = len(self._tokens) + 1
        pairs = list(map(add, map(mul, tokens, repeat(width)), tokens[1:]))
        twice = {pair for pair, k in Counter(pairs).items() if k > 1}
        if not twice:
            return []
        far = n + MAX_PERIOD + 1  # "never again"
        nxt: dict[int, int] = {}  # a position whose pair comes again -> where it does next
        seen: dict[int, int] = {}
        for j in reversed(list(compress(range(n - 1), map(twice.__contains__, pairs)))):
            pair = pairs[j]
            nxt[j] = seen.get(pair, far)
            seen[pair] = j
        starts = sorted(j for j, k in nxt.items() if k - j <= MAX_PERIOD)
        made: list[tuple[int, list[int]]] = []
        mismatch: dict[int, int] = {}  # period k -> a position p where tokens[p] != tokens[p + k], found before
        i = 0
        for start in starts:
            if start < i or self.budget <= 0:
                continue
            i = start
            j = nxt[i]
            if i <= mismatch.get(j - i, -1) < j and nxt.get(j, far) - i > MAX_PERIOD:
                continue  # its one candidate period breaks within a period (known): no run here
            best = self._best_period(tokens, nxt, i, mismatch)
            if best is None:
                continue
            k, reps = best
            before = self.budget
            kept = self._accept(refs, i, k, reps)
            if self._checks is not None:
                self._checks.append((i, k, reps, kept, before - self.budget))
            if kept >= 2:
                made += self._wrap(c, refs, i, k, kept)
            i += k * (kept if kept >= 2 else reps)  # a run that is no loop is passed whole
        return made

    def _best_period(self, tokens: list[int], nxt: dict[int, int], i: int, mismatch: dict[int, int]) -> tuple[int, int] | None:
        """(period, repetitions) of the run starting at ``i`` that covers the most
        children (a tie: the shorter period), among the candidate periods. ``mismatch``
        keeps, per period, the first position at or after an earlier ``i`` where the
        children differ from those a period on: the positions after ``i`` up to it are
        not compared again (each period's comparisons are linear in the children)."""
        n = len(tokens)
        best: tuple[int, int] | None = None
        j, tries = nxt[i], 0
        while j - i <= MAX_PERIOD and tries < MAX_CANDIDATES and self.budget > 0:
            k = j - i
            if k == 1:  # one child a step: never a step (one op, or one group again: a stack already)
                j, tries = nxt.get(j, n + MAX_PERIOD + 1), tries + 1
                continue
            p = mismatch.get(k, -1)
            if p < i:
                p = i
                while p + k < n and tokens[p] == tokens[p + k]:
                    p += 1
                mismatch[k] = p
                self.budget -= p - i + 1
            m = p - i
            self.budget -= 1
            reps = 1 + m // k
            if reps >= 2 and (best is None or k * reps > best[0] * best[1]):
                best = (k, reps)
                if i + k * reps >= n:
                    break  # nothing covers more
            j, tries = nxt.get(j, n + MAX_PERIOD + 1), tries + 1
        return best

    def _accept(self, refs: list[int], i: int, k: int, reps: int) -> int:
        """How many of the ``reps`` repetitions from ``i`` are iterations (0 or 1: none):
        the leading ones that are contiguous, carry a value on, and run no data-dependent op."""
        if k == 1 and refs[i] < 0:
            return 0  # one group again and again: a stack of calls or layers already
        if not any(self._framed(r) for r in refs[i:i + k]):
            return 0
        spans = self._run_spans = []
        for r in range(reps):
            lo, hi, size = self._reps_span(refs[i + r * k:i + (r + 1) * k])
            if hi - lo + 1 != size or size < MIN_STEP_OPS or self._data_dependent(lo, hi):
                break
            if spans and not self._carries(spans[-1], (lo, hi)):
                break
            spans.append((lo, hi))
        return len(spans)

    def _reps_span(self, items: list[int]) -> tuple[int, int, int]:
        """(first node, last node, nodes) of a repetition's children, in program order."""
        lo, hi, size = self._span(items[0])
        for ref in items[1:]:
            _, b, s = self._span(ref)
            size += s
            if b > hi:
                hi = b
        return lo, hi, size

    def _data_dependent(self, lo: int, hi: int) -> bool:
        self.budget -= hi - lo + 1
        return not DATA_DEPENDENT_OPS.isdisjoint(self.op[lo:hi + 1])

    def _carries(self, prev: tuple[int, int], this: tuple[int, int]) -> bool:
        """Whether a node in ``this`` span reads a value a node in ``prev`` made."""
        a, b = prev
        producer, in_off, in_ref = self.index.producer, self.in_off, self.in_ref
        refs = in_ref[in_off[this[0]]:in_off[this[1] + 1]]
        self.budget -= len(refs)
        return any(v >= 0 and a <= producer[v] <= b for v in refs)

    # ------------------------------------------------------------------ steps

    def _wrap(self, c: int, refs: list[int], i: int, k: int, count: int) -> list[tuple[int, list[int]]]:
        """Wraps the ``count`` iterations of ``k`` children from ``i`` into steps."""
        spans = self._run_spans[:count]  # what _accept found
        loop = self._loop_words(refs[i:i + k], spans)
        made = []
        for r in range(count):
            items = refs[i + r * k:i + (r + 1) * k]
            lo, hi = spans[r]
            step = len(self.groups)
            attrs: dict[str, Any] = {"loop": {**loop, "step": r, "carried": self._carried(spans[r - 1], spans[r]) if r else []}}
            f = self._first_frame(lo, hi)
            if f is not None:
                attrs["frame"] = f
            self.groups.append(Group(step, STEP_KIND, f"step {r}", None if c < 0 else c, attrs))
            for ref in items:
                if ref >= 0:
                    self.group[ref] = step
                else:
                    self.groups[~ref] = dataclasses.replace(self.groups[~ref], parent=step)
            self.spans[step] = (lo, hi, hi - lo + 1)
            made.append((step, items))
        return made

    def _first_frame(self, lo: int, hi: int) -> int | None:
        for j in range(lo, hi + 1):
            if self._line(self.frame[j]) >= 0:
                got: int = self.frame[j]
                return got
        return None

    def _loop_words(self, first: list[int], spans: list[tuple[int, int]]) -> dict[str, Any]:
        """What every step of the run says: how many steps, the lines of the first one
        (``file``, ``lines``: its first and last line in that file) and the values from
        outside the run each step reads (``shared``)."""
        lo, hi = spans[0]
        frames = self.capture.frames
        keys = [(frames[self.frame[j]].file, frames[self.frame[j]].line) for j in range(lo, hi + 1)
                if self._line(self.frame[j]) >= 0]
        out: dict[str, Any] = {"steps": len(spans)}
        if keys:
            file = keys[0][0]
            lines = [line for f, line in keys if f == file]
            out["file"], out["lines"] = file, [min(lines), max(lines)]
        start, end = spans[0][0], spans[-1][1]
        producer = self.index.producer
        outside = None
        for a, b in spans:
            mine = dict.fromkeys(v for v in self.in_ref[self.in_off[a]:self.in_off[b + 1]]
                                 if v >= 0 and not start <= producer[v] <= end)
            outside = mine if outside is None else {v: None for v in outside if v in mine}
            self.budget -= b - a + 1
        out["shared"] = list(outside or ())[:VALUES_KEPT]
        return out

    def _carried(self, prev: tuple[int, int], this: tuple[int, int]) -> list[int]:
        a, b = prev
        refs = self.in_ref[self.in_off[this[0]]:self.in_off[this[1] + 1]]
        producer = self.index.producer
        return list(dict.fromkeys(v for v in refs if v >= 0 and a <= producer[v] <= b))[:VALUES_KEPT]
