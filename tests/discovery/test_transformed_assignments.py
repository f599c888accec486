"""Module-level transformed functions (issue 46, item 5): ``grad_loss = jax.grad(loss)``,
``step = jax.jit(train_step, static_argnums=1)``, ``nnx.jit`` likewise: candidates named by
the assignment, located at it, taking the transformed function's inputs (a static
argument kept static); an assignment of anything else is not one."""

from __future__ import annotations

import textwrap

import pytest

from discovery.discover import discover_source

HEAD = """\
import functools
import jax
import jax.numpy as jnp
from flax import nnx


def loss(w, x):
    return jnp.mean((x @ w) ** 2)


def plain(a, b):
    return a * b
"""

CASES = [
    ("grad", "grad_loss = jax.grad(loss)", "grad_loss", "jax.grad of loss", [("w", False), ("x", False)]),
    ("jit static", "step = jax.jit(plain, static_argnums=1)", "step", "jax.jit of plain",
     [("a", False), ("b", True)]),
    ("value_and_grad", "vg = jax.value_and_grad(loss, argnums=0)", "vg", "jax.value_and_grad of loss",
     [("w", False), ("x", False)]),
    ("nnx.jit", "fast = nnx.jit(plain)", "fast", "flax.nnx.jit of plain", [("a", False), ("b", False)]),
]


@pytest.mark.parametrize("name,line,target,reason,inputs", CASES, ids=[c[0] for c in CASES])
def test_a_transformed_function_assigned_at_the_top_level(name, line, target, reason, inputs):
    text = HEAD + "\n\n" + line + "\n"
    result = discover_source(text, f"t_{name.replace(' ', '_')}.py")
    (c,) = [c for c in result.candidates if c.name == target]
    assert c.kind == "jax_function" and c.qualname == target
    assert c.reason.startswith(reason)
    assert [(i.name, i.static) for i in c.call_inputs] == inputs
    assert c.range.start.line == text.splitlines().index(line)  # located at the assignment


@pytest.mark.parametrize("line", [
    "scaled = jax.numpy.multiply(2, 3)",  # not a transform
    "wrapped = jax.jit(jnp.sin)",  # a library function, not one of this file
    "other = functools.partial(plain, 2)",  # a partial of a function: not a transform
    "lam = jax.jit(lambda x: x)",  # no named function
])
def test_other_assignments_are_not_candidates(line):
    text = HEAD + "\n\n" + textwrap.dedent(line) + "\n"
    names = {c.name for c in discover_source(text, "t_other.py").candidates}
    assert names <= {"loss"}
