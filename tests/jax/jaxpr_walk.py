"""Shared helpers for the JAX/Flax capture tests.

``primitive_counts`` is an independent recursive walk of a jaxpr (it does not use the
converter): equations of the expanded call primitives are entered, every other
equation is counted under its primitive name. A converted capture's executed nodes
(those outside ``body`` groups) must have exactly these counts; with ``bodies=True``
the walk also counts the equations of scan/while/cond bodies (each boundary stays
counted too), which every node of the capture must match.
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


BODIES = {"scan": ("jaxpr",), "while": ("cond_jaxpr", "body_jaxpr"), "cond": ("branches",)}


def primitive_counts(closed, bodies: bool = False) -> Counter:
    counts: Counter = Counter()
    stack = [closed.jaxpr]
    while stack:
        jaxpr = stack.pop()
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            if name in CALLS and eqn.params.get(CALLS[name]) is not None:
                stack.append(_body(eqn.params[CALLS[name]]))
                continue
            counts[name] += 1
            if bodies and name in BODIES:
                for key in BODIES[name]:
                    p = eqn.params[key]
                    stack.extend(_body(b) for b in (p if isinstance(p, tuple) else (p,)))
    return counts


def in_body(capture, group) -> bool:
    """Whether ``group`` (a group id or None) lies inside a ``body`` group."""
    while group is not None:
        g = capture.groups[group]
        if g.kind == "body":
            return True
        group = g.parent
    return False


def node_counts(capture, executed: bool = True) -> Counter:
    """Ops of the executed program (nodes outside body templates), or of every node."""
    return Counter(n.op for n in capture.nodes if not (executed and in_body(capture, n.group)))


def output_avals(capture) -> list[tuple[tuple, str]]:
    from capture.graph.model import tree_leaves

    return [(tuple(capture.values[i].shape), capture.values[i].dtype) for i in tree_leaves(capture.outputs)]


def eval_shape_avals(fn, *args, **kwargs) -> list[tuple[tuple, str]]:
    import jax

    out = jax.eval_shape(fn, *args, **kwargs)
    return [(tuple(s.shape), str(s.dtype)) for s in jax.tree_util.tree_leaves(out)]
