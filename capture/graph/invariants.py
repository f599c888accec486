"""What every capture must satisfy, checked on each one before it is written.

**Every value an op reads comes from somewhere the graph shows**: it is produced by a
node, or it is one of the graph's origins: a capture input (a leaf of
``capture.inputs``), a parameter, buffer, variable or constant (Torch's ``measured``
labels ``input`` / ``param`` / ``buffer`` / ``external``, JAX's ``meta["constants"]``),
or a body parameter of an unexecuted control-flow body (``attrs.parameters``). A value
that is none of these would be drawn as an unnamed input from outside the model (a
tensor filled in place through views whose writes the trace lost, issue 38 item 3), so
the capture says so instead: :func:`check_producers` marks its coverage ``partial`` with
the reason :data:`REASON` and lists the values in ``meta["values_without_producer"]``.

Standard library only (imported by the worker in the user's interpreter).
"""

from __future__ import annotations

from .meta import ValueWithoutProducer
from .model import Capture, tree_leaves

#: The coverage reason of a capture some of whose read values have no producer.
REASON = "values_without_producer"
#: The measured labels that make a Torch value an origin.
ORIGIN_LABELS = ("input", "param", "buffer", "external", "variable", "const")
#: How many of the values are listed (``count`` has them all).
LISTED = 32


def values_without_producer(capture: Capture) -> dict[int, int]:
    """Value -> the first node that reads it, for every value some node reads that is
    neither produced by a node nor an origin of the graph (see the module docstring)."""
    n_values = len(capture.values)
    produced = bytearray(n_values)
    for node in capture.nodes:
        for o in node.outputs:
            if 0 <= o < n_values:
                produced[o] = 1
    origins = _origins(capture)
    out: dict[int, int] = {}
    for node in capture.nodes:
        for operand in node.inputs:
            v = operand.value
            if v is None or not 0 <= v < n_values or produced[v] or v in origins or v in out:
                continue
            measured = capture.values[v].measured
            if isinstance(measured, dict) and any(k in measured for k in ORIGIN_LABELS):
                continue
            out[v] = node.id
    return out


def _origins(capture: Capture) -> set[int]:
    out: set[int] = set()
    try:
        out.update(tree_leaves(capture.inputs))
    except (TypeError, KeyError, AttributeError):
        pass
    meta = capture.meta if isinstance(capture.meta, dict) else {}
    for c in meta.get("constants") or ():
        if isinstance(c, dict) and type(c.get("value")) is int:
            out.add(c["value"])
    for g in capture.groups:
        params = g.attrs.get("parameters") if isinstance(g.attrs, dict) else None
        if isinstance(params, list):
            out.update(p["value"] for p in params if isinstance(p, dict) and type(p.get("value")) is int)
    return out


def check_producers(capture: Capture) -> None:
    """Mark ``capture`` partial (reason :data:`REASON`) and list, in
    ``meta["values_without_producer"]``, the values it reads that come from nowhere:
    ``count``, ``values`` (the first :data:`LISTED`: value id, the op first reading it,
    its node)."""
    missing = values_without_producer(capture)
    if not missing:
        return
    listed: list[ValueWithoutProducer] = []
    for v, nid in list(missing.items())[:LISTED]:
        listed.append({"value": v, "read_by": nid, "op": capture.nodes[nid].op})
    capture.meta["values_without_producer"] = {"count": len(missing), "values": listed}
    cov = capture.coverage
    if REASON not in cov.reasons:
        cov.reasons.append(REASON)
    cov.status = "partial"
