"""Flax Linen specifics of a JAX capture: collections the traced ``apply`` may update,
how those updates appear among the outputs, and a parameter initializer that runs once.

Mutable collections. A module that writes a collection while it runs (``nn.BatchNorm``
in training mode updates ``batch_stats``; ``self.sow("losses", …)`` appends to
``losses``) fails under a plain ``apply`` ("collection batch_stats is immutable"). The
capture applies with ``mutable=`` every collection the variables hold besides
``params`` (those ``init`` produced, or the factory bound), as training code does, and
the program's outputs become ``{"output": what __call__ returned, "updated":
{collection: …}}``: the updated collections are named as such (value paths
``updated.batch_stats.bn_init.mean``). An entry the program hands back unchanged (the
input variable itself: ``batch_stats`` of a BatchNorm using its running average) is
no update and is left out; when nothing changed, the outputs are ``__call__``'s alone,
as without ``mutable``.

One initializer run. ``Scope.param`` checks an existing parameter against its
initializer by running the initializer again abstractly. For freshly initialised state
the variables are the module's own ``init`` output (``jax.eval_shape``) for the same
inputs, so that check can only agree: while the capture traces ``apply`` on them,
:func:`trusted_params` returns the existing parameter without it, and each initializer
runs once per capture. Variables a factory bound keep Flax's check.

``flax`` is found in ``sys.modules``, never imported here.
"""

from __future__ import annotations

import inspect
import sys
from contextlib import contextmanager
from typing import Any, Iterator

UPDATED_NOTE = ("collections the traced apply updates (apply(..., mutable=[...])), among the outputs "
                "under 'updated'; entries it hands back unchanged are left out")


def mutable_collections(variables: Any) -> list[str]:
    """The collections besides ``params`` that ``variables`` hold, in their order."""
    try:
        return [str(c) for c in variables.keys() if c != "params"]
    except AttributeError:
        return []


def updated_outputs(outputs: Any, state_tree: Any, closed: Any, state_key: str) -> tuple[Any, list[str]]:
    """The canonical output structure of ``apply(..., mutable=...)``'s ``(output, updated)``
    as ``{"dict": [["output", …], ["updated", …]]}``, without the entries handed back
    unchanged; also the names of the collections that changed. ``state_tree`` is the
    variables' input structure (indices into the jaxpr's input variables)."""
    pair = outputs.get("tuple") if isinstance(outputs, dict) else None
    if not isinstance(pair, list) or len(pair) != 2:
        return outputs, []
    out, updated = pair
    invars, outvars = closed.jaxpr.invars, closed.jaxpr.outvars

    def unchanged(o: int, i: int) -> bool:
        return outvars[o] is invars[i]

    kept = _prune(updated, state_tree, unchanged)
    if kept is None:
        return out, []
    return {"dict": [["output", out], ["updated", kept]]}, [str(k) for k, _ in kept.get("dict") or []]


def _prune(tree: Any, inputs: Any, unchanged: Any) -> Any:
    """``tree`` without the dict entries whose every value leaf is its input's own variable
    (``inputs``: the same path in the variables); ``None`` when nothing is left. Lists and
    tuples are kept whole when any element changed (their positions are their names)."""
    if "value" in tree:
        i = inputs.get("value") if isinstance(inputs, dict) else None
        return None if type(i) is int and unchanged(tree["value"], i) else tree
    if "dict" in tree:
        by_key = dict(inputs.get("dict") or []) if isinstance(inputs, dict) else {}
        kept = [[k, p] for k, t in tree["dict"] if (p := _prune(t, by_key.get(k), unchanged)) is not None]
        return {"dict": kept} if kept else None
    for kind in ("list", "tuple"):
        if kind in tree:
            others = inputs.get(kind) if isinstance(inputs, dict) else None
            others = others if isinstance(others, list) and len(others) == len(tree[kind]) else [None] * len(tree[kind])
            changed = any(_prune(t, o, unchanged) is not None for t, o in zip(tree[kind], others))
            return tree if changed else None
    return None  # a static leaf: nothing computed


@contextmanager
def trusted_params() -> Iterator[None]:
    """While tracing ``apply`` on a module's own fresh variables: ``Scope.param`` returns an
    existing parameter without running its initializer again (see the module docstring).
    Leaves ``Scope.param`` alone when its signature is not the one this was written for."""
    scope_mod = sys.modules.get("flax.core.scope")
    meta = sys.modules.get("flax.core.meta")
    scope_cls: Any = getattr(scope_mod, "Scope", None)
    original = getattr(scope_cls, "param", None)
    unbox_fn = getattr(meta, "unbox", None)
    if original is None or unbox_fn is None or not _expected_signature(original):
        yield
        return

    def param(self: Any, name: str, init_fn: Any, *init_args: Any, unbox: bool = True, **init_kwargs: Any) -> Any:
        if self.has_variable("params", name):
            self.reserve(name, "params")
            value = self.get_variable("params", name)
            return unbox_fn(value) if unbox else value
        return original(self, name, init_fn, *init_args, unbox=unbox, **init_kwargs)

    param.__wrapped__ = original  # type: ignore[attr-defined]
    scope_cls.param = param
    try:
        yield
    finally:
        scope_cls.param = original


def _expected_signature(fn: Any) -> bool:
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return False
    return params == ["self", "name", "init_fn", "init_args", "unbox", "init_kwargs"]
