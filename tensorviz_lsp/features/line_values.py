"""How a captured line's values read in the editor: hint labels, tooltips, hover text.

One wording for the inlay hints (:mod:`.inlay_hints`) and the hover on an assigned name
(:mod:`.hover`). Value text comes from :func:`capture.analysis.names.value_label`, the label
the graph draws on its edges, so an editor hint and a graph edge never disagree.

Torch values carry what the worker measured (``Value.measured``: ``stats`` with
min/max/mean/std and NaN/Inf counts, ``bytes``); JAX values are abstract (traced by
``jax.make_jaxpr``, never computed), so their text says so instead of showing numbers.
A line inside an unexecuted control-flow body (a JAX ``scan``/``while``/``cond``
template) shows one iteration's shapes, as traced.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from capture.frameworks import capabilities
from capture.graph.device_memory import KEY as MEMORY_KEY
from capture.graph.device_memory import figures_text
from capture.graph.sharding import devices_text, mesh_text, nbytes, split_label
from capture.analysis.body_templates import body_summary, template_line
from capture.units import bytes_text, count_text, flops_text
from capture.analysis.lines import group_label
from capture.analysis.names import value_label
from capture.analysis.scope import cost_scope

if TYPE_CHECKING:  # pragma: no cover
    from capture.analysis.lines import LineEntry

    from ..records import Record

#: What an abstract Torch capture (``evidence = "abstract"``) is, in its own words.
ABSTRACT_NOTE = "abstract: shapes only, nothing was computed"
#: Its coverage scope (``capture.graph.model``'s ``ABSTRACT_FORWARD_SCOPE``).
ABSTRACT_SCOPE = "abstract_forward"
#: Values named in a label before "+N".
LABEL_VALUES = 3
#: Values described in a tooltip before "and N more".
TOOLTIP_VALUES = 8
STALE_SUFFIX = " (stale)"


def is_abstract(capture: Any) -> bool:
    """A Torch capture with abstract evidence: built and run without data."""
    return capture.meta.get("evidence") == "abstract" or capture.coverage.scope == ABSTRACT_SCOPE


def runs(entry: "LineEntry") -> list[Any]:
    """The calls of a line that ran an op: a module call on the line that ran none (an
    eval-mode ``Dropout``, an ``Identity``) is no run of its own (``x = self.drop(a + b)``
    ran once, not twice). A line whose calls all ran none keeps them."""
    ran = entry.ran
    counted = [c for c in ran if c.ops > 0]
    return counted or ran


def labels_of(capture: Any, value_ids: list[int]) -> list[str]:
    values = capture.values
    return [value_label(values[v].shape, values[v].dtype) for v in value_ids]


def nonfinite(capture: Any, value_ids: list[int]) -> str | None:
    """``NaN``, ``Inf`` or ``NaN/Inf`` when a measured value holds some, else None. An
    infinity the code writes on purpose is no warning: a value made by an op given a
    literal ``±inf`` (``masked_fill(mask, float("-inf"))``, ``torch.full(..., -inf)``)."""
    nan = inf = False
    values = capture.values
    for v in value_ids:
        m = values[v].measured
        stats = m.get("stats") if isinstance(m, dict) else None
        if isinstance(stats, dict):
            nan = nan or bool(stats.get("nan"))
            inf = inf or (bool(stats.get("inf")) and not _intended_infinity(capture, v))
    return "NaN/Inf" if nan and inf else "NaN" if nan else "Inf" if inf else None


#: id(capture) → {value id: its producing node}; the last few captures asked about.
_PRODUCERS: dict[int, tuple[Any, dict[int, Any]]] = {}


def _intended_infinity(capture: Any, vid: int) -> bool:
    """Whether value ``vid`` was made by an op given a literal ``±inf``."""
    known = _PRODUCERS.get(id(capture))
    if known is None or known[0] is not capture:
        if len(_PRODUCERS) > 8:
            _PRODUCERS.clear()
        producers = {o: node for node in capture.nodes for o in node.outputs}
        known = _PRODUCERS[id(capture)] = (capture, producers)
    node = known[1].get(vid)
    if node is None:
        return False
    for operand in node.inputs:
        lit = operand.literal if operand.value is None else None
        if (isinstance(lit, float) and math.isinf(lit)) or lit in ("inf", "-inf"):
            return True
    return False


def hint_label(labels: list[str], calls: int, stale: bool, bad: str | None = None) -> str:
    """``f32[2,8,8,8]``; ``→ f32[2,8] · f32[2,8]`` for several values, ``+N`` past
    :data:`LABEL_VALUES`; `` ×12`` for a line that ran 12 times (its first call shown);
    `` ⚠ NaN`` when a shown value holds NaN (``bad``, from :func:`nonfinite`);
    :data:`STALE_SUFFIX` when the file or profile changed since the capture."""
    if not labels:
        text = "(no values)"
    elif len(labels) == 1:
        text = labels[0]
    else:
        text = "→ " + " · ".join(labels[:LABEL_VALUES])
        if len(labels) > LABEL_VALUES:
            text += f" +{len(labels) - LABEL_VALUES}"
    if calls > 1:
        text += f" ×{calls}"
    if bad:
        text += f" ⚠ {bad}"
    return text + (STALE_SUFFIX if stale else "")


def when(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts))


def _num(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "-inf" if x < 0 else "inf"
        if x == 0:
            return "0"
        return f"{x:.4g}"
    return str(x)


def measured_text(measured: Any) -> str | None:
    """``4 KiB · min 0 · max 2.31 · mean 0.412 · std 0.518 · NaN 0 · Inf 0``, or None
    when nothing was measured (JAX, or a non-float Torch value without statistics)."""
    if not isinstance(measured, dict):
        return None
    bits = []
    if type(measured.get("bytes")) is int:
        bits.append(bytes_text(measured["bytes"]))
    stats = measured.get("stats")
    if isinstance(stats, dict):
        if stats.get("min") is None and stats.get("max") is None and ("nan" in stats or "inf" in stats):
            bits.append("no finite values")
        else:
            bits += [f"{k} {_num(stats.get(k))}" for k in ("min", "max", "mean", "std")]
        bits += [f"NaN {_num(stats.get('nan', 0))}", f"Inf {_num(stats.get('inf', 0))}"]
    return " · ".join(bits) if bits else None


def value_lines(capture: Any, value_ids: list[int], names: list[str] | None = None,
                dtype: bool = False) -> list[str]:
    """One markdown line per value: its label (and name; the dtype's full name with
    ``dtype``) and what was measured."""
    out = []
    values = capture.values
    for k, v in enumerate(value_ids[:TOOLTIP_VALUES]):
        val = values[v]
        head = f"`{value_label(val.shape, val.dtype)}`"
        if names and k < len(names) and names[k]:
            head = f"`{names[k]}`: " + head
        if dtype:
            head += f" · {str(val.dtype).removeprefix('torch.')}"
        split = split_text(val)
        if split:
            head += f" · {split}"
        m = measured_text(val.measured)
        out.append(f"- {head}" + (f" · {m}" if m else ""))
    if len(value_ids) > TOOLTIP_VALUES:
        out.append(f"- and {len(value_ids) - TOOLTIP_VALUES} more")
    return out


def split_text(val: Any) -> str | None:
    """How a value is split across a mesh: ``split `f32[8@data,16]` · per device `f32[2,16]`
    (128 B)``; for a value whose shape is one device's already (a shard_map body, a
    Torch local tensor): ``one device's shard of `f32[8@data,16]```. None when not split."""
    sh = val.sharding
    if not isinstance(sh, dict):
        return None
    per_device = sh.get("per_device_shape")
    pds = per_device if isinstance(per_device, list) else val.shape
    size = nbytes(pds, val.dtype)
    per = f"`{value_label(pds, val.dtype)}`" + (f" ({bytes_text(size)})" if size is not None else "")
    if sh.get("local"):
        if isinstance(sh.get("global_shape"), list):
            return f"one device's shard of `{split_label(val.shape, val.dtype, sh)}`"
        return "one device's value (inside a shard_map: shapes are per device)"
    return f"split `{split_label(val.shape, val.dtype, sh)}` · per device {per}"


def memory_lines(capture: Any, call: Any) -> list[str]:
    """What one device holds for the module calls a line made (``self.down(h)``):
    ``- `down` per device: params 1 KiB · inputs 128 B · activations 128 B``."""
    out = []
    for g in list(getattr(call, "groups", ()))[:4]:
        if not 0 <= g < len(capture.groups):
            continue
        grp = capture.groups[g]
        text = figures_text(grp.attrs.get(MEMORY_KEY)) if isinstance(grp.attrs, dict) else None
        if text:
            out.append(f"- `{group_label(capture, g) or grp.name}` per device: {text}")
    return out


def mesh_line(capture: Any) -> str | None:
    """``Mesh data=4 × model=2 on 8 cpu devices, simulated …``; None without a mesh."""
    meshes = getattr(capture, "meshes", None) or []
    if not meshes:
        return None
    text = "Mesh " + "; ".join(f"`{mesh_text(m)}`" for m in meshes[:3])
    devices = devices_text(getattr(capture, "devices", None))
    return text + (f" on {devices}" if devices else "") + "."


def provenance(capture: Any, entry: "LineEntry") -> str:
    """Where the numbers come from: measured (Torch), traced (JAX), or one traced
    iteration of an unexecuted body."""
    g = entry.first.body
    if entry.traced_body:
        if 0 <= g < len(capture.groups) and isinstance(capture.groups[g].attrs, dict):
            attrs = capture.groups[g].attrs
            node = attrs.get("node")
            op = capture.nodes[node].op if type(node) is int and 0 <= node < len(capture.nodes) else "control-flow"
            summary = body_summary(g, attrs, capture.groups[g].name)
            return (f"Inside the `{op}` body: {template_line(summary)}. The shapes are one iteration's, "
                    "as JAX traced it; nothing here was computed.")
        return ("Inside a control-flow body: one iteration, as traced; not executed. "
                "The shapes are one iteration's, as JAX traced it; nothing here was computed.")
    if is_abstract(capture):
        return f"{ABSTRACT_NOTE}: the model was built with no parameter storage and its forward ran on fake tensors."
    return capabilities(capture.framework).values_note


def cost_text(call: Any, capture: Any = None) -> str | None:
    """What a call costs, in words: ``2.42 GFLOPs · 45.1 MB moved · 2.36 M params``
    (FLOPs with a multiply-add counted 2), or None when the capture holds no costs. On a
    program split across devices (``capture`` with a mesh) the FLOPs say their scope:
    ``global``, ``per device`` (a shard_map body) or ``per shard`` (a partial-manual one's:
    ``capture.analysis.scope``), and a split Torch program's call its
    FLOPs ``per rank`` (``call.rank_flops``)."""
    if getattr(call, "flops", -1) < 0:
        return None
    rank = getattr(call, "rank_flops", -1)
    if rank >= 0:
        flops = f"{flops_text(rank)} per rank"
    else:
        scope = cost_scope(capture, call.container) if capture is not None else None
        flops = ("~" if call.estimate else "") + flops_text(call.flops) + (f" {scope}" if scope else "")
    parts = [flops, f"{bytes_text(call.bytes)} moved"]
    if call.params:
        parts.append(f"{count_text(call.params)} params")
    if call.uncounted:
        parts.append(f"{call.uncounted:,} op{'s' * (call.uncounted != 1)} uncounted (not in the FLOPs)")
    return " · ".join(parts)


def calls_text(capture: Any, entry: "LineEntry") -> str:
    ran = runs(entry)
    ops = ran[0].ops
    text = f"{ops:,} op{'s' * (ops != 1)} behind it"
    cost = cost_text(ran[0], capture)
    if cost:
        text += f" ({cost}; a multiply-add counts 2 FLOPs, bytes unfused)"
    n = len(ran)
    if n > 1:
        where = group_label(capture, ran[0].container)
        text += f"; the line ran {n}× (the first call is shown{f', in `{where}`' if where else ''})"
    if not entry.traced_body and len(entry.calls) > len(entry.ran):
        text += "; it is also part of an unexecuted control-flow body (a template, as traced)"
    return text


def stale_text(rec: "Record", rel: str, file_changed: bool) -> str | None:
    """Why what is shown is only "as of the last capture" (this file, another source
    or the profile changed since), or None when it is fresh."""
    changed = []
    if file_changed or rel in rec.stale:
        changed.append(f"`{rel}`")
    changed += [f"`{s}`" if s in rec.changed_sources else s for s in rec.stale if s != rel]
    if not changed:
        return None
    return (f"**As of the last capture** ({when(rec.captured_at)}). Changed since: {', '.join(changed)}. "
            "Lines edited since have no hint; Open as Graph again to recapture.")


def header(rec: "Record", capture: Any) -> str:
    fw = capabilities(capture.framework).label
    return f"**TensorViz** · profile `{rec.profile}` ({rec.qualname}, {fw}), captured at {when(rec.captured_at)}"
