"""Per-device memory (issue 34, ``capture.graph.device_memory``): what one device holds
for the model and every group, counted with per-device shapes; views add nothing,
unexecuted templates add nothing, a shard_map body does."""

from __future__ import annotations

from capture.graph.device_memory import annotate, compute
from capture.graph.model import Capture, Coverage, Group, Node, Operand, Value
from capture.graph.sharding import mesh_record, sharding_record

SIZES = {"tp": 4}


def torch_like() -> Capture:
    """x -> [layer: linear(x, W) -> view] -> relu, W split 4 ways; a grad of W."""
    w = sharding_record(0, [64, 16], [["tp"], []], SIZES)
    values = [
        Value(0, [2, 16], "float32", {"input": "x", "storage": 0}),
        Value(1, [64, 16], "float32", {"param": "layer.weight", "storage": 1}, w),
        Value(2, [2, 64], "float32", {"storage": 2}, sharding_record(0, [2, 64], [[], ["tp"]], SIZES)),
        Value(3, [2, 64], "float32", {"storage": 2}),  # a view: no new storage
        Value(4, [2, 64], "float32", {"storage": 3}),
        Value(5, [64, 16], "float32", {"storage": 4, "grad_of": "layer.weight"}, w),
        Value(6, [], "float32", {"buffer": "count", "storage": 5}),
    ]
    nodes = [
        Node(0, "aten::mm", [Operand(0, 0), Operand(1, 1)], [2], group=1),
        Node(1, "aten::view", [Operand(0, 2)], [3], group=1),
        Node(2, "aten::relu", [Operand(0, 3), Operand(1, 6)], [4], group=0),
        Node(3, "aten::mm", [Operand(0, 4)], [5], group=2),
    ]
    groups = [Group(0, "module", "Net", None, {"path": ""}), Group(1, "module", "layer", 0, {"path": "layer"}),
              Group(2, "backward", "backward", None)]
    return Capture("torch_eager", "torch", "2.13", Coverage("training_step"), values=values, nodes=nodes,
                   groups=groups, inputs={"dict": [["args", {"tuple": [{"value": 0}]}], ["kwargs", {"dict": []}]]},
                   meshes=[mesh_record([("tp", 4, None)], "DeviceMesh", "recipe")])


def test_model_and_group_figures():
    cap = torch_like()
    model, groups = compute(cap)
    assert model["param_bytes"] == 16 * 16 * 4 + 4  # this rank's quarter of W, and the buffer
    assert model["input_bytes"] == 2 * 16 * 4
    assert model["activation_bytes"] == 2 * 16 * 4 + 2 * 64 * 4  # mm's shard, relu's; not the view, not the grad
    assert model["gradient_bytes"] == 16 * 16 * 4 and model["devices"] == 4
    layer = groups[1]
    assert layer == {"param_bytes": 16 * 16 * 4, "input_bytes": 2 * 16 * 4, "activation_bytes": 2 * 16 * 4,
                     "gradient_bytes": 16 * 16 * 4}
    root = groups[0]
    assert root["param_bytes"] == 16 * 16 * 4 + 4 and root["activation_bytes"] == model["activation_bytes"]
    annotate(cap)
    assert cap.meta["per_device_memory"]["param_bytes"] == model["param_bytes"]
    assert cap.groups[1].attrs["per_device_memory"] == layer


def test_templates_count_nothing_and_shard_map_bodies_do():
    values = [Value(0, [8, 16], "float32"), Value(1, [8, 16], "float32"), Value(2, [2, 16], "float32"),
              Value(3, [2, 16], "float32"), Value(4, [8, 16], "float32"), Value(5, [4], "float32")]
    nodes = [Node(0, "shard_map", [Operand(0, 0)], [1]), Node(1, "psum", [Operand(0, 2)], [3], group=0),
             Node(2, "scan", [Operand(0, 1)], [4]), Node(3, "sin", [Operand(0, 4)], [5], group=1)]
    groups = [Group(0, "body", "shard_map body", None, {"node": 0, "role": "shard_map body"}),
              Group(1, "body", "scan body", None, {"node": 2, "role": "scan body"})]
    cap = Capture("jaxpr", "jax", "0.10", Coverage("traced_program"), values=values, nodes=nodes, groups=groups,
                  inputs={"dict": [["args", {"tuple": [{"value": 0}]}], ["kwargs", {"dict": []}]]},
                  meta={"state_key": None})
    model, per_group = compute(cap)
    assert model["activation_bytes"] == (8 * 16 + 2 * 16 + 8 * 16) * 4  # not the scan template's sin
    assert per_group[1] == {} and per_group[0]["activation_bytes"] == 2 * 16 * 4


def test_symbolic_dimensions_are_flagged():
    cap = Capture("torch_abstract", "torch", "2.13", Coverage("abstract_forward"),
                  values=[Value(0, ["s0", 4], "float32", {"input": "x"}), Value(1, ["s0", 4], "float32")],
                  nodes=[Node(0, "aten::neg", [Operand(0, 0)], [1])],
                  inputs={"dict": [["args", {"tuple": [{"value": 0}]}], ["kwargs", {"dict": []}]]})
    model, _ = compute(cap)
    assert model["symbolic"] is True and model["input_bytes"] == 0
