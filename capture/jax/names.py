"""Names of a JAX capture's input values as a person wrote them (``meta["input_names"]``):
positional arguments after the callee's parameters, keyword arguments after their key,
Linen variables by collection path, NNX state by attribute path. Runs in the worker;
``flax`` is found in ``sys.modules``, never imported here."""

from __future__ import annotations

import re
import sys
from typing import Any

from .structures import _key_of, type_test
from ..worker.context import positional_names

NAME_MAX = 200  # characters of a recorded input name
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def input_names(jax: Any, plan: Any, args_tree: Any, kwargs_tree: Any, state_tree: Any) -> list[list]:
    """``meta["input_names"]``: ``[value id, name]`` for each array leaf of the inputs, the
    name a person wrote. A positional argument is named after the callee's parameter
    it binds to (``x``, ``w1``; ``args[i]`` when it lands in ``*args`` or the callee has
    no signature), a keyword argument after its key, and a leaf inside either by its
    PyTree path below it (``params.Dense_0.kernel``, ``batch[0]``). Linen variables are
    named by their path from the collection (``params.Dense_0.kernel``); NNX state by its
    attribute path in the module (``linear.kernel``, prefixed by the parameter a
    partial binds another module to), without the ``.value`` of its ``Variable``."""
    out: list[list] = []
    positional = args_tree.get("tuple", []) if isinstance(args_tree, dict) else []
    for i, (tree, name) in enumerate(zip(positional, positional_names(plan.callee, len(positional)))):
        _leaf_names(tree, name or f"args[{i}]", out)
    for key, tree in kwargs_tree.get("dict", []) if isinstance(kwargs_tree, dict) else []:
        _leaf_names(tree, join_name("", [key]), out)
    if plan.state_key is not None:
        out += _state_names(jax, plan, state_tree)
    return out


def _leaf_names(tree: Any, name: str, out: list[list]) -> None:
    """``[value id, name + its path]`` for each value leaf of a canonical structure."""
    stack = [(tree, name)]
    while stack:
        t, n = stack.pop()
        if "value" in t:
            out.append([t["value"], n[:NAME_MAX]])
            continue
        kids = [(c, f"[{i}]") for i, c in enumerate(t.get("list") or t.get("tuple") or [])]
        kids += [(c, key_suffix(k)) for k, c in t.get("dict") or []]
        stack.extend((c, n + suffix) for c, suffix in reversed(kids))


def _state_names(jax: Any, plan: Any, state_tree: Any) -> list[list]:
    """Names of the state leaves in JAX's flattening order (the order their value ids
    were given in). A Flax ``Variable`` or boxed variable (``nn.Partitioned``) holding
    one array is named by where it sits, not by its ``value`` attribute. Nothing
    (structure paths stay the names) when the counts disagree."""
    ids: list[list] = []
    _leaf_names(state_tree, "", ids)
    wrapped = type_test(_variable_types())

    paths: list[list] = []
    tu = jax.tree_util
    for path, leaf in tu.tree_flatten_with_path(plan.state, is_leaf=wrapped)[0]:
        keys = [_key_of(e) for e in path]
        inner = tu.tree_flatten_with_path(leaf)[0] if wrapped(leaf) else [((), leaf)]
        if len(inner) == 1:
            paths.append(keys)
        else:
            paths.extend(keys + [_key_of(e) for e in p] for p, _ in inner)
    if len(paths) != len(ids):
        return []
    out = []
    for (v, _), keys in zip(ids, paths):
        prefix = ""
        if plan.state_key == "state" and keys:  # an NNX split of tuple(modules): the module first
            i, keys = keys[0], keys[1:]
            labels = plan.module_labels
            if type(i) is int and 0 <= i < len(labels):
                # the callable itself (or a bound method's self) needs no prefix, unless
                # two modules would share it
                prefix = labels[i] or ("" if labels.count("") == 1 else f"[{i}]")
        out.append([v, join_name(prefix, keys)[:NAME_MAX]])
    return out


def _variable_types() -> tuple[type, ...]:
    """Flax's one-array containers: NNX ``Variable`` and Linen's boxed metadata."""
    found = []
    nnx = sys.modules.get("flax.nnx")
    if nnx is not None and isinstance(getattr(nnx, "Variable", None), type):
        found.append(nnx.Variable)
    meta = sys.modules.get("flax.core.meta")
    if meta is not None and isinstance(getattr(meta, "AxisMetadata", None), type):
        found.append(meta.AxisMetadata)
    return tuple(found)


def key_suffix(k: Any) -> str:
    """How a key continues a name (``.kernel``, ``[0]``, ``['some key']``): the rule the
    viewer's value names (``capture/analysis/value_names.py``) use for structure paths."""
    if isinstance(k, str) and _IDENT_RE.match(k):
        return "." + k
    if type(k) is int:
        return f"[{k}]"
    return f"[{k!r}]"


def join_name(prefix: str, keys: list) -> str:
    """``prefix`` continued by ``keys``: ``params.Dense_0.kernel``, ``layers[0].kernel``."""
    name = prefix
    for k in keys:
        suffix = key_suffix(k)
        name = name + suffix if name else suffix.lstrip(".")
    return name
