"""Where a group sits on a program split across devices, read from the group tree: whether
a group is inside a body (:func:`within`), and what a figure's FLOPs cover
(:func:`cost_scope`: ``per device`` inside a shard_map body whose mesh axes are all
manual, ``per shard`` inside a partial-manual one, else ``global``), and how many
shards run such a figure (:func:`devices_running`). The viewer's cards and the language
server's hover word the same scope."""

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


#: The scopes of :func:`cost_scope`.
GLOBAL, PER_DEVICE, PER_SHARD = "global", "per device", "per shard"


def cost_scope(capture: Any, g: int | None) -> str | None:
    """What a card's FLOPs cover on a program split across devices: inside a shard_map
    body, ``per device`` (the program one device runs: every mesh axis is manual there,
    its own or an enclosing shard_map's) or ``per shard`` (a partial-manual body: the
    program one shard of its manual axes runs, its shapes still global over the axes left
    automatic, ``attrs.auto_axes``, whose devices the compiler splits or replicates it
    over); else ``global``; None without a mesh. The innermost body decides: it knows the
    axes still automatic inside it."""
    if not capture.meshes:
        return None
    groups, hops = capture.groups, 0
    while g is not None and g >= 0 and hops < MAX_HOPS:
        if _shard_map_body(groups[g]):
            return PER_SHARD if shard_devices(groups[g].attrs) > 1 else PER_DEVICE
        g = groups[g].parent
        hops += 1
    return GLOBAL


def shard_devices(attrs: Any) -> int:
    """The devices one shard of a shard_map body spans (1: one device's program; a file
    written before partial-manual bodies were told apart says nothing, read as 1)."""
    n = attrs.get("shard_devices") if isinstance(attrs, dict) else None
    return n if type(n) is int and n > 1 else 1


def _shard_map_body(group: Any) -> bool:
    attrs = group.attrs
    return group.kind == "body" and isinstance(attrs, dict) and attrs.get("role") == "shard_map body"


def devices_running(capture: Any, g: int | None) -> int | None:
    """How many times group ``g``'s per-device or per-shard figure runs: the product of the
    ``devices`` of the shard_map bodies holding it, each the product of the sizes of the
    axes it makes manual (a shard_map over ``j`` inside one over ``i`` runs once per ``j``
    shard of each ``i`` shard: on every device of an ``i×j`` mesh; one over ``i`` alone
    runs once per ``i`` shard, not per device), so that its FLOPs times it is its global
    figure, as its boundary's (``capture/jax/cost.py``: a shard_map is its body × its
    devices). None outside any shard_map body, or when a body does not say its count."""
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
