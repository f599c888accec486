"""Does it fit? The memory a forward or a training step needs, in parts, against a
device's memory.

:func:`memory_plan` reads a capture's cost totals (:class:`~capture.analysis.cost.LayerCosts`):

* **parameters** (the bytes of the parameters the ops use) and **inputs** (the capture's
  input tensors);
* **gradients** and **optimizer state**: as the training step made them (``.grad`` tensors;
  state an optimizer made with a factory on its first step, e.g. Adam's two moments), or,
  where the capture holds none, from a chosen optimizer (``--optimizer``): gradients as large
  as the parameters, state as :data:`OPTIMIZERS` says;
* **saved for backward**: the forward's activations the backward reads (a training step), or
  for a forward capture with a chosen optimizer every activation it makes (an upper bound:
  autograd keeps at most those);
* **peak**: parameters and inputs plus the most activation bytes alive at once in traced
  order, with what outlives the program kept to its end (outputs, gradients, optimizer
  state, results nothing reads afterwards, such as a key/value cache held by a returned
  object: ``peak_live_kept``); for a forward capture with a chosen optimizer, its
  gradients, state and saved activations added.

:func:`fits` compares the peak with a device profile's memory: for a program split across a
mesh, what one device holds (:func:`per_device`: every tensor at its per-device shape, a
value not split held whole by each device, through the same lifetimes).

Only the standard library (DESIGN.md boundaries).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from capture import units
from capture.graph.model import tree_leaves
from capture.graph.per_device import aliased, aligned, body_parameters, buffer_alignment, fused, transients

from .types import CostTotals, Fit, MemoryPlan, PerDevice

if TYPE_CHECKING:
    from .analysis import Analysis

#: Optimizer state per parameter byte, by name (``--optimizer``), and what it holds.
OPTIMIZERS: dict[str, tuple[float, str]] = {
    "adam": (2.0, "Adam: two moments (exp_avg, exp_avg_sq), each as large as the parameters"),
    "adamw": (2.0, "AdamW: two moments, each as large as the parameters"),
    "sgd": (0.0, "SGD without momentum: no state"),
    "sgd-momentum": (1.0, "SGD with momentum: one buffer as large as the parameters"),
    "adagrad": (1.0, "Adagrad: one sum of squares as large as the parameters"),
    "rmsprop": (1.0, "RMSprop: one square average as large as the parameters"),
    "none": (0.0, "no optimizer: gradients only"),
}
NOTE = ("memory: parameters + inputs + the peak of live activations in traced order, with what outlives the "
        "step kept (outputs, gradients, optimizer state, results nothing reads afterwards); unfused, no allocator "
        "rounding or fragmentation, per device for a single-device capture; a split program's per-device peak "
        "counts each temporary in whole slots of the compiled platform's buffer alignment (CPU: 64 bytes)")


def memory_plan(totals: CostTotals, inputs: int, optimizer: str | None = None) -> MemoryPlan | None:
    """The memory a capture's program needs, in parts (see the module docstring); None
    without costs. ``optimizer``: a key of :data:`OPTIMIZERS` for a step whose optimizer
    the capture does not hold."""
    if not totals.get("available"):
        return None
    known = totals["params"]["bytes"] if "params" in totals else 0
    params = int(known or 0)  # None: a parameter of unknown size (said as parameters_unknown)
    kept = totals.get("kept") or {}
    training = "saved_for_backward" in totals
    grads = int(kept.get("gradients", 0))
    state = int(kept.get("optimizer state", 0))
    peak = params + inputs + int(totals.get("peak_live_kept", totals.get("peak_live", 0)))
    plan: MemoryPlan = {"kind": "training step" if training else "forward", "parameters": params,
                        "inputs": inputs, "gradients": grads, "optimizer_state": state,
                        "saved_for_backward": int(totals.get("saved_for_backward", 0)),
                        "optimizer": "as captured" if state else ("none captured" if training else "none"),
                        "estimate": False, "peak": 0}
    if known is None:
        plan["parameters_unknown"] = True
    if optimizer is not None:
        per, words = OPTIMIZERS[optimizer]
        chosen = int(per * params)
        if not training:  # a forward: the step it would be
            grads, saved = params, int(totals.get("activations", 0))
            plan["kind"] = "training step (estimated from a forward)"
            plan["gradients"], plan["saved_for_backward"], plan["estimate"] = grads, saved, True
            peak += grads + saved
        if not state:
            plan["optimizer_state"] = chosen
            peak += chosen
            plan["optimizer"] = f"chosen: {words}"
    plan["peak"] = peak
    return plan


def fits(plan: MemoryPlan, device: Any) -> Fit | None:
    """Whether ``plan``'s peak fits in ``device``'s memory, and by how much (None when the
    device profile gives no memory)."""
    memory = float(getattr(device, "memory", 0) or 0)
    if not memory:
        return None
    split = plan.get("per_device")
    need = split["peak"] if split else plan["peak"]  # a mesh: what one of its devices holds
    out: Fit = {"device": device.name, "label": device.label, "memory": int(memory), "needs": need,
           "fits": need <= memory, "margin": int(memory - need), "share": need / memory}
    if split:
        out["per_device_of"] = split["devices"]
    return out


def fit_text(result: Fit, bytes_text: Callable[[float], str]) -> str:
    """``fits on NVIDIA H100 SXM (80 GiB): needs 10 GiB (12.5 %), 70 GiB to spare`` or
    ``does not fit …: needs …, … over``."""
    head = f"{result['label']} ({bytes_text(result['memory'])})"
    if result.get("per_device_of"):
        head = f"each of {result['per_device_of']} × {head}"
    if result["fits"]:
        return (f"fits on {head}: needs {bytes_text(result['needs'])} ({100 * result['share']:.3g} %), "
                f"{bytes_text(result['margin'])} to spare")
    return f"does not fit on {head}: needs {bytes_text(result['needs'])}, {bytes_text(-result['margin'])} over"


def input_bytes(analysis: Analysis) -> int:
    """The bytes of the capture's input tensors (values named as inputs, made by no op)."""
    total = 0
    for v, (_, role) in analysis.names.names.items():
        if role != "input" or analysis.index.producer[v] >= 0:
            continue
        val = analysis.capture.values[v]
        total += units.nbytes(val.shape, val.dtype) or 0  # an unknown size adds nothing (capture/units.py)
    return total


def per_device(analysis: Analysis) -> PerDevice | None:
    """The plan's figures for one device of a mesh, where values are split across one:
    every tensor at the shape each device holds (``sharding.per_device_shape``; a value not
    split is held whole by every device), through the same lifetimes as the whole
    program's; a temporary of a program compiled for a platform whose buffer alignment is
    known (``capture.graph.per_device.BUFFER_ALIGNMENT``) in whole aligned slots, less the
    least padding of any (the allocation ends at its top buffer, unpadded). None when nothing
    is split."""
    cap = analysis.capture
    if not any(v.sharding for v in cap.values):
        return None
    costs = analysis.costs()
    costs._need_memory()
    n = analysis.index.n_nodes

    views = aliased(cap)  # a shard_map's result that is its operand, viewed: no buffer of its own

    def held(v: int) -> float:
        if v in views:
            return 0.0
        val = cap.values[v]
        sh = val.sharding if isinstance(val.sharding, dict) else None
        shape = val.shape if sh is None or sh.get("local") else sh.get("per_device_shape") or val.shape
        return _bytes(shape, val.dtype)

    # a temporary of the compiled program reserves whole aligned slots (arguments and outputs
    # are their own allocations, exact): capture.graph.per_device.BUFFER_ALIGNMENT
    alignment = buffer_alignment(cap)
    outputs = set(tree_leaves(cap.outputs))

    paddings: list[float] = []

    def temporary(v: int) -> float:
        b = held(v)
        if v in outputs or b <= 0:
            return b
        paddings.append(aligned(b, alignment) - b)
        return aligned(b, alignment)

    # a buffer XLA's loop fusion never writes: every value that would live in it is fused away
    in_registers = fused(cap)
    chain: dict[int, list[int]] = {}
    for k, r in costs.reuse_root.items():
        chain.setdefault(r, []).append(k)
    delta = [0.0] * (n + 2)
    made = 0.0
    for key, (start, end) in costs.spans.items():
        v = costs.first_value.get(key)
        if v is None:
            continue
        members = [costs.first_value.get(k) for k in chain.get(key, [])] + [v]
        b = 0.0 if all(m in in_registers for m in members) else temporary(v)
        made += b
        delta[start] += b
        delta[min(end, n) + 1] -= b
    # what one device holds only while a node runs: a shard_map or scan body's own values, the
    # weights the compiler gathers for it (capture.graph.per_device)
    for i, b in transients(cap, lambda v: int(temporary(v))).items():
        delta[i] += b
        delta[i + 1] -= b
    live = peak = 0.0
    for i in range(n):
        live += delta[i]
        peak = max(peak, live)
    # the temporaries' allocation ends where its top buffer ends, unpadded: which buffer that is,
    # TensorViz does not know, so the least padding any of them has is taken off
    peak -= min(paddings, default=0.0) if peak > 0 else 0.0
    params, inputs = _arguments(analysis, held)
    meshes = cap.meshes or []
    devices = max((int(m.get("devices") or 1) for m in meshes if isinstance(m, dict)), default=1)
    out: PerDevice = {"devices": devices, "parameters": int(params), "inputs": int(inputs), "activations": int(made),
                      "peak": int(params + inputs + peak)}
    if alignment > 1:
        out["alignment"] = alignment
    return out


def _arguments(analysis: Analysis, held: Callable[[int], float]) -> tuple[float, float]:
    """The bytes one device holds of the program's parameters and of its inputs (arguments:
    allocations of their own, exact)."""
    params = inputs = 0.0
    inner = body_parameters(analysis.capture)  # a body's parameter is a slice or view of an outer value: held there
    for v, (_, role) in analysis.names.names.items():
        if analysis.index.producer[v] >= 0 or v in inner:
            continue
        if role in ("param", "variable"):
            params += held(v)
        elif role == "input":
            inputs += held(v)
    return params, inputs


def add_chosen(split: PerDevice, plan: MemoryPlan, optimizer: str | None) -> None:
    """What a chosen optimizer adds on each device of the mesh, as :func:`memory_plan` adds
    it to the whole: its state (and, for a forward, gradients and every activation saved) at
    the per-device sizes."""
    if optimizer is None:
        return
    per = OPTIMIZERS[optimizer][0]
    if str(plan.get("optimizer", "")).startswith("chosen"):
        split["optimizer_state"] = int(per * split["parameters"])
        split["peak"] += split["optimizer_state"]
    if plan.get("estimate"):
        split["gradients"] = split["parameters"]
        split["saved_for_backward"] = split["activations"]
        split["peak"] += split["gradients"] + split["saved_for_backward"]


def _bytes(shape: Any, dtype: str) -> int:
    return units.nbytes(shape, dtype) or 0  # exact; an unknown size adds nothing (capture/units.py)
