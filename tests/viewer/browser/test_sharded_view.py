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
    assert "data=4 × model=2" in text and "⇄ collective the program writes" in text
    assert "8 cpu devices" not in text  # the details wait behind their button: the graph's corner stays free
    page.locator("#mesh-legend .mesh-details").click()
    text = legend.inner_text()
    assert "8 cpu devices, simulated" in text
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
    app.js("() => window.tensorviz.zoomAt(300, 300, 1.7)")  # the person's own zoom
    before = app.js("() => window.tensorviz.camera")
    app.js("async () => { await window.tensorviz.setPerDevice(true); }")
    assert page.locator("#btn-device").get_attribute("aria-pressed") == "true"
    after = app.js("() => window.tensorviz.camera")
    # the same graph with other shapes: the view is kept, not re-fitted
    assert abs(after["s"] - before["s"]) < 1e-6 * before["s"], (before, after)
    _, lines = lines_of(app, "dot_general")
    assert lines[0] == "f32[2,16]"
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, "sharded-device.png"))
    app.js("async () => { await window.tensorviz.setPerDevice(false); }")
    _, lines = lines_of(app, "dot_general")
    assert lines[0] == "f32[8@data,32@model]"
    assert not app.unexpected_errors()


def compiled_capture() -> Capture:
    """The sharded step with what XLA runs for it: an all-reduce the compiler adds on the
    matmul, and an all-gather that maps onto no node."""
    cap = sharded_capture()
    # the program names the recipe's axes again (its AbstractMesh): one row in the legend
    cap.meshes.append(mesh_record([("data", 4, "auto"), ("model", 2, "auto")], "AbstractMesh", "program"))
    ar = {"kind": "all-reduce", "async": False, "axes": ["model"], "devices": 2, "groups": "{0,1},{2,3}",
          "operand_bytes": 2 * 32 * 4, "bytes_sent_per_device": 2 * 32 * 4, "node": 0, "op_name": "jit(f)/dot_general",
          "hlo": "all-reduce.1", "how": "primitive+line"}
    lost = {**ar, "kind": "all-gather", "axes": ["data"], "devices": 4, "node": None, "hlo": "all-gather.2"}
    cap.compiled = {"status": "compiled", "seconds": 0.4, "scope": "per device", "devices": 8,
                    "cost": {"flops": 4096.0}, "memory": {"arguments": 1024, "outputs": 128, "temporaries": 64,
                                                          "aliases": 0, "peak": 1216},
                    "collectives": [ar, lost], "attributed": 1, "unattributed": 1, "note": "n"}
    return cap


def test_the_compilers_collectives_badge_legend_and_banner(browser, tmp_path, close_pages):
    server = ViewerServer(workspace=make_workspace(tmp_path))
    cid = server.add_capture(compiled_capture(), "compiled step")
    server.start()
    try:
        app = open_app(browser, server.url_for(cid))
        close_pages.append(app)
        page = app.page
        banner = page.locator(".banner", has_text="XLA compiled")
        assert banner.count() == 1
        text = banner.inner_text()
        assert "2 collectives" in text and "1 drawn on their ops" in text and "1 map onto no op: all-gather(data)×1" in text
        assert banner.get_attribute("data-level") == "warn"
        rows = page.locator("#mesh-legend .mesh-row").all_inner_texts()
        assert [r for r in rows if r.startswith("mesh")] == ["mesh data=4 × model=2 · 8 devices"]
        page.locator("#mesh-legend .mesh-details").click()
        legend = page.locator("#mesh-legend").inner_text()
        assert "compiled: 2 collectives (all-reduce(model)×1, all-gather(data)×1), 1 on no op" in legend
        assert "XLA per device: 4.1 kFLOPs · peak 1.19 KiB" in legend
        app.js("async () => { await window.tensorviz.expandAll(); }")
        key, lines = lines_of(app, "dot_general")
        assert lines[0] == "XLA all-reduce model ×2 · sends 256 B each"
        card = app.js("(k) => window.tensorviz.card(k)", key)
        assert any(t.get("text") == "⇆ XLA" for t in card.get("texts", []) if isinstance(t, dict))
        _, glines = lines_of(app, "all_gather")  # the program's own collective: no compiler badge
        assert not any(line.startswith("XLA ") for line in glines)
        app.js("async () => { await window.tensorviz.collapseAll(); }")
        info = app.js("(k) => window.tensorviz.itemInfo(k)", "g0")
        assert "⇆ XLA: all-reduce(model)×1" in info["lines"]
        if SHOTS:
            page.screenshot(path=os.path.join(SHOTS, "compiled-collectives.png"))
        assert not app.unexpected_errors()
    finally:
        server.stop()


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
