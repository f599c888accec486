"""The graph first, the compiled program after, in the browser (issue 46): a sharded graph
whose compile has not finished (``compiled.status`` pending) says "compiling for 8
devices…" in the mesh legend and a "Compiling" banner; the capture that has the compiled
program completes it in place (the same id and URL), and the ⇆ XLA badge, the legend's
compiled line and the "Compiled" banner appear without a reload. A compile that timed
out leaves the graph with a "Not compiled" banner that says why."""

from __future__ import annotations

import copy

import pytest

from capture.graph.later_compiled import missing, pending_record
from viewer.server.app import ViewerServer

from test_sharded_view import compiled_capture, lines_of
from tv_browser import make_workspace, open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _first():
    done = compiled_capture()
    first = copy.deepcopy(done)
    first.compiled = pending_record(8, 2.5, 40.0, "n")
    return first, done


def test_compiling_then_the_compiled_program_in_place(browser, tmp_path, close_pages):
    first_cap, done = _first()
    server = ViewerServer(workspace=make_workspace(tmp_path))
    cid = server.add_capture(first_cap, "compiled step")
    server.start()
    try:
        app = open_app(browser, server.url_for(cid))
        close_pages.append(app)
        page = app.page
        app.wait_subscribed(server)
        row = page.locator("#mesh-legend .mesh-row.compiling")
        assert row.inner_text() == "compiling for 8 devices…" and row.is_visible()
        banner = page.locator(".banner", has_text="XLA is compiling")
        assert banner.count() == 1 and banner.get_attribute("data-level") == "info"
        assert "8 devices (at most 40 s)" in banner.inner_text()
        app.js("async () => { await window.tensorviz.expandAll(); }")
        key, lines = lines_of(app, "dot_general")
        assert not any(line.startswith("XLA ") for line in lines)  # nothing compiled yet

        same = server.add_capture(done, "compiled step", replaces=cid, in_place=True)
        assert same == cid
        app.wait("() => window.tensorviz.liveUpdates === 1")
        assert app.js("() => window.tensorviz.captureId") == cid
        page.locator(".banner", has_text="XLA compiled").wait_for()
        assert page.locator(".banner", has_text="XLA is compiling").count() == 0
        assert page.locator("#mesh-legend .mesh-row.compiling").count() == 0
        key, lines = lines_of(app, "dot_general")  # the expansion is kept
        assert lines[0] == "XLA all-reduce model ×2 · sends 256 B each"
        card = app.js("(k) => window.tensorviz.card(k)", key)
        assert any(t.get("text") == "⇆ XLA" for t in card.get("texts", []) if isinstance(t, dict))
        page.locator("#mesh-legend .mesh-details").click()
        assert "compiled: 2 collectives" in page.locator("#mesh-legend").inner_text()
        assert not app.unexpected_errors()
    finally:
        server.stop()


def test_a_compile_that_never_came_leaves_the_graph_saying_why(browser, tmp_path, close_pages):
    first_cap, _ = _first()
    gone = missing(first_cap, "the capture's 120 s deadline (--timeout) passed before they arrived", "timeout")
    server = ViewerServer(workspace=make_workspace(tmp_path))
    cid = server.add_capture(gone, "compiled step")
    server.start()
    try:
        app = open_app(browser, server.url_for(cid))
        close_pages.append(app)
        banner = app.page.locator(".banner", has_text="Not compiled")
        assert banner.count() == 1 and "the compiled program did not arrive: the capture's 120 s deadline" in \
            banner.inner_text()
        assert app.page.locator("#mesh-legend .mesh-row.compiling").count() == 0
        assert app.keys()  # the graph is there
        assert not app.unexpected_errors()
    finally:
        server.stop()


def test_a_torch_programs_legend_keys_only_its_own_collectives(browser, tmp_path, close_pages):
    """No compiler adds collectives to a Torch program: the legend keys the program's own
    (⇄), never XLA's, and its example split names the capture's own axis."""
    from capture.graph.model import Coverage
    from capture.graph.sharding import mesh_record

    cap = compiled_capture()
    cap.backend, cap.framework, cap.framework_version = "torch_eager", "torch", "2.13"
    cap.coverage = Coverage("executed_path")
    cap.compiled = None
    cap.meshes = [mesh_record([("dp", 4, None), ("tp", 2, None)], "DeviceMesh", "recipe")]
    server = ViewerServer(workspace=make_workspace(tmp_path))
    cid = server.add_capture(cap, "fsdp step")
    server.start()
    try:
        app = open_app(browser, server.url_for(cid))
        close_pages.append(app)
        page = app.page
        legend = page.locator("#mesh-legend")
        assert "⇄ collective the program writes" in legend.inner_text()
        assert "XLA" not in legend.inner_text()
        page.locator("#mesh-legend .mesh-details").click()
        text = legend.inner_text()
        assert "f32[8@dp,16]: dimension 0 split over dp" in text and "compiler" not in text
        assert not app.unexpected_errors()
    finally:
        server.stop()
