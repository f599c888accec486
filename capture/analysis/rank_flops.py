"""A split Torch program's FLOPs per rank, per op and per group (cards, hovers, summary).

A Torch capture split over a device mesh (DTensor, FSDP2) records each op's FLOPs at the
shapes it was called with: a DTensor op at its *global* shapes (every rank's share
together), a plain-tensor op (a local tensor's, FSDP's gathered parameters') at one rank's.
The worker also counts each DTensor op at the shapes one rank computes on
(``capture.cost.notes["per_rank"]``, :meth:`capture.torch.cost.TorchCosts.per_rank`).
So one figure has one scope everywhere:

* an op reading or making a DTensor: its FLOPs ``global``, with its ``per_rank`` figure;
* any other op: ``per rank`` (its recorded figure is one rank's);
* a group: its FLOPs ``per rank`` (the sum of its ops' per-rank figures), never the mixed
  sum of the two scopes.

:func:`rank_flops` reads it once per cost table (cached on it).
"""

from __future__ import annotations

from typing import Any

GLOBAL = "global"
PER_RANK = "per rank"
PER_DEVICE = "per device"


class RankFlops:
    """Per node and per group slot (``g + 1``; slot 0: the whole program), the FLOPs one
    rank computes (-1 per node: uncounted), and which nodes are DTensor ops (``split``)."""

    __slots__ = ("node", "split", "slots", "uncounted", "total")

    def __init__(self, capture: Any, index: Any, per_rank: dict[str, Any]) -> None:
        col = capture.cost.flops
        n = len(col)
        self.node = [int(f) for f in col]
        self.split: set[int] = set()
        for i, f in zip(per_rank.get("nodes") or [], per_rank.get("flops") or []):
            if type(i) is int and 0 <= i < n and type(f) is int:
                self.node[i] = f
                self.split.add(i)
        ng = len(capture.groups)
        self.slots = [0] * (ng + 1)
        self.uncounted = [0] * (ng + 1)
        grp = index.cols.group
        for i, f in enumerate(self.node):
            s = grp[i] + 1
            if f >= 0:
                self.slots[s] += f
            else:
                self.uncounted[s] += 1
        for g in sorted(range(ng), key=index.depth.__getitem__, reverse=True):  # children before parents
            if g in index.body_node:
                continue
            p = index.parent[g] + 1
            self.slots[p] += self.slots[g + 1]
            self.uncounted[p] += self.uncounted[g + 1]
        self.total = self.slots[0]

    def node_cost(self, i: int) -> dict[str, Any]:
        """What an op card adds: its scope, and for a DTensor op its per-rank figure."""
        if i in self.split:
            f = self.node[i]
            return {"scope": GLOBAL, "per_rank": f if f >= 0 else None}
        return {"scope": PER_RANK}

    def group_cost(self, g: int) -> dict[str, Any]:
        """What a group card says: its FLOPs per rank (replacing the mixed sum)."""
        s = g + 1
        out: dict[str, Any] = {"flops": self.slots[s], "scope": PER_RANK}
        if self.uncounted[s]:
            out["uncounted"] = self.uncounted[s]
        return out


def rank_flops(costs: Any) -> RankFlops | None:
    """The per-rank FLOPs of ``costs``' capture (a :class:`~capture.analysis.cost.LayerCosts`),
    None when it is not a split Torch program (no ``notes["per_rank"]``)."""
    if costs is None or getattr(costs, "cost", None) is None:
        return None
    cached = getattr(costs, "_rank_flops", False)
    if cached is not False:
        return cached if isinstance(cached, RankFlops) else None
    notes = costs.cost.notes if isinstance(costs.cost.notes, dict) else {}
    per_rank = notes.get("per_rank")
    got = RankFlops(costs.capture, costs.index, per_rank) if isinstance(per_rank, dict) else None
    costs._rank_flops = got
    return got
