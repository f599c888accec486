"""Projection: children pages, boundary edges, chunking, details and search."""

from __future__ import annotations

import json

import pytest
from viewer_fixtures import flat_capture, tiny_capture

from capture.graph import graphfile
from capture.graph.model import Capture, Failure, Group
from synthetic import synthetic_capture
from viewer.projection.projection import MAX_ITEMS, NotFound, Projection, ProjectionError, group_sublabel


def edges(view: dict) -> set[tuple[str, str, str]]:
    return {(e["source"], e["target"], e["label"]) for e in view["edges"]}


def keys(view: dict) -> list[str]:
    return [it["key"] for it in view["items"]]


@pytest.fixture(scope="module")
def tiny() -> Projection:
    return Projection(tiny_capture())


# --------------------------------------------------------------------------- children


def test_root_shows_collapsed_group_with_boundary_edges_labelled_by_shape(tiny):
    view = tiny.children(-1)
    assert keys(view) == ["g0", "n3", "n4"]
    assert edges(view) == {
        ("in:0", "g0", "f32[2,3]"),
        ("g0", "n3", "f32[2,3]"),
        ("n3", "n4", "f32[]"),
        ("n3", "out:4", "f32[]"),
        ("n4", "out:5", "bf16[4]"),
    }
    assert [(b["key"], b["label"], b["from"]) for b in view["inputs"]] == [("in:0", "f32[2,3]", {"type": "input"})]
    assert [(b["key"], b["capture_output"]) for b in view["outputs"]] == [("out:4", True), ("out:5", True)]
    group = view["items"][0]
    assert group["type"] == "group" and group["label"] == "outer" and group["kind"] == "jit"
    assert group["sublabel"] == "jit · tracing scope"
    assert group["child_count"] == 2 and group["node_count"] == 3
    assert [o["label"] for o in group["outputs"]] == ["f32[2,3]"]  # v3 leaves the group
    assert view["chunked"] is False


def test_expanded_group_has_its_own_boundary(tiny):
    view = tiny.children(0)
    assert keys(view) == ["g1", "n2"]
    assert edges(view) == {
        ("in:0", "g1", "f32[2,3]"),
        ("in:0", "n2", "f32[2,3]"),
        ("g1", "n2", "f32[2,3]"),
        ("n2", "out:3", "f32[2,3]"),
    }
    inner = tiny.children(1)
    assert keys(inner) == ["n0", "n1"]
    assert edges(inner) == {("in:0", "n0", "f32[2,3]"), ("n0", "n1", "f32[2,3]"), ("n1", "out:2", "f32[2,3]")}
    assert inner["inputs"][0]["from"] == {"type": "input"}


def test_boundary_input_names_its_producer_outside():
    # In the synthetic program, each layer reads the previous layer's outputs.
    p = Projection(synthetic_capture(600, layers=3))
    view = p.children(4)  # layer_1
    froms = {b["from"]["type"] for b in view["inputs"]}
    assert froms == {"node"}
    for b in view["inputs"]:
        assert p.index.cols.group[b["from"]["id"]] in (1, 2, 3)  # produced in layer_0
        assert b["label"] in ("f32[128,128]", "f32[128]")  # the synthetic program's two shapes


def test_node_items_carry_op_outputs_and_source(tiny):
    item = tiny.children(1)["items"][0]
    assert item == {
        "type": "node", "id": 0, "key": "n0", "label": "sin", "sublabel": "model.py:5", "kind": "op",
        "opaque": False, "child_count": 0,
        "outputs": [{"id": 1, "shape": [2, 3], "dtype": "float32", "label": "f32[2,3]"}], "outputs_total": 1,
        "card": "op",
    }


def test_opaque_nodes_and_partial_coverage_are_marked():
    p = Projection(synthetic_capture(2000, opaque_every=10))
    assert p.summary()["coverage"]["status"] == "partial"
    root = p.children(-1)
    assert root["opaque_count"] == 200 and root["items"][0]["opaque_count"] == 200
    layer = p.children(0)["items"][0]
    assert layer["opaque_count"] > 0
    nodes = [it for it in p.children(layer["id"] + 1)["items"] if it["type"] == "node"]
    opaque = [it for it in nodes if it["opaque"]]
    assert opaque and all(it["label"] == "while" and it["kind"] == "opaque" for it in opaque)
    assert all(it["kind"] == "op" for it in nodes if not it["opaque"])


def test_every_edge_joins_visible_items_or_the_boundary():
    p = Projection(synthetic_capture(3000, opaque_every=7))
    for g in [-1] + list(range(len(p.capture.groups))):
        view = p.children(g)
        for chunk in [None] + [it["id"].split(":")[1] for it in view["items"] if it["type"] == "chunk"]:
            v = p.children(g, chunk)
            ends = set(keys(v)) | {b["key"] for b in v["inputs"]} | {b["key"] for b in v["outputs"]}
            for e in v["edges"]:
                assert e["source"] in ends and e["target"] in ends, (g, chunk, e)
                assert e["source"] != e["target"]
            assert len(v["items"]) <= MAX_ITEMS


# --------------------------------------------------------------------------- chunking


def test_flat_5000_node_jit_becomes_13_sequential_chunks():
    p = Projection(synthetic_capture(5000, grouped=False))
    view = p.children(0)
    assert view["chunked"] is True
    assert [it["type"] for it in view["items"]] == ["chunk"] * 13
    assert [it["id"] for it in view["items"]] == [f"0:{k}" for k in range(13)]
    assert [it["child_count"] for it in view["items"]] == [400] * 12 + [200]
    assert view["items"][0]["label"] == "1–400 of 5,000"
    assert view["items"][3]["range"] == [1200, 1600]
    assert (view["items"][3]["first"], view["items"][3]["last"]) == (1200, 1599)
    # edges between chunks are aggregated per pair, labelled with a shape
    chain = {(e["source"], e["target"]) for e in view["edges"]}
    assert {(f"c0:{k}", f"c0:{k + 1}") for k in range(12)} <= chain
    e = next(e for e in view["edges"] if (e["source"], e["target"]) == ("c0:0", "c0:1"))
    assert e["count"] >= 1 and e["label"].startswith("f32[128,128]")
    assert view["items"][0]["outputs"], "a chunk lists what it hands on"
    inner = p.children(0, "3")
    assert keys(inner) == [f"n{i}" for i in range(1200, 1600)]
    assert inner["chunk"] == "0:3" and inner["chunked"] is False
    assert any(e["source"].startswith("in:") for e in inner["edges"])
    assert any(e["target"].startswith("out:") for e in inner["edges"])
    assert p.children(0, 12)["range"] == [4800, 5000]
    assert p.item_path(4321) == ["g0", "c0:10", "n4321"]


@pytest.mark.parametrize(
    ("n", "chunks"),
    [pytest.param(400, 0, id="400-not-chunked"), pytest.param(401, 2, id="401-two-chunks"),
     pytest.param(800, 2, id="800-two-full"), pytest.param(801, 3, id="801-three")],
)
def test_chunking_threshold(n, chunks):
    p = Projection(flat_capture(n))
    view = p.children(0)
    assert view["chunked"] is (chunks > 0)
    assert len(view["items"]) == (chunks or n)
    if chunks:
        assert sum(it["child_count"] for it in view["items"]) == n


@pytest.mark.slow
def test_groups_beyond_160000_children_get_upper_chunks():
    n = 160_401
    p = Projection(flat_capture(n, opaque_every=1000))
    top = p.children(0)
    assert [it["id"] for it in top["items"]] == ["0:-1", "0:-2"]
    assert [it["child_count"] for it in top["items"]] == [400, 2]
    assert [it["node_count"] for it in top["items"]] == [160_000, 401]
    assert top["items"][0]["opaque_count"] == 160
    first = p.children(0, -1)
    assert len(first["items"]) == 400 and first["items"][399]["id"] == "0:399"
    assert {(e["source"], e["target"]) for e in first["edges"]} >= {("c0:0", "c0:1"), ("c0:399", "out:160000")}
    last = p.children(0, -2)
    assert [it["id"] for it in last["items"]] == ["0:400", "0:401"]
    assert keys(p.children(0, 401)) == ["n160400"]
    assert p.item_path(n - 1) == ["g0", "c0:-2", "c0:401", f"n{n - 1}"]
    assert p.item_path(5) == ["g0", "c0:-1", "c0:0", "n5"]
    with pytest.raises(NotFound):
        p.children(0, -3)


@pytest.mark.parametrize("chunk", ["13", "-1", "x", "99999"])
def test_unknown_chunks_are_refused(chunk):
    p = Projection(synthetic_capture(5000, grouped=False))
    with pytest.raises(ProjectionError):
        p.children(0, chunk)


def test_ungrouped_program_order_mixes_nodes_and_groups():
    cap = flat_capture(10)
    cap.groups.append(Group(1, "remat", "ckpt", 0))
    for i in (4, 5, 6):
        cap.nodes[i].group = 1
    p = Projection(cap)
    assert keys(p.children(0)) == ["n0", "n1", "n2", "n3", "g1", "n7", "n8", "n9"]
    assert edges(p.children(0)) >= {("n3", "g1", "f32[8]"), ("g1", "n7", "f32[8]")}
    assert p.children(0)["items"][4]["sublabel"] == "remat · tracing scope"


# --------------------------------------------------------------------------- details


def test_node_details(tiny):
    d = tiny.node(2)
    assert d["op"] == "add" and d["group"] == 0
    assert d["group_path"] == [{"id": 0, "kind": "jit", "name": "outer"}]
    assert d["item_path"] == ["g0", "n2"]
    assert [(i["position"], i["value"]["id"], i["value"]["producer"]) for i in d["inputs"]] == [(0, 2, 1), (1, 0, None)]
    assert d["inputs"][1]["value"]["uses"] == [0, 2]
    assert d["outputs"][0]["uses"] == [3] and d["outputs"][0]["capture_output"] is False
    assert d["frame"] == {"file": "model.py", "line": 6, "column": 4, "function": "net"}
    lit = tiny.node(3)["inputs"][1]
    assert lit == {"position": 1, "literal": 0}
    assert tiny.node(4)["frame"] is None
    assert tiny.node(3)["item_path"] == ["n3"]


def test_value_and_group_details(tiny):
    v = tiny.value(0)
    assert v["label"] == "f32[2,3]" and v["producer"] is None and v["capture_input"] is True
    assert [(u["id"], u["positions"]) for u in v["uses"]] == [(0, [0]), (2, [1])]
    assert tiny.value(4)["capture_output"] is True
    assert tiny.value(3)["producer"] == {"id": 2, "op": "add", "item_path": ["g0", "n2"]}
    g = tiny.group(1)
    assert g["honest"].startswith("tracing scope") and "not a Flax layer hierarchy" in g["honest"]
    assert g["path"] == [{"id": 0, "kind": "jit", "name": "outer"}, {"id": 1, "kind": "scope", "name": "inner"}]
    assert g["counts"] == {"children": 2, "direct_nodes": 2, "groups": 0, "nodes": 2, "opaque": 0}
    assert [x["id"] for x in g["inputs"]] == [0] and [x["id"] for x in g["outputs"]] == [2]


@pytest.mark.parametrize(
    ("kind", "sublabel"),
    [("jit", "jit · tracing scope"), ("remat", "remat · tracing scope"),
     ("custom_jvp", "custom_jvp · tracing scope"), ("custom_vjp", "custom_vjp · tracing scope"),
     ("scope", "scope · tracing scope"), ("module", "module instance"),
     ("function", "function call"), ("loss", "loss · training step"),
     ("backward", "backward · training step"), ("optimizer", "optimizer · training step"),
     ("other", "other · group")],
)
def test_honest_group_wording(kind, sublabel):
    assert group_sublabel(kind) == sublabel


def test_nodes_page_is_bounded(tiny):
    page = tiny.nodes_page(1, 2)
    assert page["total"] == 5 and [n["id"] for n in page["nodes"]] == [1, 2]
    assert page["nodes"][0] == {
        "id": 1, "op": "cos", "group": 1, "opaque": False,
        "outputs": [{"id": 2, "shape": [2, 3], "dtype": "float32", "label": "f32[2,3]"}], "frame": "model.py:5",
    }
    p = Projection(flat_capture(3000))
    assert len(p.nodes_page(0, 5000)["nodes"]) == 1000
    assert p.nodes_page(2990, 100)["nodes"][-1]["id"] == 2999
    with pytest.raises(ProjectionError):
        p.nodes_page(-1, 10)


@pytest.mark.parametrize(
    "call",
    [lambda p: p.node(99), lambda p: p.node(-1), lambda p: p.value(6), lambda p: p.group(2),
     lambda p: p.group(-1), lambda p: p.children(5), lambda p: p.children(-2), lambda p: p.children(0, 0)],
    ids=["node-99", "node-neg", "value-6", "group-2", "group-root", "children-5", "children-neg", "chunk-unsplit"],
)
def test_unknown_ids_are_not_found(tiny, call):
    with pytest.raises(NotFound):
        call(tiny)


def test_summary_and_structures(tiny):
    s = tiny.summary()
    assert s["counts"] == {"nodes": 5, "values": 6, "groups": 2, "frames": 3, "opaque": 0}
    assert s["inputs"] == {"tuple": [{"value": 0, "shape": [2, 3], "dtype": "float32", "label": "f32[2,3]",
                                      "name": "args[0]", "role": "input"}]}
    assert s["outputs"]["tuple"][1]["label"] == "bf16[4]"
    assert s["failure"] is None and s["measured"] is False
    assert s["coverage"] == {"scope": "traced_program", "status": "complete", "reasons": [], "effects": "none"}


def test_failed_capture_projects_to_an_empty_root_with_its_failure():
    cap = Capture.failed_capture(Failure("ImportError", "no module named model", "import"), framework="jax")
    p = Projection(cap)
    assert p.children(-1)["items"] == []
    assert p.summary()["failure"]["message"] == "no module named model"


def test_file_read_and_in_memory_captures_project_alike(tmp_path):
    cap = synthetic_capture(1500, opaque_every=9)
    graphfile.write(cap, tmp_path / "c.tvg")
    a, b = Projection(cap), Projection(graphfile.read(tmp_path / "c.tvg"))
    for g in (-1, 0, 1, 2):
        assert json.dumps(a.children(g)) == json.dumps(b.children(g))
    assert a.node(77) == b.node(77) and a.value(300) == b.value(300)
    assert a.search("dot") == b.search("dot") and a.search("f32[128]") == b.search("f32[128]")


# --------------------------------------------------------------------------- search


@pytest.mark.parametrize(
    ("query", "expected", "why"),
    [
        pytest.param("sin", [("node", 0)], "op name", id="op-exact"),
        pytest.param("SIN", [("node", 0)], "op name", id="op-case"),
        pytest.param("co", [("node", 4), ("node", 1)], "op name (convert_element_type)", id="op-substring"),
        pytest.param("inner", [("group", 1)], "group name", id="group-name"),
        pytest.param("out", [("group", 0)], "group name", id="group-substring"),
        pytest.param("2,3", [("value", v) for v in range(4)], "value shape", id="shape-commas"),
        pytest.param("[2,3]", [("value", v) for v in range(4)], "value shape", id="shape-brackets"),
        pytest.param("(2, 3)", [("value", v) for v in range(4)], "value shape", id="shape-tuple"),
        pytest.param("f32[2,3]", [("value", v) for v in range(4)], "value shape", id="shape-dtype"),
        pytest.param("float32[2,3]", [("value", v) for v in range(4)], "value shape", id="shape-long-dtype"),
        pytest.param("i32[2,3]", [], None, id="shape-wrong-dtype"),
        pytest.param("f32[]", [("value", 4)], "value shape", id="scalar"),
        pytest.param("bf16[4]", [("value", 5)], "value shape", id="bf16"),
        pytest.param("[4]", [("value", 5)], "value shape", id="shape-one-dim"),
        pytest.param("model.py:5", [("node", 0), ("node", 1)], "source model.py:5", id="file-line"),
        pytest.param("model.py", [("node", 0), ("node", 1), ("node", 2)], "source model.py", id="file"),
        pytest.param("other.py:12", [("node", 3)], "source other.py:12", id="file-in-folder"),
        pytest.param("pkg/other.py:12", [("node", 3)], "source pkg/other.py:12", id="path-line"),
        pytest.param("model.py:99", [], None, id="line-absent"),
        pytest.param("helper", [("node", 3)], "source function helper", id="function"),
        pytest.param("nothing-like-this", [], None, id="no-match"),
        pytest.param("   ", [], None, id="blank"),
    ],
)
def test_search(tiny, query, expected, why):
    r = tiny.search(query)
    assert [(x["type"], x["id"]) for x in r["results"]] == expected
    assert r["truncated"] is False and r["total"] == len(expected)
    if expected:
        assert r["results"][0]["why"] == why


def test_search_results_say_where_to_look(tiny):
    (hit,) = tiny.search("cos")["results"][:1]
    assert hit["path"] == [0, 1] and hit["item_path"] == ["g0", "g1", "n1"] and hit["key"] == "n1"
    (g,) = tiny.search("inner")["results"]
    assert g["path"] == [0] and g["item_path"] == ["g0", "g1"]
    v = tiny.search("bf16[4]")["results"][0]
    assert v["key"] == "n4" and v["producer"] == 4 and v["item_path"] == ["n4"]


def test_search_is_bounded_and_says_so():
    p = Projection(synthetic_capture(5000, grouped=False))
    r = p.search("add", limit=7)
    assert len(r["results"]) == 7 and r["truncated"] is True and r["total"] == 500
    assert r["results"][0]["item_path"] == ["g0", "c0:0", "n1"]
    assert len(p.search("f32[128,128]", limit=5000)["results"]) == 1000
