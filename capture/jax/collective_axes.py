"""What a compiled collective spans and moves: the mesh axes its device groups differ along
(:func:`mesh_axes`) and one device's operand from the result's bytes (:func:`operand_bytes`).
Read by :mod:`capture.jax.compiled`."""

from __future__ import annotations

import math


def mesh_axes(groups: list[list[int]] | None, kind: str, axis_names: list[str], axis_sizes: list[int]) -> list[str]:
    """The mesh axes a collective's device groups span: the axes along which the devices of
    one group differ (device ``k`` is the mesh's ``k``-th device in row-major order)."""
    if not groups or not axis_names:
        return []
    n = math.prod(axis_sizes)

    def coords(k: int) -> tuple[int, ...]:
        out = []
        for size in reversed(axis_sizes):
            out.append(k % size)
            k //= size
        return tuple(reversed(out))

    varying: set[int] = set()
    sample = groups[: 64]
    for g in sample:
        ids = [d % n for d in g]
        cs = [coords(d) for d in ids]
        for a in range(len(axis_names)):
            if len({c[a] for c in cs}) > 1:
                varying.add(a)
    return [axis_names[a] for a in sorted(varying)]


def operand_bytes(kind: str, result: int | None, group: int) -> int | None:
    """One device's operand from the result's bytes: an all-gather's operand is its result
    over the group, a reduce-scatter's its result times the group; the others keep the size."""
    if result is None:
        return None
    if kind == "all-gather":
        return result // max(group, 1)
    if kind == "reduce-scatter":
        return result * max(group, 1)
    return result
