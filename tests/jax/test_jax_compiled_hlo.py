"""Reading a compiled HLO module (``capture.jax.compiled``): its collectives in every
spelling XLA prints (replica groups listed, as an iota, over XLA's own mesh; asynchronous
starts; a permute's pairs), the source lines behind ``stack_frame_id``, the mesh axes a
group spans, the names XLA's combiner joins, and the attribution rules, table-driven on
texts of our own; the ``compiled`` record through the graph file and its checks."""

from __future__ import annotations

import types

import pytest

from capture.graph import graphfile
from capture.graph.compiled import CompiledError, by_node, check_compiled, summary_lines
from capture.graph.model import Capture, Coverage, Node, Operand, Value
from capture.jax.compiled import Attributor, alternatives, mesh_axes, operand_bytes, parse_collectives

HEAD = """HloModule jit_f, num_partitions=8

FileNames
1 "/ws/model.py"

FunctionNames
1 "loss"

FileLocations
1 {file_name_id=1 function_name_id=1 line=10 end_line=10 column=4 end_column=4}
2 {file_name_id=1 function_name_id=1 line=20 end_line=20 column=4 end_column=4}

StackFrames
1 {file_location_id=2 parent_frame_id=1}
2 {file_location_id=1 parent_frame_id=1}

"""


def one(line: str) -> dict:
    (got,) = parse_collectives(HEAD + "ENTRY %main {\n  " + line + "\n}\n")
    return got


GROUPS = [
    ("listed", "replica_groups={{0,1},{2,3},{4,5},{6,7}}", [[0, 1], [2, 3], [4, 5], [6, 7]]),
    ("iota", "replica_groups=[2,4]<=[8]", [[0, 1, 2, 3], [4, 5, 6, 7]]),
    ("iota transposed", "replica_groups=[4,2]<=[2,4]T(1,0)", [[0, 4], [1, 5], [2, 6], [3, 7]]),
    ("XLA's mesh", "replica_groups=mesh['axis_0'=4,'axis_1'=1,'axis_2'=2] {'axis_0'}",
     [[0, 2, 4, 6], [1, 3, 5, 7]]),
]


@pytest.mark.parametrize("name,text,groups", GROUPS, ids=[g[0] for g in GROUPS])
def test_replica_groups_in_each_spelling(name, text, groups):
    got = one(f'%ar = f32[8,64]{{1,0}} all-reduce(%x), channel_id=1, {text}, use_global_device_ids=true, '
              f'to_apply=%add, metadata={{op_name="jit(f)/jvp()/dot_general" stack_frame_id=2}}')
    assert got["groups"] == groups and got["group_size"] == len(groups[0])
    assert got["kind"] == "all-reduce" and not got["async"] and got["result_bytes"] == 8 * 64 * 4
    assert got["op_name"] == "jit(f)/jvp()/dot_general"
    assert got["frames"] == [("/ws/model.py", 10), ("/ws/model.py", 20)]  # innermost first


def test_async_start_counted_once_with_its_result_and_permute_pairs():
    text = HEAD + """ENTRY %main {
  %ags = (f32[2,64]{1,0}, f32[8,64]{1,0}) all-gather-start(%x), replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={0}
  %agd = f32[8,64]{1,0} all-gather-done(%ags)
  %cp = bf16[4,4]{1,0} collective-permute(%y), source_target_pairs={{0,1},{1,0}}, metadata={source_file="/ws/m.py" source_line=7}
  ROOT %t = (f32[8,64]{1,0}) tuple(%agd)
}
"""
    gather, permute = parse_collectives(text)
    assert gather["kind"] == "all-gather" and gather["async"] and gather["result_bytes"] == 8 * 64 * 4
    assert operand_bytes("all-gather", gather["result_bytes"], 4) == 2 * 64 * 4
    assert permute["kind"] == "collective-permute" and permute["groups"] == [[0, 1], [1, 0]]
    assert permute["result_bytes"] == 4 * 4 * 2 and permute["frames"] == [("/ws/m.py", 7)]


AXES = [
    ("model", [[0, 1], [2, 3], [4, 5], [6, 7]], ["model"]),
    ("data", [[0, 2, 4, 6], [1, 3, 5, 7]], ["data"]),
    ("both", [[0, 1, 2, 3, 4, 5, 6, 7]], ["data", "model"]),
    ("none", None, []),
]


@pytest.mark.parametrize("name,groups,axes", AXES, ids=[a[0] for a in AXES])
def test_the_mesh_axes_a_group_spans(name, groups, axes):
    assert mesh_axes(groups, "all-reduce", ["data", "model"], [4, 2]) == axes


def test_combined_and_fused_names():
    assert alternatives("jit(f)/jit(step)/(jvp()/reduce_sum:transpose(jvp(m))/dot_general)") == [
        "jit(f)/jit(step)/jvp()/reduce_sum", "jit(f)/jit(step)/transpose(jvp(m))/dot_general"]
    assert alternatives("jit(f)/mul;jit(f)/broadcast_in_dim") == ["jit(f)/mul", "jit(f)/broadcast_in_dim"]


def _eqn(stack: str, line: int):
    frame = types.SimpleNamespace(file_name="/ws/model.py", line_num=line)
    return types.SimpleNamespace(source_info=types.SimpleNamespace(
        name_stack=stack, traceback=types.SimpleNamespace(frames=[frame])))


ATTRIBUTION = [
    # (op_name, frames, expected node, why)
    ("jit(f)/jvp()/dot_general", [("/ws/model.py", 10)], 0, "forward matmul: primitive, line, name stack"),
    ("jit(f)/transpose(jvp())/dot_general", [("/ws/model.py", 10)], 1, "its transpose: the backward one"),
    ("jit(f)/reduce_sum", [("/ws/model.py", 12)], 2, "a reduction"),
    ("jit(f)/sharding_constraint", [("/ws/model.py", 12)], 2, "no such primitive: the line"),
    ("jit(f)/custom_thing", [("/ws/other.py", 99)], None, "nothing agrees: unattributed"),
]


@pytest.mark.parametrize("op_name,frames,node,why", ATTRIBUTION, ids=[a[3] for a in ATTRIBUTION])
def test_attribution(op_name, frames, node, why):
    nodes = [Node(0, "dot_general"), Node(1, "dot_general"), Node(2, "reduce_sum")]
    eqns = [_eqn("jvp()", 10), _eqn("transpose(jvp())", 10), _eqn("", 12)]
    got = Attributor(nodes, eqns).attribute({"op_name": op_name, "frames": frames})
    assert (got[0][0] if got else None) == node


def _record(node):
    return {"status": "compiled", "seconds": 0.5, "scope": "per device", "devices": 8,
            "cost": {"flops": 1000.0}, "memory": {"arguments": 10, "outputs": 4, "temporaries": 6, "aliases": 0,
                                                  "peak": 20},
            "collectives": [{"kind": "all-reduce", "async": False, "axes": ["data"], "devices": 4, "groups": "",
                             "operand_bytes": 64, "bytes_sent_per_device": 96, "node": node, "op_name": "x",
                             "hlo": "ar"},
                            {"kind": "all-gather", "async": False, "axes": ["model"], "devices": 2, "groups": "",
                             "operand_bytes": 32, "bytes_sent_per_device": 32, "node": None, "op_name": "",
                             "hlo": "ag"}],
            "attributed": 1, "unattributed": 1, "note": "n"}


def _capture(compiled):
    return Capture("jaxpr", "jax", "0.10", Coverage("traced_program"),
                   values=[Value(0, [4], "float32"), Value(1, [4], "float32")],
                   nodes=[Node(0, "reduce_sum", [Operand(0, 0)], [1])],
                   inputs={"list": [{"value": 0}]}, outputs={"value": 1}, compiled=compiled)


def test_the_record_through_the_graph_file_and_its_checks():
    back = graphfile.decode(graphfile.encode(_capture(_record(0))))
    assert back.compiled == _record(0)
    assert list(by_node(back.compiled)) == [0]
    with pytest.raises(graphfile.GraphFileError, match="compiled.collectives\\[0\\].node"):
        graphfile.decode(graphfile.encode(_capture(_record(5))))
    for bad in ({"status": "done"}, {"status": "compiled", "cost": {"flops": "many"}}, []):
        with pytest.raises(CompiledError):
            check_compiled(bad, 1)


def test_the_lines_inspect_and_summary_print():
    lines = summary_lines(_record(0), lambda n: f"{n} B")
    assert lines[0].startswith("compiled:    by XLA for 8 devices in 0.50 s (figures per device)")
    assert "2 (all-reduce(data)×1, all-gather(model)×1); 128 B sent per device; 1 drawn on their nodes, " \
           "1 unattributed" in lines[1]
    assert "per device (cost_analysis)" in lines[2] and "peak 20 B per device" in lines[3]
    assert summary_lines({"status": "timeout", "reason": "too slow"}, str) == [
        "compiled:    not compiled (timeout): too slow"]


def test_the_hover_says_what_xla_runs():
    from tensorviz_lsp.features.hover import _size

    text = _size(_capture(_record(0)))
    assert "compiled by XLA for 8 devices: 2 collectives (1 on no op)" in text
    assert "per device" in text and "peak 20 B per device" in text
    assert "not compiled (timeout)" in _size(_capture({"status": "timeout", "reason": "r"}))


def test_inspect_lists_a_mesh_named_twice_once():
    from capture.graph.sharding import mesh_record
    from tensorviz_lsp.cli.commands.inspect import _split_lines

    cap = _capture(_record(0))
    axes = [("fsdp", 8, "explicit"), ("tp", 8, "explicit")]
    cap.meshes = [mesh_record(axes, "Mesh", "recipe"), mesh_record(axes, "AbstractMesh", "program")]
    meshes = [line for line in _split_lines(cap) if line.startswith("mesh")]
    assert meshes == ["mesh 0, 1:  fsdp=8 (explicit) × tp=8 (explicit), 64 devices (Mesh, from the recipe; "
                      "AbstractMesh, from the program)"]
    assert "collectives: none written by the program" in _split_lines(cap)
