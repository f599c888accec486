"""The compiled program that arrives after the graph (the graph first).

XLA compiling a large sharded program for its devices can take longer than tracing and
converting it (a 70B-width model on 64 simulated devices: about a minute of compile after
some twenty seconds of capture). The worker does not hold the graph back for it: when the
compile has not finished once the graph is converted, the graph is sent with
``Capture.compiled`` a *pending* record (:func:`pending_record`: ``status`` ``"pending"``,
the devices it compiles for), then the worker waits for the compile (within
``Limits.compile_seconds``), reads and attributes it, and sends the record
(``capture.worker.protocol.CompiledMessage``). The parent writes the graph file at once
and, when the record arrives, merges it with :func:`complete` and writes the file again
(atomically, like every graph file). A compile that fails or runs out of time arrives as
a record saying so (``failed`` / ``timeout``); one that never arrives (the worker ended,
the capture's deadline, a cancel) is made one by :func:`missing`: the graph is never lost.

Readers show a pending record as "compiling for N devices…" (the viewer's legend and
banner, ``summary``, ``inspect``, the CLI's first line).

Standard library only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from .compiled import CompiledError, check_compiled
from ..units import COUNT_LIMIT
from .model import Capture

PENDING: Final = "pending"
#: Meta keys a compiled message may update with its record (figures the worker derives
#: from the compiled program; anything else in its ``meta`` is refused).
META_KEYS: Final = frozenset(("per_device_memory",))


def pending(capture: Capture) -> bool:
    """Whether ``capture``'s compiled program is still to come."""
    c = capture.compiled
    return isinstance(c, dict) and c.get("status") == PENDING


def pending_record(devices: int, seconds: float, limit: float, note: str = "") -> dict[str, Any]:
    """``Capture.compiled`` while XLA compiles: for how many devices, for how long so far
    (``seconds``), and the most it may take (``limit``, ``Limits.compile_seconds``)."""
    out: dict[str, Any] = {
        "status": PENDING, "devices": int(devices), "seconds": round(float(seconds), 3),
        "limit_seconds": float(limit), "scope": "per device",
        "reason": f"XLA is compiling the program for {devices} device{'' if devices == 1 else 's'}; its collectives, "
                  "FLOPs and memory follow the graph",
    }
    if note:
        out["note"] = note
    return out


def complete(capture: Capture, record: Any, meta: Any = None) -> Capture:
    """``capture`` with the compiled ``record`` a worker sent after it (checked here, like a
    graph file's), and the ``meta`` keys that came with it (:data:`META_KEYS`): a new
    capture (the one shown meanwhile is left as it is). Raises ValueError naming what is
    wrong."""
    per_device = record.pop("per_device", None) if isinstance(record, dict) else None
    try:
        checked = check_compiled(record, len(capture.nodes))
    except CompiledError as exc:
        raise ValueError(f"the compiled program sent after the graph is invalid: {exc}") from None
    if checked is None or checked.get("status") == PENDING:
        raise ValueError("the compiled program sent after the graph is still pending")
    new_meta = capture.meta
    if meta:
        if not isinstance(meta, dict) or not set(meta) <= META_KEYS:
            raise ValueError(f"the compiled message's meta may hold only {', '.join(sorted(META_KEYS))}")
        new_meta = {**capture.meta, **meta}
    out = replace(capture, compiled=checked, meta=new_meta)
    return _per_device(out, per_device) if per_device is not None else out


def _per_device(capture: Capture, figures: Any) -> Capture:
    """``capture`` with the per-device figures the compiled program informed
    (``capture.jax.per_device.later``): the FLOPs column and the splits XLA gave values."""
    if not isinstance(figures, dict):
        raise ValueError("the compiled program's per-device figures: expected a map")
    column, splits = figures.get("flops_per_device"), figures.get("shardings") or []
    n, m = len(capture.nodes), len(capture.values)
    if capture.cost is None or not isinstance(column, list) or len(column) != n or \
            not all(type(x) is int and -1 <= x <= COUNT_LIMIT for x in column):
        raise ValueError(f"the compiled program's per-device FLOPs: expected {n} counts")
    values = list(capture.values)
    for item in splits if isinstance(splits, list) else []:
        if not (isinstance(item, list) and len(item) == 2 and type(item[0]) is int and 0 <= item[0] < m
                and isinstance(item[1], dict) and isinstance(item[1].get("per_device_shape"), list)):
            raise ValueError("the compiled program's per-device splits: expected [value id, sharding] pairs")
        values[item[0]] = replace(values[item[0]], sharding=item[1])
    notes = {**(capture.cost.notes or {}), "flops_per_device": str(figures.get("note") or "")}
    return replace(capture, values=values, cost=replace(capture.cost, flops_per_device=column, notes=notes))


def missing(capture: Capture, why: str, status: str = "failed") -> Capture:
    """``capture`` saying that the compiled program it waited for will not come (``why``):
    its record becomes a ``failed`` (or ``timeout``) one, the graph stands."""
    if not pending(capture):
        return capture
    c = dict(capture.compiled or {})
    record: dict[str, Any] = {k: c[k] for k in ("devices", "seconds", "scope", "note") if k in c}
    record.update(status=status, reason=f"the compiled program did not arrive: {why}")
    return replace(capture, compiled=record)
