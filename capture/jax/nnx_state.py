"""NNX graph nodes a JAX capture lifts out of what it traces: split outside the trace,
merged (cloned) inside it.

Spec: "NNX modules, bound methods and partial callables clone their state wrappers
inside the JAX trace context, allowing nnx.jit to update temporary state without
crossing trace levels. Underlying arrays are shared rather than duplicated."

Every NNX graph node (``nnx.Module``, ``nnx.Optimizer`` and any other ``nnx.Pytree`` /
``nnx.Object``, ``nnx.Variable``, ``nnx.Rngs``) the capture reaches is lifted: the
callable itself, a bound method's ``self``, a partial's function and its positional and
keyword arguments, registered PyTrees among those (lists, tuples, dicts, named tuples,
Flax structs holding modules), and the inputs. All of them are split together
(``nnx.split`` of one tuple, so a ``Variable`` two nodes share stays one ``Variable``);
the traced function merges that state into clones made in the trace context and
rebuilds the callable and the inputs around them. The live objects are never touched
by the trace, and the split state holds their own arrays.

Each node has a label, where it is held: ``""`` for the callable itself or a bound
method's ``self``, otherwise the parameter it binds to (``optimizer``, ``model``, by the
callee's signature; ``args[2]`` in ``*args``; a keyword's key), continued by its PyTree
path (``models[0]``). Labels prefix the state's value names and the module-call paths.

A plain Python closure over a module is no graph node and is left alone: it follows
JAX/NNX trace rules.

Imports nothing of JAX or Flax: ``nnx`` and ``jax`` are passed in.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from . import modules as jax_modules
from .names import join_name
from .structures import _key_of
from ..worker.context import positional_names


class NnxLift:
    """The NNX graph nodes of one capture, in lifting order, and their split state."""

    def __init__(self, jax: Any, nnx: Any) -> None:
        self.jax = jax
        self.nnx = nnx
        self.is_node = _node_test(nnx)
        self.nodes: list[Any] = []
        self.labels: list[str] = []
        self.from_inputs: list[bool] = []  # per node: reached through the inputs, not the callable
        self.graphdef: Any = None
        self.state: Any = ()

    # ------------------------------------------------------------------ lifting

    def _add(self, node: Any, label: str, from_inputs: bool) -> int:
        self.nodes.append(node)
        self.labels.append(label)
        self.from_inputs.append(from_inputs)
        return len(self.nodes) - 1

    def lift_callable(self, obj: Any, label: str = "") -> Callable[[tuple], Any]:
        """A function rebuilding ``obj`` from the merged nodes, the nodes it holds lifted."""
        if self.is_node(obj):
            i = self._add(obj, label, False)
            return lambda ms: ms[i]
        if inspect.ismethod(obj) and self.is_node(obj.__self__):
            func = obj.__func__
            get_self = self.lift_callable(obj.__self__, label)
            return lambda ms: func.__get__(get_self(ms))
        if isinstance(obj, functools.partial):
            get_func = self.lift_callable(obj.func, label)
            names = positional_names(obj.func, len(obj.args))
            args = [self.lift_callable(a, _dotted(label, names[j] or f"args[{j}]")) for j, a in enumerate(obj.args)]
            kw = {k: self.lift_callable(v, _dotted(label, k)) for k, v in obj.keywords.items()}
            return lambda ms: functools.partial(get_func(ms), *[a(ms) for a in args],
                                                **{k: v(ms) for k, v in kw.items()})
        if callable(obj) and not _is_container(obj):
            return lambda ms: obj
        return self._lift_tree(obj, label)

    def _lift_tree(self, obj: Any, label: str) -> Callable[[tuple], Any]:
        """A registered PyTree holding graph nodes: rebuilt by JAX's own unflattening
        around the merged nodes; any other value is kept as it is."""
        tu = self.jax.tree_util
        try:
            flat, treedef = tu.tree_flatten_with_path(obj, is_leaf=self.is_node)
        except Exception:  # not flattenable: a plain value
            return lambda ms: obj
        if not any(self.is_node(leaf) for _, leaf in flat) or (len(flat) == 1 and flat[0][0] == ()):
            return lambda ms: obj
        slots: list[tuple[int, int]] = []  # (leaf position, node index)
        for pos, (path, leaf) in enumerate(flat):
            if self.is_node(leaf):
                slots.append((pos, self._add(leaf, join_name(label, [_key_of(e) for e in path]), False)))
        leaves = [leaf for _, leaf in flat]

        def rebuild(ms: tuple) -> Any:
            full = list(leaves)
            for pos, i in slots:
                full[pos] = ms[i]
            return tu.tree_unflatten(treedef, full)

        return rebuild

    def lift_inputs(self, leaves: list, paths: list, callee: Any, n_args: int) -> list[tuple[int, int]]:
        """Lift the graph nodes among the inputs' leaves (flattened with ``is_leaf=self.is_node``,
        ``paths`` their key paths in ``(args, kwargs)``); returns ``(leaf position, node index)``
        per node. A node is labelled by the callee's parameter it binds to."""
        names = positional_names(callee, n_args)
        slots = []
        for pos, (leaf, path) in enumerate(zip(leaves, paths)):
            if not self.is_node(leaf):
                continue
            keys = [_key_of(e) for e in path]
            if len(keys) >= 2 and keys[0] == 0 and type(keys[1]) is int:
                j = keys[1]
                top = (names[j] if 0 <= j < len(names) else None) or f"args[{j}]"
            elif len(keys) >= 2:
                top = join_name("", [keys[1]])
            else:
                top = "input"
            slots.append((pos, self._add(leaf, join_name(top, keys[2:]), True)))
        return slots

    # ------------------------------------------------------------------ split and merge

    def split(self) -> None:
        """Split every lifted node into one state (outside the trace)."""
        self.graphdef, self.state = self.nnx.split(tuple(self.nodes))

    def merge(self, state: Any) -> tuple:
        """Inside the trace: clones of the nodes holding ``state``, registered for the
        module-call interception under their labels."""
        merged = self.nnx.merge(self.graphdef, state)
        jax_modules.register_merged(merged, self.labels)
        return merged

    def roots(self) -> list[tuple[Any, str]]:
        """``(node, label)`` of each lifted node: whose module classes are intercepted."""
        return list(zip(self.nodes, self.labels))


def _node_test(nnx: Any) -> Callable[[Any], bool]:
    """``nnx.graph.is_graph_node``, decided once per type (it is a registry lookup and
    ``isinstance`` checks against NNX's ABCs, asked of every leaf of the inputs)."""
    graph = getattr(nnx, "graph", None)
    is_graph_node = getattr(graph, "is_graph_node", None) or (lambda x: isinstance(x, (nnx.Module, nnx.Variable)))
    cache: dict[type, bool] = {}

    def test(x: Any) -> bool:
        t = type(x)
        got = cache.get(t)
        if got is None:
            got = cache[t] = bool(is_graph_node(x))
        return got

    return test


def _dotted(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix and not name.startswith("[") else prefix + name


def _is_container(obj: Any) -> bool:
    return isinstance(obj, (list, tuple, dict))
