"""Readable graphs of real models, in the app: the real captures of
``tests/viewer/real_models`` (a 12-block GPT-2 and a ResNet-18 from ``transformers``
configs, a Flax Linen ResNet-18 with bound variables) open collapsed first, taller than
wide, legible, with parameters inside their ops and the twelve blocks as one stack; the
stack opens on its first member, blocks line up in one column, Expand all lays out
everything in one go, and a person's expansions come back after a reload.

Checked by meaning through ``window.tensorviz.itemInfo(key)``, not by pixels."""

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


@pytest.fixture(scope="module")
def served():
    server = ViewerServer()
    ids = SimpleNamespace(
        gpt2=server.add_capture(graphfile.read(CAPTURES / "gpt2_torch.tvg"), "gpt2"),
        resnet=server.add_capture(graphfile.read(CAPTURES / "resnet18_torch.tvg"), "resnet"),
        linen=server.add_capture(graphfile.read(CAPTURES / "resnet18_linen.tvg"), "linen"),
        flat=server.add_capture(synthetic_capture(1000, grouped=False), "flat 1,000"),
        tiny=server.add_capture(synthetic_capture(3, grouped=False), "tiny"),
    )
    server.start()
    try:
        yield SimpleNamespace(server=server, ids=ids)
    finally:
        server.stop()


def _open(browser, served, close_pages, which, context=None):
    app = open_app(browser, served.server.url_for(getattr(served.ids, which)), viewport=VIEW)
    close_pages.append(app)
    app.js("() => localStorage.clear()")
    return app


def _infos(app) -> dict[str, dict]:
    return app.js("() => Object.fromEntries(window.tensorviz.keys().map((k) => [k, window.tensorviz.itemInfo(k)]))")


def _fit_zoom(app) -> float:
    app.js("() => window.tensorviz.fit()")
    return app.js("() => window.tensorviz.camera.s")


@pytest.mark.parametrize("which", ["gpt2", "resnet", "linen"])
def test_a_real_model_opens_collapsed_taller_than_wide_legible_and_without_parameter_items(browser, served, close_pages, which):
    app = _open(browser, served, close_pages, which)
    infos = _infos(app)
    assert infos, "nothing was laid out"
    params = [k for k, i in infos.items() if i["kind"] in ("in", "out") and i["role"] in ("param", "buffer", "variable", "const")]
    assert params == []  # parameters are lines inside their ops, never layout items
    # ...and they are there: on an op's card, or counted on a collapsed group's card
    assert any(i["weights"] or any(" params · " in line for line in i["lines"]) for i in infos.values())
    stats = app.js("() => window.tensorviz.sceneStats()")
    assert stats["h"] > stats["w"]  # data flows top to bottom, no staircase sideways
    assert app.js("() => window.tensorviz.camera.s") >= 0.6  # titles and lines legible at first
    assert _fit_zoom(app) >= 0.25
    assert app.unexpected_errors() == []


def test_the_twelve_gpt2_blocks_are_one_stack_that_opens_on_its_first_member(browser, served, close_pages):
    app = _open(browser, served, close_pages, "gpt2")
    infos = _infos(app)
    stacks = {k: i for k, i in infos.items() if i["kind"] == "stack"}
    assert len(stacks) == 1
    (key, stack), = stacks.items()
    assert stack["role"] == "GPT2Block" and len(stack["members"]) == 12
    assert stack["name"] == "h.0–11"
    version = app.scene_version
    app.js("(k) => window.tensorviz.toggle(k)", key)
    app.wait_scene_after(version)
    infos = _infos(app)
    members = stack["members"]
    assert all(m in infos for m in members) and not [k for k, i in infos.items() if i["kind"] == "stack"]
    expanded = app.js("() => window.tensorviz.expanded")
    assert members[0] in expanded and not set(members[1:]) & set(expanded)
    # consecutive blocks stand in one column: they drift sideways by at most a quarter of a block
    rects = [app.item_rect(m) for m in members]
    for a, b in zip(rects[1:], rects[2:]):
        drift = abs((a["x"] + a["w"] / 2) - (b["x"] + b["w"] / 2)) / max(a["w"], b["w"])
        assert drift <= 0.25
        assert b["y"] > a["y"]  # top to bottom, in program order
    assert app.unexpected_errors() == []


def test_expand_all_lays_out_every_group_and_collapse_all_returns(browser, served, close_pages):
    app = _open(browser, served, close_pages, "gpt2")
    jobs_before = app.js("() => window.tensorviz.layoutJobs")
    app.js("async () => { await window.tensorviz.expandAll(); }")
    infos = _infos(app)
    groups = [k for k, i in infos.items() if i["kind"] == "group"]
    views = Projection(graphfile.read(CAPTURES / "gpt2_torch.tvg")).subtree(-1)["views"]
    # The modules that ran no op (eval-mode dropout, 25 of the 151) are named in their
    # parent's card, not drawn as boxes (issue 26): this count was 151 before. The capture
    # now also holds 2 function calls (issue 26): `diff` is a card of its own, the LM head's
    # `linear` is drawn as its module's card (`lm_head`), so 153 groups draw 127 cards.
    idle = {x["key"] for v in views.values() for x in v["idle"]}
    assert len(idle) == 25 and not idle & set(infos)
    assert not idle & {it["key"] for v in views.values() for it in v["items"]}  # listed, never items
    assert len(groups) == 153 - 25 - 1 and not [k for k, i in infos.items() if i["kind"] == "stack"]
    expanded = set(app.js("() => window.tensorviz.expanded"))
    with_children = set(views) - {"g-1"}
    assert len(with_children) == 126
    # every module with something inside opens; a module drawn as its one op (c_attn,
    # ln_1: `card: "op"`) is that op's card and stays one (issue 26)
    cards = {it["key"]: it.get("card") for v in views.values() for it in v["items"]}
    frames = {k for k in with_children if cards.get(k) in ("group", "chunk")}
    assert frames <= expanded and not {k for k in with_children - frames if cards.get(k) == "op"} & expanded
    # the twelve identical blocks share one layout: far fewer layout jobs than containers
    jobs = app.js("() => window.tensorviz.layoutJobs") - jobs_before
    assert jobs < len(with_children) // 2
    assert _fit_zoom(app) <= 1.0
    app.page.click("#btn-collapse-all")
    app.wait("() => window.tensorviz.expanded.length === 1")
    assert app.unexpected_errors() == []


def test_expand_to_depth_opens_that_many_levels(browser, served, close_pages):
    app = _open(browser, served, close_pages, "resnet")
    app.js("async () => { await window.tensorviz.expandToDepth(2); }")
    infos = _infos(app)
    depth = {k: (i["path"] or "").count("/") for k, i in infos.items() if i["kind"] == "group"}
    expanded = set(app.js("() => window.tensorviz.expanded"))
    assert {k for k in depth if k in expanded} == {k for k, d in depth.items() if d <= 1 and k in expanded}
    assert max(d for k, d in depth.items()) == 2  # the third level is visible, collapsed


def test_a_persons_expansion_is_remembered_for_the_profile(browser, served, close_pages):
    app = _open(browser, served, close_pages, "gpt2")
    stack = next(k for k, i in _infos(app).items() if i["kind"] == "stack")
    version = app.scene_version
    app.js("(k) => window.tensorviz.toggle(k)", stack)
    app.wait_scene_after(version)
    before = sorted(app.js("() => window.tensorviz.expanded"))
    app.page.reload()
    app.wait_ready()
    assert sorted(app.js("() => window.tensorviz.expanded")) == before


def test_a_flat_program_opens_on_its_first_ops(browser, served, close_pages):
    app = _open(browser, served, close_pages, "flat")
    infos = _infos(app)
    nodes = [k for k, i in infos.items() if i["kind"] == "node"]
    assert len(nodes) >= 100 and "n0" in nodes
    assert app.js("() => window.tensorviz.camera.s") >= 0.6


def test_fit_never_zooms_past_100_percent_on_a_small_graph(browser, served, close_pages):
    app = _open(browser, served, close_pages, "tiny")
    assert app.js("() => window.tensorviz.camera.s") == 1
    assert _fit_zoom(app) == 1
