"""Per-device figures (issue 46, item 2): the compiled instructions' per-device shapes read from
HLO text of our own, the split a per-device shape implies, a ``dot_general`` operand's split
from its result's, the per-device FLOPs of nodes and boundaries, and the bytes one device holds
only while a node runs (a body's own values, gathered weights, a collective issued early), on
small captures built here; table-driven where the rules have cases. The end-to-end figures
against XLA's are in ``test_jax_compiled.py`` (slow)."""

from __future__ import annotations

import types

import pytest

from capture.graph import graphfile
from capture.graph.model import Capture, Coverage, Group, Node, NodeCosts, Operand, Value
from capture.graph.sharding import mesh_record
from capture.graph.per_device import body_parameters, boundary_figures, flops_total, transients
from capture.jax.cost import _power
from capture.jax.compiled import instructions
from capture.jax.per_device import _dot_operand, _record

MESH = mesh_record([("data", 2, "auto"), ("model", 4, "auto")], "Mesh", "recipe")
SIZES = [("data", 2), ("model", 4)]

HLO = """HloModule jit_step, num_partitions=8

%fused (param_0: f32[4,256], param_1: f32[256,1024]) -> f32[4,1024] {
  %param_0 = f32[4,256]{1,0} parameter(0)
  %param_1 = f32[256,1024]{1,0} parameter(1)
  ROOT %dot.2 = f32[4,1024]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/jvp()/dot_general" stack_frame_id=1}
}

ENTRY %main (p0: f32[4,1024], p1: f32[1024,256]) -> f32[4,1024] {
  %p0 = f32[4,1024]{1,0} parameter(0), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}, metadata={op_name="x"}
  %p1 = f32[1024,256]{1,0} parameter(1), sharding={devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}, metadata={op_name="w"}
  %dot.1 = f32[4,256]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/jvp()/dot_general" stack_frame_id=1}
  %gte = f32[4,256]{1,0} get-tuple-element(%t), index=0, metadata={op_name="jit(step)/while"}
  %b = f32[4,256]{1,0} broadcast(%c), dimensions={}, metadata={op_name="broadcast.3"}
  ROOT %tanh.1 = f32[4,256]{1,0} tanh(%dot.1), metadata={op_name="jit(step)/jvp()/tanh"}
}
"""


def test_compiled_instructions_carry_per_device_shapes_and_a_dots_contraction():
    got = instructions(HLO, {1: [("/ws/model.py", 10)]})
    # bookkeeping (a parameter, a tuple element) and names without a jit path are left out
    assert [(r["op"], r["shape"], r["op_name"].rsplit("/", 1)[-1]) for r in got] == [
        ("dot", [4, 1024], "dot_general"), ("dot", [4, 256], "dot_general"), ("tanh", [4, 256], "tanh")]
    assert got[0]["k"] == 256 and got[1]["k"] == 1024  # the left operand's contracted elements, by its name
    assert got[0]["frames"] == [("/ws/model.py", 10)] and "frames" not in got[2]


RECORDS = [
    # (global shape, per-device shape, spec or None, why)
    ([8, 1024], [4, 1024], [["data"], []], "the batch over data"),
    ([8, 1024], [4, 256], [["data"], ["model"]], "both axes, one a dimension"),
    ([1024, 1024], [1024, 128], [[], ["data", "model"]], "one dimension over both axes"),
    ([8, 1024], [8, 1024], None, "not split: no record"),
    ([8, 1024], [8, 1000], None, "a ratio no product of the axes makes"),
    ([7, 16], [4, 16], [["data"], []], "an uneven split (XLA pads the last block)"),
]


@pytest.mark.parametrize("shape,local,spec,why", RECORDS, ids=[r[3] for r in RECORDS])
def test_the_split_a_per_device_shape_implies(shape, local, spec, why):
    got = _record(shape, local, 0, SIZES, "compiled")
    if spec is None:
        assert got is None
    else:
        assert got["spec"] == spec and got["per_device_shape"] == local and got["source"] == "compiled"


def _dot_eqn(lhs: list, rhs: list, contract: tuple, batch: tuple = ((), ())):
    avals = [types.SimpleNamespace(aval=types.SimpleNamespace(shape=tuple(s))) for s in (lhs, rhs)]
    return types.SimpleNamespace(params={"dimension_numbers": (contract, batch)}, invars=avals)


DOT_OPERANDS = [
    # (lhs, rhs, contracting, operand, result's per-device shape, compiled k, expected, why)
    ([8, 1024], [1024, 1024], ((1,), (0,)), 0, [4, 256], None, [4, 1024], "x @ w: the batch from the result"),
    ([8, 1024], [1024, 1024], ((1,), (0,)), 1, [4, 256], None, [1024, 256], "w: its columns from the result"),
    ([8, 1024], [8, 1024], ((0,), (0,)), 0, [1024, 256], 4, [4, 1024], "a weight gradient: k from the dot"),
    ([8, 1024], [8, 1024], ((0,), (0,)), 1, [1024, 256], 4, [4, 256], "its other operand"),
]


@pytest.mark.parametrize("lhs,rhs,contract,pos,out_local,k,want,why", DOT_OPERANDS, ids=[d[-1] for d in DOT_OPERANDS])
def test_a_dot_operands_split_from_its_result(lhs, rhs, contract, pos, out_local, k, want, why):
    eqn = _dot_eqn(lhs, rhs, contract)
    out = types.SimpleNamespace(shape=[lhs[1 - contract[0][0]], rhs[1 - contract[1][0]]],
                                sharding={"per_device_shape": out_local})
    assert _dot_operand(eqn, pos, [lhs, rhs][pos], out, k) == want


@pytest.mark.parametrize("y,per", [(2, 1), (3, 2), (4, 2), (7, 4), (1, 0), (0, 0), (-1, 1), (-2, 2)])
def test_integer_power_counts_square_and_multiply(y, per):
    assert _power(y, 10) == 10 * per


def _sharded(vid, shape, local, spec, source="compiled"):
    return Value(vid, shape, "float32", sharding={"mesh": 0, "spec": spec, "per_device_shape": local,
                                                  "source": source})


def _scan_capture():
    """A scan over 2 layers inside a program on an 8-device mesh: x [8,1024] split over data,
    the body's matmul [4,1024] x [1024,256] per device, a tanh after it."""
    values = [
        _sharded(0, [8, 1024], [4, 1024], [["data"], []], "placement"),
        _sharded(1, [2, 1024, 1024], [2, 1024, 256], [[], [], ["model"]], "placement"),
        _sharded(2, [8, 1024], [4, 1024], [["data"], []]),  # the scan's carry out
        _sharded(3, [8, 1024], [4, 1024], [["data"], []]),  # body: the carry in
        _sharded(4, [1024, 1024], [1024, 256], [[], ["model"]], "the outer value's split"),  # body: one layer
        _sharded(5, [8, 1024], [4, 256], [["data"], ["model"]]),  # body: the matmul
        _sharded(6, [8, 1024], [4, 1024], [["data"], []]),  # body: the result
        _sharded(7, [8, 1024], [4, 1024], [["data"], []]),  # tanh after the scan
    ]
    nodes = [Node(0, "scan", [Operand(0, 0), Operand(1, 1)], [2]),
             Node(1, "dot_general", [Operand(0, 3), Operand(1, 4)], [5], group=0),
             Node(2, "all_gather", [Operand(0, 5)], [6], group=0),
             Node(3, "tanh", [Operand(0, 2)], [7])]
    groups = [Group(0, "body", "scan body", None, attrs={"node": 0, "iterations": 2, "role": "scan body",
                                                          "parameters": [{"value": 3}, {"value": 4}]})]
    cost = NodeCosts([4 * 2 * 8 * 1024 * 1024, 2 * 8 * 1024 * 1024, 0, 8 * 1024], [0] * 4, [0] * 4, [0] * 4,
                     ["roofline"])
    return Capture("jaxpr", "jax", "0.10", Coverage("traced_program"), values=values, nodes=nodes, groups=groups,
                   meshes=[MESH], inputs={"list": [{"value": 0}, {"value": 1}]}, outputs={"value": 7}, cost=cost)


def test_boundaries_take_their_bodies_per_device_figures_and_totals_say_loops_apart():
    cap = _scan_capture()
    column = [0, 2 * 4 * 1024 * 256, 0, 4 * 1024]  # the body's matmul at [4,1024] x [1024,256]
    boundary_figures(cap, column)
    assert column[0] == 2 * column[1]  # the scan: its body × its 2 iterations
    cap.cost.flops_per_device = column
    assert flops_total(cap) == column[0] + column[3]  # the body's own rows are in the scan's figure
    assert flops_total(cap, loops_once=True) == column[1] + column[3]  # as XLA's cost_analysis counts a while
    back = graphfile.decode(graphfile.encode(cap))
    assert back.cost.flops_per_device == column and back.cost.of(0)["flops_per_device"] == column[0]


def test_what_a_device_holds_while_a_body_runs():
    cap = _scan_capture()
    assert body_parameters(cap) == {3, 4}  # the carry and the layer stand for outer values: counted there
    got = transients(cap)
    # the body's all_gather of its own matmul is a value of the program; the matmul's result
    # [4,256] is live until the gather reads it, the gather's [4,1024] is the body's result
    assert got == {0: 4 * 256 * 4}
    cap.compiled = {"collectives": [{"kind": "all-gather", "node": 3, "operand_bytes": 4096, "devices": 2}]}
    assert transients(cap)[3] == 8192  # a weight XLA gathers for the tanh, held while it runs


def test_a_collective_of_what_enters_a_body_is_issued_at_its_start():
    """Two gathered weights inside a shard_map body: XLA issues both gathers first, so both are
    held while the first matmul runs (the NNX/FSDP pattern of the shard_map notes)."""
    vals = [Value(i, [4, 4], "float32") for i in range(8)]
    nodes = [Node(0, "shard_map", [Operand(0, 0), Operand(1, 1)], [7]),
             Node(1, "all_gather", [Operand(0, 0)], [2], group=0),
             Node(2, "dot_general", [Operand(0, 2), Operand(1, 2)], [3], group=0),
             Node(3, "all_gather", [Operand(0, 1)], [4], group=0),
             Node(4, "dot_general", [Operand(0, 3), Operand(1, 4)], [5], group=0),
             Node(5, "tanh", [Operand(0, 5)], [6], group=0)]
    groups = [Group(0, "body", "shard_map body", None, attrs={"node": 0, "role": "shard_map body"})]
    cost = NodeCosts([0] * 6, [0] * 6, [0] * 6, [0] * 6, ["roofline"])
    cap = Capture("jaxpr", "jax", "0.10", Coverage("traced_program"), values=vals, nodes=nodes, groups=groups,
                  inputs={"list": [{"value": 0}, {"value": 1}]}, outputs={"value": 7}, cost=cost)
    # at the first matmul: both gathered weights (64 B each) and its result (64 B)
    assert transients(cap) == {0: 3 * 64}


def test_the_summary_sets_the_per_node_figures_beside_xlas_and_says_what_they_are():
    from capture.jax.per_device import NOTE, NOTE_UNCOMPILED
    from tensorviz_lsp.cli.commands.summary import _compiled_text, compiled_doc

    cap = _scan_capture()
    column = [0, 2 * 4 * 1024 * 256, 0, 4 * 1024]
    boundary_figures(cap, column)
    cap.cost.flops_per_device = column
    cap.cost.notes["flops_per_device"] = NOTE_UNCOMPILED
    doc = compiled_doc(cap, {"flops": sum(cap.cost.flops)})  # compile = "off": TensorViz's own figure, said so
    assert "compiled" not in doc and doc["per_device"]["flops_estimate"] == column[0] + column[3]
    assert "TensorViz's unfused estimate" in _compiled_text(doc)
    cap.cost.notes["flops_per_device"] = NOTE
    cap.compiled = {"status": "compiled", "devices": 8, "seconds": 1.0, "collectives": [],
                    "cost": {"flops": 2.0e6, "transcendentals": 4096.0}}
    pd = compiled_doc(cap, {"flops": sum(cap.cost.flops)})["per_device"]
    once = column[1] + column[3]  # a loop's body once, as XLA counts a while loop
    assert pd["flops_loops_once"] == once and pd["xla_flops"] == 2.0e6 + 4096
    assert pd["flops_ratio"] == round(once / (2.0e6 + 4096), 4)
    text = _compiled_text({"compiled": cap.compiled, "per_device": pd})
    assert "with each loop's body once, as XLA counts" in text and "XLA's flops + transcendentals" in text


def _xla(complete=True, **extra):
    """XLA's own per-instruction FLOPs (capture.jax.xla_flops) for the scan capture's program."""
    return {"complete": complete, "total": 2 * 4 * 1024 * 256 + 7 + 4 * 1024 + 9, "failed": {}, **extra,
            "instructions": [
                {"op": "dot", "flops": 2 * 4 * 1024 * 256, "op_name": "jit(step)/while/body/dot_general",
                 "shape": [4, 256]},
                {"op": "add", "flops": 7, "op_name": "jit(step)/while/body/dot_general", "shape": [],
                 "inherited": True},  # a rewrite's scalar, placed on what reads it
                {"op": "tanh", "flops": 4 * 1024, "op_name": "jit(step)/tanh", "shape": [4, 1024]},
                {"op": "multiply", "flops": 9, "op_name": "jit(step)/no_such_primitive", "shape": [4]}]}


def test_xlas_own_instruction_flops_go_on_their_nodes():
    from capture.jax.per_device import annotate

    cap = _scan_capture()
    annotate(cap, [None] * 4, [], 0, None, _xla())
    column = cap.cost.flops_per_device
    assert column[1] == 2 * 4 * 1024 * 256 + 7 and column[3] == 4 * 1024
    assert column[0] == 2 * column[1]  # the scan: its body × its 2 iterations
    assert flops_total(cap, loops_once=True) == _xla()["total"] - 9  # as cost_analysis counts it, less the unplaced
    note = cap.cost.notes["flops_per_device"]
    assert note.startswith("XLA's own FLOPs for each compiled instruction") and "under 0.1%" in note


@pytest.mark.parametrize("extra, why", [({"timed_out": True}, "ran out of time"),
                                        ({"failed": {"custom-call": 2}}, "could not cost 2 custom-call")])
def test_without_all_of_xlas_figures_each_node_is_counted_at_its_shapes(extra, why):
    from capture.jax.per_device import NOTE, annotate

    cap = _scan_capture()
    annotate(cap, [None] * 4, [], 0, None, _xla(complete=False, **extra))
    note = cap.cost.notes["flops_per_device"]
    assert note.startswith(NOTE) and why in note
    assert cap.cost.flops_per_device[3] == 4 * 1024  # the tanh at its per-device shape [4,1024]
