"""A split program's per-device figures from its per-node columns: FLOPs one device
computes (``NodeCosts.flops_per_device``, written by the framework's capture) summed over the
executed program, control-flow boundaries from their bodies, and the buffers one device
holds that the graph's values do not show (a ``shard_map`` or ``scan`` body's values while
it runs; the weights the compiler gathers for an op).

Standard library only: the viewer's memory plan (``capture.analysis.fit``), the summary and
the benchmarks read these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..frameworks import capabilities
from ..units import nbytes
from .model import UNCOUNTED, Capture, tree_leaves

BODY = "body"
#: A program's own collectives.
COLLECTIVES = frozenset({"all_gather", "all_gather_invariant", "ppermute", "all_to_all", "psum", "psum_invariant",
                         "pmax", "pmin", "psum_scatter", "reduce_scatter"})
#: Ops XLA's scheduler issues as soon as their operands exist (communication, slices of inputs).
EARLY = COLLECTIVES | frozenset({"dynamic_slice", "slice", "split", "gather"})
#: Ops XLA's loop fusion takes into the elementwise op that reads them: the consumer reads their
#: operand directly, and their result is never written out (a padded block added to another).
FUSIBLE = frozenset({"pad", "slice", "dynamic_slice", "split"})


def innermost_bodies(groups: list, body_kind: str = BODY) -> list[int]:
    """Per group, the innermost body group (of kind ``body_kind``) holding it (itself when
    it is one), or -1. The JAX cost rules read it too (``capture/jax/cost.py``)."""
    out = [-2] * len(groups)
    for g in range(len(groups)):
        path = []
        x: int | None = g
        while x is not None and out[x] == -2:
            if groups[x].kind == body_kind:
                out[x] = x
                break
            path.append(x)
            x = groups[x].parent
        found = -1 if x is None else out[x]
        for y in path:
            out[y] = found
    return out


#: A ``shard_map``'s body: the program every device of its mesh runs once, on its own shard.
SHARD_MAP_ROLE = "shard_map body"


def bodies(capture: Capture) -> tuple[dict[int, list[int]], dict[int, list[int]], list[int]]:
    """``(boundary node -> its body groups, body group -> the nodes directly in it, per node its
    innermost body group or -1)``."""
    groups = capture.groups
    inner = innermost_bodies(groups)
    of: dict[int, list[int]] = {}
    for g, grp in enumerate(groups):
        if grp.kind == BODY and type(grp.attrs.get("node")) is int:
            of.setdefault(grp.attrs["node"], []).append(g)
    members: dict[int, list[int]] = {}
    node_body = []
    for node in capture.nodes:
        b = inner[node.group] if node.group is not None and 0 <= node.group < len(groups) else -1
        node_body.append(b)
        if b >= 0:
            members.setdefault(b, []).append(node.id)
    return of, members, node_body


def boundary_figures(capture: Capture, column: list[int], loops_once: bool = False) -> None:
    """Set each control-flow boundary's per-device FLOPs from its bodies' (innermost first):
    a ``scan`` its body × its length, a ``cond`` its largest branch, a ``shard_map`` its body
    (one device's already), a ``while`` uncounted (its trip count is decided at run time)."""
    of, members, _ = bodies(capture)
    groups = capture.groups
    for i in sorted(of, reverse=True):
        op = capture.nodes[i].op
        sums = [sum(column[j] for j in members.get(g, []) if column[j] > 0) for g in of[i]
                if "closed" not in groups[g].attrs]
        if not sums or len(sums) < len(of[i]):
            continue  # a closed body: the global rule's figure stands
        if op == "scan":
            length = groups[of[i][0]].attrs.get("iterations")
            column[i] = sums[0] if loops_once else sums[0] * length if type(length) is int else UNCOUNTED
        elif op == "cond":
            column[i] = max(sums)
        elif op == "shard_map":
            column[i] = sums[0]
        elif op == "while":
            column[i] = sums[0] if loops_once else UNCOUNTED


def flops_total(capture: Capture, loops_once: bool = False) -> int | None:
    """One device's FLOPs over the executed program, each body's nodes counted once, by its
    boundary (:func:`boundary_figures`): a ``shard_map`` body (executed: every device runs it)
    as its node's figure, a loop or branch template as its trip count or largest branch
    gives; None without a per-device column. ``loops_once``: a loop's body
    counted once, as XLA's ``cost_analysis()`` counts a ``while`` (its trip count not applied),
    to set the two side by side."""
    cost = capture.cost
    column = getattr(cost, "flops_per_device", None) if cost is not None else None
    if not column:
        return None
    if loops_once:
        column = list(column)
        boundary_figures(capture, column, loops_once=True)
    _, _, node_body = bodies(capture)
    return sum(f for f, b in zip(column, node_body) if b < 0 and f > 0)


#: The bytes XLA's buffer assignment aligns every buffer of a compiled program to, by the
#: platform compiled for: each temporary starts at a multiple of it, so a buffer smaller than
#: it reserves it whole (the CPU backend's 64: a ``f32[2,2]`` block takes 64 bytes of
#: ``memory_analysis()``'s temporaries, not 16). Platforms not listed: no rounding (a TPU's
#: buffers are padded to its tiles instead, which TensorViz does not model).
BUFFER_ALIGNMENT = {"cpu": 64}


def buffer_alignment(capture: Capture) -> int:
    """The alignment of the compiled program's buffers (:data:`BUFFER_ALIGNMENT`); 1 when the
    capture was not compiled or its platform's is not known."""
    compiled = capture.compiled or {}
    if compiled.get("status") != "compiled":
        return 1
    return BUFFER_ALIGNMENT.get(str(compiled.get("platform") or ""), 1)


def aligned(b: float, alignment: int) -> float:
    """``b`` bytes as a buffer aligned to ``alignment`` reserves them (0 stays 0)."""
    return -(-b // alignment) * alignment if b > 0 and alignment > 1 else b


def _held(capture: Capture) -> Callable[[int], int]:
    def held(v: int) -> int:
        val = capture.values[v]
        sh = val.sharding if isinstance(val.sharding, dict) else None
        shape = val.shape if sh is None or sh.get("local") else sh.get("per_device_shape") or val.shape
        return nbytes(shape, val.dtype) or 0
    return held


def transients(capture: Capture, held: Callable[[int], int] | None = None) -> dict[int, int]:
    """Per node of the executed program, bytes one device holds only while it runs, beyond the
    graph's values there: a boundary's bodies' own values at their most (a ``shard_map``'s body
    runs on every device at its shard's shapes; a ``scan``'s one iteration at a time; nested
    bodies and gathered weights inside them included) and the weights the compiler gathers
    for the node (:func:`gathered`). A ``shard_map``'s operands are its body's parameters: the
    program's figures hold them at the boundary, so they add nothing here."""
    held = held or _held(capture)
    of, members, node_body = bodies(capture)
    made = {o: n.id for n in capture.nodes for o in n.outputs}
    extra = gathered(capture)
    groups = capture.groups
    in_registers = fused(capture)
    for i in sorted(of, reverse=True):  # inner boundaries first: a body's own boundary's peak is known
        node = capture.nodes[i]
        best = 0
        for g in of[i]:
            params: list[int] = []
            if node.op == "shard_map":
                params = [p["value"] for p in groups[g].attrs.get("parameters") or []
                          if isinstance(p, dict) and type(p.get("value")) is int]
            # the parameters are the operands, held at the boundary by the program's figures
            listed = groups[g].attrs.get("results")  # None: not said (every unread value taken for a result)
            results = None if not isinstance(listed, list) else {
                r["value"] for r in listed if isinstance(r, dict) and type(r.get("value")) is int}
            walked = _walk(capture, members.get(g, []), made, held, extra, params, in_registers, results)
            best = max(best, walked)
        extra[i] = extra.get(i, 0) + best
    return {i: b for i, b in extra.items() if node_body[i] < 0 and b > 0}


def carries(capture: Capture) -> dict[int, dict[int, int]]:
    """Per loop boundary (``scan``, ``while``), its carries' outputs, each with the operand that
    starts it: XLA updates a carry in place, in its first value's buffer when nothing reads
    that value after the loop (the operand, the body's parameter and result and the loop's
    output are one buffer)."""
    out: dict[int, dict[int, int]] = {}
    for g in capture.groups:
        node = g.attrs.get("node") if g.kind == BODY else None
        if type(node) is not int or capture.nodes[node].op not in ("scan", "while"):
            continue
        n = capture.nodes[node]
        for p in g.attrs.get("parameters") or []:
            name = p.get("stands_for") if isinstance(p, dict) else None
            k, j = p.get("operand") if isinstance(p, dict) else None, None
            if isinstance(name, str) and name.startswith("carry ") and name[6:].isdigit():
                j = int(name[6:])
            first = n.inputs[k].value if type(k) is int and k < len(n.inputs) else None
            if first is not None and j is not None and j < len(n.outputs):
                out.setdefault(node, {})[n.outputs[j]] = first
    return out


def _fusion_roots(capture: Capture, ids: list[int], pos: dict[int, int], in_registers: set[int]) -> list[int]:
    """Per body position, where its reads happen: a node whose result XLA's loop fusion keeps in
    registers reads its operands when the fusion's root runs (the last of its chain), so a sum
    accumulated over a loop holds every addend until the last add."""
    at = list(range(len(ids)))
    users: dict[int, list[int]] = {}
    for k, n in enumerate(ids):
        for o in capture.nodes[n].inputs:
            if o.value is not None:
                users.setdefault(o.value, []).append(k)
    for k in range(len(ids) - 1, -1, -1):
        outs = capture.nodes[ids[k]].outputs
        if len(outs) == 1 and outs[0] in in_registers and users.get(outs[0]):
            at[k] = max(at[j] for j in users[outs[0]])
    return at


def _walk(capture: Capture, ids: list[int], made: dict[int, int], held: Callable[[int], int],
          inner: dict[int, int], params: list[int] = (),  # type: ignore[assignment]
          in_registers: set[int] = frozenset(),  # type: ignore[assignment]
          results: set[int] | None = None) -> int:
    """The most bytes live at once over a body's nodes ``ids`` (in order) beyond what its
    boundary holds: each value from the node that makes it to the last of these nodes that
    reads it or a view of it, or while its node runs when nothing reads it (a parameter in
    ``params`` is an operand, and a result in ``results`` its boundary's output: held there,
    through the body), with an inner boundary's own peak at it."""
    if not ids:
        return 0
    cost = capture.cost
    view = cost.rules.index("view") if cost is not None and "view" in cost.rules else -2
    pos = {n: k for k, n in enumerate(ids)}
    root: dict[int, int] = {}  # a view's value -> the value whose buffer it reads
    last: dict[int, int] = {}
    own = set(params)
    hoisted = _hoisted(capture, ids, made, pos)
    at = _fusion_roots(capture, ids, pos, in_registers)
    for k, n in enumerate(ids):
        node = capture.nodes[n]
        reads = [root.get(o.value, o.value) for o in node.inputs if o.value is not None]
        if cost is not None and cost.rule[n] == view and reads:
            for v in node.outputs:
                root[v] = reads[0]
        when = 0 if ids[at[k]] in hoisted else at[k]  # a hoisted op reads its operands at the start
        for v in reads:
            if made.get(v) in pos or v in own:
                last[v] = max(last.get(v, -1), when)
    delta = [0] * (len(ids) + 2)  # the parameters are held at the boundary, through the body
    in_place = carries(capture) if any(capture.nodes[n].op in ("scan", "while") for n in ids) else {}
    for k, n in enumerate(ids):
        node = capture.nodes[n]
        if cost is not None and cost.rule[n] == view:
            continue  # a view (a reshape, a broadcast, pvary) lives in its operand's buffer
        early = n in hoisted
        for v in node.outputs:
            if v in in_registers or v not in last and (results is None or v in results):
                continue  # fused, or one of the body's results unread in it (held as its boundary's output)
            b = held(v)  # a value nothing reads is still written: held while its node runs (a loop's last state)
            start = 0 if early else k
            first = in_place.get(n, {}).get(v)
            if first is not None and last.get(first) == k and first not in in_registers and held(first) == b:
                start = k + 1  # a carry updated in its first value's buffer, which dies at the loop
            end = max(last.get(v, k), 0 if early else k)
            if end >= start:
                delta[start] += b
                delta[end + 1] -= b
        extra = inner.get(n, 0)
        delta[k] += extra
        delta[k + 1] -= extra
    live = best = 0
    for k in range(len(ids)):
        live += delta[k]
        best = max(best, live)
    return best


def _hoisted(capture: Capture, ids: list[int], made: dict[int, int], pos: dict[int, int]) -> set[int]:
    """The body's nodes XLA's scheduler issues at its start: a collective or a slice of what
    enters the body (a weight's shard gathered, a block of an operand), indexed by scalars, or
    a slice of what is so issued. A collective of another collective's result (a ring of
    shifts: each step sends on the block the last one received) is not: it is issued in its
    turn, after the work that reads the block it replaces."""
    out: set[int] = set()
    early_values: set[int] = set()
    for n in ids:
        node = capture.nodes[n]
        if node.op not in EARLY:
            continue
        ok = True
        for o in node.inputs:
            v = o.value
            if v is None or made.get(v) not in pos or not capture.values[v].shape:
                continue
            if v not in early_values or node.op in COLLECTIVES and capture.nodes[made[v]].op in COLLECTIVES:
                ok = False
                break
        if ok:
            out.add(n)
            early_values.update(node.outputs)
    return out


def body_parameters(capture: Capture) -> set[int]:
    """The values that stand for a body's parameters (a scan's slice of its stacked weights, a
    shard_map's block of an argument): the outer value holds their bytes."""
    out: set[int] = set()
    for g in capture.groups:
        if g.kind != BODY:
            continue
        for p in g.attrs.get("parameters") or []:
            if isinstance(p, dict) and type(p.get("value")) is int:
                out.add(p["value"])
    return out


def aliased(capture: Capture) -> set[int]:
    """Results of a ``shard_map`` that are a view of one of its body's parameters (a replicated
    weight marked as varying, saved for the backward pass): the operand's buffer, not one of
    their own."""
    cost = capture.cost
    if cost is None or "view" not in cost.rules:
        return set()
    view = cost.rules.index("view")
    made = {o: n for n in capture.nodes for o in n.outputs}
    out: set[int] = set()
    for g in capture.groups:
        node = g.attrs.get("node") if g.kind == BODY else None
        if type(node) is not int or capture.nodes[node].op != "shard_map":
            continue
        params = {p["value"] for p in g.attrs.get("parameters") or [] if isinstance(p, dict)}
        for r in g.attrs.get("results") or []:
            v, pos = r.get("value") if isinstance(r, dict) else None, r.get("output") if isinstance(r, dict) else None
            hops = 0
            while type(v) is int and v in made and cost.rule[made[v].id] == view and made[v].inputs and hops < 64:
                v, hops = made[v].inputs[0].value, hops + 1
            outs = capture.nodes[node].outputs
            if v in params and type(pos) is int and pos < len(outs):
                out.add(outs[pos])
    return out


def fused(capture: Capture) -> set[int]:
    """Values XLA's loop fusion need never write out: made by an elementwise op and read only by
    elementwise ops of the same shape in the same scope (and no output of the program): they stay
    in the fused loop's registers (an optimizer's update, each moment's chain of multiplies)."""
    cost = capture.cost
    kinds = cost.notes.get("kinds") if cost is not None and isinstance(cost.notes, dict) else None
    if not isinstance(kinds, dict) or not capabilities(capture.framework).fuses_pointwise:  # eager Torch writes all
        return set()
    pointwise = {op for op, kind in kinds.items() if kind == "pointwise"}
    readers: dict[int, list] = {}
    for node in capture.nodes:
        for o in node.inputs:
            if o.value is not None:
                readers.setdefault(o.value, []).append(node)
    outputs = set(tree_leaves(capture.outputs))
    out: set[int] = set()
    for node in capture.nodes:
        if node.op not in pointwise or len(node.outputs) != 1:
            continue
        v = node.outputs[0]
        users, shape = readers.get(v, []), capture.values[v].shape
        if users and v not in outputs and all(
                u.op in pointwise and u.group == node.group and len(u.outputs) == 1
                and capture.values[u.outputs[0]].shape == shape for u in users):
            out.add(v)
    out |= _index_arithmetic(capture, pointwise, readers, outputs)
    return out | _fused_producers(capture, pointwise, readers, outputs)


def _fused_producers(capture: Capture, pointwise: set[str], readers: dict[int, list],
                     outputs: set[int]) -> set[int]:
    """Results of a :data:`FUSIBLE` op (a pad, a slice) read only by elementwise ops, or by
    fusible ops whose results are so read, within one body: XLA fuses them into the
    elementwise op's loop, which reads their operand where it needs it."""
    _, _, node_body = bodies(capture)
    out: set[int] = set()
    for node in reversed(capture.nodes):  # readers come later in traced order: decided first
        if node.op not in FUSIBLE:
            continue
        for v in node.outputs:
            users = readers.get(v, [])
            if v in outputs or not users:
                continue
            if all(node_body[u.id] == node_body[node.id] and (
                    u.op in pointwise or u.op in FUSIBLE and all(w in out for w in u.outputs)) for u in users):
                out.add(v)
    return out


#: Ops whose operands from position ``k`` on are start indices, which XLA computes inside the
#: op's own fusion.
_INDEXED = {"dynamic_slice": 1, "dynamic_update_slice": 2, "gather": 1, "scatter": 1, "scatter-add": 1,
            "scatter_add": 1}


def _index_arithmetic(capture: Capture, pointwise: set[str], readers: dict[int, list],
                      outputs: set[int]) -> set[int]:
    """Scalars XLA never writes out: a 0-d value made by an elementwise op (or a conversion or
    view of one) and read only by elementwise ops, conversions, views and as the start
    indices of a dynamic slice or update, within one body: index arithmetic (``(i - k) %
    n``), which XLA's fusion recomputes inside each op that reads it. (A 0-d value of another
    op, a device's ``axis_index`` or a loop's counter, is a buffer of its own.)"""
    cost = capture.cost
    views = {cost.rules.index("view")} if cost is not None and "view" in cost.rules else set()
    _, _, node_body = bodies(capture)

    def scalar_math(n: Any) -> bool:
        return n.op in pointwise or n.op == "convert_element_type" or (cost is not None and cost.rule[n.id] in views)

    made = {o: n for n in capture.nodes for o in n.outputs}
    out: set[int] = set()
    for v, node in made.items():
        if v in outputs or capture.values[v].shape != [] or not scalar_math(node) or not readers.get(v):
            continue
        ok = True
        for u in readers[v]:
            start = _INDEXED.get(u.op)
            index_only = start is not None and all(o.value != v for o in u.inputs[:start])
            if node_body[u.id] != node_body[node.id] or not (index_only or scalar_math(u)):
                ok = False
                break
        if ok:
            out.add(v)
    return out


def gathered(capture: Capture) -> dict[int, int]:
    """Per node, the bytes of the buffers the compiler gathers for it (the results of the
    all-gathers XLA adds, attributed to the node: a weight gathered for a matmul), held while
    it runs; the program's own collectives are its values already."""
    compiled = capture.compiled or {}
    out: dict[int, int] = {}
    for c in compiled.get("collectives") or []:
        if not isinstance(c, dict) or c.get("kind") != "all-gather" or type(c.get("node")) is not int:
            continue
        node = capture.nodes[c["node"]]
        if node.op in ("all_gather", "all_gather_invariant"):
            continue
        size = c.get("operand_bytes")
        devices = c.get("devices") or 1
        if isinstance(size, int):
            out[c["node"]] = out.get(c["node"], 0) + size * int(devices)
    return out
