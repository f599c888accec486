"""Statistics that arrive after the graph (the graph first).

A Torch capture's parameters do not depend on the input: the worker writes the graph
without their statistics, ``meta["stats_pending"]`` counting the values that wait, sends
it, and only then measures them (``capture.worker.protocol.StatisticsMessage``). The
parent writes the graph file at once and, when they arrive, merges them into the capture
with :func:`complete` and writes the file again. Until then a reader shows those values
as being measured (:func:`pending`); a capture whose statistics never came (the worker
ended first, a reduction failed) says why in ``meta["stats_missing"]`` instead.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from .model import Capture, Value

PENDING_KEY: Final = "stats_pending"
MISSING_KEY: Final = "stats_missing"
_STATS_KEYS = frozenset(("min", "max", "mean", "std", "nan", "inf"))


def pending(capture: Capture) -> int:
    """How many values of ``capture`` wait for statistics measured after the graph."""
    n = capture.meta.get(PENDING_KEY)
    return n if type(n) is int and n > 0 else 0


def complete(capture: Capture, rows: Any, skipped: int = 0, error: str | None = None) -> Capture:
    """``capture`` with statistics rows (``[value id, statistics]``, a worker's message:
    checked here) merged into its values, its ``stats_pending`` dropped and a problem the
    worker reported kept in ``meta["stats_missing"]``: a new capture (the one shown
    meanwhile is left as it is; the values it shares are not written to). Raises
    ValueError naming the first bad row."""
    values = list(capture.values)
    n = len(values)
    for i, row in enumerate(rows if isinstance(rows, list) else ()):
        if not (isinstance(row, list) and len(row) == 2 and type(row[0]) is int and 0 <= row[0] < n
                and isinstance(row[1], dict) and set(row[1]) == _STATS_KEYS):
            raise ValueError(f"statistics row {i} is not [value id, statistics] of a value of this graph: {row!r:.200}")
        v = values[row[0]]
        values[row[0]] = Value(v.id, v.shape, v.dtype, {**(v.measured or {}), "stats": row[1]}, v.sharding)
    meta = capture.meta.copy()
    meta.pop(PENDING_KEY, None)
    if skipped:
        meta["stats_skipped_values"] = skipped
    if error:
        meta[MISSING_KEY] = f"the parameters' statistics could not be measured: {error}"
    return replace(capture, values=values, meta=meta)


def missing(capture: Capture, why: str) -> Capture:
    """``capture`` saying that the statistics it waited for will not come (``why``)."""
    if not pending(capture):
        return capture
    meta = capture.meta.copy()
    meta.pop(PENDING_KEY, None)
    meta[MISSING_KEY] = f"the parameters' statistics did not arrive: {why}"
    return replace(capture, meta=meta)
