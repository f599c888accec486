"""Mixture-of-experts blocks on the viewer's pages, as a person draws them on a whiteboard:
a router that picks the top k of N experts by their scores, and the experts, each a lane
(gate, up, down).

* **The router** (:func:`router_words`): a module whose own ops (its function calls'
  included) pick ``aten::topk`` of a softmax or sigmoid of scores says so on its card:
  ``router: top-2 of 8, softmax scores`` (the last dimension of what ``topk`` reads is
  the number of experts).
* **Experts in one batched call** (:func:`experts_words`): a module whose own ops run a
  grouped or batched matmul (``_grouped_mm``, ``bmm``) over a parameter stacked along
  its experts (``gate_up_proj [8, 2·I, H]``) says ``8 experts · grouped matmul``.
* **Experts in a loop** (:func:`lane_folds`, and :func:`experts_words` saying
  ``8 experts · 5 ran, one lane each``): where the experts run one after another
  (``transformers``' eager experts loop, one iteration per expert the routing hit), the
  repeated run of the module's items is cut into lanes, each folded into one card named
  after its expert: ``expert 3`` when the iteration selects slice 3 of a stacked expert
  parameter, else ``expert lane 2`` by order. A lane opens like a stack.

How the experts of each MoE layer ran (sparse top-k or dense) is the shared analysis's
(:mod:`capture.analysis.experts`).
"""

from __future__ import annotations

from typing import Any, Callable

from capture.analysis.experts import TOPK_OPS, topk_operands
from capture.analysis.structure import find_repeats

#: The score functions before the ``topk`` that picks the experts.
SCORE_OPS = {"aten::_softmax": "softmax", "aten::softmax.int": "softmax", "aten::sigmoid": "sigmoid"}
#: Ops that run every expert in one call.
BATCHED_OPS = {"aten::_grouped_mm": "grouped matmul", "aten::bmm": "batched matmul"}
#: Ops that take one expert's slice of a stacked parameter.
SLICE_OPS = frozenset({"aten::select.int"})
#: The shortest loop body cut into lanes, and how many lanes at least.
LANE_MIN_PERIOD = 3


def _own_nodes(index: Any, present: Any, g: int) -> list[int]:
    """Group ``g``'s ops and those of its function calls (not of its module children)."""
    out = list(index.direct_nodes[g + 1])
    for c in index.child_groups[g + 1]:
        if present.is_function_card(c):
            out.extend(_own_nodes(index, present, c))
    return out


def router_words(capture: Any, index: Any, present: Any, g: int) -> str | None:
    """``router: top-k of N, softmax scores`` for a router module, else None."""
    ops = index.cols.op
    nodes = _own_nodes(index, present, g)
    topk = [i for i in nodes if ops[i] in TOPK_OPS]
    if not topk:
        return None
    i = topk[-1]  # DeepSeek-V3 picks groups first, then the experts within them
    got = topk_operands(capture, i)
    if got is None:
        return None
    k, shape = got
    n = shape[-1] if shape else None
    score = None
    for j in nodes:
        if j < i and ops[j] in SCORE_OPS:
            score = SCORE_OPS[ops[j]]
    of = f" of {n}" if type(n) is int else ""
    return f"router: top-{k}{of}" + (f", {score} scores" if score else "")


def experts_words(capture: Any, index: Any, present: Any, g: int, is_weight: Callable[[int], bool]) -> str | None:
    """``8 experts · grouped matmul`` for a module running its experts in one call,
    ``8 experts · 5 ran, one lane each`` for one running them in a loop."""
    ops = index.cols.op
    nodes = _own_nodes(index, present, g)
    for i in nodes:
        how = BATCHED_OPS.get(ops[i])
        if how is None:
            continue
        for v in index.operands_of(i):
            if v < 0:
                continue
            w = present.source(v, False)
            if w >= 0 and not is_weight(w):
                producer = index.producer[w]
                # a transpose of the stacked parameter (grouped_mm reads weight.transpose(-2, -1))
                w = next((u for u in (index.operands_of(producer) if producer >= 0 else ()) if u >= 0), -1)
            if w >= 0 and is_weight(w):
                shape = capture.values[w].shape
                if len(shape) == 3 and type(shape[0]) is int:
                    return f"{shape[0]} experts · {how}"
    return _loop_words(capture, ops, nodes, is_weight)


def _loop_words(capture: Any, ops: Any, nodes: list[int], is_weight: Callable[[int], bool]) -> str | None:
    """``8 experts · 5 ran, one lane each``: the module's own ops select slices of a
    parameter stacked along its experts (``gate_up_proj[3]``), one per expert the
    routing hit."""
    n = None
    hit: set[int] = set()
    for i in nodes:
        got = _expert_slice(capture, ops, i, is_weight)
        if got is None:
            continue
        shape = capture.values[got[0]].shape
        if len(shape) == 3 and type(shape[0]) is int:
            n = shape[0] if n is None else n
            hit.add(got[1])
    return f"{n} experts · {len(hit)} ran, one lane each" if n is not None and hit else None


def lane_folds(capture: Any, index: Any, items: list[dict[str, Any]], is_weight: Callable[[int], bool]) -> list[dict[str, Any]]:
    """The lanes of a routed module's page (``items`` in program order): the longest
    repeating run of items (the loop over the experts), one fold per repetition."""
    if len(items) < 2 * LANE_MIN_PERIOD:
        return []
    tokens = [("n", it["label"]) if it["type"] == "node" else ("g", it.get("function") or it["label"]) for it in items]
    runs = [r for r in find_repeats(tokens, [True] * len(items)) if r[1] >= LANE_MIN_PERIOD]
    if not runs:
        return []
    start, period, count = max(runs, key=lambda r: r[1] * r[2])
    out = []
    for rep in range(count):
        members = items[start + rep * period:start + (rep + 1) * period]
        expert, weights = _expert_of(capture, index, members, is_weight)
        label = f"expert {expert}" if expert is not None else f"expert lane {rep}"
        ops = sum(int(it.get("node_count") or 1) for it in members)
        names = [w.rsplit(".", 1)[-1] for w in weights]
        out.append({
            "key": "s" + members[0]["key"], "fold": "lane", "start": start + rep * period, "period": period,
            "count": 1, "members": [[it["key"] for it in members]], "label": label, "pattern": [], "inner": [],
            "names": names, "ops": ops, "expert": expert,
        })
    return out


def _expert_of(capture: Any, index: Any, members: list[dict[str, Any]], is_weight: Callable[[int], bool]) -> tuple[Any, list[str]]:
    """The expert a lane runs (the slice it selects of a stacked parameter) and the
    parameters it slices, by name."""
    nodes: list[int] = []
    for it in members:
        if it["type"] == "node":
            nodes.append(it["id"])
        else:
            nodes.extend(index.direct_nodes[it["id"] + 1])
    ops = index.cols.op
    expert = None
    names: dict[str, None] = {}
    for i in nodes:
        got = _expert_slice(capture, ops, i, is_weight)
        if got is None:
            continue
        src, at = got
        m = capture.values[src].measured or {}
        name = m.get("param") or m.get("buffer")
        if isinstance(name, str):
            names.setdefault(name, None)
        if expert is None:
            expert = at
        elif expert != at:
            return None, list(names)
    return expert, list(names)


def _expert_slice(capture: Any, ops: Any, i: int, is_weight: Callable[[int], bool]) -> tuple[int, int] | None:
    """``(parameter, expert)`` when op ``i`` takes one expert's slice of a stacked
    parameter (``select(gate_up_proj, 0, 3)``), else None."""
    if ops[i] not in SLICE_OPS:
        return None
    node = capture.nodes[i]
    src = next((o.value for o in node.inputs if o.value is not None and o.position == 0), None)
    lit = {o.position: o.literal for o in node.inputs if o.value is None}
    if src is None or not is_weight(src) or lit.get(1) != 0 or type(lit.get(2)) is not int:
        return None
    return src, lit[2]
