"""Small captures with a known shape, shared by the viewer tests (imported by name:
test files put their own folder on ``sys.path``)."""

from __future__ import annotations

from capture.graph.model import Capture, Coverage, Frame, Group, Node, Operand, Source, Value


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


# --------------------------------------------------------------------------- named values


def _m(**labels) -> dict:
    return {"device": "cpu", "bytes": 32, **labels}


def torch_capture() -> Capture:
    """A Torch-style capture of ``Net(x)`` with ``stem`` (conv) and ``norm`` (batch norm)::

        g0 module Net
        ├── g1 module stem:  n0 convolution(x, stem.weight, stem.bias) -> v3
        └── g2 module norm:  n1 batch_norm(v3, norm.weight, norm.running_mean) -> v6
                              n2 add_(v5 running_mean', v6) (new version v7 of running_mean)
                              n3 mul(v6, v8) -> v9    (v8: an external tensor)
                              n4 mul(v9, v10) -> v11  (v10: running_mean changed outside)
    """
    values = [
        Value(0, [2, 3, 16, 16], "float32", _m(input="x")),
        Value(1, [8, 3, 3, 3], "float32", _m(param="stem.weight", requires_grad=True)),
        Value(2, [8], "float32", _m(param="stem.bias", requires_grad=True)),
        Value(3, [2, 8, 16, 16], "float32", _m()),
        Value(4, [8], "float32", _m(param="norm.weight", requires_grad=True)),
        Value(5, [8], "float32", _m(buffer="norm.running_mean")),
        Value(6, [2, 8, 16, 16], "float32", _m()),
        Value(7, [8], "float32", _m(version_of=5)),
        Value(8, [8], "float32", _m(external=True)),
        Value(9, [2, 8, 16, 16], "float32", _m()),
        Value(10, [8], "float32", _m(version_of=7, changed_outside_trace=True)),
        Value(11, [2, 8, 16, 16], "float32", _m()),
    ]
    nodes = [
        Node(0, "aten::convolution", [Operand(0, 0), Operand(1, 1), Operand(2, 2)], [3], {}, 1),
        Node(1, "aten::batch_norm", [Operand(0, 3), Operand(1, 4), Operand(2, 5)], [6], {}, 2),
        Node(2, "aten::add_.Tensor", [Operand(0, 5), Operand(1, 6)], [7], {}, 2),
        Node(3, "aten::mul.Tensor", [Operand(0, 6), Operand(1, 8)], [9], {}, 2),
        Node(4, "aten::mul.Tensor", [Operand(0, 9), Operand(1, 10)], [11], {}, 2),
    ]
    return Capture(
        backend="torch_dispatch", framework="torch", framework_version="2.0-test",
        coverage=Coverage(scope="eager_forward"), values=values, nodes=nodes,
        groups=[Group(0, "module", "Net"), Group(1, "module", "stem", 0), Group(2, "module", "norm", 0)],
        inputs={"dict": [["args", {"tuple": []}], ["kwargs", {"dict": [["x", {"value": 0}]]}]]},
        outputs={"value": 11},
    )


def flax_capture() -> Capture:
    """A JAX capture of a Linen MLP called as ``mlp(x, mask=m)`` with its variables, a
    closed-over constant and a positional argument::

        g0 scope MLP
        ├── g1 scope Dense_0:  n0 dot_general(args[0], kernel) -> v6 ; n1 add(v6, bias) -> v7
        └── n2 mul(v7, mask) -> v8 ; n3 add(v8, const) -> v9
    """
    values = [
        Value(0, [2, 3], "float32"),   # args[0]
        Value(1, [2, 8], "float32"),   # kwargs mask
        Value(2, [8], "float32"),      # variables.params.Dense_0.bias
        Value(3, [3, 8], "float32"),   # variables.params.Dense_0.kernel
        Value(4, [8], "float32"),      # variables.batch_stats.mean (unused)
        Value(5, [8], "float32"),      # closure constant
        Value(6, [2, 8], "float32"),
        Value(7, [2, 8], "float32"),
        Value(8, [2, 8], "float32"),
        Value(9, [2, 8], "float32"),
    ]
    nodes = [
        Node(0, "dot_general", [Operand(0, 0), Operand(1, 3)], [6], {}, 1),
        Node(1, "add", [Operand(0, 6), Operand(1, 2)], [7], {}, 1),
        Node(2, "mul", [Operand(0, 7), Operand(1, 1)], [8], {}, 0),
        Node(3, "add", [Operand(0, 8), Operand(1, 5)], [9], {}, 0),
    ]
    variables = {"dict": [
        ["params", {"dict": [["Dense_0", {"dict": [["bias", {"value": 2}], ["kernel", {"value": 3}]]}]]}],
        ["batch_stats", {"dict": [["mean", {"value": 4}]]}],
    ]}
    return Capture(
        backend="jaxpr", framework="jax", framework_version="0.0-test",
        coverage=Coverage(scope="traced_program"), values=values, nodes=nodes,
        groups=[Group(0, "scope", "MLP"), Group(1, "scope", "Dense_0", 0)],
        inputs={"dict": [["args", {"tuple": [{"value": 0}]}], ["kwargs", {"dict": [["mask", {"value": 1}]]}],
                         ["variables", variables]]},
        outputs={"value": 9},
        meta={"constants": [{"value": 5, "origin": "closure"}]},
    )
