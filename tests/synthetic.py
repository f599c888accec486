"""Synthetic captures of any size, for tests, benchmarks and scale checks.

Deterministic for a given size and seed; shaped like a real traced program: a
stack of layer groups, each a chain of matmul/add/activation nodes with literal
operands, repeated uses of values, params and source frames. Shapes are consistent:
each op's operands have the shapes that op accepts.
"""

from __future__ import annotations

import random

from capture.graph.model import Capture, Coverage, Frame, Group, Node, Operand, Source, Value

# Every value is [N, N] (so dot_general, transpose and the binary ops always agree) except
# a reduce_sum's [N], which only broadcast_in_dim (or an opaque ``while`` standing in its
# place) reads, to bring it back to [N, N].
N = 128
_SQUARE = [N, N]
_OPS = ("dot_general", "add", "max", "mul", "reshape", "transpose", "exp", "reduce_sum", "broadcast_in_dim", "div")
_BINARY = ("add", "mul", "div", "dot_general", "max")


def _operands(op: str, a: int, b: int, reduced: int | None) -> tuple[list[Operand], dict]:
    """The operands and params of a synthetic ``op`` on the last value ``a`` (and ``b``; a
    pending reduction ``reduced`` is what a broadcast or a loop takes)."""
    params: dict = {}
    if op in _BINARY:
        inputs = [Operand(0, a), Operand(1, b)]
        if op == "max":
            inputs[1] = Operand(1, None, 0.0)
        if op == "dot_general":
            params = {"dimension_numbers": [[[1], [0]], [[], []]], "precision": None}
    elif op == "broadcast_in_dim" and reduced is not None:
        inputs = [Operand(0, reduced)]
        params = {"shape": _SQUARE, "broadcast_dimensions": [0]}
    elif op == "broadcast_in_dim":
        inputs = [Operand(0, a)]
        params = {"shape": _SQUARE, "broadcast_dimensions": [0, 1]}
    elif op == "while":
        # A loop carrying the last value (and a pending reduction, whose broadcast it replaces).
        inputs = [Operand(0, a)] + ([Operand(1, reduced)] if reduced is not None else [])
    else:
        inputs = [Operand(0, a)]
        if op == "reduce_sum":
            params = {"axes": [1]}
    return inputs, params


def synthetic_capture(
    n_nodes: int,
    *,
    layers: int | None = None,
    grouped: bool = True,
    seed: int = 0,
    opaque_every: int = 0,
    framework: str = "jax",
) -> Capture:
    """A capture of exactly ``n_nodes`` nodes.

    ``grouped``: nodes sit in ``layers`` scope groups under one jit group (a
    transformer-like nesting); otherwise every node is a direct child of a single
    jit group (a flat program). ``opaque_every``: every k-th node is an opaque
    ``while`` boundary (and coverage becomes partial).
    """
    rng = random.Random(seed)
    layers = layers or max(1, min(48, n_nodes // 200))
    groups = [Group(0, "jit", "main")]
    per_layer = max(1, -(-n_nodes // layers))
    if grouped:
        for layer in range(layers):
            lg = Group(len(groups), "scope", f"layer_{layer}", 0)
            groups.append(lg)
            for sub in ("attention", "mlp"):
                groups.append(Group(len(groups), "scope", sub, lg.id))
    frames = [Frame(f"model/layer{i % 7}.py", 10 + i, 4, f"block_{i % 7}") for i in range(64)]
    values: list[Value] = []
    nodes: list[Node] = []

    def new_value(shape: list[int], dtype: str = "float32") -> int:
        values.append(Value(len(values), shape, dtype))
        return len(values) - 1

    x = new_value(_SQUARE)
    first = x
    recent = [x]  # the last few [N, N] values
    reduced: int | None = None  # a reduce_sum's [N] result not yet broadcast back
    for i in range(n_nodes):
        op = _OPS[i % len(_OPS)]
        is_opaque = bool(opaque_every) and i % opaque_every == opaque_every - 1
        if is_opaque:
            op = "while"
        a = recent[-1]
        b = recent[rng.randrange(len(recent))]
        inputs, params = _operands(op, a, b, reduced)
        if op in ("broadcast_in_dim", "while"):
            reduced = None
        out = new_value([N] if op == "reduce_sum" else _SQUARE)
        if grouped:
            layer = min(i // per_layer, layers - 1)
            group = 1 + layer * 3 + (1 if (i % per_layer) < per_layer // 2 else 2)
        else:
            group = 0
        nodes.append(Node(i, op, inputs, [out], params, group, rng.randrange(len(frames)), is_opaque))
        if op == "reduce_sum":
            reduced = out
        else:
            recent.append(out)
            if len(recent) > 8:
                recent.pop(0)
    reasons = ["opaque_kernel"] if opaque_every else []
    return Capture(
        backend="jaxpr" if framework == "jax" else "torch_eager",
        framework=framework,
        framework_version="0.0-synthetic",
        coverage=Coverage(
            scope="traced_program" if framework == "jax" else "eager_forward",
            status="partial" if opaque_every else "complete",
            reasons=reasons,
            effects="incomplete" if opaque_every else "none",
        ),
        values=values,
        nodes=nodes,
        groups=groups,
        frames=frames,
        inputs={"tuple": [{"value": first}]},
        outputs={"value": recent[-1]},
        sources=[Source("model/layer0.py", "0" * 64)],
        recipe={"kind": "model", "framework": framework, "model": "model:net"},
        meta={"synthetic": True},
    )
