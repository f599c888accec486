"""Small captures with a known shape, shared by the viewer tests (imported by name:
test files put their own folder on ``sys.path``)."""

from __future__ import annotations

from capture.model import Capture, Coverage, Frame, Group, Node, Operand, Source, Value


def tiny_capture() -> Capture:
    """A two-level program whose every edge is known::

        root
        ├── g0 jit "outer"
        │   ├── g1 scope "inner":  n0 sin(v0) -> v1 ; n1 cos(v1) -> v2
        │   └── n2 add(v2, v0) -> v3
        └── n3 reduce_sum(v3, literal 0) -> v4 (f32[]) ; n4 convert(v4) -> v5 (bf16[4])

    v0 (f32[2,3]) is the input; v4 and v5 are outputs."""
    values = [
        Value(0, [2, 3], "float32"),
        Value(1, [2, 3], "float32"),
        Value(2, [2, 3], "float32"),
        Value(3, [2, 3], "float32"),
        Value(4, [], "float32"),
        Value(5, [4], "bfloat16"),
    ]
    frames = [
        Frame("model.py", 5, 4, "net"),
        Frame("model.py", 6, 4, "net"),
        Frame("pkg/other.py", 12, 0, "helper"),
    ]
    nodes = [
        Node(0, "sin", [Operand(0, 0)], [1], {}, 1, 0),
        Node(1, "cos", [Operand(0, 1)], [2], {}, 1, 0),
        Node(2, "add", [Operand(0, 2), Operand(1, 0)], [3], {"note": float("inf")}, 0, 1),
        Node(3, "reduce_sum", [Operand(0, 3), Operand(1, None, 0)], [4], {"axes": [0, 1]}, None, 2),
        Node(4, "convert_element_type", [Operand(0, 4)], [5], {"new_dtype": "bfloat16"}, None, None),
    ]
    return Capture(
        backend="jaxpr",
        framework="jax",
        framework_version="0.0-test",
        coverage=Coverage(scope="traced_program"),
        values=values,
        nodes=nodes,
        groups=[Group(0, "jit", "outer"), Group(1, "scope", "inner", 0)],
        frames=frames,
        inputs={"tuple": [{"value": 0}]},
        outputs={"tuple": [{"value": 4}, {"value": 5}]},
        sources=[Source("model.py", "0" * 64)],
        recipe={"kind": "model", "framework": "jax", "model": "model:net"},
    )


def flat_capture(n: int, *, opaque_every: int = 0) -> Capture:
    """``n`` nodes directly in one jit group, each using the previous node's output:
    cheaper to build than the synthetic generator for very wide groups."""
    values = [Value(i, [8], "float32") for i in range(n + 1)]
    nodes = [
        Node(i, "neg" if not opaque_every or i % opaque_every else "while", [Operand(0, i)], [i + 1], {}, 0, None,
             bool(opaque_every) and i % opaque_every == 0)
        for i in range(n)
    ]
    return Capture(
        backend="jaxpr", framework="jax", framework_version="0.0-test",
        coverage=Coverage(scope="traced_program"),
        values=values, nodes=nodes, groups=[Group(0, "jit", "flat")],
        inputs={"value": 0}, outputs={"value": n},
    )
