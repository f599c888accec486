"""A program split across devices in the viewer (issue 34): the mesh legend, each value's
split where its shape is shown and the Per device toggle, collectives drawn apart and
found by their mesh axis, per-device memory on group cards (browser)."""

from __future__ import annotations

import os

import pytest

from capture.graph.model import Capture, Coverage, Group, Node, Operand, Value
from capture.graph.sharding import collective_record, mesh_record, sharding_record
from viewer.server.app import ViewerServer

from tv_browser import make_workspace, open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOTS = os.environ.get("TENSORVIZ_SHOTS")
SIZES = {"data": 4, "model": 2}


def sharded_capture() -> Capture:
    split = sharding_record(0, [8, 16], [["data"], []], SIZES, source="in_shardings")
    values = [
        Value(0, [8, 16], "float32", None, split),
        Value(1, [16, 32], "float32", None, sharding_record(0, [16, 32], [[], ["model"]], SIZES)),
        Value(2, [8, 32], "float32", None, sharding_record(0, [8, 32], [["data"], ["model"]], SIZES)),
        Value(3, [8, 32], "float32", None, sharding_record(0, [8, 32], [["data"], []], SIZES)),
    ]
    gather = {"collective": collective_record("all_gather", ["model"], 2, 2 * 16 * 4)}
    nodes = [Node(0, "dot_general", [Operand(0, 0), Operand(1, 1)], [2], group=1),
             Node(1, "all_gather", [Operand(0, 2)], [3], params=gather, group=0)]
    memory = {"param_bytes": 16 * 16 * 4, "input_bytes": 2 * 16 * 4, "activation_bytes": 2 * 16 * 4}
    groups = [Group(0, "jit", "step", None, {"per_device_memory": memory}),
              Group(1, "scope", "layer", 0, {"per_device_memory": memory})]
    cap = Capture("jaxpr", "jax", "0.10", Coverage("traced_program"), values=values, nodes=nodes, groups=groups,
                  inputs={"dict": [["args", {"tuple": [{"value": 0}, {"value": 1}]}], ["kwargs", {"dict": []}]]},
                  outputs={"value": 3}, meshes=[mesh_record([("data", 4, "auto"), ("model", 2, "auto")], "Mesh",
                                                            "recipe")],
                  devices={"platform": "cpu", "count": 8, "simulated": True},
                  meta={"per_device_memory": {**memory, "devices": 8}})
    return cap


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    server = ViewerServer(workspace=make_workspace(tmp_path_factory.mktemp("ws")))
    cid = server.add_capture(sharded_capture(), "sharded step")
    server.start()
    try:
        yield server, cid
    finally:
        server.stop()


def lines_of(app, op):
    for k in app.keys():
        info = app.js("(k) => window.tensorviz.itemInfo(k)", k)
        if info and op in (info["name"], info["title"]):  # a one-op group is drawn as its op
            return k, info["lines"]
    raise AssertionError(f"no {op} card in {app.keys()}")


def test_legend_split_shapes_per_device_and_collectives(browser, served, close_pages):
    server, cid = served
    app = open_app(browser, server.url_for(cid))
    close_pages.append(app)
    page = app.page
    legend = page.locator("#mesh-legend")
    assert legend.is_visible()
    text = legend.inner_text()
    assert "data=4 × model=2" in text and "8 cpu devices, simulated" in text
    assert "per device: 1 KiB params · 128 B in · 128 B act" in text  # as group cards write it
    assert page.locator("#btn-device").is_visible()
    app.js("async () => { await window.tensorviz.expandAll(); }")
    key, lines = lines_of(app, "dot_general")
    assert lines[0] == "f32[8@data,32@model]"
    gather, glines = lines_of(app, "all_gather")
    assert glines[0] == "model ×2 · sends 128 B each"
    card = app.js("(k) => window.tensorviz.card(k)", gather)
    assert card and any(t.get("text") == "⇄ model" for t in card.get("texts", []) if isinstance(t, dict))
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, "sharded-global.png"))
    app.js("async () => { await window.tensorviz.setPerDevice(true); }")
    assert page.locator("#btn-device").get_attribute("aria-pressed") == "true"
    _, lines = lines_of(app, "dot_general")
    assert lines[0] == "f32[2,16]"
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, "sharded-device.png"))
    app.js("async () => { await window.tensorviz.setPerDevice(false); }")
    _, lines = lines_of(app, "dot_general")
    assert lines[0] == "f32[8@data,32@model]"
    assert not app.unexpected_errors()


def test_group_cards_and_search_by_axis(browser, served, close_pages):
    server, cid = served
    app = open_app(browser, server.url_for(cid))
    close_pages.append(app)
    app.js("async () => { await window.tensorviz.collapseAll(); }")
    info = app.js("(k) => window.tensorviz.itemInfo(k)", "g0")
    assert "per device: 1 KiB params · 128 B in · 128 B act" in info["lines"]  # format.js formatBytes
    got = app.js("async () => (await (await fetch('api/search?q=model&' + location.search.slice(1))).json())")
    assert [r["label"] for r in got["results"] if r["type"] == "node"] == ["all_gather"]
    assert got["results"][0]["why"] == "collective over model"
