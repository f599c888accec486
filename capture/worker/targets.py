"""What a recipe's ``model`` names, seen through ``functools.partial``.

Flax's examples name their models as partials of one class (``ResNet18 =
partial(ResNet, stage_sizes=[2, 2, 2, 2], block_cls=ResNetBlock)``), and so do some
Torch codebases. With a literal init such a partial is built like its class: the
partial's arguments come first and the recipe's ``init`` adds to them (a keyword of the
recipe overrides the partial's, as a call would); with an init factory, the factory's
result is the model.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PartialOfClass:
    """A ``functools.partial`` of a class, nested partials flattened."""

    cls: type
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The class's arguments once the recipe's ``args``/``kwargs`` join the partial's."""
        return (*self.args, *args), {**self.kwargs, **kwargs}


def partial_of_class(obj: Any) -> PartialOfClass | None:
    """``obj`` as a partial of a class; None when it is anything else (a class itself too)."""
    if not isinstance(obj, functools.partial):
        return None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    while isinstance(obj, functools.partial):
        # partial(partial(f, a, k=1), b, k=2) calls f(a, b, k=2): inner arguments first,
        # outer keywords win.
        args = (*obj.args, *args)
        kwargs = {**obj.keywords, **kwargs}
        obj = obj.func
    if not isinstance(obj, type):
        return None
    return PartialOfClass(obj, args, kwargs)
