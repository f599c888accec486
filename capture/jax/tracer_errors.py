"""A traced value's missing ``sharding`` without the search that explains it.

JAX's ``Tracer.sharding`` raises ``AttributeError`` (so that ``getattr(x, "sharding",
None)`` works) and builds its message first, naming where the traced value came from:
``partial_eval`` walks every equation traced so far (``find_progenitors``). Flax NNX asks
for it on every ``Variable.set_value`` of a traced value, which each RNG stream's count
update is: under ``nnx.eval_shape``, building a model therefore costs the square of its
size (80 blocks of two ``Linear`` and a ``LayerNorm``: 3.6 s, of which about 80 % is that
search). :func:`plain_sharding_errors` makes the property raise the same error with the
first sentence of JAX's message only, for as long as TensorViz builds a model abstractly;
nothing else changes (a value that has a sharding is not a ``Tracer`` of this property).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def _plain_sharding(self: Any) -> Any:
    raise AttributeError(f"The 'sharding' attribute is not available on {self._error_repr()}.")


@contextmanager
def plain_sharding_errors() -> Iterator[None]:
    """Within: ``Tracer.sharding`` raises without searching the trace (the module
    docstring). Left as it is where this JAX defines it otherwise."""
    try:
        from jax._src import core
    except ImportError:  # a JAX without this layout: nothing to change
        yield
        return
    tracer = getattr(core, "Tracer", None)
    original = vars(tracer).get("sharding") if isinstance(tracer, type) else None
    if not isinstance(original, property) or not hasattr(tracer, "_error_repr"):
        yield
        return
    tracer.sharding = property(_plain_sharding)  # type: ignore[union-attr]
    try:
        yield
    finally:
        tracer.sharding = original  # type: ignore[union-attr]
