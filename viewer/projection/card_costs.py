"""A card's and a stack's cost fields on a page (:mod:`.views`): a stack's sums and one
block's, and a card's FLOPs' scope on a split program."""

from __future__ import annotations

from capture.analysis.scope import devices_running
from capture.graph.model import Capture

from .answers import BlockCost, CardCost, Item, StackCost
from .compiled_view import cost_scope


def stack_cost(items: list[Item], block: list[Item]) -> StackCost | None:
    """A stack's cost: the whole run's sums and one block's (its first repetition)."""
    if not items or any("cost" not in it for it in items):
        return None

    def total(its: list[Item]) -> BlockCost:
        out: BlockCost = {"flops": sum(it["cost"]["flops"] or 0 for it in its),
                               "bytes": sum(it["cost"]["bytes"] for it in its),
                               "params": sum((it.get("params") or {}).get("count", 0) for it in its)}
        unc = sum(it["cost"].get("uncounted", 0) for it in its)
        if unc:
            out["uncounted"] = unc
        if any(it["cost"].get("estimate") for it in its):
            out["estimate"] = True
        return out

    out: StackCost = {**total(items), "per_block": total(block)}
    scopes = {it["cost"].get("scope") for it in items}
    if len(scopes) == 1 and None not in scopes:  # a split program: global, per device or per rank
        out["scope"] = scopes.pop()
        for key in ("devices", "shards"):
            runs = {it["cost"].get(key) for it in items}
            if len(runs) == 1 and None not in runs:
                out[key] = runs.pop()
    return out


def set_scope(out: CardCost, capture: Capture, g: int | None) -> None:
    """A card's FLOPs' scope on a split program (``global``, ``per device``, ``per shard``);
    per device, also how many devices run it (``devices``), per shard (a partial-manual
    shard_map body) how many shards of its manual axes (``shards``): its FLOPs times it is
    its global figure, its share's numerator."""
    scope = cost_scope(capture, g)
    if not scope:
        return
    out["scope"] = scope
    runs = devices_running(capture, g) if scope in ("per device", "per shard") else None
    if runs is not None:
        out["devices" if scope == "per device" else "shards"] = runs
