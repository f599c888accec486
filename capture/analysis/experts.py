"""Mixture-of-experts layers (:func:`moe_layers`): per router (a ``topk`` over the experts'
scores), the block holding it, the experts that ran in it and how they ran
(:func:`convention`): sparse (the active top-k rows per token, as executed) or dense (every
expert computed on every token). The summary's MoE table and the viewer's experts cards
read it; the cards' words are the viewer's (``viewer/projection/expert_cards.py``).
"""

from __future__ import annotations

from typing import Any, Callable, cast

from .types import MoeLayer

#: Ops that pick the top experts.
TOPK_OPS = frozenset({"aten::topk"})
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


def topk_operands(capture: Any, i: int) -> tuple[int, Any] | None:
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
    got = topk_operands(capture, i)
    if got is None:
        return None
    k, shape = got
    if not shape or not all(type(d) is int for d in shape):
        return None
    tokens = 1
    for d in shape[:-1]:
        tokens *= d
    return k, shape[-1], tokens
