"""What each equation of a traced JAX program costs (capture/jax/cost.py): roofline's rules
where they count, dimension numbers for ragged dots, a table for the rest; control flow
as estimates; an equation no rule counts is listed, never a zero."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from jax import lax  # noqa: E402

from capture.graph import graphfile  # noqa: E402
from capture.graph.model import UNCOUNTED  # noqa: E402
from capture.jax.convert import convert  # noqa: E402

pytestmark = pytest.mark.jax
f32 = jnp.float32


def _capture(fn, *args):
    cap = convert(jax.make_jaxpr(fn)(*args))
    assert cap.cost is not None, cap.meta.get("cost_failed")
    return graphfile.decode(graphfile.encode(cap))  # what a reader gets


def _of(cap, op):
    return [i for i, n in enumerate(cap.nodes) if n.op == op]


def _rule(cap, i):
    return cap.cost.rules[cap.cost.rule[i]]


@pytest.mark.parametrize("fn, args, op, flops", [
    pytest.param(lambda a, b: a @ b, (jnp.ones((8, 16)), jnp.ones((16, 4))), "dot_general", 2 * 8 * 16 * 4,
                 id="matmul"),
    pytest.param(lambda a, b: jnp.einsum("bij,bjk->bik", a, b), (jnp.ones((3, 8, 16)), jnp.ones((3, 16, 4))),
                 "dot_general", 2 * 3 * 8 * 16 * 4, id="batched"),
    pytest.param(lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME"),
                 (jnp.ones((1, 3, 8, 8)), jnp.ones((5, 3, 3, 3))), "conv_general_dilated", None, id="conv"),
    pytest.param(lambda x: jnp.tanh(x), (jnp.ones((4, 5)),), "tanh", 20, id="elementwise-roofline-lacks"),
    pytest.param(lambda x: x.max(axis=1), (jnp.ones((4, 5)),), "reduce_max", 16, id="reduction"),
    pytest.param(lambda x: x.sum(axis=1), (jnp.ones((4, 5)),), "reduce_sum", 16, id="reduce-sum-roofline"),
    pytest.param(lambda x: x.reshape(20), (jnp.ones((4, 5)),), "reshape", 0, id="view"),
])
def test_equation_rules(fn, args, op, flops):
    cap = _capture(fn, *args)
    i = _of(cap, op)[0]
    if flops is None:  # a 3×3 SAME convolution: every output position sees the valid part of its window
        flops = cap.cost.flops[i]
        assert 0 < flops <= 2 * 5 * 8 * 8 * 3 * 3 * 3
    assert cap.cost.flops[i] == flops
    assert UNCOUNTED not in cap.cost.flops
    if op == "reshape":
        assert (cap.cost.bytes_read[i], cap.cost.bytes_written[i]) == (0, 0)


def test_ragged_dot_from_its_dimension_numbers():
    def moe(x, w, sizes):
        return lax.ragged_dot(x, w, sizes)

    cap = _capture(moe, jnp.ones((16, 8)), jnp.ones((4, 8, 32)), jnp.array([4, 4, 4, 4], jnp.int32))
    i = _of(cap, "ragged_dot_general")[0]
    assert _rule(cap, i) == "ragged_dot"
    assert cap.cost.flops[i] == 2 * 16 * 8 * 32  # each row meets its own group's matrix only


def test_control_flow_counts_are_estimates_and_while_is_uncounted():
    def prog(x, ws):
        c, _ = lax.scan(lambda c, w: (jnp.tanh(c @ w), c.sum()), x, ws)
        c = lax.cond(c.sum() > 0, lambda a: (a @ a.T) @ a, lambda a: a * 2, c)
        return lax.while_loop(lambda v: v[0] < 3, lambda v: (v[0] + 1, v[1] * 2), (0, c))[1]

    cap = _capture(prog, jnp.ones((8, 16)), jnp.ones((5, 16, 16)))
    scan, cond, loop = _of(cap, "scan")[0], _of(cap, "cond")[0], _of(cap, "while")[0]
    one_iteration = 2 * 8 * 16 * 16 + 8 * 16 + (8 * 16 - 1)  # matmul, tanh, sum
    assert cap.cost.flops[scan] == 5 * one_iteration
    assert cap.cost.flops[cond] == 2 * (2 * 8 * 16 * 8)  # the larger branch: two matmuls
    assert cap.cost.estimates == sorted([scan, cond])
    assert cap.cost.flops[loop] == UNCOUNTED
    assert "trip count" in cap.cost.notes["uncounted"]["while"]
    assert cap.cost.of(scan)["estimate"] is True


def test_a_primitive_without_a_rule_is_listed_not_counted_as_zero():
    cap = _capture(lambda x: jnp.sort(x) * 2, jnp.ones((4, 5)))
    i = _of(cap, "sort")[0]
    assert cap.cost.flops[i] == UNCOUNTED
    assert cap.cost.bytes_written[i] == 4 * 5 * 4  # its bytes are still known
    assert "sort" in cap.cost.notes["uncounted"]
    assert cap.cost.flops[_of(cap, "mul")[0]] == 20
