"""Recapture on save, in the browser: a page showing a graph that is recaptured in the
background (``capture-ready`` with ``replaces``) updates in place, without a reload,
keeping its camera and expansion, and drops its stale banner."""

from __future__ import annotations

import pytest

from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import make_workspace, open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_recaptured_graph_updates_in_place_keeping_camera_and_expansion(browser, tmp_path, close_pages):
    ws = make_workspace(tmp_path / "ws")
    server = ViewerServer(workspace=ws)
    first = server.add_capture(synthetic_capture(300, grouped=True), "net (p)")
    server.start()
    try:
        app = open_app(browser, server.url_for(first))
        close_pages.append(app)
        app.wait_subscribed(server)
        groups = [k for k in app.keys() if k.startswith("g") and app.js("(k) => window.tensorviz.itemInfo(k).kind", k) == "group"]
        assert groups
        closed = [k for k in groups if k not in app.js("() => window.tensorviz.expanded")]
        version = app.scene_version
        app.js("(k) => window.tensorviz.toggle(k)", closed[0])
        app.wait_scene_after(version)
        app.js("() => window.tensorviz.panBy(37, -21)")
        app.js("() => window.tensorviz.zoomAt(300, 200, 1.3)")

        def open_paths() -> list[str]:
            return app.js(
                "() => window.tensorviz.expanded.filter((k) => k !== 'root' && window.tensorviz.itemInfo(k))"
                ".map((k) => window.tensorviz.itemInfo(k).path).sort()"
            )

        paths = open_paths()
        assert paths
        camera = app.js("() => window.tensorviz.camera")
        app.js("() => { window.__same_page = true; }")
        server.publish("stale", {"files": ["model/layer0.py"], "capture": first})
        app.page.locator("[data-banner=stale]").wait_for()

        second = server.add_capture(synthetic_capture(330, grouped=True), "net (p) again", replaces=first)
        app.wait("() => window.tensorviz.liveUpdates === 1")
        assert app.js("() => window.tensorviz.captureId") == second
        assert app.js("() => window.__same_page") is True  # no reload
        assert f"capture={second}" in app.page.url
        assert app.js("() => window.tensorviz.camera") == camera
        assert open_paths() == paths
        assert app.page.locator("[data-banner=stale]").count() == 0
        assert "net (p) again" in app.page.title()
        assert app.painted_pixels() > 0
        # A capture-ready that replaces another graph leaves this page alone.
        server.add_capture(synthetic_capture(50, grouped=True), "other", replaces=first)
        server.publish("progress", {"message": "marker", "fraction": 0.1})
        app.page.locator("[data-banner=progress]").wait_for()
        assert app.js("() => window.tensorviz.liveUpdates") == 1
        assert app.unexpected_errors() == []
    finally:
        server.stop()
