"""Equations with one signature share one count (capture/jax/cost.py ``_figures``): the
figures are those of counting each equation on its own, and an equation that differs in
anything its figures read (shape, dtype, params, an operand read twice) is counted apart.
Only equations a roofline rule counts are shared: TensorViz's own table rules (``tanh``,
views, data movement) cost less to count than a signature."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from jax import lax  # noqa: E402

import capture.jax.cost as cost  # noqa: E402
from capture.jax.convert import convert  # noqa: E402

pytestmark = pytest.mark.jax


def _program(x, y, w):
    for _ in range(3):  # the same four equations three times: one count each
        x = jnp.tanh(jnp.sin(x) * 1.5 + 0.25)
    a = x * x  # one operand read twice: half the bytes of x * y
    b = x * y
    c = x.astype(jnp.bfloat16) * 2  # another dtype
    d = lax.integer_pow(x, 2) + lax.integer_pow(x, 3)  # params differ
    e = x[:2] @ w + x[:2, :3] @ w[:3]  # shapes differ
    return a, b, c, d, e


ARGS = (jnp.ones((4, 8)), jnp.ones((4, 8)), jnp.ones((8, 8)))


def test_shared_counts_equal_counting_each_equation(monkeypatch):
    closed = jax.make_jaxpr(_program)(*ARGS)
    calls = []
    flops = cost._Costs.flops
    monkeypatch.setattr(cost._Costs, "flops", lambda self, eqn: calls.append(eqn) or flops(self, eqn))
    shared = convert(closed).cost
    counted = len(calls)
    monkeypatch.setattr(cost, "_signature", lambda eqn: None)
    calls.clear()
    alone = convert(closed).cost
    assert len(calls) == len(closed.jaxpr.eqns)
    # the loop's repeats of sin, mul and add (roofline's rules) were not counted again;
    # tanh (a table rule) is counted each time
    assert counted == len(calls) - 6
    assert shared == alone


def test_an_operand_read_twice_is_not_shared_with_two_operands():
    cap = convert(jax.make_jaxpr(_program)(*ARGS))
    muls = [i for i, n in enumerate(cap.nodes) if n.op == "mul" and all(o.value is not None for o in n.inputs)]
    read = {cap.cost.bytes_read[i] for i in muls}
    assert {4 * 8 * 4, 2 * 4 * 8 * 4} <= read  # x * x reads x once, x * y both


def test_an_unhashable_param_is_counted_on_its_own():
    class Eqn:  # an equation whose params hold an array
        primitive = None
        invars, outvars = [], []
        params = {"table": jnp.ones(3).__array__()}

    assert cost._signature(Eqn()) is None
