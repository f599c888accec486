"""Semantic zoom at Fit (issue 26, "Expand all that can be read"), on the real Llama capture
of ``tests/viewer/real_models``: op cards too small for their text are summarised by their
op's short name, inside the card; frame names stay inside the frames they name, always
across them (a narrow frame too small for its name has its own name, without its class,
start inside its top and run on past its right edge: issue 36 item 6), never beside a
column that could hold a line of text; the top module is named once; below 60 % (where a title would be under
8 px on screen) every card says what it is that way.

Read through ``window.tensorviz.farDrawn()`` (what the last frame drew far away, with the
box of the item each name belongs to), not by pixels."""

from __future__ import annotations

from pathlib import Path

import pytest

from capture.graph import graphfile
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CAPTURE = Path(__file__).resolve().parents[1] / "real_models" / "captures" / "llama_torch.tvg"
VIEW = {"width": 1600, "height": 1000}
FRAMES = "() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"


@pytest.fixture(scope="module")
def llama():
    server = ViewerServer([(graphfile.read(CAPTURE), "llama")])
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _open(browser, llama, close_pages):
    app = open_app(browser, llama.url, viewport=VIEW)
    close_pages.append(app)
    app.js("() => localStorage.clear()")
    return app


def _within(box: dict, of: dict, slack: float) -> bool:
    return (box["x"] >= of["x"] - slack and box["x"] + box["w"] <= of["x"] + of["w"] + slack
            and box["y"] >= of["y"] - slack and box["y"] + box["h"] <= of["y"] + of["h"] + slack)


def _far_at_fit(app) -> tuple[float, list[dict]]:
    app.js("() => window.tensorviz.fit()")
    app.js(FRAMES)
    return app.js("() => window.tensorviz.camera.s"), app.js("() => window.tensorviz.farDrawn()")


def test_at_fit_op_cards_too_small_to_read_say_their_op_inside_them(browser, llama, close_pages):
    app = _open(browser, llama, close_pages)
    # the first view keeps the rotary embedding (beside the decoder stack) a card: open it
    before = app.js("() => window.tensorviz.keys().length")
    key = app.js("""() => { const t = window.tensorviz;
      return t.keys().find((k) => (t.itemInfo(k) || {}).role === 'LlamaRotaryEmbedding'); }""")
    app.js("(k) => window.tensorviz.toggle(k)", key)
    app.wait(f"() => window.tensorviz.keys().length > {before}")
    app.js("() => window.tensorviz.settle()")
    s, far = _far_at_fit(app)
    assert s < 0.42  # below the zoom where cards draw their titles
    ops = [f for f in far if f["op"]]
    names = {f["text"] for f in ops}
    # the rotary embedding's kernels and the LM head's linear call, by their short names
    assert {"cos", "sin", "cat", "linear"} <= names, names
    assert not [f for f in ops if "::" in f["text"]]  # `aten::cos` says `cos`
    assert all(_within(f["box"], f["of"], 0.5 / s) for f in ops)
    # the frames keep their names first: no op name over a frame's
    frames = [f["box"] for f in far if f["frame"]]
    assert frames and not [1 for f in ops for b in frames if _meets(f["box"], b)]
    # the top module is named by its class, once
    assert "LlamaForCausalLM" in {f["text"] for f in far if f["frame"]}
    assert app.unexpected_errors() == []


def test_at_half_zoom_cards_say_what_they_are_at_a_readable_size(browser, llama, close_pages):
    # at 50 %, a 13 px title would be 6.5 px on screen: the far names (10.5 px) say it instead
    app = _open(browser, llama, close_pages)
    app.js("() => window.tensorviz.readable()")
    app.js("() => window.tensorviz.zoomAt(800, 500, 0.5)")
    app.js(FRAMES)
    assert app.js("() => window.tensorviz.camera.s") == pytest.approx(0.5)
    far = app.js("() => window.tensorviz.farDrawn()")
    assert [f for f in far if f["op"]] and [f for f in far if f["frame"]]
    assert app.unexpected_errors() == []


def test_after_expand_all_at_fit_frame_names_stay_inside_their_frames(browser, llama, close_pages):
    app = _open(browser, llama, close_pages)
    app.js("async () => { await window.tensorviz.expandAll(); }")
    s, far = _far_at_fit(app)
    assert s < 0.3  # below the titles' level of detail (wrapped for the screen: larger than before)
    frames = [f for f in far if f["frame"]]
    # no name stands beside a frame that could hold a line of text (14.5 px wide: only a
    # deeper model's column is narrower); one wider than its frame starts inside the
    # frame's top and is the frame's own name (`input_layernorm`, not its class)
    wide = [f for f in frames if f["of"]["w"] * s >= 14.5]
    inside = [f for f in wide if _within(f["box"], f["of"], 0.5 / s)]
    past = [f for f in wide if f not in inside]
    assert inside and not [f for f in wide if f["box"]["x"] < f["of"]["x"] or f["box"]["y"] < f["of"]["y"]]
    assert all(f["text"] == f["full"].split(" · ")[0] and f["box"]["w"] > f["box"]["h"] for f in past), \
        [(f["full"], f["text"]) for f in past]
    # each decoder layer is still named, across its frame
    layers = [f for f in frames if f["full"].startswith("layers.") and f["full"].endswith("· LlamaDecoderLayer")]
    assert len(layers) == 4 and all(f["text"].startswith("layers.") for f in layers)
    assert app.unexpected_errors() == []


def _meets(a, b) -> bool:
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


# Counts the canvas's text measuring from now on (window.__measured).
COUNT_MEASURING = """() => {
  const proto = CanvasRenderingContext2D.prototype;
  if (!window.__measureText) {
    window.__measureText = proto.measureText;
    proto.measureText = function (text) { window.__measured += 1; return window.__measureText.call(this, text); };
  }
  window.__measured = 0;
}"""

PAN_FRAMES = """async (n) => {
  for (let i = 0; i < n; i++) {
    window.tensorviz.panBy(i % 2 ? -3 : 3, 0);
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  }
}"""


def test_panning_at_fit_after_expand_all_measures_no_far_name_again(browser, llama, close_pages):
    # Every frame tries the far name of every frame in view (hundreds at Fit after Expand
    # all); measuring them again at each redraw made panning at Fit 20-30 times slower (a
    # 10k-node capture: 1.6 ms -> 50 ms a frame). At one zoom they are measured once.
    app = _open(browser, llama, close_pages)
    app.js("async () => { await window.tensorviz.expandAll(); await window.tensorviz.settle(); }")
    s, before = _far_at_fit(app)
    frames = [f for f in before if f["frame"]]
    assert frames and s < 0.3
    app.js(COUNT_MEASURING)
    app.js(PAN_FRAMES, 6)
    assert app.js("() => window.tensorviz.camera.s") == s
    assert app.js("() => window.__measured") == 0
    # the same names, at the same world places (the pan moved the camera, not the names)
    after = app.js("() => window.tensorviz.farDrawn()")
    assert [(f["text"], f["box"]) for f in after] == [(f["text"], f["box"]) for f in before]
    # a new zoom places them for it; back at Fit, nothing is measured again either (a
    # text's width is its width at one size, scaled: zooming measures only cuts it had
    # not met)
    app.js("() => window.tensorviz.zoomAt(800, 500, 1.25)")
    app.js(FRAMES)
    zoomed = app.js("() => window.tensorviz.farDrawn()")
    assert zoomed and [(f["text"], f["box"]) for f in zoomed] != [(f["text"], f["box"]) for f in after]
    app.js("() => { window.__measured = 0; }")
    s2, back = _far_at_fit(app)
    assert s2 == s and app.js("() => window.__measured") == 0
    assert [(f["text"], f["box"]) for f in back] == [(f["text"], f["box"]) for f in before]
    assert app.unexpected_errors() == []
