"""``tensorviz diff`` reports sharding changes (issue 34): an op whose output is split
another way, a parameter split over another axis, the same split on a renumbered mesh
(no change), and the CLI's words for it."""

from __future__ import annotations

import copy

from capture.graph import graphfile
from capture.graph.diff import diff, summary, to_json
from capture.graph.model import Capture, Coverage, Group, Node, Operand, Value
from capture.graph.sharding import mesh_record, sharding_record

SIZES = {"data": 4, "model": 2}


def capture(w_spec, out_spec, *, meshes_first=None) -> Capture:
    meshes = [mesh_record([("data", 4, "auto"), ("model", 2, "auto")], "Mesh", "recipe")]
    m = 0
    if meshes_first is not None:  # another mesh listed first: the same mesh, index 1
        meshes.insert(0, meshes_first)
        m = 1
    values = [
        Value(0, [8, 16], "float32", {"input": "x"}),
        Value(1, [16, 32], "float32", {"param": "w"}, sharding_record(m, [16, 32], w_spec, SIZES)),
        Value(2, [8, 32], "float32", None, sharding_record(m, [8, 32], out_spec, SIZES)),
    ]
    nodes = [Node(0, "aten::mm", [Operand(0, 0), Operand(1, 1)], [2], group=0)]
    groups = [Group(0, "module", "Net", None, {"path": ""})]
    return Capture("torch_eager", "torch", "2.13", Coverage("eager_forward"), values=values, nodes=nodes,
                   groups=groups, inputs={"dict": [["args", {"tuple": [{"value": 0}]}], ["kwargs", {"dict": []}]]},
                   outputs={"value": 2}, meshes=meshes)


def roundtrip(cap):
    return graphfile.decode(graphfile.encode(cap))


def test_an_output_split_another_way_is_a_change():
    a = roundtrip(capture([[], ["model"]], [["data"], ["model"]]))
    b = roundtrip(capture([[], ["model"]], [["data"], []]))
    d = diff(a, b)
    assert not d.same
    (node,) = d.nodes
    assert node.status == "changed"
    sh = node.changes["shardings"]
    assert sh["a"] == ["[data,model] on data=4 × model=2, per device [2,16]"]
    assert sh["b"] == ["[data,-] on data=4 × model=2, per device [2,32]"]
    assert "sharding [data,model] on data=4 × model=2" in summary(d)
    assert to_json(d)["nodes"][0]["changes"]["shardings"] == sh


def test_a_parameter_split_over_another_axis():
    a = capture([[], ["model"]], [["data"], ["model"]])
    b = capture([["data"], []], [["data"], ["model"]])
    d = diff(a, b)
    changed = d.parameters["changed"]
    assert [c["name"] for c in changed] == ["w"]
    assert changed[0]["a"]["sharding"].startswith("[-,model]") and changed[0]["b"]["sharding"].startswith("[data,-]")
    text = summary(d)
    assert "split [-,model] on data=4 × model=2" in text


def test_the_same_split_on_a_renumbered_mesh_is_no_change():
    a = capture([[], ["model"]], [["data"], ["model"]])
    other = mesh_record([("pipe", 2, "auto")], "Mesh", "program")
    b = capture([[], ["model"]], [["data"], ["model"]], meshes_first=copy.deepcopy(other))
    assert diff(roundtrip(a), roundtrip(b)).same
