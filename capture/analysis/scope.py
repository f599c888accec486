"""Where a group sits on a program split across devices, read from the group tree: whether
a group is inside a body (:func:`within`), and what a figure's FLOPs cover
(:func:`cost_scope`: ``per device`` inside a shard_map body, else ``global``). The viewer's
cards and the language server's hover word the same scope."""

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
        attrs = groups[g].attrs
        if groups[g].kind == "body" and isinstance(attrs, dict) and attrs.get("role") == "shard_map body":
            return "per device"
        g = groups[g].parent
        hops += 1
    return "global"
