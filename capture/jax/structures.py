"""The canonical structure of a Python PyTree (:func:`structure_of`: JAX's own key
paths, array leaves numbered in its flattening order), and the tests it and the
plug-in's readers share (:func:`is_array_leaf`, :func:`type_test`).

JAX is imported only inside functions: importing this module needs the standard
library alone."""

from __future__ import annotations

import enum
from typing import Any


def is_array_leaf(x: Any) -> bool:
    """An array JAX traces as an argument (jax/numpy arrays, numpy scalars, abstract
    ``ShapeDtypeStruct`` descriptions); Python scalars are not (they stay static)."""
    import jax
    import numpy as np

    return isinstance(x, (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct))


def type_test(classes: tuple[type, ...]) -> Any:
    """``isinstance(x, classes)``, decided once per type of ``x``: Flax's ``Module`` and
    ``Variable`` are ABCs whose ``isinstance`` costs microseconds, asked of every node of a
    model's state. Only for classes whose instance check is their subclass check (not
    ``jax.Array``, whose check on a tracer reads its abstract value)."""
    cache: dict[type, bool] = {}

    def test(x: Any) -> bool:
        t = type(x)
        got = cache.get(t)
        if got is None:
            got = cache[t] = bool(classes) and issubclass(t, classes)
        return got

    return test


def structure_of(tree: Any, counter: list[int] | None = None, *, static_leaves: bool = True,
                 lifted: Any = None) -> Any:
    """The canonical structure of a Python PyTree, walked one registered level at a
    time with JAX's own key paths (the container is never rebuilt).

    Array leaves become ``{"value": i}`` numbered in JAX's flattening order (``counter``
    holds the next index); Python scalars, strings and None become ``{"static": x}``;
    lists, tuples and dicts keep their kind; every other registered container
    (named tuples, Flax structs, FrozenDicts, custom PyTrees) becomes a dict of its
    registered child keys. Static PyTree metadata (aux data) is not serialised.
    ``static_leaves=False``: every leaf is a value (a tree JAX traced whole, such as
    Linen variables or an output tree). ``lifted``: a predicate naming the objects
    whose arrays are traced elsewhere (NNX graph nodes split into the state), each a
    static ``{"static": "<ClassName>"}`` here.
    """
    import jax

    counter = counter if counter is not None else [0]
    return _structure(jax.tree_util, tree, counter, static_leaves, 0, lifted)


def _structure(tu: Any, x: Any, counter: list[int], static_leaves: bool, depth: int, lifted: Any = None) -> Any:
    if depth > 60:
        raise ValueError("the PyTree is nested more than 60 levels deep")
    if x is None:
        return {"static": None}
    if is_array_leaf(x):
        i = counter[0]
        counter[0] += 1
        return {"value": i}
    if lifted is not None and lifted(x):
        return {"static": f"<{type(x).__name__}>"}
    kids, _ = tu.tree_flatten_with_path(x, is_leaf=lambda n: n is not x)
    if len(kids) == 1 and kids[0][0] == ():
        if static_leaves:
            return {"static": _static_leaf(x)}
        i = counter[0]
        counter[0] += 1
        return {"value": i}
    subs = [(_key_of(path[0]), _structure(tu, c, counter, static_leaves, depth + 1, lifted)) for path, c in kids]
    if type(x) is list:
        return {"list": [s for _, s in subs]}
    if type(x) is tuple:
        return {"tuple": [s for _, s in subs]}
    return {"dict": [[k, s] for k, s in subs]}


def _key_of(entry: Any) -> str | int:
    for attr in ("key", "name", "idx"):
        if hasattr(entry, attr):
            k = getattr(entry, attr)
            if type(k) in (str, int):
                return k
            if isinstance(k, enum.Enum):
                return k.name
            if isinstance(k, (str, int)) and not isinstance(k, bool):
                return k.__class__.__mro__[-2](k)
            return str(k) if isinstance(k, (bool, float)) else f"<{type(k).__name__}>"
    return f"<{type(entry).__name__}>"


def _static_leaf(x: Any) -> Any:
    if x is None or type(x) in (bool, int, float, str):
        return x
    if isinstance(x, enum.Enum):
        return x.name
    return f"<{type(x).__name__}>"
