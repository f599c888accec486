"""Where a group sits on a program split across devices, read from the group tree: whether
a group is inside a body (:func:`within`), and what a figure's FLOPs cover
(:func:`cost_scope`: ``per device`` inside a shard_map body, else ``global``), and how many
devices run a per-device figure (:func:`devices_running`). The viewer's cards and the
language server's hover word the same scope."""

from __future__ import annotations

from typing import Any

#: The most parent links followed up a group tree (a hostile file may nest deeper or loop).
MAX_HOPS = 10_000


def within(groups: Any, g: int, body: int) -> bool:
    """Whether group ``g`` is ``body`` or inside it (``g`` -1: the whole model)."""
    x: int | None = g
    hops = 0
    while x is not None and x >= 0 and hops < MAX_HOPS:
        if x == body:
            return True
        x = groups[x].parent
        hops += 1
    return False


def cost_scope(capture: Any, g: int | None) -> str | None:
    """What a card's FLOPs cover on a program split across devices: ``per device`` inside
    a shard_map body (the program one device runs), else ``global``; None without a mesh."""
    if not capture.meshes:
        return None
    groups, hops = capture.groups, 0
    while g is not None and g >= 0 and hops < MAX_HOPS:
        if _shard_map_body(groups[g]):
            return "per device"
        g = groups[g].parent
        hops += 1
    return "global"


def _shard_map_body(group: Any) -> bool:
    attrs = group.attrs
    return group.kind == "body" and isinstance(attrs, dict) and attrs.get("role") == "shard_map body"


def devices_running(capture: Any, g: int | None) -> int | None:
    """How many devices run group ``g``'s per-device figure: the product of the ``devices``
    of the shard_map bodies holding it (a shard_map in a shard_map runs on each device of
    the outer one's), so that its FLOPs times it is its global figure, as its boundary's
    (``capture/jax/cost.py``: a shard_map is its body × its devices). None outside any
    shard_map body, or when a body does not say its device count."""
    groups, hops, found = capture.groups, 0, None
    while g is not None and g >= 0 and hops < MAX_HOPS:
        if _shard_map_body(groups[g]):
            n = groups[g].attrs.get("devices")
            if type(n) is not int or n < 1:
                return None
            found = n if found is None else found * n
        g = groups[g].parent
        hops += 1
    return found
