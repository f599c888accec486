"""What one device holds and computes, node by node, in a JAX program split across a mesh.

TensorViz knows the split of the values the program states: inputs placed on the mesh,
explicit axes in the types, ``sharding_constraint`` / ``reshard``, ``shard_map`` specs and
bodies. Under automatic axes XLA decides the rest (sharding propagation), so a traced
value may carry no split at all. When the capture compiled the program
(``capture.jax.compiled``), the compiled module holds the shape each device computes for
each instruction, and its ``op_name`` metadata names the equation it was made for. So:

1. :func:`capture.jax.compiled.instructions` reads every instruction of the compiled HLO text with an array
   result and ``op_name`` metadata: its per-device shape, its operand shapes (a ``dot``'s
   contracting dimensions), its name and source frames;
2. :func:`propagated_shardings` maps each onto the node of its equation (the same rules
   as the compiled collectives: primitive, source line, name stack; every best-scoring
   node of that primitive is a candidate, the one whose output shape the per-device
   shape divides is taken) and gives each value XLA split that the capture had no split
   for a ``sharding`` of source ``compiled`` (its mesh axes inferred from the ratio of
   each dimension); an unmapped value of the same shape as an operand of its node takes
   that operand's split (``propagated``);
3. :func:`xla_column`: with XLA's own FLOPs for each compiled instruction
   (:mod:`capture.jax.xla_flops`), each node's per-device FLOPs are those of the
   instructions whose ``op_name`` names it (the figure ``cost_analysis()`` sums, after XLA's
   rewrites); where they could not all be costed in time,
   :func:`flops_per_device` counts each node's FLOPs at the shapes one device computes:
   the node's FLOPs times the share of its work one device does (a ``dot_general``: its
   output's share times its contracted dimensions' share; a reduction: its operand's
   share; anything else: its output's share); a ``scan`` is its body's per-device figure ×
   its length, a ``cond`` its largest branch, a ``shard_map`` its body (already one
   device's). Without a compiled program the same rule runs on the splits TensorViz knows
   (an unsplit value counts whole: the unfused estimate, ``NodeCosts.notes``).

JAX is not imported here: the compiled text and the converted capture are plain data.
"""

from __future__ import annotations

import math
import time
from typing import Any

from ..graph.model import UNCOUNTED, Capture
from ..graph.sharding import sharding_record
from ..units import dtype_bits

#: How long mapping the compiled instructions onto nodes may take (a 70B program has some
#: 100k instructions); past it the rest is left to propagation.
MAP_SECONDS = 8.0

# Instructions that move or wrap a result rather than compute it.
_SECONDARY = frozenset({"fusion", "copy", "bitcast", "reshape", "transpose", "broadcast", "slice", "dynamic-slice",
                        "dynamic-update-slice", "custom-call", "convert", "pad", "concatenate"})
# Primitives whose work is their operand's (a reduction reads more than it writes).
_REDUCING = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
                       "reduce_xor", "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp",
                       "reduce_precision"})
# The program's reducing collectives: one combine per element of a device's block.
_REDUCING_COLLECTIVES = frozenset({"psum", "psum_invariant", "pmax", "pmin"})
NOTE = ("each node at the shapes one device computes, with the splits XLA propagated; scalar index arithmetic as "
        "traced (XLA counts it after its rewrites: constants folded, an integer % by a power of two as six ops)")
NOTE_XLA = ("XLA's own FLOPs for each compiled instruction (its cost analysis, after its rewrites: constants folded, "
            "an integer % by a power of two as six ops, fusions' recomputed scalars), put on the node its op_name names")
NOTE_UNCOMPILED = ("TensorViz's unfused estimate: each node at the splits the program states (not compiled: a value "
                   "the compiler would split counts whole)")


# --------------------------------------------------------------------------- per-device shapes


def local_shape(capture: Capture, vid: int) -> list[int] | None:
    """The shape one device holds of value ``vid`` (its own shape when not split); None
    when a dimension is symbolic."""
    v = capture.values[vid]
    sh = v.sharding if isinstance(v.sharding, dict) else None
    shape = v.shape if sh is None or sh.get("local") else sh.get("per_device_shape") or v.shape
    return [int(d) for d in shape] if all(type(d) is int for d in shape) else None


def _split_axes(ratio: int, sizes: list[tuple[str, int]], used: set[str]) -> list[str] | None:
    """Mesh axes (in mesh order, none of ``used``) whose sizes multiply to ``ratio``."""
    free = [(n, s) for n, s in sizes if n not in used and s > 1]
    for mask in range(1, 1 << len(free)):
        pick = [free[i] for i in range(len(free)) if mask >> i & 1]
        if math.prod(s for _, s in pick) == ratio:
            return [n for n, _ in pick]
    return None


def _record(shape: list, local: list[int], mesh: int, sizes: list[tuple[str, int]], source: str) -> dict | None:
    """A sharding record for a value of ``shape`` of which one device holds ``local``; None
    when a dimension's ratio is no product of the mesh's axes (or nothing is split)."""
    spec: list[list[str]] = []
    used: set[str] = set()
    for g, l in zip(shape, local):
        if type(g) is not int or l <= 0 or l > g:
            return None
        ratio = -(-g // l)
        if ratio == 1:
            spec.append([])
            continue
        axes = _split_axes(ratio, sizes, used)
        if axes is None or -(-g // math.prod(s for n, s in sizes if n in axes)) != l:
            return None
        used.update(axes)
        spec.append(axes)
    if not used:
        return None
    rec = sharding_record(mesh, shape, spec, dict(sizes), source=source)
    rec["per_device_shape"] = list(local)
    return rec


def _fits(shape: list, local: list[int]) -> bool:
    return len(shape) == len(local) and all(type(g) is int and 0 < l <= g for g, l in zip(shape, local))


class _Mapper:
    """Compiled instructions onto nodes (:class:`capture.jax.compiled.Attributor`'s rules,
    every best candidate kept)."""

    def __init__(self, capture: Capture, eqns: list, sources: Any) -> None:
        from .compiled import Attributor

        self.capture = capture
        self.att = Attributor(capture.nodes, eqns, capture.groups, sources)

    def best(self, name: str, frames: list[tuple[str, int]]) -> list[int]:
        parts = [p for p in name.split("/") if p]
        if not parts:
            return []
        prim, path = parts[-1], parts[1:-1]
        top, out = -1, []
        for i in self.att._candidates(prim, frames):
            score, _ = self.att._score(i, prim, path, frames)
            if score > top:
                top, out = score, [i]
            elif score == top:
                out.append(i)
        return out if top >= 8 else []  # the primitive must agree

    def local_shapes(self, records: list[dict[str, Any]], deadline: float) -> tuple[dict[int, list], dict]:
        """``(per node: the per-device shapes of its first output the instructions made for
        it show, per node: a dot's contracted elements per device)``."""
        from .compiled import alternatives

        nodes, values = self.capture.nodes, self.capture.values
        shapes: dict[int, list[tuple[bool, list[int]]]] = {}
        ks: dict[tuple[int, tuple[int, ...]], int] = {}
        cache: dict[tuple, list[int]] = {}
        for rec in records:
            if time.perf_counter() > deadline:
                break
            frames = [tuple(f) for f in rec.get("frames") or []]
            for name in alternatives(rec["op_name"]):
                key = (name, tuple(frames[:1]))
                ids = cache.get(key)
                if ids is None:
                    ids = cache[key] = self.best(name, frames)
                for i in ids:
                    outs = nodes[i].outputs
                    if not outs or not _fits(values[outs[0]].shape, rec["shape"]):
                        continue
                    seen = shapes.setdefault(i, [])
                    option = (rec["op"] not in _SECONDARY, rec["shape"])
                    if option not in seen:
                        seen.append(option)
                    if "k" in rec:
                        ks[(i, tuple(rec["shape"]))] = max(ks.get((i, tuple(rec["shape"])), 0), rec["k"])
        return shapes, ks


def _choose(capture: Capture, i: int, options: list[tuple[bool, list[int]]]) -> list[int]:
    """Of the per-device shapes instructions show for node ``i``'s result, those of the
    instructions that compute it (a ``dot``, an ``add``) before those that move it (a copy of a
    gathered operand, a fusion's result); then the one an operand of its shape holds (an
    elementwise op keeps its operands' split), else the largest."""
    primary = [shape for first, shape in options if first] or [shape for _, shape in options]
    node = capture.nodes[i]
    if len(primary) > 1 and node.op != "dot_general":
        out = capture.values[node.outputs[0]]
        for o in node.inputs:
            if o.value is not None and capture.values[o.value].shape == out.shape:
                local = local_shape(capture, o.value)
                if local in primary:
                    return local
    return max(primary, key=math.prod)


def propagated_shardings(capture: Capture, eqns: list, records: list[dict[str, Any]] | None, mesh: int | None,
                         sources: Any = None) -> dict[int, tuple[int, int]]:
    """Give values XLA split (and the capture did not know split) a ``compiled`` sharding;
    then values of an operand's shape an operand's split (``propagated``). Returns per node
    a ``dot``'s work on one device (result elements × contracted elements), where the compiled
    program shows it."""
    if mesh is None or not 0 <= mesh < len(capture.meshes):
        return {}
    sizes = [(str(a["name"]), int(a["size"])) for a in capture.meshes[mesh].get("axes") or []
             if isinstance(a, dict) and "name" in a and "size" in a]
    dots: dict[int, tuple[int, int]] = {}
    if records:
        mapper = _Mapper(capture, eqns, sources)
        shapes, shape_ks = mapper.local_shapes(records, time.perf_counter() + MAP_SECONDS)
        for i in sorted(shapes):  # in program order: an operand's split is settled before its users'
            v = capture.values[capture.nodes[i].outputs[0]]
            local = _choose(capture, i, shapes[i])
            if v.sharding is None:
                v.sharding = _record(list(v.shape), local, mesh, sizes, "compiled")
            k = shape_ks.get((i, tuple(local)))
            if k is not None:  # a dot's contraction and its work on one device (result × contraction)
                dots[i] = (k, math.prod(local) * k)
    _propagate(capture)
    _through_bodies(capture)
    _from_users(capture, eqns, {i: k for i, (k, _) in dots.items()}, mesh, sizes)
    _through_bodies(capture)
    return dots


def _propagate(capture: Capture) -> None:
    """An unsplit result of a node, of the same shape as one of its split operands, takes
    that operand's split (an elementwise op keeps its operands' split)."""
    values = capture.values
    for node in capture.nodes:
        for vid in node.outputs:
            v = values[vid]
            if v.sharding is not None:
                continue
            for o in node.inputs:
                if o.value is None:
                    continue
                src = values[o.value].sharding
                if isinstance(src, dict) and not src.get("local") and values[o.value].shape == v.shape \
                        and src.get("source") in ("compiled", "propagated", "placement", "partitioning", "type"):
                    v.sharding = {**src, "source": "propagated"}
                    break


def _stacked(sharding: dict[str, Any], length: int, source: str) -> dict[str, Any]:
    """A slice's split with the scanned (leading, unsplit) dimension put back."""
    out = {**sharding, "spec": [[]] + [list(d) if d is not None else None for d in sharding.get("spec") or []],
           "source": source}
    out["per_device_shape"] = [length] + list(sharding.get("per_device_shape") or [])
    return out


def _through_bodies(capture: Capture) -> None:
    """Splits across a ``scan``'s boundary: its stacked results (``ys``) and final carry take
    their body results' split, its body's slices (``xs``) and carries their outer values'."""
    values, nodes = capture.values, capture.nodes
    for g in capture.groups:
        attrs = g.attrs
        if g.kind != "body" or type(attrs.get("node")) is not int or nodes[attrs["node"]].op != "scan":
            continue
        node = nodes[attrs["node"]]
        length = attrs.get("iterations")
        for r in attrs.get("results") or []:
            inner, pos = r.get("value"), r.get("output")
            if type(inner) is not int or type(pos) is not int or pos >= len(node.outputs):
                continue
            outer, split = values[node.outputs[pos]], values[inner].sharding
            if outer.sharding is not None or not isinstance(split, dict) or split.get("local"):
                continue
            ys = str(r.get("stands_for", "")).startswith("ys")
            if ys and type(length) is int and len(outer.shape) == len(values[inner].shape) + 1:
                outer.sharding = _stacked(split, length, "propagated")
            elif not ys and outer.shape == values[inner].shape:
                outer.sharding = {**split, "source": "propagated"}
        for p in attrs.get("parameters") or []:
            inner, op = p.get("value"), p.get("operand")
            if type(inner) is not int or type(op) is not int or op >= len(node.inputs) or node.inputs[op].value is None:
                continue
            v, split = values[inner], values[node.inputs[op].value].sharding
            if v.sharding is not None or not isinstance(split, dict) or split.get("local"):
                continue
            spec = split.get("spec") or []
            if str(p.get("stands_for", "")).startswith("xs") and len(v.shape) == len(spec) - 1 and not spec[0]:
                v.sharding = {**split, "spec": spec[1:], "per_device_shape": list(split["per_device_shape"][1:]),
                              "source": "the outer value's split"}
            elif v.shape == values[node.inputs[op].value].shape:
                v.sharding = {**split, "source": "the outer value's split"}


def _from_users(capture: Capture, eqns: list, ks: dict[int, int], mesh: int, sizes: list[tuple[str, int]]) -> None:
    """A value still unsplit (a body's parameter, a result XLA fused away) takes the split its
    users show: a user of its shape with a split result (elementwise), a ``dot_general``'s
    operand the split of the result dimensions it makes (and of its contracted dimension where
    the compiled dot shows it)."""
    values = capture.values
    # the program's inputs are placed where the capture placed them (unsplit: replicated)
    inner = {o for n in capture.nodes for o in n.outputs} | {
        p["value"] for g in capture.groups if g.kind == "body" for p in g.attrs.get("parameters") or []
        if isinstance(p, dict) and type(p.get("value")) is int}
    for node in reversed(capture.nodes):
        out = values[node.outputs[0]] if node.outputs else None
        if out is None or not isinstance(out.sharding, dict) or out.sharding.get("local"):
            continue
        eqn = eqns[node.id] if node.id < len(eqns) else None
        for pos, o in enumerate(node.inputs):
            if o.value is None or values[o.value].sharding is not None or o.value not in inner:
                continue
            v = values[o.value]
            if v.shape == out.shape:
                v.sharding = {**out.sharding, "source": "propagated"}
            elif node.op == "dot_general" and eqn is not None and pos < 2:
                local = _dot_operand(eqn, pos, list(v.shape), out, ks.get(node.id))
                if local is not None:
                    v.sharding = _record(list(v.shape), local, mesh, sizes, "propagated")


def _dot_operand(eqn: Any, pos: int, shape: list, out: Any, k: int | None) -> list[int] | None:
    """The per-device shape of operand ``pos`` of a ``dot_general`` from its result's: its batch
    and free dimensions as the result's, a single contracted dimension as the compiled dot's."""
    if not all(type(d) is int for d in shape):
        return None
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    contract, batch = (lc, lb) if pos == 0 else (rc, rb)
    free = [d for d in range(len(shape)) if d not in contract and d not in batch]
    # the result's dimensions: batch, the left operand's free ones, the right operand's free ones
    start = len(batch) + (0 if pos == 0 else len(eqn.invars[0].aval.shape) - len(lc) - len(lb))
    out_local = out.sharding.get("per_device_shape") or out.shape
    local = list(shape)
    for j, d in enumerate(batch):
        local[d] = out_local[j]
    for j, d in enumerate(free):
        local[d] = out_local[start + j]
    if len(contract) == 1 and k:
        local[contract[0]] = min(k, shape[contract[0]])
    return local


# --------------------------------------------------------------------------- per-device FLOPs


def _share(capture: Capture, vid: int) -> float:
    v = capture.values[vid]
    local = local_shape(capture, vid)
    if local is None or not all(type(d) is int for d in v.shape):
        return 1.0
    whole = math.prod(int(d) for d in v.shape)
    return math.prod(local) / whole if whole else 1.0


def _devices(capture: Capture, vid: int) -> int:
    """The devices of the mesh value ``vid`` is split over (1 when it is not)."""
    sh = capture.values[vid].sharding
    mesh = sh.get("mesh") if isinstance(sh, dict) else None
    if type(mesh) is not int or not 0 <= mesh < len(capture.meshes):
        return 1
    return int(capture.meshes[mesh].get("devices") or 1)


def _node_share(capture: Capture, i: int, eqn: Any, dots: dict[int, tuple[int, int]]) -> float:
    """The share of node ``i``'s work one device does."""
    node = capture.nodes[i]
    ins = [o.value for o in node.inputs if o.value is not None]
    if node.op in _REDUCING and ins:
        return _share(capture, ins[0])
    out = _share(capture, node.outputs[0]) if node.outputs else 1.0
    if node.op == "dot_general" and len(ins) >= 2 and eqn is not None:
        (lc, rc), _ = eqn.params["dimension_numbers"]
        lhs = capture.values[ins[0]]
        k = math.prod(int(lhs.shape[d]) for d in lc) if all(type(lhs.shape[d]) is int for d in lc) else 0
        if k:
            whole = math.prod(int(d) for d in capture.values[node.outputs[0]].shape) * k
            if i in dots and whole:  # the compiled dot's own work
                return min(dots[i][1] / whole, 1.0)
            ll, rl = local_shape(capture, ins[0]), local_shape(capture, ins[1])
            kl = math.prod(ll[d] for d in lc) if ll else k
            kr = math.prod(rl[d] for d in rc) if rl else k
            # no device does less than its share of the whole (one axis cannot split both the
            # result and the contracted dimensions)
            return max(out * min(kl, kr) / k, 1 / _devices(capture, node.outputs[0]))
    return out


def flops_per_device(capture: Capture, eqns: list, dots: dict[int, tuple[int, int]] | None = None) -> list[int] | None:
    """Each node's FLOPs on one device (:data:`UNCOUNTED` where the global figure is);
    None without cost columns."""
    from ..graph.per_device import boundary_figures

    cost = capture.cost
    if cost is None:
        return None
    dots = dots or {}
    n = len(capture.nodes)
    out = [UNCOUNTED] * n
    added = _compiler_reductions(capture)
    for i in range(n):
        f = cost.flops[i]
        if f < 0:
            continue
        eqn = eqns[i] if i < len(eqns) else None
        node = capture.nodes[i]
        if node.op in _REDUCING_COLLECTIVES and node.outputs:  # one combine per element of a device's block
            local = local_shape(capture, node.outputs[0])
            f = math.prod(local) if local is not None else 0
            out[i] = f
            continue
        out[i] = int(round(f * _node_share(capture, i, eqn, dots))) + added.get(i, 0)
    boundary_figures(capture, out)
    return out


def _compiler_reductions(capture: Capture) -> dict[int, int]:
    """Per node, the elements the all-reduces XLA adds for it combine on one device (a sum
    over a dimension split across devices: each device adds the others' partial results)."""
    out: dict[int, int] = {}
    for c in (capture.compiled or {}).get("collectives") or []:
        i = c.get("node") if isinstance(c, dict) else None
        if c.get("kind") != "all-reduce" or type(i) is not int or capture.nodes[i].op in _REDUCING_COLLECTIVES:
            continue
        size = c.get("operand_bytes")
        outs = capture.nodes[i].outputs
        item = (dtype_bits(capture.values[outs[0]].dtype) or 32) // 8 if outs else 4
        if isinstance(size, int) and item:
            out[i] = out.get(i, 0) + size // item
    return out


def xla_column(capture: Capture, eqns: list, xla: dict[str, Any], sources: Any = None) -> tuple[list[int], float]:
    """Each node's per-device FLOPs as XLA counts them (:mod:`capture.jax.xla_flops`): every
    compiled instruction's own figure on the node its ``op_name`` names (the nodes that best
    match it, those whose result its per-device shape fits first; several equal ones, such as
    an unrolled loop's, take the instructions in turn; none of its primitive: the first node
    of its source line), boundaries from their bodies. Returns ``(column, FLOPs of instructions no node took)``."""
    from ..graph.per_device import boundary_figures
    from .compiled import alternatives

    mapper = _Mapper(capture, eqns, sources)
    nodes, values = capture.nodes, capture.values
    column = [0.0] * len(nodes)
    cache: dict[tuple, list[int]] = {}
    turns: dict[tuple, int] = {}
    left = 0.0
    for rec in xla.get("instructions") or []:
        frames = [tuple(f) for f in rec.get("frames") or []]
        ids: list[int] = []
        for name in alternatives(rec.get("op_name") or ""):
            key = (name, tuple(frames[:1]))
            got = cache.get(key)
            if got is None:
                got = cache[key] = mapper.best(name, frames)
            ids += [i for i in got if i not in ids]
        if not ids:  # no equation of its primitive (one JAX expanded): the first node of its line
            ids = next((mapper.att.by_line(key)[:1] for key in frames[:3] if mapper.att.by_line(key)), [])
        shape = rec.get("shape")
        fit = [i for i in ids if shape is not None and nodes[i].outputs and _fits(values[nodes[i].outputs[0]].shape, shape)]
        take = fit or ids
        if not take:
            left += rec["flops"]
            continue
        turn = turns.get(tuple(take), 0)  # equal candidates (an unrolled loop's): in turn
        turns[tuple(take)] = turn + 1
        column[take[turn % len(take)]] += rec["flops"]

    out = [int(round(f)) for f in column]
    boundary_figures(capture, out)
    return out, left


def annotate(capture: Capture, eqns: list, records: list[dict[str, Any]] | None, mesh: int | None,
             sources: Any = None, xla: dict[str, Any] | None = None) -> None:
    """Per-device splits (from the compiled program's instructions, :func:`instructions`,
    when it was compiled) and the per-device FLOPs column (``cost.flops_per_device``, what
    informed it in ``cost.notes["flops_per_device"]``). With XLA's own per-instruction FLOPs
    (``xla``, :func:`capture.jax.xla_flops.instruction_flops`, complete), the column is theirs
    (:func:`xla_column`); else each node's FLOPs at its per-device shapes. Nothing without a
    mesh."""
    if capture.cost is None or (mesh is None and not capture.meshes):
        return
    dots = propagated_shardings(capture, eqns, records, 0 if mesh is None else mesh, sources)
    column = flops_per_device(capture, eqns, dots)
    if column is None:
        return
    note = NOTE if records is not None else NOTE_UNCOMPILED
    if records is not None and xla is not None and xla.get("complete"):
        column, left = xla_column(capture, eqns, xla, sources)
        total = float(xla.get("total") or 0.0)
        share = "under 0.1%" if left < total / 1000 else f"{left / total:.1%}"
        note = NOTE_XLA + (f"; {share} of them on instructions no node was found for (not counted)"
                           if left and total else "")
    elif records is not None and xla is not None:  # XLA's own figures could not all be had
        why = ("costing XLA's instructions one by one ran out of time" if xla.get("timed_out") else
               "XLA's cost analysis could not cost " + ", ".join(f"{n} {op}" for op, n in (xla.get("failed") or {}).items()))
        note = f"{NOTE} ({why})"
    capture.cost.flops_per_device = column
    capture.cost.notes["flops_per_device"] = note


def later(finish: Any, capture: Capture, eqns: list, compiling: Any, mesh: int | None, stated: list,
          sources: Any = None) -> Any:
    """``finish`` (the worker's step that reads the compiled program after the graph was sent)
    followed by the per-device figures from it: the record carries them (``per_device``: the
    per-device FLOPs column and the splits XLA gave values) for
    :func:`capture.graph.later_compiled.complete` to put on the graph. ``stated``: each value's
    split as the program states it (the estimate sent with the graph is worked out again)."""

    def after() -> tuple[dict[str, Any], dict[str, Any]]:
        record, meta = finish()
        records = getattr(compiling, "instructions", None)
        if records is None or capture.cost is None:
            return record, meta
        before = [v.sharding for v in capture.values]
        for v, split in zip(capture.values, stated):
            v.sharding = split
        annotate(capture, eqns, records, mesh, sources, getattr(compiling, "xla_flops", None))
        record["per_device"] = {
            "flops_per_device": capture.cost.flops_per_device, "note": capture.cost.notes.get("flops_per_device"),
            "shardings": [[v.id, v.sharding] for v, old in zip(capture.values, before)
                          if v.sharding is not old and v.sharding is not None]}
        return record, meta

    return after
