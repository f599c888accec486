"""What a reader sees of each child of a container: layers and function calls, not kernels.

The capture keeps every kernel; the pages present them the way a person reads a model
(issue 26), unless a page asks for every kernel (``kernels=1``):

* **Function cards.** A Torch function call that ran two or more kernels is a group of
  kind ``function`` (``linear``, ``layer_norm``, ``scaled_dot_product_attention``,
  ``conv2d``; ``attrs.function`` its qualified name). It is drawn as one op card with its
  parameters inside; opening it shows its kernels. A group of kind ``function`` at the
  top of the tree is not a call but the captured function itself (a plain-function
  capture's own scope): it stays a frame.
* **Bookkeeping elided.** Ops that compute nothing are not on the main path:
  ``aten::alias``, ``aten::lift_fresh`` (and ``lift_fresh_copy``), ``prim::device``, an
  ``empty`` whose outputs hold no element (BatchNorm's ``u8[0]`` reserve), and inside a
  function call a reshape (``view``, ``_unsafe_view``, ``reshape``) that flattens what
  enters the call or restores the shape of what leaves it. Their consumers are wired to
  what the op copied (its first operand); an op with no operand to copy (``empty``,
  ``prim::device``) just loses its edges. Each page counts and lists what it elided.
* **One-op groups.** A group (module or scope) whose content, so presented, is exactly
  one op or one function card is drawn as that op with the group named on it, not as a
  frame with in/out pills (``single``); wrappers nest (``Sequential(Linear)``).
* **Idle groups.** A group that ran no op (an eval-mode ``Dropout``) is not among its
  container's items: its parent's item and its container's page list it as ``idle``.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import chain, compress, filterfalse, repeat
from operator import eq
from typing import Any

FUNCTION_KIND = "function"
#: Ops that copy or describe a tensor without computing anything.
BOOKKEEPING_OPS = frozenset({"aten::alias", "aten::lift_fresh", "aten::lift_fresh_copy", "prim::device"})
#: Ops that may allocate nothing: elided when every output holds no element.
EMPTY_PREFIXES = ("aten::empty", "aten::new_empty")
#: Reshapes a function call does on its way in and out (``linear`` on a 3-D input).
RESHAPE_OPS = frozenset({"aten::view", "aten::_unsafe_view", "aten::reshape"})
#: Ops copied by what they elide into: the first operand is the tensor they pass on.
_PASS_ON = BOOKKEEPING_OPS - {"prim::device"} | RESHAPE_OPS


class Presentation:
    """The presentation rules above, over one capture's index (built in one linear pass;
    each group's presented content is worked out when a page first asks)."""

    def __init__(self, capture: Any, index: Any) -> None:
        self.index = index
        groups = capture.groups
        # the function groups found by a C-level pass over the kinds (a deep model's 57k groups)
        calls = list(compress(range(len(groups)), map(eq, index.kinds, repeat(FUNCTION_KIND))))
        inner = compress(calls, map((-1).__ne__, map(index.parent.__getitem__, calls)))  # not at the top
        self.function_cards = frozenset(filterfalse(index.body_node.__contains__, inner) if index.body_node else inner)
        self.elided = self._bookkeeping(capture)
        self._single: dict[tuple[int, bool], int | None] = {}

    def _bookkeeping(self, capture: Any) -> frozenset[int]:
        cols, ix = self.index.cols, self.index
        values = capture.values
        ops = cols.op
        out: list[int] = []
        # only ops that may be bookkeeping are looked at, found by C-level passes
        # each kind by its own pass (bookkeeping first, then empty-making ops, then reshapes)
        kinds = set(ops)
        book = {op for op in kinds if op in BOOKKEEPING_OPS}
        empty = {op for op in kinds - book if op.startswith(EMPTY_PREFIXES)}
        reshaping = {op for op in kinds - book - empty if op in RESHAPE_OPS}
        if book:
            out += compress(range(len(ops)), map(book.__contains__, ops))
        for i in compress(range(len(ops)), map(empty.__contains__, ops)) if empty else ():
            outs = ix.outputs_of(i)
            if outs and all(_empty(values[v].shape) for v in outs):
                out.append(i)
        reshapes = list(compress(range(len(ops)), map(reshaping.__contains__, ops))) if reshaping else []
        out += self._call_reshapes(reshapes)
        return frozenset(out)

    def _call_reshapes(self, reshapes: list[int]) -> list[int]:
        """The reshapes a function call does on its way in or out (28,570 in a deep
        ModuleList's ``linear`` calls): what one reshapes enters the call from outside, or
        what it makes leaves it. The common case, a first operand that is a value, is read
        by C-level passes over the columns."""
        cols, ix = self.index.cols, self.index
        group, producer, bout = cols.group, ix.producer, ix.bout
        in_off, in_ref, out_off, out_ids = cols.in_off, cols.in_ref, cols.out_off, cols.out_ids
        cards = self.function_cards
        calls = list(compress(reshapes, map(cards.__contains__, map(group.__getitem__, reshapes))))
        n_refs = len(in_ref)
        starts = list(map(in_off.__getitem__, calls))
        firsts = list(map(in_ref.__getitem__, starts)) if not starts or max(starts) < n_refs else \
            [in_ref[k] if k < n_refs else -1 for k in starts]
        out = []
        for i, v in zip(calls, firsts):
            g = group[i]
            if v < 0 or in_off[i] == in_off[i + 1]:  # a literal first (or no operand): the first value, if any
                v = next((u for u in in_ref[in_off[i]:in_off[i + 1]] if u >= 0), -1)
                if v < 0:
                    leaving = bout[g + 1]
                    if leaving and not leaving.keys().isdisjoint(out_ids[out_off[i]:out_off[i + 1]]):
                        out.append(i)
                    continue
            p = producer[v]
            if p < 0 or group[p] != g:
                out.append(i)
                continue
            leaving = bout[g + 1]
            if leaving and not leaving.keys().isdisjoint(out_ids[out_off[i]:out_off[i + 1]]):
                out.append(i)
        return out

    def alike_blocks(self, runs: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        """The runs of ``runs`` (blocks proved to repeat their first exactly:
        ``Structure.clones``) whose elided ops repeat too: then a group of a later block is
        drawn as its counterpart in the first block is (the same function cards, idle groups
        and drawn children a block on: :func:`counterpart`), so that a frame or its one op
        is worked out once per run rather than per block (a deep stack's 14,285)."""
        ix = self.index
        order = sorted(self.elided)
        out: list[tuple[int, int, int]] = []
        for c0, step, end in runs:
            k = (end - c0) // step
            s, m = ix.first[c0 + 1], ix.node_count[c0 + 1]
            n_step = ix.first[c0 + step + 1] - s
            e = s + (k - 1) * n_step + m
            elided = order[bisect_left(order, s):bisect_left(order, e)]
            first = [x for x in elided if x < s + m]
            in_blocks = [x for x in elided if (x - s) % n_step < m]  # (not the container's own ops between blocks)
            if in_blocks != sorted(chain.from_iterable(range(x, e, n_step) for x in first)):
                continue
            if not ix.body_node.keys().isdisjoint(range(c0, end)):
                continue
            out.append((c0, step, end))
        return sorted(out)

    # ------------------------------------------------------------------ questions

    def is_function_card(self, g: int) -> bool:
        return g in self.function_cards

    def is_idle(self, g: int) -> bool:
        """Group ``g`` ran no op (executed program; bodies are opened elsewhere)."""
        return self.index.node_count[g + 1] == 0 and g not in self.index.body_node

    def elided_op(self, ref: int, kernels: bool) -> bool:
        """A child ref that is an elided op, unless every kernel is asked for."""
        return ref >= 0 and not kernels and ref in self.elided

    def drawn(self, ref: int, kernels: bool) -> bool:
        """A child ref among its container's items: neither an elided op nor an idle
        group (that ran no op: there is nothing of it to draw, with kernels or without)."""
        return not (self.elided_op(ref, kernels) or (ref < 0 and self.is_idle(~ref)))

    def passed_on(self, i: int) -> int | None:
        """The value elided op ``i`` passes on (its first operand), or ``None``."""
        if self.index.cols.op[i] not in _PASS_ON:
            return None
        return next((v for v in self.index.operands_of(i) if v >= 0), None)

    def source(self, v: int, kernels: bool) -> int:
        """The value a consumer of ``v`` is drawn reading: ``v`` itself, or through the
        elided ops that made it, what they copied (-1: nothing, an ``empty``'s output)."""
        if kernels:
            return v
        producer, elided = self.index.producer, self.elided
        for _ in range(64):  # a chain of copies; a hostile file may make one long
            p = producer[v]
            if p < 0 or p not in elided:
                return v
            u = self.passed_on(p)
            if u is None:
                return -1
            v = u
        return v

    def single(self, g: int, kernels: bool) -> int | None:
        """The one op (node id, or ``~c`` for function card ``c``) group ``g`` is drawn
        as, or ``None`` when ``g`` is a frame."""
        # Iterative: a chain of groups that each hold one group may be as deep as the file
        # allows (a hostile one: 20,000), and every group on it is drawn as the same op.
        chain: list[int] = []
        got: int | None = None
        while True:
            key = (g, kernels)
            if key in self._single:
                got = self._single[key]
                break
            chain.append(g)
            if g in self.index.body_node or not (kernels or g not in self.function_cards):
                break
            r = self._only(g, kernels)
            if r is None:
                break
            if self._is_op(r, kernels):
                got = r
                break
            g = ~r
        for c in chain:
            self._single[(c, kernels)] = got
        return got

    def wrappers(self, g: int, kernels: bool, most: int | None = None) -> list[int]:
        """For a group drawn as its single op, the groups from ``g`` down to that op
        (``g`` first: ``Sequential`` then its ``Linear``); the first ``most`` of them when
        given (a hostile chain of single-child groups may be 20,000 deep: every card on it
        listing all below it would be quadratic)."""
        out = [g]
        while most is None or len(out) < most:
            (r,) = self._shown(out[-1], kernels, 2)
            if self._is_op(r, kernels):
                return out
            out.append(~r)
        return out

    def _is_op(self, ref: int, kernels: bool) -> bool:
        return ref >= 0 or (not kernels and ~ref in self.function_cards)

    def _only(self, g: int, kernels: bool) -> int | None:
        """The child ref of ``g`` its page draws when it draws one alone, else ``None``
        (none, or two or more): counted in any order, so a group's children are not put
        in program order for it (``single`` is asked of every block of a 14,285-block stack)."""
        ix, drawn = self.index, self.drawn
        found: int | None = None
        for r in ix.direct_nodes[g + 1]:
            if drawn(r, kernels):
                if found is not None:
                    return None
                found = r
        for c in ix.child_groups[g + 1]:
            if drawn(~c, kernels):
                if found is not None:
                    return None
                found = ~c
        return found

    def _shown(self, g: int, kernels: bool, most: int) -> list[int]:
        """The first ``most`` children of ``g`` its page draws."""
        _, refs, _ = self.index.ordered(g)
        out = []
        for r in refs:
            if self.drawn(r, kernels):
                out.append(r)
                if len(out) >= most:
                    break
        return out


#: How many of the runs starting before a group :func:`counterpart` looks at (nested runs:
#: the innermost few; past them the group is its own, which is always right).
COUNTERPART_TRIES = 4


def counterpart(runs: list[tuple[int, int, int]], starts: list[int], g: int) -> int:
    """Group ``g``'s counterpart in the first block of a run of ``runs`` (sorted; ``starts``:
    their first groups) holding it in a later block, else ``g``."""
    i = bisect_right(starts, g) - 1
    for j in range(i, max(i - COUNTERPART_TRIES, -1), -1):
        c0, step, end = runs[j]
        if c0 + step <= g < end:
            return c0 + (g - c0) % step
    return g


def _empty(shape: Any) -> bool:
    return any(type(d) is int and d == 0 for d in shape)
