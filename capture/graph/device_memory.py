"""Per-device memory of a capture: what one device holds, for the whole model and for
every group, at the captured shapes.

Four figures, in bytes, each counted with every value's *per-device* shape (its
``sharding.per_device_shape`` when it is split across a mesh, else its shape: a value
nothing splits is held whole by every device that uses it):

* ``param_bytes``: parameters and model state, each tensor once: Torch parameters and
  buffers, JAX variables (the state a Linen ``apply`` or an NNX split traces: params,
  batch statistics, an optimizer's moments when the program takes it);
* ``input_bytes``: the values a group takes from outside it that are not parameters or
  constants (for the whole model: the capture's inputs);
* ``activation_bytes``: the values the group's operations make, each new allocation
  once: Torch views and in-place results share their input's storage and add nothing;
  a JAX program's every intermediate is counted, as if all were held at once (an upper
  bound: XLA fuses and reuses buffers). Unexecuted control-flow templates count nothing
  (a ``shard_map`` body does: every device runs it);
* ``gradient_bytes`` (a Torch ``training_step``): the gradients of the group's parameters.

``Capture.meta["per_device_memory"]`` holds the model's figures with ``devices`` (the
devices of the mesh, 1 without one) and what each figure means; every group's
``attrs["per_device_memory"]`` its own (``param_bytes``, ``input_bytes``,
``activation_bytes``, ``gradient_bytes`` where there are gradients). A dimension that is
a name (symbolic) counts as 0 bytes and sets ``symbolic: True``.

Only the standard library: the worker computes it; readers (viewer, inspect, hover, the
cost table) read the stored figures.
"""

from __future__ import annotations

from typing import Any

from .model import Capture, state_keys, tree_leaves
from .sharding import DTYPE_BITS

NOTE = ("bytes one device holds at the captured shapes: parameters and state once each; inputs a group takes "
        "from outside; activations its operations allocate (Torch: new storage only; JAX: every intermediate, "
        "an upper bound before XLA's fusion and buffer reuse); gradients of its parameters (training step)")
KEY = "per_device_memory"
# Group kinds whose nodes never ran (templates): their values are not held.
_TEMPLATE_ROLES_EXCLUDED = ("shard_map body",)


def value_bytes(v: Any) -> int | None:
    """Bytes one device holds of value ``v``; None when a dimension is symbolic."""
    sh = v.sharding
    shape = sh.get("per_device_shape") if isinstance(sh, dict) and isinstance(sh.get("per_device_shape"), list) \
        else v.shape
    n = 1
    for d in shape:
        if type(d) is not int:
            return None
        n *= d
    return (n * DTYPE_BITS.get(v.dtype, 32) + 7) // 8


def compute(capture: Capture) -> tuple[dict[str, Any], list[dict[str, int]]]:
    """``(model figures, per-group figures by group id)``."""
    values = list(capture.values)
    nodes = list(capture.nodes)
    groups = capture.groups
    n_groups = len(groups)
    vbytes = [value_bytes(v) for v in values]
    symbolic = any(b is None for b in vbytes)
    vb = [b or 0 for b in vbytes]

    # Which groups are templates that never ran (scan/while/cond bodies), with their subtrees.
    template = [False] * n_groups
    for g in groups:
        if g.kind == "body" and g.attrs.get("role") not in _TEMPLATE_ROLES_EXCLUDED:
            template[g.id] = True
    for g in groups:  # children come after their parents
        if g.parent is not None and template[g.parent]:
            template[g.id] = True

    producer = [-1] * len(values)
    for n in nodes:
        for o in n.outputs:
            producer[o] = n.id

    # Roles of values no node made.
    params: set[int] = set()
    grads: dict[str, int] = {}
    param_name: dict[int, str] = {}
    first_on_storage: dict[Any, int] = {}
    for v in values:
        m = v.measured
        if isinstance(m, dict):
            if producer[v.id] < 0 and (isinstance(m.get("param"), str) or isinstance(m.get("buffer"), str)):
                params.add(v.id)
                if isinstance(m.get("param"), str):
                    param_name[v.id] = m["param"]
            if isinstance(m.get("grad_of"), str):
                grads[m["grad_of"]] = v.id
            sid = m.get("storage")
            if type(sid) is int:
                first_on_storage.setdefault(sid, v.id)
    inputs_tree = capture.inputs if isinstance(capture.inputs, dict) else {}
    input_values: set[int] = set()
    keys = state_keys(capture.meta)
    for key, sub in inputs_tree.get("dict", []) if isinstance(inputs_tree.get("dict"), list) else []:
        ids = [i for i in tree_leaves(sub) if type(i) is int and 0 <= i < len(values)]
        if key in keys:
            params.update(ids)
        else:
            input_values.update(ids)
    constants = {c.get("value") for c in capture.meta.get("constants", []) if isinstance(c, dict)} \
        if isinstance(capture.meta.get("constants"), list) else set()
    grad_values = set(grads.values())

    def allocates(vid: int) -> bool:
        m = values[vid].measured
        if isinstance(m, dict) and type(m.get("storage")) is int:
            return first_on_storage.get(m["storage"]) == vid
        return True

    parent = [g.parent for g in groups]
    act = [0] * n_groups
    model_act = 0
    for n in nodes:
        g = n.group
        if g is not None and template[g]:
            continue
        made = sum(vb[o] for o in n.outputs if o not in grad_values and allocates(o))
        if g is None:
            model_act += made
        else:
            act[g] += made
    total_act = list(act)
    for g in range(n_groups - 1, -1, -1):
        p = parent[g]
        if p is not None and not template[g]:
            total_act[p] += total_act[g]
    model_act += sum(total_act[g.id] for g in groups if g.parent is None and not template[g.id])

    # Values entering each group's subtree from outside: walk from the consumer's group up
    # to (not including) the first group that also holds the value's producer.
    depth = [0] * n_groups
    for g in range(n_groups):
        p = parent[g]
        depth[g] = 0 if p is None else depth[p] + 1
    node_group = [n.group for n in nodes]
    entering: dict[int, set[int]] = {}
    for n in nodes:
        g = n.group
        if g is None or template[g]:
            continue
        for o in n.inputs:
            v = o.value
            if v is None:
                continue
            p = producer[v]
            src = node_group[p] if p >= 0 else None
            # the groups holding the producer: its group and ancestors
            holders = set()
            s = src
            while s is not None:
                holders.add(s)
                s = parent[s]
            c = g
            while c is not None and c not in holders:
                entering.setdefault(c, set()).add(v)
                c = parent[c]

    per_group: list[dict[str, int]] = []
    for g in groups:
        if template[g.id]:
            per_group.append({})
            continue
        ins = entering.get(g.id, set())
        pbytes = sum(vb[v] for v in ins if v in params)
        ibytes = sum(vb[v] for v in ins if v not in params and v not in constants)
        figures = {"param_bytes": pbytes, "input_bytes": ibytes, "activation_bytes": total_act[g.id]}
        if grads:
            figures["gradient_bytes"] = sum(vb[grads[param_name[v]]] for v in ins
                                            if v in param_name and param_name[v] in grads)
        per_group.append(figures)

    model: dict[str, Any] = {
        "param_bytes": sum(vb[v] for v in params),
        "input_bytes": sum(vb[v] for v in input_values),
        "activation_bytes": model_act,
    }
    if grads:
        model["gradient_bytes"] = sum(vb[v] for v in grad_values)
    model["devices"] = max((m.get("devices", 1) for m in capture.meshes if isinstance(m, dict)), default=1)
    if symbolic:
        model["symbolic"] = True
    model["note"] = NOTE
    return model, per_group


def annotate(capture: Capture) -> None:
    """Store the figures: ``meta["per_device_memory"]`` and each group's
    ``attrs["per_device_memory"]`` (templates get none)."""
    if capture.failure is not None:
        return
    model, per_group = compute(capture)
    capture.meta[KEY] = model
    for g, figures in zip(capture.groups, per_group):
        if figures:
            g.attrs[KEY] = figures


def size_text(n: int) -> str:
    """``1.5 GiB``, ``512 B``."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


LABELS = (("param_bytes", "params"), ("input_bytes", "inputs"), ("activation_bytes", "activations"),
          ("gradient_bytes", "gradients"))


def figures_text(figures: Any) -> str | None:
    """``params 1.2 MiB · inputs 3 KiB · activations 10 MiB`` (per device); None without figures."""
    if not isinstance(figures, dict):
        return None
    parts = [f"{label} {size_text(figures[key])}" for key, label in LABELS if type(figures.get(key)) is int]
    return " · ".join(parts) or None
