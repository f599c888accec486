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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from .meta import PerDeviceMemory
from .model import Capture, Group, Node, Value, state_keys, tree_leaves
from ..units import bytes_text, nbytes

NOTE = ("bytes one device holds at the captured shapes: parameters and state once each; inputs a group takes "
        "from outside; activations its operations allocate (Torch: new storage only; JAX: every intermediate, "
        "an upper bound before XLA's fusion and buffer reuse); gradients of its parameters (training step)")
KEY: Final = "per_device_memory"
# Group kinds whose nodes never ran (templates): their values are not held.
_TEMPLATE_ROLES_EXCLUDED = ("shard_map body",)


def value_bytes(v: Any) -> int | None:
    """Bytes one device holds of value ``v``; None when a dimension or the dtype is not
    known (:func:`capture.units.nbytes`)."""
    sh = v.sharding
    per_device = sh.get("per_device_shape") if isinstance(sh, dict) else None
    return nbytes(per_device if isinstance(per_device, list) else v.shape, v.dtype)


def _templates(groups: list[Group]) -> list[bool]:
    """Which groups are templates that never ran (scan/while/cond bodies), with their subtrees."""
    template = [False] * len(groups)
    for g in groups:
        if g.kind == "body" and g.attrs.get("role") not in _TEMPLATE_ROLES_EXCLUDED:
            template[g.id] = True
    for g in groups:  # children come after their parents
        if g.parent is not None and template[g.parent]:
            template[g.id] = True
    return template


def _producers(nodes: list[Node], n_values: int) -> list[int]:
    """The id of the node that made each value, -1 for none."""
    producer = [-1] * n_values
    for n in nodes:
        for o in n.outputs:
            producer[o] = n.id
    return producer


@dataclass
class _Roles:
    """Roles of the values no node made, read from what the capture measured: parameters and
    buffers, gradients by parameter name, and the first value on each storage."""

    values: list[Value]
    params: set[int] = field(default_factory=set)
    grads: dict[str, int] = field(default_factory=dict)
    param_name: dict[int, str] = field(default_factory=dict)
    first_on_storage: dict[Any, int] = field(default_factory=dict)

    @classmethod
    def read(cls, values: list[Value], producer: list[int]) -> _Roles:
        roles = cls(values)
        for v in values:
            m = v.measured
            if isinstance(m, dict):
                roles._note(v.id, m, made=producer[v.id] >= 0)
        return roles

    def _note(self, vid: int, m: dict[str, Any], made: bool) -> None:
        if not made and (isinstance(m.get("param"), str) or isinstance(m.get("buffer"), str)):
            self.params.add(vid)
            if isinstance(m.get("param"), str):
                self.param_name[vid] = m["param"]
        if isinstance(m.get("grad_of"), str):
            self.grads[m["grad_of"]] = vid
        sid = m.get("storage")
        if type(sid) is int:
            self.first_on_storage.setdefault(sid, vid)

    def allocates(self, vid: int) -> bool:
        """Whether value ``vid`` is a new allocation (not a view or in-place result of another)."""
        m = self.values[vid].measured
        if isinstance(m, dict) and type(m.get("storage")) is int:
            return self.first_on_storage.get(m["storage"]) == vid
        return True


def _input_values(capture: Capture, n_values: int, params: set[int]) -> set[int]:
    """The capture's input values; those under a model-state key go to ``params`` instead."""
    inputs_tree = capture.inputs if isinstance(capture.inputs, dict) else {}
    input_values: set[int] = set()
    keys = state_keys(capture.meta)
    for key, sub in inputs_tree.get("dict", []) if isinstance(inputs_tree.get("dict"), list) else []:
        ids = [i for i in tree_leaves(sub) if type(i) is int and 0 <= i < n_values]
        if key in keys:
            params.update(ids)
        else:
            input_values.update(ids)
    return input_values


def _constants(meta: Any) -> set[Any]:
    """The values the capture recorded as constants (``meta`` is outside input)."""
    constants = meta.get("constants") if isinstance(meta, dict) else None
    return {c.get("value") for c in constants if isinstance(c, dict)} if isinstance(constants, list) else set()


def _activations(nodes: list[Node], groups: list[Group], template: list[bool],
                 made_bytes: Callable[[Node], int]) -> tuple[int, list[int]]:
    """``(the model's activation bytes, each group's with its subtree's)``; templates count nothing."""
    act = [0] * len(groups)
    model_act = 0
    for n in nodes:
        gid = n.group
        if gid is not None and template[gid]:
            continue
        if gid is None:
            model_act += made_bytes(n)
        else:
            act[gid] += made_bytes(n)
    total_act = list(act)
    for gid in range(len(groups) - 1, -1, -1):
        p = groups[gid].parent
        if p is not None and not template[gid]:
            total_act[p] += total_act[gid]
    model_act += sum(total_act[g.id] for g in groups if g.parent is None and not template[g.id])
    return model_act, total_act


def _holders(group: int | None, parent: list[int | None]) -> set[int]:
    """``group`` and its ancestors."""
    out: set[int] = set()
    while group is not None:
        out.add(group)
        group = parent[group]
    return out


def _entering(nodes: list[Node], parent: list[int | None], template: list[bool],
              producer: list[int]) -> dict[int, set[int]]:
    """Values entering each group's subtree from outside: walk from the consumer's group up
    to (not including) the first group that also holds the value's producer."""
    node_group = [n.group for n in nodes]
    entering: dict[int, set[int]] = {}
    for n in nodes:
        gid = n.group
        if gid is None or template[gid]:
            continue
        for o in n.inputs:
            v = o.value
            if v is None:
                continue
            p = producer[v]
            holders = _holders(node_group[p] if p >= 0 else None, parent)
            c: int | None = gid
            while c is not None and c not in holders:
                entering.setdefault(c, set()).add(v)
                c = parent[c]
    return entering


def _group_figures(ins: set[int], activation: int, vb: list[int], roles: _Roles,
                   constants: set[Any]) -> dict[str, int]:
    """One group's figures from the values entering it and its activation bytes."""
    figures = {"param_bytes": sum(vb[v] for v in ins if v in roles.params),
               "input_bytes": sum(vb[v] for v in ins if v not in roles.params and v not in constants),
               "activation_bytes": activation}
    if roles.grads:
        figures["gradient_bytes"] = sum(vb[roles.grads[roles.param_name[v]]] for v in ins
                                        if v in roles.param_name and roles.param_name[v] in roles.grads)
    return figures


def compute(capture: Capture) -> tuple[PerDeviceMemory, list[dict[str, int]]]:
    """``(model figures, per-group figures by group id)``."""
    values = list(capture.values)
    nodes = list(capture.nodes)
    groups = capture.groups
    vbytes = [value_bytes(v) for v in values]
    vb = [b or 0 for b in vbytes]
    template = _templates(groups)
    producer = _producers(nodes, len(values))
    roles = _Roles.read(values, producer)
    input_values = _input_values(capture, len(values), roles.params)
    constants = _constants(capture.meta)
    grad_values = set(roles.grads.values())

    def made_bytes(n: Node) -> int:
        return sum(vb[o] for o in n.outputs if o not in grad_values and roles.allocates(o))

    model_act, total_act = _activations(nodes, groups, template, made_bytes)
    entering = _entering(nodes, [g.parent for g in groups], template, producer)
    per_group = [{} if template[g.id] else
                 _group_figures(entering.get(g.id, set()), total_act[g.id], vb, roles, constants)
                 for g in groups]

    model: PerDeviceMemory = {
        "param_bytes": sum(vb[v] for v in roles.params),
        "input_bytes": sum(vb[v] for v in input_values),
        "activation_bytes": model_act,
    }
    if roles.grads:
        model["gradient_bytes"] = sum(vb[v] for v in grad_values)
    model["devices"] = max((m.get("devices", 1) for m in capture.meshes if isinstance(m, dict)), default=1)
    if any(b is None for b in vbytes):
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


LABELS = (("param_bytes", "params"), ("input_bytes", "inputs"), ("activation_bytes", "activations"),
          ("gradient_bytes", "gradients"))


def figures_text(figures: Any) -> str | None:
    """``params 1.2 MiB · inputs 3 KiB · activations 10 MiB`` (per device); None without figures."""
    if not isinstance(figures, dict):
        return None
    parts = [f"{label} {bytes_text(figures[key])}" for key, label in LABELS if type(figures.get(key)) is int]
    return " · ".join(parts) or None
