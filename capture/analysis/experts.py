"""Mixture-of-experts blocks as a person draws them on a whiteboard: a router that picks
the top k of N experts by their scores, and the experts, each a lane (gate, up, down).

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
"""

from __future__ import annotations

from typing import Any, Callable, cast

from .structure import find_repeats
from .types import MoeLayer

#: Ops that pick the top experts, and the score functions before them.
TOPK_OPS = frozenset({"aten::topk"})
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
    got = _topk_operands(capture, i)
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


# --------------------------------------------------------------------------- convention

#: Ops that run the experts' matrices (their FLOPs, over the experts' parameters, say how
#: many expert rows ran per token).
EXPERT_MATMULS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_grouped_mm",
                            "aten::matmul", "aten::linear"})
CONVENTION_NOTE = ("experts: sparse when the experts' matmuls ran about top-k expert rows per token (the active "
                   "experts, counted as executed), dense when they ran all N per token (every expert computed, "
                   "transformers' dense path): rows per token = the experts' matmul FLOPs / (2 x one expert's "
                   "parameters) / tokens")


def moe_layers(capture: Any, index: Any, matmul_flops: Callable[[int], int],
               params_of: Callable[[int], int | None]) -> list[MoeLayer]:
    """Every MoE layer of the capture, one per router (a ``topk`` over the experts'
    scores): the block holding the router module, the experts that ran in it (its
    other child modules, a shared expert apart), and how they ran
    (:func:`convention`): ``{block, router, experts_groups, experts, top_k, tokens,
    rows_per_token, convention, text}``."""
    ops, grp = index.cols.op, index.cols.group
    groups = capture.groups
    out: list[MoeLayer] = []
    # per block, its last topk before its experts run (DeepSeek-V3 picks groups of experts
    # with a first topk, then the experts within them)
    last: dict[int, tuple[int, int, list[int]]] = {}
    for i, op in enumerate(ops):
        if op not in TOPK_OPS or grp[i] < 0:
            continue
        found = _block_of(index, groups, grp[i], i)
        if found is not None and _topk(capture, i) is not None:
            last[found[0]] = (i, found[1], found[2])
    for block, (i, router, experts) in last.items():
        got = _topk(capture, i)
        assert got is not None
        k, n, tokens = got
        flops = sum(matmul_flops(c) for c in experts)
        counts = [params_of(c) for c in experts]
        # an expert of unknown size (a symbolic dimension) leaves how they ran unknown, never a guess
        params = 0 if any(x is None for x in counts) else sum(x or 0 for x in counts)
        entry: dict[str, Any] = {"block": block, "path": _path(groups[block]), "router": router,
                                 "experts_groups": experts}
        entry.update(convention(flops, params, n, k, tokens))
        rows = entry.get("rows_per_token")
        entry["flops"] = flops  # the experts' matmuls as counted (what ran)
        # the active top-k's share: all of it when sparse, k of the rows run per token otherwise
        entry["active_flops"] = int(flops * min(1.0, k / rows)) if rows else flops
        out.append(cast(MoeLayer, entry))
    return out


def convention(flops: int, params: int, experts: int, k: int, tokens: int) -> dict[str, Any]:
    """How ``experts`` experts with ``params`` parameters in all ran, their matmuls doing
    ``flops`` for ``tokens`` tokens routed top-``k``: each token row through one expert
    costs 2 FLOPs per parameter of one expert, so rows per token = flops / (2 · params /
    experts) / tokens: about ``k`` is sparse (the active experts, as executed), about
    ``experts`` dense (every expert computed on every token)."""
    out: dict[str, Any] = {"experts": experts, "top_k": k, "tokens": tokens}
    if params <= 0 or tokens <= 0:
        out.update(convention="unknown", text=f"top-{k} of {experts} experts chosen; how they ran is unknown")
        return out
    rows = flops / (2 * params / experts) / tokens
    out["rows_per_token"] = round(rows, 3)
    if rows >= 0.9 * experts and experts > k:
        out.update(convention="dense",
                   text=f"dense: all {experts} experts computed on every token (top-{k} chosen), counted as run")
    elif rows <= 1.1 * k:
        out.update(convention="sparse", text=f"sparse: the active top-{k} of {experts} experts per token, "
                                             "counted as executed")
    else:
        out.update(convention="partial", text=f"about {rows:.3g} of {experts} experts computed per token "
                                              f"(top-{k} chosen)")
    return out


def _block_of(index: Any, groups: Any, g: int, i: int) -> tuple[int, int, list[int]] | None:
    """For the ``topk`` node ``i`` (in group ``g``): the MoE block, the router (its child
    holding the topk, -1 when the topk is the block's own op) and the experts: the nearest
    module up the tree with child modules that start after the topk (its router's own
    projection runs before it), a shared expert apart."""
    x: int | None = g
    below = -1
    while x is not None:
        if groups[x].kind == "module":
            experts = [c for c in index.child_groups[x + 1] if c != below and groups[c].kind == "module"
                       and index.first[c + 1] > i and "shared" not in _path(groups[c]).rsplit(".", 1)[-1]]
            if experts:
                return x, below, experts
            below = x
        x = groups[x].parent
    return None


def _path(grp: Any) -> str:
    attrs = grp.attrs if isinstance(grp.attrs, dict) else {}
    return str(attrs.get("path") or grp.name)


def _topk_operands(capture: Any, i: int) -> tuple[int, Any] | None:
    """``(k, the scores' shape)`` of the ``topk`` node ``i``: its literal ``k`` and its
    input's shape, or None when either is not recorded."""
    node = capture.nodes[i]
    k = next((o.literal for o in node.inputs if o.value is None and o.position == 1), None)
    src = next((o.value for o in node.inputs if o.value is not None and o.position == 0), None)
    if type(k) is not int or src is None:
        return None
    return k, capture.values[src].shape


def _topk(capture: Any, i: int) -> tuple[int, int, int] | None:
    """``(k, choices, tokens)`` of the ``topk`` node ``i``."""
    got = _topk_operands(capture, i)
    if got is None:
        return None
    k, shape = got
    if not shape or not all(type(d) is int for d in shape):
        return None
    tokens = 1
    for d in shape[:-1]:
        tokens *= d
    return k, shape[-1], tokens
