"""A named scope is one group per entry (issue 49, item 5): a scope entered again later in
the same container (an einsum label in a Python loop, ``jax.named_scope`` in a loop) is a
new group, so every scope group is one stretch of the program and a loop's steps can each
hold their own; a scope continued after an inner one closes stays one group."""

from __future__ import annotations

from pathlib import Path

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from capture.jax.convert import convert  # noqa: E402
from capture.jax.structures import structure_of  # noqa: E402

pytestmark = pytest.mark.jax
WORKSPACE = Path(__file__).resolve().parents[2]


def converted(fn, *args):
    closed, shapes = jax.make_jaxpr(fn, return_shape=True)(*args)
    return convert(closed, outputs=structure_of(shapes), workspace=WORKSPACE)


def looped(x):
    for _ in range(3):
        with jax.named_scope("step"):
            x = jnp.sin(x) * 2.0
        x = x + 1.0
    return x


def continued(x):
    with jax.named_scope("outer"):
        x = jnp.sin(x)
        with jax.named_scope("inner"):
            x = jnp.cos(x)
        x = jnp.tanh(x)
    return x


def einsum_loop(x, c):
    for i in range(3):
        x = jnp.einsum("bd,b->bd", x, c[:, i]) + 1.0
    return x


def scopes(cap, name):
    return [g for g in cap.groups if g.kind == "scope" and g.name == name]


def test_a_scope_entered_three_times_is_three_groups_in_program_order():
    cap = converted(looped, jnp.ones(3))
    groups = scopes(cap, "step")
    assert len(groups) == 3
    for g in groups:  # each holds one entry's sin and mul, and nothing between entries
        assert sorted(n.op for n in cap.nodes if n.group == g.id) == ["mul", "sin"]
    assert [n.group for n in cap.nodes if n.op == "add"] == [None] * 3  # between the entries
    firsts = [min(n.id for n in cap.nodes if n.group == g.id) for g in groups]
    assert firsts == sorted(firsts)


def test_a_scope_continued_after_an_inner_one_is_one_group():
    cap = converted(continued, jnp.ones(3))
    (outer,) = scopes(cap, "outer")
    (inner,) = scopes(cap, "inner")
    assert inner.parent == outer.id
    ops = {n.op: n.group for n in cap.nodes}
    assert (ops["sin"], ops["cos"], ops["tanh"]) == (outer.id, inner.id, outer.id)


def test_an_einsum_label_in_a_loop_is_a_scope_per_call():
    cap = converted(einsum_loop, jnp.ones((2, 4)), jnp.ones((2, 3)))
    groups = scopes(cap, "bd,b->bd")
    assert len(groups) == 3
    assert all(sum(1 for n in cap.nodes if n.group == g.id) >= 1 for g in groups)
