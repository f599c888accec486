"""XLA's own FLOPs per compiled instruction, put on the equations their ``op_name`` names
(``capture.jax.xla_flops``, ``capture.jax.per_device.xla_column``; issue 46).

* Reading the HLO text (fast, no JAX): instruction lines with tuple types, operand comments,
  quoted metadata; which computations are only applied (a reduction's ``to_apply``); the
  one-instruction module; the ``op_name`` an instruction XLA made without one inherits.
* The instructions costed one by one add up to ``cost_analysis()`` exactly (one device,
  in process): integer ``%`` and ``//`` by constants and by a value, loops, reductions, a
  sort, transcendentals.
* The validation table (slow, 2/4/8 simulated devices): programs of our own whose scalar
  index arithmetic XLA rewrites (``axis_index`` with ``% 3``, ``% 4``, ``// 2``,
  ``(i + 1) % n``, the same in a ``fori_loop``, an unrolled ring matmul): the graph's
  per-device FLOPs equal ``cost_analysis()``'s, and each FLOP is on the node whose equation
  XLA made it for (the six ops of a ``% 4`` on the ``rem`` node).
"""

from __future__ import annotations

import pytest

pytest.importorskip("jax")

from capture.jax import xla_flops as xf  # noqa: E402

pytestmark = pytest.mark.jax

HLO = '''HloModule m, is_scheduled=true

%region_add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b), metadata={op_name="jit(f)/reduce_sum" stack_frame_id=3}
}

%fused_computation (param_0: u32[], param_1: f32[8]) -> f32[8] {
  %param_0 = u32[] parameter(0)
  %constant.1 = u32[] constant(7)
  %and.1 = u32[] and(%param_0, %constant.1), metadata={op_name="jit(f)/shard_map/axis_index" stack_frame_id=1}
  %convert.1 = f32[] convert(%and.1)
  %broadcast.1 = f32[8]{0} broadcast(%convert.1), dimensions={}
  %param_1 = f32[8]{0} parameter(1)
  ROOT %multiply.1 = f32[8]{0} multiply(%param_1, %broadcast.1), metadata={op_name="jit(f)/shard_map/mul" stack_frame_id=2}
}

ENTRY %main (p: f32[8]) -> (f32[8], f32[]) {
  %p = f32[8]{0} parameter(0), metadata={op_name="x"}
  %pid = u32[] partition-id()
  %fusion = f32[8]{0} fusion(%pid, %p), kind=kLoop, calls=%fused_computation, metadata={op_name="jit(f)/shard_map/mul"}
  %zero = f32[] constant(0)
  %r = f32[] reduce(%fusion, %zero), dimensions={0}, to_apply=%region_add, metadata={op_name="jit(f)/reduce_sum" stack_frame_id=3}
  ROOT %t = (f32[8]{0}, /*index=1*/f32[]) tuple(/*index=0*/%fusion, %r), metadata={op_name="a\\"b,{c}"}
}
'''


def test_instruction_lines():
    p = xf.parse_instruction('  ROOT %t = (f32[8]{0}, /*index=1*/f32[]) tuple(/*index=0*/%fusion, %r), '
                             'metadata={op_name="a\\"b,{c}"}')
    assert p is not None and p["name"] == "t" and p["op"] == "tuple"
    assert p["type"] == "(f32[8]{0}, /*index=1*/f32[])"
    assert [xf._ref(o) for o in p["operands"]] == ["fusion", "r"]
    p = xf.parse_instruction("  %dot.1 = f32[2,4]{1,0} dot(f32[2,3]{1,0} %a, %b), lhs_contracting_dims={1}, "
                             "rhs_contracting_dims={0}, metadata={op_name=\"jit(f)/dot_general\"}")
    assert p["type"] == "f32[2,4]{1,0}" and [xf._ref(o) for o in p["operands"]] == ["a", "b"]
    assert xf._attrs_kept(p["attrs"]) == ", lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    assert xf.parse_instruction("HloModule m") is None
    assert xf.parse_instruction("}") is None
    assert xf._split_top('a, b={1,2}, c="x,\\"y", d=(1,2)') == ['a', 'b={1,2}', 'c="x,\\"y"', 'd=(1,2)']


def test_computations_and_what_is_only_applied():
    comps, entry = xf.computations(HLO)
    assert entry == "main" and set(comps) == {"region_add", "fused_computation", "main"}
    assert xf._applied(HLO) == {"region_add"}  # its add is the reduce's cost, not costed again
    c = xf._Computation(comps["fused_computation"])
    # XLA's convert made without metadata: the op_name of what reads it (the multiply)
    assert c.nearest("convert.1", lambda: None) == ("jit(f)/shard_map/mul", 2)
    assert c.nearest("constant.1", lambda: None) == ("jit(f)/shard_map/axis_index", 1)
    assert c.root == "multiply.1" and c.own() == ("jit(f)/shard_map/mul", 2)


def test_metadata_through_fusions_without_any():
    """A fused dot whose fusion carries no metadata, read by another fusion without any: the
    work the reader runs names the equation (XLA's CPU dot fusions)."""
    text = """HloModule m

%fused_dot (a: f32[2,2], b: f32[2,2]) -> f32[2,2] {
  %a = f32[2,2]{1,0} parameter(0)
  %b = f32[2,2]{1,0} parameter(1)
  ROOT %dot.1 = f32[2,2]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%fused_copy (c: f32[2,2]) -> f32[2,2] {
  %c = f32[2,2]{1,0} parameter(0)
  ROOT %neg = f32[2,2]{1,0} negate(%c), metadata={op_name="jit(f)/neg" stack_frame_id=4}
}

ENTRY %main (x: f32[2,2]) -> f32[2,2] {
  %x = f32[2,2]{1,0} parameter(0)
  %d = f32[2,2]{1,0} fusion(%x, %x), kind=kCustom, calls=%fused_dot
  ROOT %e = f32[2,2]{1,0} fusion(%d), kind=kLoop, calls=%fused_copy
}
"""
    got = xf.instruction_flops(text, lambda t: 1.0)
    by = {r["name"]: r for r in got["instructions"]}
    assert by["dot.1"]["op_name"] == "jit(f)/neg" and by["dot.1"]["inherited"]
    assert by["neg"]["op_name"] == "jit(f)/neg" and not by["neg"].get("inherited")


def test_one_instruction_module_carries_its_reducer():
    comps, _ = xf.computations(HLO)
    main = xf._Computation(comps["main"])
    r = next(p for p in main.parsed if p["name"] == "r")
    text = xf.module_text(r, main.types, comps)
    assert "%region_add" in text and "metadata" not in text
    assert "ROOT %r = f32[] reduce(%p0, %p1), dimensions={0}, to_apply=%region_add" in text
    assert xf.module_text({**r, "operands": ["%unknown"]}, main.types, comps) is None


def test_costs_each_computing_instruction_once():
    seen: list[str] = []

    def cost(text: str) -> float:
        seen.append(text.split("ROOT %r = ")[1].split("(")[0])
        return 8.0 if "reduce(" in text else 1.0

    got = xf.instruction_flops(HLO, cost)
    # the fusion's and, convert, broadcast, multiply; the reduce (its region inside it); not
    # the parameters, constants, partition-id, tuple, nor the fusion itself
    assert sorted(seen) == sorted(["u32[] and", "f32[] convert", "f32[8]{0} broadcast", "f32[8]{0} multiply",
                                   "f32[] reduce"])
    assert got["complete"] and got["total"] == 12.0
    by = {r["name"]: r for r in got["instructions"]}
    assert by["convert.1"]["op_name"] == "jit(f)/shard_map/mul" and by["convert.1"]["inherited"]
    assert by["r"]["shape"] == [] and by["multiply.1"]["shape"] == [8]


def test_an_instruction_that_cannot_be_costed_makes_it_incomplete():
    def cost(text: str) -> float:
        if "reduce(" in text:
            raise RuntimeError("no")
        return 1.0

    got = xf.instruction_flops(HLO, cost)
    assert not got["complete"] and got["failed"] == {"reduce": 1}
    assert not xf.instruction_flops(HLO, cost, seconds=-1)["complete"]  # out of time


# --------------------------------------------------------------------------- against cost_analysis (one device)

def _programs():
    import jax.numpy as jnp
    from jax import lax

    def ints(k):
        return (k % 3) * 2 + (k % 4) + k // 2 + (k + 1) % k + jnp.remainder(-k, 8)

    def loop(k, x):
        def body(t, acc):
            return acc * ((k - t) % 4).astype(acc.dtype) + jnp.exp(acc)
        return lax.fori_loop(1, 5, body, x)

    def sums(x):
        return jnp.sum(jnp.tanh(x), axis=1) + jnp.max(x) + jnp.sort(x, axis=0)[0]

    def matmul(a, b):
        return (a @ b) % 3.0

    k, x = jnp.int32(5), jnp.ones((8, 8))
    return {"ints": (ints, (k,)), "loop": (loop, (k, x)), "sums": (sums, (x,)),
            "matmul": (matmul, (x, jnp.ones((8, 4))))}


@pytest.mark.parametrize("name", ["ints", "loop", "sums", "matmul"])
def test_instructions_add_up_to_cost_analysis(name):
    import jax

    fn, args = _programs()[name]
    compiled = jax.jit(fn).lower(*args).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    want = cost.get("flops", 0.0) + cost.get("transcendentals", 0.0)
    got = xf.instruction_flops(compiled.as_text(), xf.platform_cost(compiled.runtime_executable().client))
    assert got["complete"] and got["total"] == want, (got["total"], cost)


# --------------------------------------------------------------------------- the validation table (slow)

PROGRAMS = '''
"""Scalar index arithmetic of our own, as sharded programs write it."""
from functools import partial

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

ROWS = P("i")


def _scale(x, k):
    return x * k.astype(x.dtype)


@partial(jax.shard_map, in_specs=ROWS, out_specs=ROWS)
def mod3(x):
    return _scale(x, (lax.axis_index("i") + 1) % 3)


@partial(jax.shard_map, in_specs=ROWS, out_specs=ROWS)
def mod4(x):
    return _scale(x, (lax.axis_index("i") + 1) % 4)


@partial(jax.shard_map, in_specs=ROWS, out_specs=ROWS)
def div2(x):
    return _scale(x, lax.axis_index("i") // 2)


@partial(jax.shard_map, in_specs=ROWS, out_specs=ROWS)
def ring(x):
    k, n = lax.axis_index("i"), lax.axis_size("i")
    return _scale(x, (k + 1) % n) + _scale(x, (k - 1) % n)


@partial(jax.shard_map, in_specs=ROWS, out_specs=ROWS)
def ring_loop(x):
    k, n = lax.axis_index("i"), lax.axis_size("i")
    return lax.fori_loop(1, n, lambda t, acc: acc + _scale(x, (k - t) % n), x)


@partial(jax.shard_map, in_specs=(P("i", None), P("i", None)), out_specs=P("i", None))
def ring_matmul(a, b):
    n, k = lax.axis_size("i"), lax.axis_index("i")
    width = a.shape[1] // n
    out = lax.dynamic_slice_in_dim(a, k * width, width, 1) @ b
    for t in range(1, n):
        b = lax.ppermute(b, "i", [(j, (j + 1) % n) for j in range(n)])
        out += lax.dynamic_slice_in_dim(a, ((k - t) % n) * width, width, 1) @ b
    return out


def vector():
    return {"args": (jax.device_put(jnp.ones((16,)), ROWS),)}


def matrices():
    return {"args": (jax.device_put(jnp.ones((8, 8)), P("i", None)), jax.device_put(jnp.ones((8, 4)), P("i", None)))}
'''

# the child's JAX starts with the first case's devices (8); a smaller mesh takes the first of them
TABLE = [(fn, n) for fn in ("mod3", "mod4", "div2", "ring", "ring_loop") for n in (8, 4, 2)] + [
    ("ring_matmul", 4), ("ring_matmul", 2)]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    from jax_workspace import profile, write
    from sharded_captures import capture_all

    # a module per mesh size: JAX caches a function's trace with the mesh it first ran on
    root = write(tmp_path_factory.mktemp("ws"), {f"indices{n}.py": PROGRAMS for n in (2, 4, 8)})
    cases = {f"{fn}@{n}": {"framework": "jax", "root": str(root),
                           "table": profile(f"indices{n}:{fn}", mesh={"i": {"size": n, "type": "auto"}}, compile="on",
                                            inputs={"factory": f"indices{n}:" + ("matrices" if fn == "ring_matmul"
                                                                                  else "vector")})}
             for fn, n in TABLE}
    return capture_all(cases, tmp_path_factory.mktemp("out"))


@pytest.mark.slow
@pytest.mark.parametrize("case", [f"{fn}@{n}" for fn, n in TABLE])
def test_graph_flops_are_xlas(table, case):
    from capture.graph.per_device import flops_total
    from sharded_captures import read

    cap = read(table[case])
    cost = cap.compiled["cost"]
    xla = cost["flops"] + cost.get("transcendentals", 0)
    assert flops_total(cap, loops_once=True) == xla, (case, cap.cost.notes["flops_per_device"])
    assert cap.cost.notes["flops_per_device"].startswith("XLA's own FLOPs for each compiled instruction")


@pytest.mark.slow
def test_each_flop_is_on_its_equation(table):
    from sharded_captures import read

    cap = read(table["mod4@8"])
    by_op: dict[str, int] = {}
    for node, f in zip(cap.nodes, cap.cost.flops_per_device):
        by_op[node.op] = by_op.get(node.op, 0) + max(f, 0)
    # x * ((i + 1) % 4) on 2 elements: XLA's axis_index is an and + a convert, its % 4 of a
    # value that may be negative six ops (compare, negate, select, and, negate, select), and
    # jnp's sign fix-up of the remainder (lt, ne, and, add, select_n) one each
    assert by_op["axis_index"] == 2 and by_op["rem"] == 6 and by_op["mul"] == 2
    assert by_op["add"] == 2  # the + 1 and the fix-up's + 4
