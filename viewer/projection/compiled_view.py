"""What the pages say of a program split across devices beyond its shapes: the compiled
program's collectives on their nodes and groups (``capture.graph.compiled``). The scope of
a card's FLOPs (:func:`~capture.analysis.scope.cost_scope`) is the analysis's: the hover says it too."""

from __future__ import annotations

from typing import Any

from capture.analysis.scope import MAX_HOPS as _MAX_HOPS
from capture.analysis.scope import cost_scope  # noqa: F401 (the pages' name)
from capture.graph.compiled import by_node, kind_counts



def compiled_by_node_and_group(capture: Any) -> tuple[dict[int, list[Any]], dict[int, list[Any]]]:
    """The compiled program's collectives per node, and per group (each once, with every
    group that holds one of its nodes)."""
    per_node = by_node(getattr(capture, "compiled", None))
    per_group: dict[int, list[Any]] = {}
    groups, nodes = capture.groups, capture.nodes
    seen: dict[int, set[int]] = {}
    for i, items in per_node.items():
        g = nodes[i].group
        hops = 0
        while g is not None and hops < _MAX_HOPS:
            mark = seen.setdefault(g, set())
            for c in items:
                if id(c) not in mark:
                    mark.add(id(c))
                    per_group.setdefault(g, []).append(c)
            g = groups[g].parent
            hops += 1
    return per_node, per_group


def compiled_brief(c: dict[str, Any], written: Any) -> dict[str, Any]:
    """One compiled collective on its node's card: what it is, over which axes, what each
    device sends, and whether it is the program's own collective (``written``: the node's
    ``params["collective"]``) or one the compiler added."""
    out = {k: c.get(k) for k in ("kind", "axes", "devices", "bytes_sent_per_device", "operand_bytes", "how")}
    out["added"] = not isinstance(written, dict)
    if c.get("nodes"):
        out["combined"] = len(c["nodes"])  # XLA's combiner merged several equations' collectives into one
    return out


def group_compiled(inside: list[Any] | None) -> dict[str, Any]:
    """A group item's ``compiled`` (the compiler's collectives of the equations inside it),
    or nothing."""
    if not inside:
        return {}
    return {"compiled": {"count": len(inside), "kinds": kind_counts(inside),
                         "bytes_sent_per_device": sum(x.get("bytes_sent_per_device") or 0 for x in inside)}}
