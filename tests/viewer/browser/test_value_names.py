"""Names of the values entering a graph from outside, in the app: a capture input's pill
says `x  f32[2,3,16,16]`; parameters, buffers and constants are lines inside the op that
uses them (`stem.weight  f32[8,3,3,3]`), or, with "Weights as nodes", quieter pills; the
inspector names the value and its role, and search finds a parameter by name."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from viewer.server.app import ViewerServer

from tv_browser import open_app

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/viewer: viewer_fixtures
from viewer_fixtures import flax_capture, torch_capture  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def served():
    server = ViewerServer()
    ids = SimpleNamespace(
        torch=server.add_capture(torch_capture(), "named torch"),
        flax=server.add_capture(flax_capture(), "named flax"),
    )
    server.start()
    try:
        yield SimpleNamespace(server=server, ids=ids)
    finally:
        server.stop()


def _open(browser, served, close_pages, which):
    app = open_app(browser, served.server.url_for(getattr(served.ids, which)))
    close_pages.append(app)
    app.wait("() => window.tensorviz.firstPaintMs !== null")
    app.js("() => window.tensorviz.readable()")
    return app


# The convolution is the one op of module `stem`: drawn as that op's card, under the
# module's key, with the module as its caption (issue 26: a one-op module is its op).
CONV = "g1"


def _click(app, key):
    x, y = app.item_point(key, dy=app.item_rect(key)["h"] / 2)
    app.page.mouse.click(x, y)


def _weight_point(app, key, k):
    """Page coordinates of weight line ``k`` of node ``key`` (the view is at 100 %)."""
    info = app.js("(k) => window.tensorviz.itemInfo(k)", key)
    app.item_point(key)  # centres the card when it is off screen
    r = app.item_rect(key)
    box = app.page.locator("#graph").bounding_box()
    row = info["weightStart"] + k
    caption = 14 if info.get("caption") else 0  # a one-op module's card names it above the title
    return box["x"] + r["x"] + r["w"] / 2, box["y"] + r["y"] + 8 + caption + 18 + 15 * (row + 0.5)


def test_parameters_are_lines_inside_their_ops_not_layout_items(browser, served, close_pages):
    app = _open(browser, served, close_pages, "torch")
    x = app.js("() => window.tensorviz.pill('in:0')")
    assert (x["look"], x["role"], x["texts"]) == ("input", "input", ["x", "f32[2,3,16,16]"])
    # no parameter, buffer or constant is a separate item
    infos = [app.js("(k) => window.tensorviz.itemInfo(k)", k) for k in app.keys()]
    assert not [i for i in infos if i["kind"] == "in" and i["role"] in ("param", "buffer", "variable", "const")]
    conv = app.js("(k) => window.tensorviz.itemInfo(k)", CONV)
    assert conv["title"] == "aten::convolution"
    assert conv["weights"] == ["stem.weight", "stem.bias"]
    assert conv["lines"][conv["weightStart"]:] == ["stem.weight  f32[8,3,3,3]", "stem.bias  f32[8]"]
    assert app.unexpected_errors() == []


def test_weights_as_nodes_brings_back_quiet_pills(browser, served, close_pages):
    app = _open(browser, served, close_pages, "torch")
    version = app.scene_version
    app.page.click("#btn-weights")
    app.wait_scene_after(version)
    assert app.page.get_attribute("#btn-weights", "aria-pressed") == "true"
    x = app.js("() => window.tensorviz.pill('in:0')")
    w = app.js("() => window.tensorviz.pill('in:1')")
    buf = app.js("() => window.tensorviz.pill('in:5')")
    # the whole name and shape fit: the layout sized the pills for them
    assert (x["look"], x["role"], x["texts"]) == ("input", "input", ["x", "f32[2,3,16,16]"])
    assert (w["look"], w["role"], w["texts"]) == ("quiet", "param", ["stem.weight", "f32[8,3,3,3]"])
    assert (buf["look"], buf["role"], buf["texts"]) == ("quiet", "buffer", ["norm.running_mean", "f32[8]"])
    assert w["h"] < x["h"]  # a parameter's pill is smaller than the data input's
    assert app.js("() => window.tensorviz.pill('in:8')")["texts"] == ["external", "f32[8]"]
    assert app.js("(k) => window.tensorviz.itemInfo(k)", CONV)["weightStart"] is None  # no lines then
    # a value from a node outside the view keeps the plain pill
    keys = app.keys()
    plain = [k for k in keys if k.startswith("in:") and app.js("(k) => window.tensorviz.pill(k)", k)["look"] == "plain"]
    assert plain and all(app.js("(k) => window.tensorviz.pill(k)", k)["texts"][0].startswith("in  f32[") for k in plain)
    # and back
    version = app.scene_version
    app.page.click("#btn-weights")
    app.wait_scene_after(version)
    assert app.js("() => window.tensorviz.pill('in:1')") is None
    assert app.unexpected_errors() == []


def test_clicking_a_weight_line_shows_that_value(browser, served, close_pages):
    app = _open(browser, served, close_pages, "torch")
    app.page.mouse.click(*_weight_point(app, CONV, 0))
    app.page.wait_for_function("() => document.getElementById('insp-title').textContent === 'stem.weight'")
    assert app.js("() => window.tensorviz.selected") == CONV
    assert app.page.locator("#inspector [data-role]").inner_text() == "param"
    assert "parameter" in app.page.locator("#inspector [data-role-wording]").inner_text()
    assert app.page.locator("#inspector dd[data-name]").inner_text() == "stem.weight"
    app.page.mouse.click(*_weight_point(app, CONV, 1))
    app.page.wait_for_function("() => document.getElementById('insp-title').textContent === 'stem.bias'")
    # a node's operands say which parameter they are (the card stands for module stem; its
    # op, n0, is what the inspector lists operands for)
    app.js("() => window.tensorviz.store.select('n0')")
    app.page.wait_for_function("() => document.getElementById('insp-title').textContent === 'aten::convolution'")
    rows = app.page.locator("#inspector [data-section=inputs] li").all_inner_texts()
    assert "input x" in rows[0] and "param stem.weight" in rows[1] and "param stem.bias" in rows[2]


def test_search_finds_a_parameter_by_name_and_opens_its_op(browser, served, close_pages):
    app = _open(browser, served, close_pages, "torch")
    app.page.fill("#search", "stem.weight")
    app.page.wait_for_selector("#search-results li[role=option]")
    first = app.page.locator("#search-results li[role=option]").first.inner_text()
    assert "stem.weight" in first and "parameter" in first
    app.page.press("#search", "Enter")
    app.wait("() => window.tensorviz.selected === 'n0'")
    app.page.wait_for_function("() => document.getElementById('insp-title').textContent === 'stem.weight'")


def test_flax_variables_are_named_inside_their_ops_and_on_pills(browser, served, close_pages):
    app = _open(browser, served, close_pages, "flax")
    infos = {k: app.js("(k) => window.tensorviz.itemInfo(k)", k) for k in app.keys()}
    inside = {w for i in infos.values() for w in i["weights"]}
    assert "variables.params.Dense_0.kernel" in inside and "const" in inside
    version = app.scene_version
    app.js("() => window.tensorviz.setWeightPills(true)")
    app.wait_scene_after(version)
    k = app.js("() => window.tensorviz.pill('in:3')")
    assert (k["look"], k["role"], k["texts"]) == ("quiet", "variable", ["variables.params.Dense_0.kernel", "f32[3,8]"])
    assert app.js("() => window.tensorviz.pill('in:1')")["texts"] == ["mask", "f32[2,8]"]
    assert app.js("() => window.tensorviz.pill('in:5')")["texts"] == ["const", "f32[8]"]
    app.page.fill("#search", "Dense_0")
    app.page.wait_for_function("() => document.querySelectorAll('#search-results li[role=option]').length === 3")
    texts = app.page.locator("#search-results li[role=option]").all_inner_texts()
    assert "group" in texts[0] and "variables.params.Dense_0.bias" in texts[1] and "variables.params.Dense_0.kernel" in texts[2]
    assert app.unexpected_errors() == []
