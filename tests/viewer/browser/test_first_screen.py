"""The first screen (renderer.home()): it shows a card to read, not an empty stretch of a
frame. A generate loop's first chunk is a container 54,000 px wide (its 400 outputs in a
row at the bottom) whose cards begin at its left, under the inputs centred over it: the
first screen then moved across to the topmost card."""

from __future__ import annotations

import pytest

from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HOME = """async ([cards]) => {
  const { Renderer } = await import("./static/draw/renderer.js");
  const canvas = document.createElement("canvas");
  canvas.style.cssText = "position:fixed;left:0;top:0;width:1200px;height:800px";
  document.body.appendChild(canvas);
  const r = new Renderer(canvas, null);
  r.requestDraw = () => {};
  // the inputs over the middle of a 54,000 px container; its cards (or not) at its left
  const pill = { key: "in:0", type: "in", x: 27000, y: 20, w: 120, h: 24, expanded: null, item: {} };
  const frame = { key: "g0", type: "group", x: 0, y: 80, w: 54000, h: 3000, expanded: { items: [] }, item: {} };
  const items = [pill, frame];
  if (cards) items.push({ key: "n1", type: "node", x: 300, y: 200, w: 140, h: 50, expanded: null, item: {} },
                        { key: "n2", type: "node", x: 300, y: 300, w: 140, h: 50, expanded: null, item: {} });
  r.scene = { root: { items: [pill, frame] }, byKey: new Map(items.map((it) => [it.key, it])), w: 54000, h: 3100 };
  r.home();
  const s = r.cam.s;
  const on = (it) => (it.x + it.w) * s + r.cam.tx > 0 && it.x * s + r.cam.tx < r.width;
  const out = { pill: on(pill), card: cards ? on(items[2]) : null, s };
  canvas.remove();
  return out;
}"""


def test_the_first_screen_moves_across_to_a_card_when_none_is_under_the_inputs(browser, close_pages):
    server = ViewerServer([synthetic_capture(30)])
    server.start()
    try:
        app = open_app(browser, server.url)
        close_pages.append(app)
        got = app.js(HOME, [True])
        assert got["card"] is True and got["pill"] is False and got["s"] == pytest.approx(0.8)
        # nothing to move to: the inputs stay centred as before
        assert app.js(HOME, [False])["pill"] is True
    finally:
        server.stop()
