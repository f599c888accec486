"""``Capture.compiled``: the captured program as XLA compiled it for the capture's devices
(``capture.jax.compiled`` builds it in the worker), checked when a file is read, and read
by the summary, ``inspect`` and the viewer.

The record (plain data)::

    {"status": "compiled" | "skipped" | "timeout" | "failed" | "pending",
     "reason": str,                 # when not compiled: why (pending: for how many devices)
     "seconds": float,              # the compile's wall time (0 when skipped; pending: so far)
     "lower_seconds": float,        # of it, lowering the traced program to StableHLO
     "limit_seconds": float,        # pending: the most it may take (Limits.compile_seconds)
     "scope": "per device",         # every figure below is one device's
     "devices": int,                # the partitions XLA compiled for
     "cost": {"flops", "bytes_accessed", "transcendentals"},   # cost_analysis(), per device
     "memory": {"arguments", "outputs", "temporaries", "aliases", "generated_code",
                "peak"},            # memory_analysis(), per device; peak = arguments +
                                    # outputs + temporaries - aliases
     "collectives": [{"kind": "all-reduce", "async": bool, "axes": ["data"], "devices": 4,
                      "groups": "{0,2,4,6},{1,3,5,7}", "operand_bytes": int | None,
                      "bytes_sent_per_device": int | None, "node": int | None,
                      "how": "primitive+line+name stack", "op_name": str, "hlo": str,
                      "source": "file:line"}, …],
     "attributed": int, "unattributed": int,
     "note": str}

``node`` is the node (an index into ``Capture.nodes``) of the equation XLA made the
collective for, ``None`` when it maps onto none (counted in ``unattributed``).

``pending``: the graph was sent before XLA finished; the record follows it
(:mod:`capture.graph.later_compiled`), and readers say "compiling for N devices…".

Standard library only.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..units import flops_text

STATUSES = ("compiled", "skipped", "timeout", "failed", "pending")
MAX_COLLECTIVES = 20_000


class CompiledError(ValueError):
    pass


def check_compiled(obj: Any, n_nodes: int) -> dict[str, Any] | None:
    """``obj`` as a ``Capture.compiled`` record, or ``CompiledError`` naming what is wrong."""
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise CompiledError("compiled: expected a map")
    if obj.get("status") not in STATUSES:
        raise CompiledError(f"compiled.status: one of {', '.join(STATUSES)}")
    for key in ("cost", "memory"):
        part = obj.get(key)
        if part is not None and (not isinstance(part, dict) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in part.values())):
            raise CompiledError(f"compiled.{key}: a map of numbers")
    items = obj.get("collectives", [])
    if not isinstance(items, list) or len(items) > MAX_COLLECTIVES:
        raise CompiledError(f"compiled.collectives: a list of at most {MAX_COLLECTIVES:,}")
    for i, c in enumerate(items):
        if not isinstance(c, dict) or not isinstance(c.get("kind"), str):
            raise CompiledError(f"compiled.collectives[{i}]: a map with a kind")
        node = c.get("node")
        if node is not None and (type(node) is not int or not 0 <= node < n_nodes):
            raise CompiledError(f"compiled.collectives[{i}].node: a node id below {n_nodes}")
        more = c.get("nodes", [])
        if not isinstance(more, list) or not all(type(k) is int and 0 <= k < n_nodes for k in more):
            raise CompiledError(f"compiled.collectives[{i}].nodes: node ids below {n_nodes}")
        axes = c.get("axes", [])
        if not isinstance(axes, list) or not all(isinstance(a, str) for a in axes):
            raise CompiledError(f"compiled.collectives[{i}].axes: a list of axis names")
    return obj


def by_node(compiled: dict[str, Any] | None) -> dict[int, list[dict[str, Any]]]:
    """The attributed compiled collectives per node id."""
    out: dict[int, list[dict[str, Any]]] = {}
    for c in (compiled or {}).get("collectives") or []:
        if not isinstance(c, dict):
            continue
        ids = c.get("nodes") or ([c["node"]] if type(c.get("node")) is int else [])
        for i in ids:
            if type(i) is int:
                out.setdefault(i, []).append(c)
    return out


def kind_counts(items: list[dict[str, Any]]) -> str:
    """``all-reduce(model)×4, all-gather(data)×2``: compiled collectives by kind and axes."""
    counts: Counter = Counter(f"{c.get('kind')}({','.join(c.get('axes') or []) or '-'})" for c in items)
    return ", ".join(f"{k}×{v}" for k, v in counts.most_common(8)) + ("…" if len(counts) > 8 else "")


def sent_bytes(items: list[dict[str, Any]]) -> int:
    return sum(c.get("bytes_sent_per_device") or 0 for c in items)


def summary_lines(compiled: dict[str, Any] | None, size_text: Any) -> list[str]:
    """The compiled program in a few lines of text (``inspect``, ``summary``): its
    collectives, what maps onto no node, XLA's per-device FLOPs and memory, the compile time."""
    if not compiled:
        return []
    status = compiled.get("status")
    if status == "pending":
        n = compiled.get("devices", 1)
        return [f"compiled:    compiling for {n} device{'' if n == 1 else 's'}… (XLA's collectives, FLOPs and memory "
                "follow the graph; this file is written again when they arrive)"]
    if status != "compiled":
        return [f"compiled:    not compiled ({status}): {compiled.get('reason', '')}"]
    items = compiled.get("collectives") or []
    n = compiled.get("devices", 1)
    lines = [f"compiled:    by XLA for {n} device{'' if n == 1 else 's'} in {compiled.get('seconds', 0):.2f} s "
             "(figures per device)"]
    if items:
        lines.append(f"compiler collectives: {len(items)} ({kind_counts(items)}); "
                     f"{size_text(sent_bytes(items))} sent per device; "
                     f"{compiled.get('attributed', 0)} drawn on their nodes, "
                     f"{compiled.get('unattributed', 0)} unattributed")
    else:
        lines.append("compiler collectives: none (XLA runs no communication for this program)")
    cost = compiled.get("cost") or {}
    if "flops" in cost:
        lines.append(f"XLA FLOPs:   {flops_text(cost['flops'])} per device (cost_analysis)")
    mem = compiled.get("memory") or {}
    if "peak" in mem:
        lines.append(f"XLA memory:  peak {size_text(mem['peak'])} per device (memory_analysis: arguments "
                     f"{size_text(mem.get('arguments', 0))} + outputs {size_text(mem.get('outputs', 0))} + "
                     f"temporaries {size_text(mem.get('temporaries', 0))} - aliases {size_text(mem.get('aliases', 0))})")
    return lines



def words(compiled: dict[str, Any], size_text: Any = None) -> dict[str, Any]:
    """The compiled program for the viewer's legend and banner (``api/capture``'s
    ``compiled``): its status, counts and figures, without the list of collectives (they
    are on their nodes' cards)."""
    out: dict[str, Any] = {k: compiled.get(k) for k in ("status", "reason", "seconds", "devices", "scope",
                                                       "attributed", "unattributed", "cost", "memory",
                                                       "limit_seconds")
                           if compiled.get(k) is not None}
    items = compiled.get("collectives") or []
    out["count"] = len(items)
    out["added"] = sum(1 for c in items if isinstance(c, dict) and c.get("node") is not None)
    if items:
        out["kinds"] = kind_counts(items)
        out["bytes_sent_per_device"] = sent_bytes(items)
        lost = [c for c in items if isinstance(c, dict) and c.get("node") is None]
        if lost:
            out["unattributed_kinds"] = kind_counts(lost)
    return out
