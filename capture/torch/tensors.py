"""Walking nested Python results for their tensors: what the trace, its backward
mirror and the training step's loss all need, in one place below all of them (so that
no module of the Torch capture imports another one that imports it back).

Torch is imported at module level: one of the worker's framework modules.
"""

from __future__ import annotations

from typing import Any, Iterator

from torch import Tensor as _Tensor

# Nested results deeper than this are not searched for tensors.
MAX_DEPTH = 32


def tensors_in(obj: Any, depth: int = 0) -> Iterator[_Tensor]:
    """Every tensor in a nested list/tuple/dict result, in order."""
    if isinstance(obj, _Tensor):
        yield obj
    elif depth < MAX_DEPTH:
        if isinstance(obj, (list, tuple)):
            for x in obj:
                yield from tensors_in(x, depth + 1)
        elif isinstance(obj, dict):
            for x in obj.values():
                yield from tensors_in(x, depth + 1)


def tensors_of(obj: Any) -> list[_Tensor]:
    """Every tensor in a nested list/tuple/dict result, in order, as a list."""
    return list(tensors_in(obj))
