"""The cost panel and the heat map (issue 35) on real captures: the table follows what
the graph draws, a row selects its card, the heat map colours the cards with a legend,
group and stack cards say their FLOPs, and a device adds estimated times."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from capture.graph import graphfile
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CAPTURES = Path(__file__).resolve().parents[1] / "real_models" / "captures"
#: Set to a folder to keep the screenshots (to look at them).
SHOTS = os.environ.get("TENSORVIZ_SCREENSHOTS")


@pytest.fixture(scope="module")
def served():
    server = ViewerServer()
    ids = {name: server.add_capture(graphfile.read(CAPTURES / f"{name}.tvg"), name)
           for name in ("gpt2_torch", "resnet50_torch")}
    server.start()
    try:
        yield server, ids
    finally:
        server.stop()


def _open(browser, served, close_pages, name):
    server, ids = served
    app = open_app(browser, server.url_for(ids[name]), viewport={"width": 1500, "height": 950})
    close_pages.append(app)
    app.js("() => window.tensorviz.cost.open()")
    app.page.wait_for_function("() => window.tensorviz.cost.rows().length > 0")
    return app


def test_the_table_follows_the_graph_and_a_row_selects_its_card(browser, served, close_pages):
    app = _open(browser, served, close_pages, "gpt2_torch")
    keys = set(app.js("() => window.tensorviz.keys()"))
    rows = app.js("() => window.tensorviz.cost.rows()")
    assert {r["key"] for r in rows} <= keys  # what the graph draws, nothing else
    stack = next(r for r in rows if r["type"] == "stack")
    assert stack["count"] == 12 and stack["flops"] == 12 * stack["perBlock"]["flops"]
    top = rows[0]
    assert top["share"] == pytest.approx(1.0) and top["flops"] > 0
    # it follows the depth of the graph
    app.js("() => window.tensorviz.collapseAll()")
    app.page.wait_for_function("() => window.tensorviz.cost.rows().length === 1")
    app.js("() => window.tensorviz.expandToDepth(2)")
    app.page.wait_for_function("() => window.tensorviz.cost.rows().length > 3")
    rows = app.js("() => window.tensorviz.cost.rows()")
    assert {r["key"] for r in rows} <= set(app.js("() => window.tensorviz.keys()"))
    stack = next(r for r in rows if r["type"] == "stack")
    app.page.click(f".cost-table tr[data-key='{stack['key']}']")
    app.page.wait_for_function("(k) => window.tensorviz.selected === k", arg=stack["key"])
    # sorting by FLOPs: largest first
    app.page.click(".cost-table th[data-key='flops']")
    flops = [r["flops"] for r in app.js("() => window.tensorviz.cost.rows()") if r["flops"] is not None]
    assert flops == sorted(flops, reverse=True)
    text = app.page.inner_text(".cost-footer")
    assert "Every op was counted by a rule" in text and "multiply-add counts 2" in text


@pytest.mark.parametrize("name", ["gpt2_torch", "resnet50_torch"])
def test_the_heat_map_colours_cards_by_what_they_cost_with_a_legend(browser, served, close_pages, name, tmp_path):
    app = _open(browser, served, close_pages, name)
    app.js("() => window.tensorviz.cost.setHeat('flops')")
    legend = app.page.inner_text("#heat-legend")
    assert "Heat map: FLOPs" in legend and "multiply-add counts 2" in legend
    rows = app.js("() => window.tensorviz.cost.rows()")
    closed = [r for r in rows if not r["open"]]
    colours = {r["key"]: app.js("(k) => window.tensorviz.cost.heatOf(k)", r["key"]) for r in closed}
    biggest = max(closed, key=lambda r: r["flops"] or 0)
    assert colours[biggest["key"]]  # the most expensive card drawn is coloured
    for r in closed:
        if not r["flops"]:
            assert colours[r["key"]] is None  # nothing to show, not a "cold" colour
    # group cards say what they cost under their parameters
    cards = [app.js("(k) => window.tensorviz.card(k)", r["key"]) for r in closed if r["type"] in ("group", "stack")]
    assert any(any("FLOPs" in line and "moved" in line for line in c["says"]) for c in cards if c)
    app.js("() => window.tensorviz.cost.setHeat('')")
    assert app.page.is_hidden("#heat-legend")
    assert app.js("(k) => window.tensorviz.cost.heatOf(k)", biggest["key"]) is None
    if SHOTS:
        app.js("() => window.tensorviz.cost.setHeat('flops')")
        app.page.screenshot(path=str(Path(SHOTS) / f"heat_{name}.png"))


def test_a_device_adds_estimated_times(browser, served, close_pages):
    app = _open(browser, served, close_pages, "gpt2_torch")
    app.js("() => window.tensorviz.cost.setDevice('h100-sxm')")
    app.page.wait_for_function("() => window.tensorviz.cost.rows().some((r) => r.time > 0)")
    head = app.page.inner_text(".cost-table thead")
    assert "Est. time" in head
    totals = app.page.inner_text(".cost-totals")
    assert "estimated, not measured" in totals
    assert "Memory needed" in totals and "fits on NVIDIA H100 SXM (" in totals and "to spare" in totals


def test_the_totals_split_flops_by_kind_and_name_the_rules_that_differ(browser, close_pages, tmp_path):
    """A CNN training step captured now: the totals split its FLOPs by kind, a row's FLOPs say
    theirs on hover, and the footer names the rule that counts differently from FlopCounterMode."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "torch"))
    from torch_workspace import capture_in_process, make_workspace, profile, tensor

    ws = make_workspace(tmp_path)
    cap, _ = capture_in_process(ws, profile("models:SmallCNN", args=[tensor([2, 3, 16, 16])], kind="training_step",
                                            grad_enabled=True, mode="train", step={"loss": "sum"}))
    server = ViewerServer()
    cid = server.add_capture(cap, "cnn")
    server.start()
    try:
        app = open_app(browser, server.url_for(cid), viewport={"width": 1500, "height": 950})
        close_pages.append(app)
        app.js("() => window.tensorviz.cost.open()")
        app.page.wait_for_function("() => window.tensorviz.cost.rows().length > 0")
        totals = app.page.inner_text(".cost-totals")
        assert "FLOPs by kind" in totals and "convolution" in totals and "matmul" in totals
        row = next(r for r in app.js("() => window.tensorviz.cost.rows()") if r["kinds"])
        assert sum(row["kinds"].values()) == row["flops"]
        assert "convolution backward" in app.page.inner_text(".cost-footer")
    finally:
        server.stop()
