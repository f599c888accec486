"""Scale: a 100,000-node capture opens and paints; a flat 5,000-node jit is chunked."""

from __future__ import annotations

import pytest

from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def server():
    s = ViewerServer([(synthetic_capture(100_000, grouped=True, opaque_every=11), "synthetic 100,000")])
    s.start()
    try:
        s.warm()  # the server's index, built before the page asks
        yield s
    finally:
        s.stop()


def test_a_100000_node_capture_opens_and_paints(browser, server, close_pages):
    app = open_app(browser, server.url, ready=False)
    close_pages.append(app)
    app.wait_ready(timeout=60_000)
    app.wait("() => window.tensorviz.firstPaintMs !== null")
    assert app.js("() => window.tensorviz.error") is None
    assert "100,000 nodes" in app.page.locator("#title").inner_text()
    assert app.painted_pixels() > 2000
    stats = app.js("() => window.tensorviz.sceneStats()")
    # Only what is open was sent and laid out: the jit group and its 48 layer cards.
    assert 40 <= stats["items"] <= 400
    # Expanding one layer and one of its scopes (a chunked group of ~1,000 nodes) works.
    before = app.scene_version
    app.js("() => window.tensorviz.toggle('g1')")
    app.wait_scene_after(before)
    before = app.scene_version
    app.js("() => window.tensorviz.toggle('g2')")
    app.wait_scene_after(before)
    assert any(k.startswith("c2:") for k in app.keys())
    # Search reaches a node deep inside: the path, the chunk and the node get opened.
    app.page.fill("#search", "layer_47")
    app.page.wait_for_selector("#search-results li[role=option]")
    app.page.keyboard.press("Enter")
    app.wait("() => window.tensorviz.selected === 'g142'")
    assert app.unexpected_errors() == []
