"""The synthetic captures the viewer tests and benchmarks use are shape-consistent: each
op reads operands of the shapes it accepts, so no [N] value feeds an [N, N] op."""

from __future__ import annotations

import pytest

from synthetic import N, synthetic_capture

SQUARE, VECTOR = [N, N], [N]


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"n_nodes": 5000, "grouped": False}, id="flat"),
        pytest.param({"n_nodes": 1200, "grouped": True, "opaque_every": 7}, id="grouped-opaque-7"),
        pytest.param({"n_nodes": 3000, "opaque_every": 10}, id="opaque-10"),
        pytest.param({"n_nodes": 600, "layers": 3}, id="three-layers"),
        pytest.param({"n_nodes": 3}, id="tiny"),
    ],
)
def test_every_op_reads_the_shapes_it_accepts(kwargs):
    cap = synthetic_capture(**kwargs)
    shape = {v.id: v.shape for v in cap.values}
    read: set[int] = set()
    for node in cap.nodes:
        ins = [shape[o.value] for o in node.inputs if o.value is not None]
        read.update(o.value for o in node.inputs if o.value is not None)
        (out,) = [shape[v] for v in node.outputs]
        if node.op in ("add", "mul", "div", "dot_general"):
            assert ins == [SQUARE, SQUARE] and out == SQUARE, node
        elif node.op == "reduce_sum":
            assert ins == [SQUARE] and out == VECTOR, node
        elif node.op == "broadcast_in_dim":
            assert len(ins) == 1 and len(node.params["broadcast_dimensions"]) == len(ins[0]) and out == SQUARE, node
        elif node.op == "while":
            assert ins[0] == SQUARE and ins[1:] in ([], [VECTOR]) and out == SQUARE, node
        else:
            assert ins == [SQUARE] and out == SQUARE, node
    vectors = {v.id for v in cap.values if v.shape == VECTOR}
    assert vectors <= read  # every reduction is brought back by a broadcast (or a loop)
