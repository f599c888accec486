"""Shared helpers for the JAX/Flax capture tests.

``primitive_counts`` is an independent recursive walk of a jaxpr (it does not use the
converter): equations of the expanded call primitives are entered, every other
equation is counted under its primitive name. A converted capture must have exactly
these counts.
"""

from __future__ import annotations

from collections import Counter



CALLS = {
    "jit": "jaxpr",
    "pjit": "jaxpr",
    "remat2": "jaxpr",
    "checkpoint": "jaxpr",
    "custom_jvp_call": "call_jaxpr",
    "custom_vjp_call": "call_jaxpr",
}


def _body(param):
    return param.jaxpr if hasattr(param, "consts") else param


def primitive_counts(closed) -> Counter:
    counts: Counter = Counter()
    stack = [closed.jaxpr]
    while stack:
        jaxpr = stack.pop()
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            if name in CALLS and eqn.params.get(CALLS[name]) is not None:
                stack.append(_body(eqn.params[CALLS[name]]))
            else:
                counts[name] += 1
    return counts


def node_counts(capture) -> Counter:
    return Counter(n.op for n in capture.nodes)


def output_avals(capture) -> list[tuple[tuple, str]]:
    from capture.model import tree_leaves

    return [(tuple(capture.values[i].shape), capture.values[i].dtype) for i in tree_leaves(capture.outputs)]


def eval_shape_avals(fn, *args, **kwargs) -> list[tuple[tuple, str]]:
    import jax

    out = jax.eval_shape(fn, *args, **kwargs)
    return [(tuple(s.shape), str(s.dtype)) for s in jax.tree_util.tree_leaves(out)]
