"""Expand all at scale, in the app: on a big graph only what the view shows is laid out
for real; every other container gets an estimated layout until it comes into view, and
then it is laid out for real, with its children inside it and the item at the centre of
the screen kept where it was.

Checked by meaning (which containers are estimated, what sits inside what), never by time."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from capture.graph import graphfile
from synthetic import synthetic_capture
from viewer.projection.projection import Projection
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CAPTURES = Path(__file__).resolve().parents[1] / "real_models" / "captures"
VIEW = {"width": 1600, "height": 1000}
BLOCKS = 200  # 4,000 nodes whose blocks all differ: more than one relayout lays out at once


@pytest.fixture(scope="module")
def served():
    server = ViewerServer()
    big = synthetic_capture(BLOCKS * 20, layers=BLOCKS, grouped=True)
    ids = SimpleNamespace(
        big=server.add_capture(big, "4,000 nodes"),
        gpt2=server.add_capture(graphfile.read(CAPTURES / "gpt2_torch.tvg"), "gpt2"),
    )
    server.start()
    try:
        proj = Projection(big)
        yield SimpleNamespace(server=server, ids=ids, views=proj.subtree(-1)["views"], projection=proj)
    finally:
        server.stop()


def _open(browser, served, close_pages, which):
    app = open_app(browser, served.server.url_for(getattr(served.ids, which)), viewport=VIEW)
    close_pages.append(app)
    app.js("() => localStorage.clear()")
    return app


def _rects(app, keys):
    return app.js("(ks) => Object.fromEntries(ks.map((k) => [k, window.tensorviz.itemRect(k)]))", keys)


def _inside(inner, outer, slack=0.5):
    return (inner["x"] >= outer["x"] - slack and inner["y"] >= outer["y"] - slack
            and inner["x"] + inner["w"] <= outer["x"] + outer["w"] + slack
            and inner["y"] + inner["h"] <= outer["y"] + outer["h"] + slack)


def _overlap(a, b):
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def _layer_keys(views, name):
    """The key of block `name` and of every item inside it, two levels down."""
    for view in views.values():
        for it in view["items"]:
            if it["type"] == "group" and it["label"] == name:
                k = it["key"]
                parts = [i["key"] for i in views[k]["items"]]
                leaves = {p: [i["key"] for i in views[p]["items"]] for p in parts if p in views}
                return k, parts, leaves
    raise AssertionError(f"no group {name}")


def test_expand_all_estimates_what_is_out_of_view_and_lays_out_what_comes_into_view(browser, served, close_pages):
    app = _open(browser, served, close_pages, "big")
    # One run top to bottom (wrap: false), far taller than the screen: at Fit most blocks
    # are out of reach of a legible zoom. Laid out for the screen, the 200 blocks fit it
    # whole and are laid out at once (test_expand_all_for_the_screen.py).
    app.js("async () => { await window.tensorviz.expandAll({wrap: false}); }")
    # Every group is open...
    expanded = set(app.js("() => window.tensorviz.expanded"))
    assert set(served.views) - {"g-1"} <= expanded
    keys = set(app.keys())
    layer, parts, leaves = _layer_keys(served.views, f"layer_{BLOCKS * 3 // 4}")
    assert {layer, *parts} <= keys
    # ...but at Fit (no edge is drawn at this zoom) the blocks are estimated, not laid out,
    # and the deepest containers far from view are not even fetched yet.
    estimated = set(app.js("() => window.tensorviz.estimatedKeys()"))
    assert layer in estimated and len(estimated) >= BLOCKS
    early, _, _ = _layer_keys(served.views, "layer_3")
    assert early in estimated
    _, last_parts, last_leaves = _layer_keys(served.views, f"layer_{BLOCKS - 1}")
    assert set(last_parts) <= estimated and not {n for ns in last_leaves.values() for n in ns} & keys

    # Into view at readable detail: that block is laid out for real, its children inside it.
    app.js("(k) => { window.tensorviz.center(k); window.tensorviz.readable(); }", layer)
    app.js("async () => { await window.tensorviz.settle(); }")
    estimated = set(app.js("() => window.tensorviz.estimatedKeys()"))
    assert layer not in estimated and not set(parts) & estimated
    assert early in estimated  # far out of view: still an estimate
    assert {n for ns in leaves.values() for n in ns} <= set(app.keys())  # fetched now
    rects = _rects(app, [layer, *parts, *[n for ns in leaves.values() for n in ns]])
    for part in parts:
        assert _inside(rects[part], rects[layer]), (part, rects[part], rects[layer])
        for n in leaves.get(part, []):
            assert _inside(rects[n], rects[part]), (n, rects[n], rects[part])
    for p in leaves:
        ns = leaves[p]
        assert not [(a, b) for i, a in enumerate(ns) for b in ns[i + 1:] if _overlap(rects[a], rects[b])]
    # What was at the centre of the screen stayed there: the block still covers the centre.
    centre = {"x": VIEW["width"] / 2, "y": VIEW["height"] / 2, "w": 0, "h": 0}
    assert _inside(centre, rects[layer], slack=0), rects[layer]
    assert app.unexpected_errors() == []


def test_scrolling_through_estimated_blocks_lays_them_out_without_overlaps(browser, served, close_pages):
    app = _open(browser, served, close_pages, "big")
    app.js("async () => { await window.tensorviz.expandAll(); }")
    start = BLOCKS // 2
    first, _, _ = _layer_keys(served.views, f"layer_{start}")
    app.js("(k) => { window.tensorviz.center(k); window.tensorviz.readable(); }", first)
    app.js("async () => { await window.tensorviz.settle(); }")
    for _ in range(10):  # down, about a screen at a time, as a person reads
        app.js("async () => { window.tensorviz.panBy(0, -900); await window.tensorviz.settle(); }")
    blocks = [_layer_keys(served.views, f"layer_{k}") for k in range(start, start + 3)]
    estimated = set(app.js("() => window.tensorviz.estimatedKeys()"))
    assert not {b[0] for b in blocks} & estimated  # laid out for real on the way
    keys = [b[0] for b in blocks]
    rects = _rects(app, keys + [p for b in blocks for p in b[1]])
    for a, b in zip(keys, keys[1:]):
        # in reading order: below it in its column, or at the top of a column to its right
        # (a group taller than the screen continues in the next column, issue 36 item 6)
        below = rects[a]["y"] < rects[b]["y"]
        right = rects[b]["x"] >= rects[a]["x"] + rects[a]["w"] - 0.5
        assert not _overlap(rects[a], rects[b]) and (below or right), (a, b)
    for layer, parts, _ in blocks:
        for part in parts:
            assert _inside(rects[part], rects[layer]), (part, layer)
    assert app.unexpected_errors() == []


def test_a_search_result_inside_a_container_not_fetched_yet_is_shown(browser, served, close_pages):
    app = _open(browser, served, close_pages, "big")
    app.js("async () => { await window.tensorviz.expandAll({wrap: false}); }")  # most of it deferred
    _, _, leaves = _layer_keys(served.views, f"layer_{BLOCKS - 2}")
    node = next(n for ns in leaves.values() for n in ns if n.startswith("n"))
    assert node not in set(app.keys())  # deferred: not fetched by Expand all
    path = served.projection.item_path(int(node[1:]))
    app.js("async (r) => { await window.tensorviz.jump(r); }", {"type": "node", "id": int(node[1:]), "item_path": path})
    app.wait("(k) => window.tensorviz.keys().includes(k) && window.tensorviz.selected === k", node)
    app.js("async () => { await window.tensorviz.settle(); }")
    assert app.js("(k) => window.tensorviz.itemInfo(k).kind", node) == "node"
    holder = path[-2]
    assert holder not in app.js("() => window.tensorviz.estimatedKeys()")
    rects = _rects(app, [node, holder])
    assert _inside(rects[node], rects[holder])
    assert app.unexpected_errors() == []


def test_expand_all_on_a_small_real_model_lays_out_everything_for_real(browser, served, close_pages):
    app = _open(browser, served, close_pages, "gpt2")
    app.js("async () => { await window.tensorviz.expandAll(); }")
    assert app.js("() => window.tensorviz.estimatedKeys()") == []
    infos = app.js("() => window.tensorviz.keys().length")
    assert infos > 600
