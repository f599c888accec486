"""``jax.make_jaxpr`` as a capture calls it: the output structure read without
rebuilding anything, and the retries a Flax model needs to trace at all.

Output structure. The traced function flattens what the callable returned itself,
inside the trace, and records its canonical structure there (``structure_of`` over the
returned object: JAX's key paths, one registered level at a time; the leaves are the
tracers the program computed). ``make_jaxpr`` then sees a flat list of arrays, one per
output variable. ``return_shape=True`` would instead rebuild every registered output
container around ``ShapeDtypeStruct`` placeholders, and a class whose
``tree_unflatten`` or constructor checks its arrays fails there where the program itself
traced fine (spec: "Capture never reconstructs these containers with graph-reference
objects, so array invariants in a custom constructor remain valid").

Retries, each for a reason the error names, each at most once per name:

* a Linen module asking for an RNG stream nothing gave it (``capture.jax.rngs``);
* a collective over an axis name no enclosing transformation binds: a model written to
  run under ``pmap`` (Flax's ImageNet ResNet, ``nn.BatchNorm(axis_name="batch")`` in
  training mode, takes ``lax.pmean`` over ``"batch"``). The capture runs on one device,
  so the axis is bound at size 1 (``make_jaxpr(axis_env=[("batch", 1)])``): the
  collective stays in the program as the primitive it is (``psum``), the shapes of a
  reduction do not depend on the axis size. ``meta["axis_env"]`` records each axis so
  bound and why.

JAX is passed in, never imported here.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from ..graph.meta import AxisEnv
from .structures import structure_of
from ..worker.errors import CaptureError

MAX_AXES = 16
AXIS_NOTE = ("named by a collective (psum, pmean, all_gather…) but bound by no enclosing transformation: "
             "traced with the axis bound at size 1, the one device the capture runs on; the collective "
             "stays in the program, and the shapes of a reduction over it do not depend on its size")
_UNBOUND_AXIS = re.compile(r"unbound axis name: ([^\s.,;]+)")


class Traced:
    """What one trace gave: the jaxpr, the canonical structure of the callable's result
    (``{"value": i}`` leaves index the jaxpr's output variables), and the axis names it
    bound (``axis_env``: ``[(name, size)]``)."""

    __slots__ = ("closed", "outputs", "axis_env")

    def __init__(self, closed: Any, outputs: Any, axis_env: list[tuple[str, int]]) -> None:
        self.closed = closed
        self.outputs = outputs
        self.axis_env = axis_env

    def axis_meta(self) -> list[AxisEnv]:
        return [{"name": name, "size": size, "note": AXIS_NOTE} for name, size in self.axis_env]


def trace(jax: Any, fn: Callable[..., Any], plan: Any, seed: int, *args: Any) -> Traced:
    """``jax.make_jaxpr(fn)(*args)`` with the output flattened inside the trace and the
    retries of the module docstring."""
    streams = getattr(plan, "rng_streams", None)
    if streams is not None:
        streams.seed = seed
    structure: list[Any] = []
    tree_leaves = jax.tree_util.tree_leaves

    def flat(*a: Any) -> list:
        out = fn(*a)
        structure[:] = [structure_of(out, static_leaves=False)]
        return tree_leaves(out)

    axis_env: list[tuple[str, int]] = []
    while True:
        try:
            closed = jax.make_jaxpr(flat, axis_env=axis_env or None)(*args)
        except Exception as exc:
            if streams is not None and streams.add_missing(jax, exc):
                continue
            axis = _unbound_axis(exc)
            if axis is None or any(name == axis for name, _ in axis_env):
                raise
            if len(axis_env) >= MAX_AXES:
                raise CaptureError("trace", f"the program names more than {MAX_AXES} unbound collective axes") from exc
            axis_env.append((axis, 1))
            continue
        n_out = len(closed.jaxpr.outvars)
        counted = _count_values(structure[0])
        if counted != n_out:  # cannot happen while tree_leaves and structure_of agree
            raise CaptureError("trace", f"the traced program has {n_out} outputs but its result holds {counted} "
                               "array leaves; TensorViz cannot label them")
        return Traced(closed, structure[0], axis_env)


def _unbound_axis(exc: BaseException) -> str | None:
    if not isinstance(exc, NameError):
        return None
    m = _UNBOUND_AXIS.search(str(exc))
    return m.group(1) if m else None


def _count_values(tree: Any) -> int:
    n, stack = 0, [tree]
    while stack:
        t = stack.pop()
        if "value" in t:
            n += 1
        stack.extend(t.get("list") or t.get("tuple") or [])
        stack.extend(c for _, c in t.get("dict") or [])
    return n
