"""Value names: every value entering the graph from outside has a human name and a role
(Torch measured labels, the capture's input structure, JAX constants), shown on boundary
inputs and in details, and found by search."""

from __future__ import annotations

import json

import pytest

from viewer_fixtures import flax_capture, torch_capture

from capture.graph import graphfile
from capture.graph.model import Capture, Coverage, Node, Operand, Value
from viewer.projection.projection import Projection


def names(p: Projection, view: dict) -> list[tuple]:
    """The input pills of a page asked with its weight pills (weights=True)."""
    return [(b["key"], b.get("name"), b.get("role")) for b in view["inputs"]]


# --------------------------------------------------------------------------- Torch


def test_torch_boundary_inputs_are_named_from_measured_labels():
    p = Projection(torch_capture())
    # the root holds the model's group: its weights' pills are inside it, at their ops
    assert names(p, p.children(-1, weights=True)) == [("in:0", "x", "input")]
    assert names(p, p.children(0, weights=True)) == [
        ("in:0", "x", "input"), ("in:1", "stem.weight", "param"), ("in:2", "stem.bias", "param")]
    assert names(p, p.children(2, weights=True))[1:] == [
        ("in:4", "norm.weight", "param"), ("in:5", "norm.running_mean", "buffer"),
        ("in:8", "external", "const"), ("in:10", "norm.running_mean", "buffer"),
    ]
    assert names(p, p.children(1, weights=True)) == [("in:0", "x", "input"), ("in:1", "stem.weight", "param"), ("in:2", "stem.bias", "param")]
    # a value produced inside the view's parent arrives from a node: no name
    inner = p.children(2)
    assert ("in:3", None, None) in names(p, inner)
    assert all(b["label"].startswith("f32[") for b in inner["inputs"])  # the label stays the shape


def test_torch_value_and_node_details_carry_names():
    p = Projection(torch_capture())
    v = p.value(1)
    assert (v["name"], v["role"], v["label"]) == ("stem.weight", "param", "f32[8,3,3,3]")
    ops = p.node(0)["inputs"]
    assert [(o["value"].get("name"), o["value"].get("role")) for o in ops] == [
        ("x", "input"), ("stem.weight", "param"), ("stem.bias", "param")]
    # produced values have no name; a version produced by a node keeps none either
    assert "name" not in p.value(3) and "name" not in p.value(7)
    assert [(x["id"], x.get("name")) for x in p.group(1)["inputs"]] == [(0, "x"), (1, "stem.weight"), (2, "stem.bias")]


def test_torch_search_finds_values_by_name_and_structure_path():
    p = Projection(torch_capture())
    (hit,) = p.search("stem.weight")["results"]
    assert (hit["type"], hit["id"], hit["label"], hit["key"]) == ("value", 1, "stem.weight", "in:1")
    assert hit["why"] == "value name" and hit["sublabel"] == "f32[8,3,3,3] · parameter"
    assert hit["item_path"] == ["g0", "g1", "in:1"] and hit["path"] == [0, 1]
    r = p.search("running_mean")["results"]
    assert [(x["id"], x["sublabel"]) for x in r] == [(5, "f32[8] · buffer"), (10, "f32[8] · buffer")]
    assert r[0]["item_path"] == ["g0", "g2", "in:5"]
    # the input by its argument name and by where it sits in the inputs structure
    assert [x["id"] for x in p.search("kwargs.x")["results"]] == [0]
    assert [(x["type"], x["id"]) for x in p.search("stem")["results"]][:1] == [("group", 1)]
    assert {x["id"] for x in p.search("stem")["results"] if x["type"] == "value"} == {1, 2}


# --------------------------------------------------------------------------- JAX / Flax


def test_flax_args_kwargs_and_variables_are_named():
    p = Projection(flax_capture())
    got = {v: (p.value(v).get("name"), p.value(v).get("role")) for v in range(6)}
    assert got == {
        0: ("args[0]", "input"),
        1: ("mask", "input"),
        2: ("variables.params.Dense_0.bias", "variable"),
        3: ("variables.params.Dense_0.kernel", "variable"),
        4: ("variables.batch_stats.mean", "variable"),
        5: ("const", "const"),
    }
    assert names(p, p.children(1, weights=True)) == [("in:0", "args[0]", "input"), ("in:3", "variables.params.Dense_0.kernel", "variable"),
                                       ("in:2", "variables.params.Dense_0.bias", "variable")]
    assert ("in:5", "const", "const") in names(p, p.children(0, weights=True))
    s = p.summary()["inputs"]["dict"]
    assert s[1][1]["dict"][0][1]["name"] == "mask"


def test_flax_search_by_layer_name_finds_the_scope_then_its_variables():
    p = Projection(flax_capture())
    r = p.search("Dense_0")["results"]
    assert [(x["type"], x["id"]) for x in r] == [("group", 1), ("value", 2), ("value", 3)]
    assert r[1]["why"] == "value name" and r[1]["sublabel"] == "f32[8] · variable" and r[2]["item_path"] == ["g0", "g1", "in:3"]
    # an exact name comes before longer ones; an unused variable has nowhere to go
    assert [x["id"] for x in p.search("mask")["results"]] == [1]
    (mean,) = p.search("batch_stats")["results"]
    assert mean["item_path"] == [] and mean["key"] == "in:4"
    assert [x["id"] for x in p.search("kwargs.mask")["results"]] == [1]


def test_file_read_captures_are_named_alike(tmp_path):
    for cap in (torch_capture(), flax_capture()):
        graphfile.write(cap, tmp_path / "c.tvg")
        a, b = Projection(cap), Projection(graphfile.read(tmp_path / "c.tvg"))
        assert a.names.names == b.names.names
        assert json.dumps(a.children(-1)) == json.dumps(b.children(-1))
        assert a.search("e") == b.search("e")


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        pytest.param({"list": [{"value": 0}, {"tuple": [{"value": 1}]}]}, {0: "args[0]", 1: "args[1][0]"}, id="root-list"),
        pytest.param({"value": 0}, {0: "input"}, id="root-value"),
        pytest.param({"dict": [["a", {"value": 0}], [3, {"value": 1}]]}, {0: "a", 1: "[3]"}, id="root-dict"),
        pytest.param({"dict": [["args", {"tuple": [{"dict": [["odd key", {"value": 0}]]}]}],
                               ["kwargs", {"dict": [["y", {"list": [{"value": 1}]}]]}]]},
                     {0: "args[0]['odd key']", 1: "y[0]"}, id="nested"),
        pytest.param({"dict": [["args", {"tuple": []}], ["kwargs", {"dict": []}], ["state", {"dict": [["w", {"value": 0}]]}]]},
                     {0: "state.w"}, id="nnx-state"),
        pytest.param({"dict": [["args", "junk"], ["kwargs", {"dict": [["x", {"value": 99}], ["z", {"value": "1"}]]}]]},
                     {}, id="hostile"),
    ],
)
def test_structure_names(inputs, expected):
    values = [Value(0, [2], "float32"), Value(1, [2], "float32"), Value(2, [2], "float32")]
    nodes = [Node(0, "add", [Operand(0, 0), Operand(1, 1)], [2])]
    cap = Capture(backend="jaxpr", framework="jax", framework_version="0", coverage=Coverage(scope="traced_program"),
                  values=values, nodes=nodes, inputs=inputs, outputs={"value": 2})
    p = Projection(cap)
    assert {v: n for v, (n, _) in p.names.names.items()} == expected


def test_hostile_measured_labels_are_ignored():
    cap = torch_capture()
    cap.values[1].measured = {"param": 7, "buffer": ["x"]}
    cap.values[7].measured = {"version_of": 10}  # a loop of versions (7 is produced: stays unnamed)
    cap.values[10].measured = {"version_of": 10}
    cap.meta = {"constants": [{"value": "3"}, 5, {"value": 10 ** 9}]}
    p = Projection(cap)
    assert "name" not in p.value(1) and "name" not in p.value(10)
    assert p.value(0)["name"] == "x"
