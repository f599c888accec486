"""Unexecuted control-flow bodies: the subprograms of ``scan``, ``while`` and ``cond``
converted as *templates* under their opaque boundary node.

The boundary stays what the spec says it is: one opaque node at its level, with its
output shapes, and coverage ``partial`` with ``opaque_kernel``. In addition, each of
its bodies becomes a group of kind ``body`` whose nodes are the body's equations, as
traced once. Nothing here says that a branch was taken or that an iteration ran:

* ``attrs.executed`` is always ``False``; ``attrs.note`` says "one iteration, as
  traced; not executed";
* ``attrs.node``: the boundary node; ``attrs.role``: ``scan body``, ``while cond``,
  ``while body``, ``branch 0``, …; ``attrs.iterations``: the trip count where it is
  static (a ``scan``'s ``length``), ``None`` for a ``while`` (decided at run time);
  a branch has none (it runs at most once, and which one is decided at run time).

Wiring. A body is a template: its inputs are not the boundary's operands (a scan body
sees one slice of ``xs`` and a carry that changes every iteration). So every body
input gets a value of its own, with no producer, and ``attrs.parameters`` says what
each stands for: ``{"value": id, "stands_for": "carry 0", "operand": 1, "outer": 7}``
(``operand``: the boundary operand position it comes from, ``outer``: that operand's
value id, or ``None`` for a literal). ``attrs.results`` likewise names each body
output (``"carry 0 (next iteration)"``, ``"ys 0 (one slice)"``, ``"output 0"``) with
the boundary output position it feeds. No edge joins a template to the executed
program; the two are linked only through these attrs and ``attrs.node``.

Ordering and limits. Bodies are converted after the whole executed program (node,
value and group ids of the executed program do not depend on them), breadth first, so
a nested ``scan`` inside a body is itself a boundary node inside the body group, with
its own bodies. A body converts only when it fits: at most ``Limits.max_body_ops``
equations of its own (expanded ``jit``/``remat``/custom-derivative calls included,
nested control-flow bodies not), and within what ``max_ops`` / ``max_values`` /
``max_groups`` leave after everything converted before it. A body that does not fit
stays closed: its group exists, empty, with ``attrs.closed`` saying why and
``attrs.closed_limit`` naming the limit, so a large template never turns a capture that
fits into a failure. (Nodes and values are counted exactly beforehand, groups with an
upper bound; a limit passed anyway while walking undoes the body and closes it.) When
even the body group cannot be added (``max_groups`` reached), ``meta["bodies"]
["closed_without_group"]`` lists it. ``meta["bodies"]`` sums it all up: converted,
closed, template nodes, opaque primitives inside templates (not counted in
``meta["opaque_primitives"]``, which describes the executed program). A ``shard_map`` body
(below) is no template: its nodes are ``shard_map_nodes``, not ``template_nodes``.

``shard_map`` (and ``pmap``, which lowers to it) is the one body that is not control flow:
every shard of its manual axes runs it once, on its own shard (every device, when all the
mesh's axes are manual): it is executed, as a ``jit`` body is
(unless it lies inside a template itself: :func:`capture.graph.per_device.template_bodies`). Its body converts the same way,
breadth first, as a ``body`` group (role ``shard_map body``, ``devices``: how many shards
run it, the product of its ``manual_axes``' sizes, ``mesh``, ``auto_axes`` and
``shard_devices``: the axes left automatic and the devices one shard spans; see
:func:`_shard_axes`), with the shapes one shard sees; its parameters stand for
one shard of each operand (``attrs.parameters``: ``shard of operand 0``, the
spec). Every value inside is marked per-device (``sharding.local``), and the collectives
it holds name the mesh axes they run over (``capture.jax.convert``). A converted
``shard_map`` leaves nothing unexpanded, so its node stops being opaque; coverage
is partial only for what else stays closed. The boundary node keeps the global shapes.

A Pallas kernel (``pallas_call``) opens the same way: its kernel jaxpr is a ``body`` group
(role ``pallas kernel``) whose parameters are the blocks (Refs) one grid point sees:
``block of input 0``, ``block of output 0`` (the kernel writes it), scalar-prefetch
operands and scratch buffers; it returns nothing (it writes its output blocks).
``attrs.grid``, ``attrs.grid_points`` (how many times the kernel runs), ``attrs.blocks``
(each operand's block shape against its array's shape) and ``attrs.cost_estimate`` (the
author's ``pl.CostEstimate``, when given) say the rest. Like ``shard_map``, a converted
kernel leaves nothing unexpanded: its node stops being opaque.

Other subprograms (scatter reducers, ``reduce``, ``reduce_window``, ``sort``,
``custom_linear_solve``…) stay opaque boundaries without bodies.

JAX is not imported here: the module reads the jaxpr objects it is handed.
"""

from __future__ import annotations

import math

from typing import Any

from ..graph.meta import Bodies
from ..graph.model import Group
from ..graph.per_device import SHARD_MAP_ROLE
from ..worker.errors import LimitExceeded

BODY_NOTE = "one iteration, as traced; not executed"
SHARD_NOTE = ("one device's program, as traced (every device of the mesh runs it on its own shard; "
              "shapes are one device's); not executed")
SHARD_PART_NOTE = ("one shard's program, as traced (each shard of {0} runs it once; shapes are one shard's, "
                   "still global over {1}, which the compiler splits or replicates over the shard's {2} devices); "
                   "not executed")
BRANCH_NOTE = "one branch, as traced; not executed (which branch runs is decided at run time)"
BODY_KIND = "body"
PALLAS_ROLE = "pallas kernel"
PALLAS_NOTE = ("the kernel as traced, for one grid point: it runs once per grid point on the blocks its "
               "BlockSpecs select; not executed")
WIRING_NOTE = ("a body's inputs are values of its own (a template's inputs are not the boundary's "
               "operands: a carry changes every iteration, xs enter one slice at a time); each body "
               "group's attrs.parameters says which boundary operand each stands for (operand, outer), "
               "attrs.results which boundary output each feeds")

# Primitives whose bodies are converted as templates.
BODY_PRIMITIVES = frozenset({"scan", "while", "cond", "shard_map", "pallas_call"})
# Boundaries whose converted body leaves nothing unexpanded (every device, every grid
# point runs it): their node stops being opaque.
OPENED_ROLES = frozenset({SHARD_MAP_ROLE, PALLAS_ROLE})


class _Role:
    """One body of a boundary: its role, jaxpr, and what each input/output stands for."""

    __slots__ = ("role", "closed", "params", "results", "iterations", "extra")

    def __init__(self, role: str, closed: Any, params: list, results: list,
                 iterations: Any = "absent", extra: dict | None = None) -> None:
        self.role = role
        self.closed = closed
        self.params = params  # [(stands_for, operand position or None)] per body invar
        self.results = results  # [(stands_for, boundary output position or None)] per outvar
        self.iterations = iterations
        self.extra = extra or {}


def _jaxpr_of(body: Any) -> Any:
    inner = getattr(body, "jaxpr", None)
    if inner is not None and hasattr(inner, "eqns"):
        return inner
    return body if hasattr(body, "eqns") else None


def roles_of(prim: str, params: dict, n_operands: int, n_outputs: int) -> list[_Role]:
    """The bodies of one boundary equation, or [] when its params do not line up."""
    if prim == "scan":
        body = params.get("jaxpr")
        nc, nk = params.get("num_consts"), params.get("num_carry")
        if body is None or type(nc) is not int or type(nk) is not int:
            return []
        n_xs = n_operands - nc - nk
        n_ys = n_outputs - nk
        if n_xs < 0 or n_ys < 0:
            return []
        ins = ([(f"const {j}", j) for j in range(nc)]
               + [(f"carry {j}", nc + j) for j in range(nk)]
               + [(f"xs {j} (one slice)", nc + nk + j) for j in range(n_xs)])
        outs = ([(f"carry {j} (next iteration)", j) for j in range(nk)]
                + [(f"ys {j} (one slice)", nk + j) for j in range(n_ys)])
        length = params.get("length")
        extra: dict[str, Any] = {"reverse": bool(params.get("reverse", False))}
        return [_Role("scan body", body, ins, outs, length if type(length) is int else None, extra)]
    if prim == "while":
        cond, body = params.get("cond_jaxpr"), params.get("body_jaxpr")
        cn, bn = params.get("cond_nconsts"), params.get("body_nconsts")
        if cond is None or body is None or type(cn) is not int or type(bn) is not int:
            return []
        n_carry = n_operands - cn - bn
        if n_carry < 0 or n_carry != n_outputs:
            return []
        carry = [(f"carry {j}", cn + bn + j) for j in range(n_carry)]
        cond_ins = [(f"const {j}", j) for j in range(cn)] + carry
        body_ins = [(f"const {j}", cn + j) for j in range(bn)] + carry
        body_outs = [(f"carry {j} (next iteration)", j) for j in range(n_carry)]
        extra = {"trip_count": "decided at run time by the while cond"}
        return [
            _Role("while cond", cond, cond_ins, [("predicate: another iteration runs while true", None)], None, extra),
            _Role("while body", body, body_ins, body_outs, None, extra),
        ]
    if prim == "shard_map":
        body = params.get("jaxpr")
        in_specs, out_specs = params.get("in_specs") or (), params.get("out_specs") or ()
        if body is None:
            return []
        ins = [(f"shard of operand {j}" + _spec_text(in_specs, j), j) for j in range(n_operands)]
        outs = [(f"shard of output {j}" + _spec_text(out_specs, j), j) for j in range(n_outputs)]
        extra = _shard_axes(params)
        extra["note"] = SHARD_NOTE if extra["shard_devices"] == 1 else SHARD_PART_NOTE.format(
            ", ".join(extra["manual_axes"]), ", ".join(extra["auto_axes"]), extra["shard_devices"])
        return [_Role("shard_map body", body, ins, outs, extra=extra)]
    if prim == "pallas_call":
        return _pallas_roles(params, n_operands, n_outputs)
    if prim == "cond":
        branches = params.get("branches")
        if type(branches) not in (tuple, list) or not branches:
            return []
        ins = [(f"operand {j}", 1 + j) for j in range(n_operands - 1)]  # operand 0: the index
        outs = [(f"output {j}", j) for j in range(n_outputs)]
        when = ("runs when the index operand is {k}" + (" (lax.cond: {tf})" if len(branches) == 2 else ""))
        return [
            _Role(f"branch {k}", b, ins, outs, extra={
                "case": k, "selected": when.format(k=k, tf="false" if k == 0 else "true"), "note": BRANCH_NOTE})
            for k, b in enumerate(branches)
        ]
    return []


def _pallas_roles(params: dict, n_operands: int, n_outputs: int) -> list[_Role]:
    """A ``pallas_call``'s kernel: its Ref parameters (scalar prefetch, input blocks,
    output blocks, scratch) in the kernel's order; no results (it writes its outputs)."""
    body, gm = params.get("jaxpr"), params.get("grid_mapping")
    if body is None or gm is None:
        return []
    n_index = int(getattr(gm, "num_index_operands", 0) or 0)
    n_scratch = int(getattr(gm, "num_scratch_operands", 0) or 0)
    n_in = n_operands - n_index
    ins = ([(f"scalar prefetch {j}", j) for j in range(n_index)]
           + [(f"block of input {j}", n_index + j) for j in range(n_in)]
           + [(f"block of output {j} (the kernel writes it)", None) for j in range(n_outputs)]
           + [(f"scratch {j}", None) for j in range(n_scratch)])
    return [_Role(PALLAS_ROLE, body, ins, [], extra=pallas_attrs(params, n_outputs))]


def pallas_attrs(params: dict, n_outputs: int) -> dict[str, Any]:
    """What a ``pallas_call`` says about its kernel, as data: the grid, how many times the
    kernel runs, each operand's block against its array, the author's ``CostEstimate``."""
    gm = params.get("grid_mapping")
    grid = [int(g) if isinstance(g, int) else str(g) for g in (getattr(gm, "grid", ()) or ())]
    points = 1
    for g in grid:
        points = points * g if isinstance(g, int) else points
    blocks = []
    mappings = list(getattr(gm, "block_mappings", ()) or ())
    n_in = len(mappings) - n_outputs
    for k, bm in enumerate(mappings):
        what = f"input {k}" if k < n_in else f"output {k - n_in}"
        array = getattr(bm, "array_aval", None)
        blocks.append({"operand": what, "block_shape": [_block_dim(b) for b in getattr(bm, "block_shape", ()) or ()],
                       "array_shape": [int(d) if isinstance(d, int) else str(d) for d in getattr(array, "shape", ())]})
    ce = params.get("cost_estimate")
    out: dict[str, Any] = {"grid": grid, "grid_points": points if all(isinstance(g, int) for g in grid) else None,
                           "blocks": blocks, "note": PALLAS_NOTE, "interpret": bool(params.get("interpret", False))}
    if ce is not None:
        out["cost_estimate"] = {k: int(getattr(ce, k)) for k in ("flops", "transcendentals", "bytes_accessed")
                                if isinstance(getattr(ce, k, None), int)}
    name = params.get("name") or getattr(getattr(gm, "debug", None), "name", None)
    if isinstance(name, str) and name:
        out["kernel"] = name
    return out


def _block_dim(b: Any) -> Any:
    """One block dimension: its size (``Blocked(4)``: 4), ``None`` for a squeezed one."""
    if b is None or isinstance(b, int):
        return b
    size = getattr(b, "block_size", None)
    return int(size) if isinstance(size, int) else (None if size is None else str(size))


def _shard_axes(params: dict) -> dict[str, Any]:
    """A shard_map body's axes: ``manual_axes``, those it makes manual (``axis_names=``;
    every axis of its mesh when it names none); ``devices``, the product of their sizes:
    how many shards run the body, each once, per run of what holds it (its boundary's
    figure is the body's times it); and ``auto_axes``, the mesh's axes still automatic
    inside it (neither its own manual axes nor an enclosing shard_map's, which its mesh
    marks ``Manual``) with ``shard_devices``, the devices one shard spans (the product of
    their sizes): a partial-manual body's shapes are one shard's, not one device's, and
    the compiler splits or replicates it over those devices."""
    mesh = params.get("mesh")
    names = [str(a) for a in getattr(mesh, "axis_names", ()) or ()]
    size = {a: int(n) for a, n in zip(names, getattr(mesh, "axis_sizes", ()) or ())}
    manual = sorted(str(a) for a in (params.get("newly_manual_axes") or names))
    outer = {str(a) for a in getattr(mesh, "manual_axes", ()) or ()}
    auto = [a for a in names if a not in manual and a not in outer]
    return {"devices": math.prod(size.get(a, 1) for a in manual), "manual_axes": manual,
            "auto_axes": auto, "shard_devices": math.prod(size.get(a, 1) for a in auto)}


def _spec_text(specs: Any, j: int) -> str:
    """`` (P('data', None))`` for the ``j``-th spec, as JAX prints it."""
    try:
        return f" ({specs[j]})"
    except (IndexError, TypeError):
        return ""


def body_size(jaxpr: Any, expanded: dict) -> tuple[int, int, int]:
    """(equations, values, expanded call groups) this body adds when converted: its own
    equations and those of the calls it expands in place, not nested control-flow
    bodies (each of those is a body of its own)."""
    eqns = values = groups = 0
    values += len(jaxpr.invars) + len(jaxpr.constvars)
    stack = [jaxpr]
    while stack:
        j = stack.pop()
        for eqn in j.eqns:
            exp = expanded.get(eqn.primitive.name)
            if exp is not None:
                inner = _jaxpr_of(eqn.params.get(exp[1]))
                if inner is not None:
                    groups += 1
                    values += len(inner.constvars)
                    stack.append(inner)
                    continue
            eqns += 1
            values += len(eqn.outvars)
    return eqns, values, groups


def _scope_estimate(jaxpr: Any) -> int:
    """An upper bound on the name-stack scope groups a body's equations open."""
    seen: set = set()
    n = 0
    for eqn in jaxpr.eqns:
        ns = eqn.source_info.name_stack
        try:
            if ns in seen:
                continue
            seen.add(ns)
        except TypeError:
            pass
        text = str(ns) if ns is not None else ""
        n += text.count("/") + 1 if text else 0
    return n


def convert_bodies(conv: Any, expanded: dict, literal_value: Any) -> Bodies:
    """Convert the bodies queued in ``conv.pending_bodies`` (and those of boundaries
    found inside them), breadth first. Returns the summary kept in ``meta["bodies"]``."""
    queue = conv.pending_bodies
    executed_opaque = dict(conv.opaque_ops)
    executed_nodes = len(conv.nodes)
    converted = closed = template_nodes = shard_maps = shard_map_nodes = 0
    reasons: dict[str, int] = {}
    template_of: dict[int, bool] = {}  # body group -> a template (unexecuted), or a shard_map body that runs
    i = 0
    while i < len(queue):
        eqn, nid, parent, frame = queue[i]
        i += 1
        roles = roles_of(eqn.primitive.name, eqn.params, len(eqn.invars), len(eqn.outvars))
        for role in roles:
            if len(conv.groups) >= conv.max_groups:
                reasons["max_groups"] = reasons.get("max_groups", 0) + 1
                closed += 1
                conv.closed_without_group.append({"node": nid, "role": role.role,
                                                  "reason": "the capture's max_groups limit is reached"})
                continue
            gid = len(conv.groups)
            # A shard_map body runs on every device (it is no template) unless it lies in one.
            template_of[gid] = role.role != SHARD_MAP_ROLE or _in_template(conv.groups, parent, template_of)
            n = _convert_one(conv, eqn, nid, parent, frame, role, expanded, literal_value)
            if n is None:
                closed += 1
                why = conv.groups[-1].attrs["closed_limit"]
                reasons[why] = reasons.get(why, 0) + 1
            else:
                converted += 1
                if template_of[gid]:
                    template_nodes += n
                else:
                    shard_map_nodes += n
                if role.role in OPENED_ROLES:
                    shard_maps += role.role == "shard_map body"
                    # Every device (every grid point) runs it: nothing of it is left unexpanded.
                    prim = eqn.primitive.name
                    conv.nodes[nid].opaque = False
                    for counts in ((executed_opaque, conv.opaque_ops) if nid < executed_nodes
                                   else (conv.opaque_ops,)):
                        counts[prim] = counts.get(prim, 0) - 1
                        if counts[prim] <= 0:
                            del counts[prim]
    body_opaque = {k: v - executed_opaque.get(k, 0) for k, v in conv.opaque_ops.items()
                   if v - executed_opaque.get(k, 0)}
    # Opaque nodes inside templates are not part of the executed program's count.
    conv.opaque_ops.clear()
    conv.opaque_ops.update(executed_opaque)
    summary: Bodies = {"converted": converted, "closed": closed, "template_nodes": template_nodes,
                               "note": BODY_NOTE, "wiring": WIRING_NOTE}
    if shard_maps:
        summary["shard_map"] = shard_maps  # of the converted: per-device programs, not control flow
    if shard_map_nodes:
        summary["shard_map_nodes"] = shard_map_nodes  # every device runs them: not in template_nodes
    if body_opaque:
        summary["opaque_primitives"] = dict(sorted(body_opaque.items()))
    if reasons:
        summary["closed_reasons"] = dict(sorted(reasons.items()))
    if conv.closed_without_group:
        summary["closed_without_group"] = conv.closed_without_group
    return summary


def _in_template(groups: list[Group], parent: int | None, template_of: dict[int, bool]) -> bool:
    """Whether group ``parent`` (where a boundary node sits) lies inside a template body."""
    x = parent
    while type(x) is int and 0 <= x < len(groups):
        if groups[x].kind == BODY_KIND:
            return template_of.get(x, True)
        nxt = groups[x].parent
        x = nxt if type(nxt) is int and nxt < x else None
    return False


def _convert_one(conv: Any, eqn: Any, nid: int, parent: int | None, frame: int | None,
                 role: _Role, expanded: dict, literal_value: Any) -> int | None:
    """One body as a group; the number of template nodes, or None when it stays closed."""
    jaxpr = _jaxpr_of(role.closed)
    gid = len(conv.groups)
    attrs: dict[str, Any] = {
        "node": nid, "primitive": eqn.primitive.name, "role": role.role, "executed": False,
        "note": BODY_NOTE,
    }
    if role.role == PALLAS_ROLE:
        conv.nodes[nid].params.update({k: v for k, v in role.extra.items() if k != "note"})
    if role.iterations != "absent":
        attrs["iterations"] = role.iterations
    attrs.update(role.extra)
    if frame is not None:
        attrs["frame"] = frame
    name = _body_name(jaxpr, role.role)
    group = Group(gid, BODY_KIND, name, parent, attrs)
    conv.groups.append(group)

    why = None
    if jaxpr is None or len(jaxpr.invars) != len(role.params) or len(jaxpr.outvars) != len(role.results):
        why = ("signature", "the body's inputs and outputs do not line up with the boundary's operands")
    else:
        eqns, values, groups = body_size(jaxpr, expanded)
        groups += _scope_estimate(jaxpr)
        if eqns > conv.max_body_ops:
            why = ("max_body_ops", f"{eqns:,} equations, over the per-body budget of {conv.max_body_ops:,} (max_body_ops)")
        elif len(conv.nodes) + eqns > conv.max_ops:
            why = ("max_ops", f"{eqns:,} equations would pass the capture's max_ops limit ({conv.max_ops:,})")
        elif len(conv.values) + values > conv.max_values:
            why = ("max_values", f"{values:,} values would pass the capture's max_values limit ({conv.max_values:,})")
        elif len(conv.groups) + groups > conv.max_groups:
            why = ("max_groups", f"its groups would pass the capture's max_groups limit ({conv.max_groups:,})")
        attrs["equations"] = eqns
    if why is not None:
        attrs["closed"] = f"not converted: {why[1]}"
        attrs["closed_limit"] = why[0]
        return None

    operands = conv.nodes[nid].inputs  # the boundary's operands, in argument order
    Literal = conv.Literal
    mark = (len(conv.nodes), len(conv.values), len(conv.groups), len(conv.constants), len(conv.pending_bodies))
    saved = (conv.axis_sizes, conv.local_mesh)
    conv.axis_sizes = conv.body_axes.get(nid, conv.axis_sizes)
    if role.role == "shard_map body":
        _enter_shard_map(conv, eqn.params, attrs)
    try:
        return _fill(conv, eqn, nid, gid, frame, role, jaxpr, attrs, operands, Literal, literal_value)
    except LimitExceeded as exc:
        # The estimate above is exact for nodes and values and an upper bound for the
        # groups this converter opens; anything else that adds groups while walking
        # (module-call interception) may still pass a limit. Then the body is undone
        # and stays closed, as one over the estimate would.
        _undo(conv, mark)
        attrs.pop("parameters", None)
        limit = str(exc.details.get("limit", "a"))
        attrs["closed"] = f"not converted: converting it passed the capture's {limit} limit"
        attrs["closed_limit"] = limit
        return None
    finally:
        conv.axis_sizes, conv.local_mesh = saved


def _enter_shard_map(conv: Any, params: dict, attrs: dict) -> None:
    """While a shard_map body converts: its mesh's axes are the collectives' axes, and its
    values are one device's (``sharding.local``)."""
    mesh = params.get("mesh")
    names = [str(a) for a in getattr(mesh, "axis_names", ()) or ()]
    sizes = [int(n) for n in getattr(mesh, "axis_sizes", ()) or ()]
    conv.axis_sizes = {**conv.axis_sizes, **dict(zip(names, sizes))}
    idx = conv.shardings.mesh_index(mesh) if mesh is not None else None
    if idx is not None:
        attrs["mesh"] = idx
        # manual inside: its own axes and an enclosing shard_map's (its mesh marks them Manual)
        outer = [str(a) for a in getattr(mesh, "manual_axes", ()) or () if str(a) not in (attrs.get("manual_axes") or ())]
        conv.local_mesh = (idx, sorted(outer + list(attrs.get("manual_axes") or names)))


def _undo(conv: Any, mark: tuple) -> None:
    n_nodes, n_values, n_groups, n_consts, n_pending = mark
    del conv.nodes[n_nodes:]
    del conv.eqns[n_nodes:]
    del conv.values[n_values:]
    del conv.groups[n_groups:]
    del conv.constants[n_consts:]
    del conv.pending_bodies[n_pending:]
    # Scope caches must not point at the groups just removed (their ids will be reused).
    conv.forget_scopes(n_groups)
    if getattr(conv, "modules", None) is not None:
        conv.modules.forget_groups(n_groups)


def _fill(conv: Any, eqn: Any, nid: int, gid: int, frame: int | None, role: _Role, jaxpr: Any,
          attrs: dict, operands: list, Literal: Any, literal_value: Any) -> int:
    env: dict = {}
    for var in jaxpr.constvars:
        env[var] = conv.constant(var.aval, "closure")
    parameters = []
    for var, (stands_for, pos) in zip(jaxpr.invars, role.params):
        vid = conv.new_value(var.aval)
        env[var] = vid
        entry: dict[str, Any] = {"value": vid, "stands_for": stands_for, "operand": pos}
        if pos is not None and pos < len(operands):
            op = operands[pos]
            entry["outer"] = op.value
            if op.value is None:
                entry["literal"] = op.literal
            elif conv.local_mesh is not None:
                _shard_of(conv, vid, op.value)
            else:
                _split_of(conv, vid, op.value, stands_for)
        parameters.append(entry)
    attrs["parameters"] = parameters
    before = len(conv.nodes)
    conv.walk(jaxpr, env, gid, frame)
    results = []
    for atom, (stands_for, pos) in zip(jaxpr.outvars, role.results):
        entry = {"stands_for": stands_for, "output": pos}
        if type(atom) is Literal:
            entry["value"], entry["literal"] = None, literal_value(atom.val)
        else:
            ref = env[atom]
            if type(ref) is int:
                entry["value"] = ref
            else:  # a literal bound through an expanded call
                entry["value"], entry["literal"] = None, literal_value(ref.val)
        results.append(entry)
    attrs["results"] = results
    return len(conv.nodes) - before


def _shard_of(conv: Any, vid: int, outer: int) -> None:
    """A shard_map body parameter: one device's shard of the outer value, whose split it
    shows (mesh axes per dimension) with the outer, global shape."""
    local = conv.values[vid].sharding
    split = conv.values[outer].sharding
    if not isinstance(local, dict) or not isinstance(split, dict) or split.get("local"):
        return
    conv.values[vid].sharding = {**local, "spec": [list(s) if s is not None else None for s in split["spec"]],
                                 "global_shape": list(conv.values[outer].shape), "source": "shard_map in_specs"}


def _split_of(conv: Any, vid: int, outer: int, stands_for: str) -> None:
    """A scan/while/cond body parameter whose type says nothing of its split (automatic
    axes): the outer value's split, so that an opened body keeps a weight's
    ``1024@model``. An ``xs`` slice drops the scanned (leading) dimension."""
    from ..graph.sharding import sharding_record

    value, split = conv.values[vid], conv.values[outer].sharding
    if value.sharding is not None or not isinstance(split, dict) or split.get("local") or "mesh" not in split:
        return
    spec = split.get("spec") or []
    if stands_for.startswith("xs ") and len(value.shape) == len(spec) - 1:
        if spec[0]:
            return  # the scanned dimension itself is split: each slice lies on some devices only
        spec = spec[1:]
    elif len(value.shape) != len(spec):
        return
    mesh = split["mesh"]
    conv.values[vid].sharding = sharding_record(mesh, list(value.shape), spec, conv.shardings.sizes(mesh),
                                                source="the outer value's split")


def _body_name(jaxpr: Any, role: str) -> str:
    info = getattr(jaxpr, "debug_info", None) if jaxpr is not None else None
    func = getattr(info, "func_name", None) if info is not None else None
    if isinstance(func, str) and func and func != "<unknown>" and func != "<lambda>":
        return f"{role}: {func}"
    return role
