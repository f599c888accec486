"""Torch programs split across devices (issue 34): a tensor-parallel MLP
(``parallelize_module`` with ``ColwiseParallel`` / ``RowwiseParallel``, the Llama MLP's
plan) on the recipe's mesh, a ``fake`` process group of 4 ranks. The graph stays
connected across every DTensor/local boundary (no orphan or dead-end value the plain MLP
does not have), global and per-device shapes are both recorded and never mixed, the
placements and the mesh are recorded, collectives name their mesh dimension and bytes,
and each rank's parameter bytes are a quarter of the global ones. The captures run in one
fresh interpreter (``tests/sharded_captures.py``; the process group is process-wide)."""

from __future__ import annotations


import pytest

pytest.importorskip("torch")

from capture.graph.model import tree_leaves  # noqa: E402
from capture.graph.sharding import check_sharding, nbytes  # noqa: E402

from capture_workspace import profile_table, tensor, write  # noqa: E402
from sharded_captures import capture_all, read  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]

MODEL = '''
import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class MLP(nn.Module):
    def __init__(self, dim: int = 16, hidden: int = 64):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))


PLAN = {"gate": ColwiseParallel(), "up": ColwiseParallel(), "down": RowwiseParallel()}


def tensor_parallel():
    """The factory builds its own DeviceMesh of the recipe's shape over the process group."""
    mesh = init_device_mesh("cpu", (4,), mesh_dim_names=("tp",))
    return parallelize_module(MLP(), mesh, PLAN)


def sgd(params):
    return torch.optim.SGD(params, lr=0.1)
'''


@pytest.fixture(scope="module")
def caps(tmp_path_factory):
    root = write(tmp_path_factory.mktemp("ws"), {"tp.py": MODEL})
    x = tensor([2, 16])
    cases = {
        "plain": {"framework": "torch", "root": str(root), "table": profile_table("tp:MLP", args=[x])},
        "tp": {"framework": "torch", "root": str(root), "table": profile_table(
            "tp:MLP", args=[x], init={"factory": "tp:tensor_parallel"}, mesh={"tp": 4})},
        "tp_step": {"framework": "torch", "root": str(root), "table": profile_table(
            "tp:MLP", args=[x], init={"factory": "tp:tensor_parallel"}, mesh={"tp": 4}, kind="training_step",
            grad_enabled=True, mode="train", step={"loss": "sum", "optimizer": {"factory": "tp:sgd"}})},
    }
    return capture_all(cases, tmp_path_factory.mktemp("out"))


def loose_ends(cap):
    """(orphans, dead ends): values no node made that the capture does not name (an input,
    a parameter, a buffer), and values a node made that nothing reads and no output holds."""
    produced, consumed = set(), set()
    for n in cap.nodes:
        produced.update(n.outputs)
        consumed.update(o.value for o in n.inputs if o.value is not None)
    outputs = set(tree_leaves(cap.outputs))
    orphans, dead = [], []
    for v in cap.values:
        m = v.measured or {}
        if v.id not in produced and not any(k in m for k in ("input", "param", "buffer")):
            orphans.append(v.id)
        if v.id in produced and v.id not in consumed and v.id not in outputs:
            dead.append(v.id)
    return orphans, dead


def test_connected_across_every_dtensor_boundary(caps):
    plain, tp = read(caps["plain"]), read(caps["tp"])
    assert loose_ends(plain) == ([], [])
    assert loose_ends(tp) == ([], [])
    ops = [n.op for n in tp.nodes]
    assert ops.count("dtensor::from_local") == 3 and ops.count("dtensor::to_local") == 3
    for n in tp.nodes:
        if n.op.startswith("dtensor::"):
            assert n.params["mesh"] == 0 and n.params["no_kernel"]
            # between the groups it joins: never inside the function group of its reader (issue 46)
            assert tp.groups[n.group].kind == "module"
    # an AsyncCollectiveTensor wrapped around a collective's result is that result, no node of its own
    assert "_c10d_functional::_wrap_tensor_autograd" not in ops


def test_mesh_devices_and_placements_are_recorded(caps):
    cap = read(caps["tp"])
    assert cap.meshes == [{"axes": [{"name": "tp", "size": 4, "type": None}], "devices": 4, "kind": "DeviceMesh",
                           "origin": "recipe"}]
    assert cap.devices["count"] == 4 and cap.devices["simulated"] is True and "fake process group" in cap.devices["how"]
    assert "stats_off" in cap.meta
    for v in cap.values:
        if v.sharding is not None:
            check_sharding(v.sharding, v.shape, cap.meshes, f"values[{v.id}]")
    weights = {v.measured["param"]: v for v in cap.values if v.measured and "param" in v.measured}
    assert weights["gate.weight"].shape == [64, 16]  # global
    assert weights["gate.weight"].sharding["per_device_shape"] == [16, 16]  # this rank's
    assert weights["gate.weight"].sharding["placements"] == ["S(0)"]
    assert weights["down.weight"].sharding["spec"] == [[], ["tp"]]


def test_global_and_per_device_shapes_are_never_mixed(caps):
    cap = read(caps["tp"])
    mm = [n for n in cap.nodes if n.op == "aten::mm"]
    out = cap.values[mm[0].outputs[0]]  # a DTensor: global [2, 64], split on dim 1
    assert out.shape == [2, 64] and out.sharding["per_device_shape"] == [2, 16]
    (to_local,) = [n for n in cap.nodes if n.op == "dtensor::to_local" and n.inputs[0].value == out.id]
    local = cap.values[to_local.outputs[0]]  # the local tensor: per-device shape, saying so
    assert local.shape == [2, 16] and local.sharding["local"] is True and local.sharding["global_shape"] == [2, 64]
    (silu,) = [n for n in cap.nodes if n.op == "aten::silu"]
    assert silu.inputs[0].value == local.id
    partial = cap.values[mm[-1].outputs[0]]
    assert partial.sharding["partial"] == ["tp"]


def test_collectives_name_the_mesh_dimension_and_bytes(caps):
    cap = read(caps["tp"])
    (reduce,) = [n for n in cap.nodes if n.op == "_c10d_functional::all_reduce"]
    c = reduce.params["collective"]
    assert (c["op"], c["axes"], c["devices"], c["operand_bytes"]) == ("all_reduce", ["tp"], 4, 2 * 16 * 4)
    assert c["bytes_sent_per_device"] == 2 * 3 * 2 * 16 * 4 // 4
    src = cap.nodes[next(i for i, n in enumerate(cap.nodes) if reduce.inputs[0].value in n.outputs)]
    assert src.op == "dtensor::to_local"


def test_per_device_parameter_bytes_are_a_quarter(caps):
    plain, tp = read(caps["plain"]), read(caps["tp"])
    glob = plain.meta["per_device_memory"]["param_bytes"]
    assert glob == 3 * 64 * 16 * 4
    assert tp.meta["per_device_memory"]["param_bytes"] * 4 == glob
    params = [v for v in tp.values if v.measured and "param" in v.measured]
    assert sum(v.measured["bytes"] for v in params) * 4 == glob  # what the rank holds, measured
    assert sum(nbytes(v.shape, v.dtype) for v in params) == glob  # the global shapes stay global
    gate = next(g for g in tp.groups if g.kind == "module" and g.attrs["path"] == "gate")
    assert gate.attrs["per_device_memory"]["param_bytes"] == 64 * 16 * 4 // 4


def test_training_step_gradients_per_device(caps):
    cap = read(caps["tp_step"])
    memory = cap.meta["per_device_memory"]
    assert memory["gradient_bytes"] == memory["param_bytes"] == 3 * 64 * 16 * 4 // 4
    grads = [v for v in cap.values if v.measured and "grad_of" in v.measured]
    assert {v.measured["grad_of"] for v in grads} == {"gate.weight", "up.weight", "down.weight"}
    assert all(v.sharding and v.sharding["per_device_shape"] != v.shape for v in grads)
