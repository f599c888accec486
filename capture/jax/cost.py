"""What each equation of a traced JAX program costs: FLOPs and unfused bytes, per equation
from the jaxpr, by JAX's own roofline rules where they apply.

Called by :func:`capture.jax.convert.convert` once the program (and its unexecuted
bodies) is converted, with the equation behind each node. Each node is counted by the
first rule that applies:

* ``roofline``: the rule ``jax.experimental.roofline`` registers for the primitive, where
  it counts something (``dot_general`` and ``conv_general_dilated`` from their dimension
  numbers, elementwise unary and binary primitives, ``reduce_sum``, ``select_n``,
  ``gather``, the ``scatter`` family with its update function): its ``unfused_flops``.
  (Its rules for ``cumsum`` and the like count one axis, not the elements, and most other
  primitives are registered as zeros: those are not reused.)
* ``ragged_dot``: ``ragged_dot_general`` from its dimension numbers: 2 FLOPs per output
  element per contracted element (a group of a ragged contracting dimension contracts its
  own rows only);
* ``power``: ``integer_pow`` as XLA expands it (square and multiply: ``x**2`` one multiply
  per element, ``x**1`` none), where roofline counts one per element whatever the power;
* ``elementwise``: elementwise primitives roofline has no count for (``tanh``, ``pow``,
  ``exp2``, ``clamp``…): 1 FLOP per output element;
* ``reduction``: ``reduce_max``, ``argmax``…: input elements − output elements;
* ``cumulative``: ``cumsum``, ``cummax``…: 1 FLOP per element;
* ``window``: ``reduce_window_sum``/``max``/``min`` (pooling): window elements per output element;
* ``random``: random bits (``threefry2x32``, ``random_bits``…): 1 FLOP per element generated;
* ``view``: ``reshape``, ``broadcast_in_dim``, ``squeeze``, ``expand_dims``…: no FLOPs, no bytes;
* ``data movement``: ``concatenate``, ``convert_element_type``, ``transpose``, ``slice``,
  ``pad``, ``iota``…: no FLOPs, their bytes;
* ``collective``: ``psum``, ``all_gather``…: no FLOPs here (what crosses devices is the
  sharding figures' business), their bytes;
* ``shard_map``: its body × the product of the sizes of the axes it makes manual (each
  shard of them runs the body once: the global figure; the body's own rows stay per
  device, or per shard of a partial-manual one: ``capture.analysis.scope``);
* control flow: a ``scan`` is its body × its length, a ``cond`` its largest branch, both
  marked as estimates (``NodeCosts.estimates``); a ``while`` is uncounted (its trip count
  is decided at run time), as is a boundary whose body stayed closed. The bodies' own
  nodes are counted as traced, once (one iteration, one branch);
* a Pallas kernel (``pallas_call``): the author's ``pl.CostEstimate`` when the call gives
  one (its ``flops``; its ``bytes_accessed``, the outputs' bytes counted as written and the
  rest as read); else its kernel body (one grid point, as traced) times the grid's points
  for FLOPs, and its operands read and results written once for bytes, marked as an
  estimate; uncounted when the body stayed closed. The kernel's own nodes are counted
  once, as traced (reads and writes of its blocks as data movement);
* anything else is *uncounted* (``-1``), listed with the reason, never a zero.

Bytes are unfused: every operand read and every result written at its shape and dtype;
views move nothing; a gather or slice reads what it takes (the size of its result) and
its indices; a scatter or dynamic_update_slice reads and writes the rows it updates.

JAX is imported only inside functions: importing this module needs the standard library.
"""

from __future__ import annotations

import math
from typing import Any

from ..graph.model import UNCOUNTED, Group, Node, NodeCosts
from ..graph.per_device import innermost_bodies
from ..units import COUNT_LIMIT, OVERFLOW_REASON

#: What each rule name means (``NodeCosts.notes["rules"]``).
RULES = {
    "roofline": "jax.experimental.roofline's rule for the primitive (its unfused FLOPs)",
    "ragged_dot": "ragged_dot_general from its dimension numbers: 2 FLOPs per output element per contracted element",
    "elementwise": "an elementwise primitive roofline does not count: 1 FLOP per output element",
    "power": "integer_pow: the multiplies of square-and-multiply per element (x**2: 1, x**3: 2, x**1: 0), a "
             "division more for a negative power",
    "reduction": "a reduction: input elements - output elements (n - 1 per result)",
    "cumulative": "a cumulative scan (cumsum, cummax…): 1 FLOP per element",
    "window": "a windowed reduction (pooling): window elements per output element",
    "random": "random bit generation: 1 FLOP per element generated",
    "view": "a reshape or broadcast: no FLOPs, no bytes",
    "data movement": "copies, casts, slices, concatenations, transposes: no FLOPs, the bytes they move",
    "collective": "a collective: no FLOPs counted here, its bytes",
    "scan body × length": "estimate: the scan's body (one iteration, as traced) times its length",
    "shard_map body × devices": "a shard_map: its body (the program one shard of its manual axes runs: one device "
                                "when every mesh axis is manual) times the shards that run it, the product of its "
                                "manual axes' sizes (the global figure; the body's own rows are per device or per "
                                "shard)",
    "cond: largest branch": "estimate: the cond's largest branch (which one runs is decided at run time)",
    "while: trip count unknown": "uncounted: a while loop's trip count is decided at run time "
                                 "(its body is counted once, as traced)",
    "body not converted": "uncounted: the control-flow body stayed closed (a capture limit)",
    "opaque subprogram": "uncounted: a primitive carrying a subprogram TensorViz does not open",
    "pallas: CostEstimate": "the Pallas kernel author's pl.CostEstimate: its flops; its bytes_accessed, the "
                            "outputs' bytes as written and the rest as read",
    "pallas: kernel body × grid": "estimate: the Pallas kernel's body (one grid point, as traced) times the grid's "
                                  "points for FLOPs; bytes: its operands read and its results written once",
    "no rule": "uncounted: no rule counts this primitive",
}
NOTES = {
    "flops": "floating-point operations; a multiply-add counts 2 (jax.experimental.roofline's convention)",
    "bytes": "unfused: each equation reads its operands and writes its results at their shapes and dtypes; "
             "views move nothing; gathers and slices read what they take",
}

_ELEMENTWISE = frozenset({
    "tanh", "exp2", "pow", "atan2", "acosh", "asinh", "atanh", "clamp", "nextafter", "polygamma", "igamma",
    "igammac", "igamma_grad_a", "random_gamma_grad", "regularized_incomplete_beta", "zeta", "complex",
    "shift_left", "shift_right_arithmetic", "shift_right_logical", "population_count", "clz", "mulhi",
    "reduce_precision", "add_any", "erf_inv", "sign", "logistic", "is_finite", "copysign", "square",
})
_REDUCTIONS = frozenset({"reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "reduce_xor",
                         "argmax", "argmin"})
_CUMULATIVE = frozenset({"cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"})
_WINDOWS = frozenset({"reduce_window_sum", "reduce_window_max", "reduce_window_min"})
_RANDOM = frozenset({"random_bits", "threefry2x32", "rng_bit_generator", "rng_uniform"})
_VIEWS = frozenset({"reshape", "squeeze", "expand_dims", "broadcast_in_dim", "sharding_constraint", "pvary",
                    "optimization_barrier", "name", "tie", "random_wrap", "random_unwrap", "stop_gradient",
                    "mesh_cast", "reshard"})
_DATA = frozenset({"concatenate", "convert_element_type", "copy", "copy_p", "device_put", "dynamic_slice",
                   "dynamic_update_slice", "pad", "rev", "slice", "split", "iota", "transpose", "zeros_like",
                   "tile", "stack", "unstack", "empty", "random_seed", "random_fold_in", "random_split",
                   "random_clone", "to_edtype", "from_edtype", "iota_2x32_shape", "bitcast_convert_type",
                   "select_and_gather_add", "platform_index", "create_token", "after_all",
                   # a Pallas kernel's block reads and writes (``x_ref[...]``, ``o_ref[...] = v``)
                   "get", "swap", "addupdate"})
# Reads and writes of a Ref (Pallas blocks): what moves is the value read or written.
_REF_OPS = frozenset({"get", "swap", "addupdate"})
_COLLECTIVES = frozenset({"psum", "pmax", "pmin", "all_gather", "all_to_all", "ppermute", "reduce_scatter",
                          "psum_invariant", "psum_scatter", "pbroadcast", "axis_index", "all_gather_invariant"})
# Roofline rules not reused (see the module docstring) besides its registered zeros.
_NOT_REUSED = _CUMULATIVE | _COLLECTIVES | {"debug_callback", "pure_callback", "io_callback"}
# Read what they take (their result's size) and their index operands, not the whole operand.
_TAKING = frozenset({"gather", "slice", "dynamic_slice"})
# Read and write only the rows they update (operand 0 is updated in place).
_UPDATING = frozenset({"scatter", "scatter-add", "scatter_add", "scatter-mul", "scatter_mul", "scatter-min",
                       "scatter_min", "scatter-max", "scatter_max", "scatter-sub", "scatter_sub",
                       "scatter_apply", "dynamic_update_slice"})
_MAX = COUNT_LIMIT
#: What kind of arithmetic each node's FLOPs are (``notes["kinds"]``, per primitive), as the Torch
#: count names them: matmul, convolution, attention, pointwise, reduction/norm, scan, other. A
#: ``scan``, ``cond`` or ``shard_map`` boundary is ``control flow``: a reader splits it by its
#: bodies' kinds.
_RULE_KINDS = {"ragged_dot": "matmul", "elementwise": "pointwise", "power": "pointwise", "reduction": "reduction/norm",
               "cumulative": "scan", "window": "reduction/norm", "random": "pointwise",
               "scan body × length": "control flow", "shard_map body × devices": "control flow",
               "cond: largest branch": "control flow",
               "pallas: kernel body × grid": "control flow"}
_PRIM_KINDS = {"dot_general": "matmul", "conv_general_dilated": "convolution", "reduce_sum": "reduction/norm",
               "dot_product_attention": "attention"}


def kind_of(prim: str, rule: str) -> str:
    """The kind of the FLOPs of primitive ``prim`` counted by ``rule``."""
    got = _PRIM_KINDS.get(prim) or _RULE_KINDS.get(rule)
    if got is not None:
        return got
    if rule == "roofline":
        return "reduction/norm" if prim.startswith(("reduce_", "argm")) else "pointwise"
    return "other"


_ROOFLINE: Any = None


def load_rules() -> Any:
    """``jax.experimental.roofline``'s module, its rules registered: imported once per
    process. The JAX capture calls it when it imports JAX (``capture.jax.framework``), so
    converting a program does not pay for the import."""
    global _ROOFLINE
    if _ROOFLINE is None:
        import importlib

        importlib.import_module("jax.experimental.roofline")  # registers the rules
        # the module (the package re-exports its function ``roofline`` under the same name)
        _ROOFLINE = importlib.import_module("jax.experimental.roofline.roofline")
    return _ROOFLINE


class _Costs:
    def __init__(self) -> None:
        roofline_mod = load_rules()
        self.rooflines = roofline_mod._rooflines
        self.roofline = roofline_mod
        self.reasons: dict[str, str] = {}
        self._rules: dict[Any, Any] = {}

    def rule_of(self, prim: Any) -> Any:
        """Roofline's rule for ``prim`` when it counts something and is reused, else None."""
        got = self._rules.get(prim, False)
        if got is False:
            rule = self.rooflines.get(prim)
            if rule is not None and (getattr(rule, "__qualname__", "").startswith("register_standard_roofline")
                                     or prim.name in _NOT_REUSED):
                rule = None
            got = self._rules[prim] = rule
        return got

    def flops(self, eqn: Any) -> tuple[int, str]:
        prim = eqn.primitive
        name = prim.name
        avals_in = [_aval(v) for v in eqn.invars]
        avals_out = [v.aval for v in eqn.outvars]
        if not (all(map(_sized, avals_in)) and all(map(_sized, avals_out))):
            self.reasons.setdefault(name, "a shape that is not a fixed size")
            return UNCOUNTED, "no rule"
        if name in _VIEWS:
            return 0, "view"
        if name in _DATA:
            return 0, "data movement"
        if name in _COLLECTIVES:
            return 0, "collective"
        if name == "integer_pow":  # roofline counts 1 per element whatever the power
            return _power(eqn.params.get("y"), max((_size(a) for a in avals_out), default=0)), "power"
        rule = self.rule_of(prim)
        if rule is not None:
            try:
                result = self._roofline(rule, eqn, avals_in, avals_out)
            except Exception as exc:
                self.reasons.setdefault(name, f"its roofline rule failed ({type(exc).__name__})")
                return UNCOUNTED, "no rule"
            return int(result.unfused_flops), "roofline"
        out = sum(_size(a) for a in avals_out)
        if name == "ragged_dot_general":
            return self._ragged(eqn, avals_in, avals_out), "ragged_dot"
        if name in _ELEMENTWISE:
            return max((_size(a) for a in avals_out), default=0), "elementwise"
        if name in _REDUCTIONS:
            return max(_size(avals_in[0]) - max((_size(a) for a in avals_out), default=1), 0), "reduction"
        if name in _CUMULATIVE:
            return _size(avals_in[0]), "cumulative"
        if name in _WINDOWS:
            window = eqn.params.get("window_dimensions") or ()
            return out * math.prod(int(d) for d in window), "window"
        if name in _RANDOM:
            return out, "random"
        self.reasons.setdefault(name, RULES["no rule"])
        return UNCOUNTED, "no rule"

    def _roofline(self, rule: Any, eqn: Any, avals_in: list, avals_out: list) -> Any:
        rl = self.roofline
        shapes = [rl.RooflineShape.from_aval(a) for a in avals_in]
        ctx = rl.RooflineRuleContext(
            name_stack=eqn.source_info.name_stack, primitive=eqn.primitive, avals_in=avals_in,
            avals_out=avals_out, jaxpr_eqn_ctx=eqn.ctx, mesh=None, pin_lhs_in_vmem=False, pin_rhs_in_vmem=False)
        return rule(ctx, *shapes, **eqn.params)

    @staticmethod
    def _ragged(eqn: Any, avals_in: list, avals_out: list) -> int:
        dn = eqn.params["ragged_dot_dimension_numbers"]
        (lhs_contract, _), _ = dn.dot_dimension_numbers
        lhs = avals_in[0].shape
        contracted = math.prod(int(lhs[d]) for d in lhs_contract)
        flops = 2 * _size(avals_out[0]) * contracted
        ragged = tuple(dn.lhs_ragged_dimensions)
        if ragged and ragged[0] in tuple(lhs_contract):
            groups = int(avals_in[2].shape[-1]) if len(avals_in) > 2 and avals_in[2].shape else 1
            flops //= max(groups, 1)  # each group contracts its own rows only
        return flops


def _power(y: Any, elements: int) -> int:
    """``x ** y`` for an integer ``y``, as XLA expands it (square and multiply): one multiply
    per squaring and per further set bit, a division for a negative power; ``x ** 1`` and
    ``x ** 0`` compute nothing."""
    if type(y) is not int:
        return elements
    n = abs(y)
    per = max(n.bit_length() - 1, 0) + max(bin(n).count("1") - 1, 0) + (1 if y < 0 else 0)
    return per * elements


def _aval(atom: Any) -> Any:
    aval = getattr(atom, "aval", None)
    if aval is None:
        from jax import core

        aval = core.get_aval(atom.val)
    return aval


def _sized(aval: Any) -> bool:
    shape = getattr(aval, "shape", None)
    if shape is None:
        return False
    for d in shape:
        if type(d) is not int and not isinstance(d, int):
            return False
    return getattr(getattr(aval, "dtype", None), "itemsize", None) is not None


def _size(aval: Any) -> int:
    return math.prod(int(d) for d in aval.shape)


def _bytes(aval: Any) -> int:
    return _size(aval) * int(aval.dtype.itemsize)


def _moved(eqn: Any, kind: str) -> tuple[int, int]:
    """(bytes read, bytes written) of one equation, unfused."""
    if kind == "view":
        return 0, 0
    name = eqn.primitive.name
    ins = [_aval(v) for v in eqn.invars]
    outs = [v.aval for v in eqn.outvars]
    if not (all(map(_sized, ins)) and all(map(_sized, outs))):
        return UNCOUNTED, UNCOUNTED
    if name in _REF_OPS:  # a block read (get) or written (swap, addupdate): the value's bytes
        moved = _bytes(outs[0]) if name == "get" else _bytes(ins[1])
        return moved, moved
    if name in _TAKING:  # the result's worth of the operand, and the indices
        taken = sum(_bytes(a) for a in outs)
        return taken + sum(_bytes(a) for a in ins[1:]), taken
    if name in _UPDATING:  # the updated rows, read and written, and the indices
        updates = ins[-1] if name == "dynamic_update_slice" else (ins[2] if len(ins) > 2 else ins[-1])
        rows = _bytes(updates)
        return rows + sum(_bytes(a) for a in ins[1:]), rows
    seen: set[int] = set()
    read = 0
    for v, a in zip(eqn.invars, ins):
        if id(v) in seen:
            continue
        seen.add(id(v))
        read += _bytes(a)
    return read, sum(_bytes(a) for a in outs)


# Counted before any roofline rule is asked (``_Costs.flops``).
_BEFORE_ROOFLINE = _VIEWS | _DATA | _COLLECTIVES | {"integer_pow"}


def _figures(costs: _Costs, eqn: Any, memo: dict[tuple, tuple[int, str, int, int]]) -> tuple[int, str, int, int]:
    """``(FLOPs, rule, bytes read, bytes written)`` of one equation, counted once per
    signature: equations of one primitive on equal abstract values with equal params (a
    layer repeated, a Python loop of primitives) share one count (roofline's rules build
    several objects per call). An equation no roofline rule counts is counted directly:
    its rule costs less than its signature."""
    prim = eqn.primitive
    if prim.name in _BEFORE_ROOFLINE or costs.rule_of(prim) is None:
        f, kind = costs.flops(eqn)
        return (f, kind, *_moved(eqn, kind))
    key = _signature(eqn)
    got = memo.get(key) if key is not None else None
    if got is None:
        f, kind = costs.flops(eqn)
        r, w = _moved(eqn, kind)
        got = (f, kind, r, w)
        if key is not None:
            memo[key] = got
    return got


def _signature(eqn: Any) -> tuple | None:
    """What an equation's figures are computed from: its primitive, params, operand and
    result abstract values, and which operands are the same variable (read once); None
    when a param cannot be hashed (an array)."""
    first: dict[int, int] = {}
    ins = []
    for pos, v in enumerate(eqn.invars):
        ins.append((_aval(v), first.setdefault(id(v), pos)))
    try:
        key = (eqn.primitive, tuple((k, type(v), v) for k, v in eqn.params.items()), tuple(ins),
               tuple(v.aval for v in eqn.outvars))
        hash(key)
    except TypeError:
        return None
    return key


def count(nodes: list[Node], groups: list[Group], eqns: list[Any]) -> NodeCosts:
    """The cost columns of a converted program: ``eqns[i]`` is the equation behind ``nodes[i]``."""
    from .control_flow import BODY_KIND

    costs = _Costs()
    rules: list[str] = []
    rule_ids: dict[str, int] = {}

    def rule_id(name: str) -> int:
        k = rule_ids.get(name)
        if k is None:
            k = rule_ids[name] = len(rules)
            rules.append(name)
        return k

    n = len(nodes)
    flops, read, written, rule = [0] * n, [0] * n, [0] * n, [0] * n
    boundaries = []
    memo: dict[tuple, tuple[int, str, int, int]] = {}
    for i, (node, eqn) in enumerate(zip(nodes, eqns)):
        if node.opaque or node.op in ("pallas_call", "shard_map"):  # a shard_map's body is open; its node counts it
            boundaries.append(i)
            if eqn.primitive.name not in ("scan", "cond", "while") and costs.rule_of(eqn.primitive) is not None:
                boundaries.pop()  # a scatter with its update function: roofline counts it
            else:
                continue
        f, kind, r, w = _figures(costs, eqn, memo)
        flops[i] = f if f <= _MAX else _fit(f, node.op, costs.reasons)
        read[i] = r if r <= _MAX else UNCOUNTED
        written[i] = w if w <= _MAX else UNCOUNTED
        k = rule_ids.get(kind)
        rule[i] = rule_id(kind) if k is None else k

    # Control-flow boundaries, innermost first (a body's nodes come after its boundary's,
    # and a nested boundary's body after the one holding it).
    bodies, members = _body_members(nodes, groups, BODY_KIND)
    estimates = []
    for i in sorted(boundaries, reverse=True):
        prim = nodes[i].op
        mine = bodies.get(i, [])
        sums = []
        closed = False
        for g in mine:
            if "closed" in groups[g].attrs:
                closed = True
                continue
            ids = members.get(g, [])
            sums.append((_sum(flops[j] for j in ids), _sum(read[j] for j in ids), _sum(written[j] for j in ids),
                         groups[g].attrs.get("role", "")))
        (flops[i], read[i], written[i]), why, reason = _boundary(prim, eqns[i], mine, closed, sums, groups)
        rule[i] = rule_id(why)
        if why in _ESTIMATED:
            estimates.append(i)
        if reason is not None:
            costs.reasons.setdefault(prim, reason)
    notes: dict[str, Any] = dict(NOTES)
    import jax

    notes["counter"] = f"jax {jax.__version__}: jax.experimental.roofline rules where they count, TensorViz's table " \
                       "for the rest"
    notes["rules"] = {name: RULES[name] for name in rules}
    uncounted = {nodes[i].op for i in range(n) if flops[i] < 0}
    if uncounted:
        notes["uncounted"] = {op: costs.reasons.get(op, RULES["no rule"]) for op in sorted(uncounted)}
    kinds = _kinds(nodes, flops, rule, rules)
    if kinds:
        notes["kinds"] = kinds
    return NodeCosts(flops, read, written, rule, rules, sorted(estimates), notes)


def _kinds(nodes: list[Node], flops: list[int], rule: list[int], rules: list[str]) -> dict[str, str]:
    """Per primitive that counted FLOPs, their kind (:func:`kind_of`)."""
    kinds: dict[str, str] = {}
    for node, f, k in zip(nodes, flops, rule):
        if f > 0 and node.op not in kinds:
            kinds[node.op] = kind_of(node.op, rules[k])
    return kinds


_ESTIMATED = frozenset({"scan body × length", "cond: largest branch", "pallas: kernel body × grid"})
_NONE = (UNCOUNTED, UNCOUNTED, UNCOUNTED)


def _boundary(prim: str, eqn: Any, mine: list[int], closed: bool, sums: list,
              groups: list[Group]) -> tuple[tuple[int, int, int], str, str | None]:
    """A subprogram boundary's figures from its bodies' sums: ``(figures, rule, reason it
    is uncounted or None)``."""
    if prim == "pallas_call":
        figures, why = _pallas(eqn, mine, closed, sums, groups)
        if why in ("body not converted", "opaque subprogram"):
            return figures, why, RULES[why]
        return figures, why, OVERFLOW_REASON if figures[0] < 0 and why != "no rule" else None
    if prim == "while":
        return _NONE, "while: trip count unknown", RULES["while: trip count unknown"]
    if prim == "shard_map" and mine and not closed and type(groups[mine[0]].attrs.get("devices")) is int:
        # every shard of its manual axes runs the body once: the whole program is the body × their count
        devices = groups[mine[0]].attrs["devices"]
        f, r, w, _ = sums[0]
        return (_scale(f, devices), _scale(r, devices), _scale(w, devices)), "shard_map body × devices", None
    if closed or not mine or prim not in ("scan", "cond"):
        why = "body not converted" if mine else "opaque subprogram"
        return _NONE, why, RULES[why]
    if prim == "scan":
        length = groups[mine[0]].attrs.get("iterations")
        f, r, w, _ = sums[0]
        if type(length) is not int:
            return _NONE, "no rule", "its length is not static"
        figures = (_scale(f, length), _scale(r, length), _scale(w, length))
        # beyond the file's int64 column: uncounted with the reason, never clipped
        return figures, "scan body × length", OVERFLOW_REASON if figures[0] < 0 <= f else None
    f, r, w, _ = max(sums, key=lambda s: (s[0], s[1] + s[2]))  # cond: the largest branch
    return (f, r, w), "cond: largest branch", None


def _pallas(eqn: Any, mine: list[int], closed: bool, sums: list, groups: list[Group]) -> tuple[tuple[int, int, int], str]:
    """A ``pallas_call``'s figures and the rule that gave them."""
    written = _sum(_bytes(v.aval) for v in eqn.outvars if _sized(v.aval))
    read = _sum(_bytes(a) for a in (_aval(v) for v in eqn.invars) if _sized(a))
    ce = eqn.params.get("cost_estimate")
    if ce is not None and isinstance(getattr(ce, "flops", None), int) and isinstance(getattr(ce, "bytes_accessed", None), int):
        total = _fit(int(ce.bytes_accessed))
        out = min(written, total)
        return (_fit(int(ce.flops)), total - out if total >= 0 else UNCOUNTED, out), "pallas: CostEstimate"
    if closed or not mine or not sums:
        why = "body not converted" if mine else "opaque subprogram"
        return (UNCOUNTED, UNCOUNTED, UNCOUNTED), why
    points = groups[mine[0]].attrs.get("grid_points")
    if type(points) is not int:
        return (UNCOUNTED, UNCOUNTED, UNCOUNTED), "no rule"
    return (_scale(sums[0][0], points), read, written), "pallas: kernel body × grid"


def _body_members(nodes: list[Node], groups: list[Group], body_kind: str) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """The body groups of each boundary node, and the nodes directly inside each body
    (innermost): ``(boundary node -> bodies, body -> nodes)``."""
    body_of = innermost_bodies(groups, body_kind)
    bodies: dict[int, list[int]] = {}
    for g, grp in enumerate(groups):
        if grp.kind == body_kind and type(grp.attrs.get("node")) is int:
            bodies.setdefault(grp.attrs["node"], []).append(g)
    members: dict[int, list[int]] = {}
    for i, node in enumerate(nodes):
        b = body_of[node.group] if node.group is not None else -1
        if b >= 0:
            members.setdefault(b, []).append(i)
    return bodies, members


def _fit(x: int, op: str | None = None, reasons: dict[str, str] | None = None) -> int:
    """``x``, or UNCOUNTED beyond what a graph file stores (never clipped to the limit),
    with the reason for ``op`` in ``reasons`` when given."""
    if x <= _MAX:
        return x
    if op is not None and reasons is not None:
        reasons.setdefault(op, OVERFLOW_REASON)
    return UNCOUNTED


def _sum(xs: Any) -> int:
    """A total that stays uncounted-aware: an uncounted part is left out (it is listed on its
    own); UNCOUNTED beyond the limit."""
    return _fit(sum(x for x in xs if x > 0))


def _scale(x: int, k: int, op: str | None = None, reasons: dict[str, str] | None = None) -> int:
    return UNCOUNTED if x < 0 else _fit(x * k, op, reasons)
