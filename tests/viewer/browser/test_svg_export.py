"""The SVG export draws what the canvas draws: both come from one draw list
(viewer/static/draw/drawlist.js). On a real capture (the 12-block GPT-2 of
``tests/viewer/real_models``), every text the canvas draws is in the exported SVG, same
string (truncated once, with the canvas's measureText) and same position; every card on
screen (its box from the renderer, through ``itemRect``) is in the SVG as a box of the same
size and place, with its title; and the SVG, rendered by Chromium, looks like the canvas."""

from __future__ import annotations

import base64
import math
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from capture.graph import graphfile
from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CAPTURE = Path(__file__).resolve().parents[1] / "real_models" / "captures" / "gpt2_torch.tvg"
VIEW = {"width": 1400, "height": 900}
SVG_NS = "{http://www.w3.org/2000/svg}"
PAD_X, PAD_TOP, TITLE_H, CAPTION_H = 11, 8, 18, 14  # CARD_STYLE (card.js)

# Records every fillText of the graph canvas (world coordinates: the renderer draws the
# scene under its camera transform) over one forced frame.
RECORD_CANVAS_TEXT = """async () => {
  const ctx = document.getElementById('graph').getContext('2d');
  const orig = ctx.fillText;
  const got = [];
  ctx.fillText = function (t, x, y) { got.push([String(t), x, y]); return orig.call(this, t, x, y); };
  window.tensorviz.panBy(0, 0);
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  delete ctx.fillText;
  return got;
}"""

# Each laid-out item fully on screen: its world box (from the renderer's screen rectangle
# and camera), what it is, and whether it is open.
VISIBLE_CARDS = """() => {
  const tv = window.tensorviz;
  const cam = tv.camera;
  const c = document.getElementById('graph').getBoundingClientRect();
  const open = new Set(tv.expanded);
  const out = [];
  for (const k of tv.keys()) {
    const r = tv.itemRect(k);
    if (!r || r.x < 0 || r.y < 0 || r.x + r.w > c.width || r.y + r.h > c.height) continue;
    const info = tv.itemInfo(k);
    // A module drawn as its one op (issue 26) is titled by the op, its name on the caption row.
    out.push({ key: k, kind: info.kind, name: info.caption ? info.title : info.name, caption: info.caption, open: open.has(k),
               x: (r.x - cam.tx) / cam.s, y: (r.y - cam.ty) / cam.s, w: r.w / cam.s, h: r.h / cam.s });
  }
  return { cards: out, s: cam.s };
}"""

# How two PNGs of the same size differ, on 4×4 blocks (so that a glyph's antialiasing does
# not count, a missing card, line or text does): the mean absolute difference (0..255 over
# RGB) and the fraction of blocks where some channel differs by more than 48.
IMAGE_DIFF = """async ([a, b]) => {
  const load = async (b64) => createImageBitmap(await (await fetch('data:image/png;base64,' + b64)).blob());
  const [ia, ib] = [await load(a), await load(b)];
  const w = Math.floor(Math.min(ia.width, ib.width) / 4);
  const h = Math.floor(Math.min(ia.height, ib.height) / 4);
  const px = (img) => {
    const c = new OffscreenCanvas(w, h);
    const g = c.getContext('2d');
    g.imageSmoothingQuality = 'high';
    g.drawImage(img, 0, 0, w * 4, h * 4, 0, 0, w, h);
    return g.getImageData(0, 0, w, h).data;
  };
  const [pa, pb] = [px(ia), px(ib)];
  let sum = 0;
  let bad = 0;
  for (let i = 0; i < pa.length; i += 4) {
    const d = [0, 1, 2].map((k) => Math.abs(pa[i + k] - pb[i + k]));
    sum += d[0] + d[1] + d[2];
    if (Math.max(...d) > 48) bad++;
  }
  return { diff: sum / (3 * w * h), bad: bad / (w * h), w, h };
}"""


@pytest.fixture(scope="module")
def served():
    server = ViewerServer()
    cid = server.add_capture(graphfile.read(CAPTURE), "gpt2")
    flat = server.add_capture(synthetic_capture(300, grouped=False, opaque_every=7), "flat 300")
    server.start()
    try:
        yield server, cid, flat
    finally:
        server.stop()


def _export_svg(app) -> str:
    with app.page.expect_download() as d:
        app.page.click("#btn-svg")
    return open(d.value.path(), encoding="utf-8").read()


def _svg_texts(root) -> list[tuple[str, float, float]]:
    return [(t.text or "", float(t.get("x")), float(t.get("y"))) for t in root.iter(f"{SVG_NS}text")]


def _key(t) -> tuple[str, float, float]:
    # The SVG writes coordinates to 2 decimals (export.js fmt, Math.round): a canvas x of
    # 117.6495 is 117.65 there, so both are rounded that way before comparing.
    def near(v: float) -> float:
        return round(math.floor(v * 100 + 0.5) / 100, 1)
    return (t[0], near(t[1]), near(t[2]))


def _check_view(app, tmp_path: Path, name: str) -> dict:
    canvas_texts = app.js(RECORD_CANVAS_TEXT)
    view = app.js(VISIBLE_CARDS)
    svg = _export_svg(app)
    (tmp_path / f"{name}.svg").write_text(svg, encoding="utf-8")
    root = ET.fromstring(svg)
    svg_texts = _svg_texts(root)

    # Every text on the canvas is in the SVG, same string, same place (and nothing else).
    assert canvas_texts, "the canvas drew no text"
    missing = Counter(map(_key, canvas_texts)) - Counter(map(_key, svg_texts))
    extra = Counter(map(_key, svg_texts)) - Counter(map(_key, canvas_texts))
    assert not missing, f"drawn on the canvas, not in the SVG: {list(missing)[:8]}"
    assert not extra, f"in the SVG, not on the canvas: {list(extra)[:8]}"

    # Every card on screen is a box of the same place and size in the SVG, with its title.
    boxes = [(float(r.get("x")), float(r.get("y")), float(r.get("width")), float(r.get("height")))
             for r in root.iter(f"{SVG_NS}rect") if r.get("x") is not None]
    specks = [(float(x), float(y)) for p in root.iter(f"{SVG_NS}path")
              for x, y in re.findall(r"M(-?[\d.]+),(-?[\d.]+)h", p.get("d", ""))]
    cards = view["cards"]
    assert len(cards) >= 5, f"too few cards on screen to compare: {len(cards)}"
    s = view["s"]
    # An open group too small on screen to read is drawn as its frame only.
    framed = [c for c in cards if c["open"] and c["w"] * s < 24 and c["h"] * s < 24]
    titled = 0
    for c in cards:
        if any(f is not c and f["x"] <= c["x"] and f["y"] <= c["y"] and c["x"] + c["w"] <= f["x"] + f["w"]
               and c["y"] + c["h"] <= f["y"] + f["h"] for f in framed):
            continue
        if c["w"] * s < 2.5 and c["h"] * s < 2.5 and not c["open"]:
            # Sub-pixel on the canvas: a speck, in the SVG too.
            assert any(abs(x - c["x"]) < 0.05 and abs(y - c["y"]) < 0.05 for x, y in specks), f"no speck for {c['key']}"
            continue
        assert any(abs(b[0] - c["x"]) < 0.05 and abs(b[1] - c["y"]) < 0.05 and abs(b[2] - c["w"]) < 0.05
                   and abs(b[3] - c["h"]) < 0.05 for b in boxes), f"no box for {c} in the SVG"
        if s < 0.42 or c["kind"] not in ("node", "group", "stack", "chunk") or not c["name"]:
            continue
        # The title row: at the card's padding, or in the header band of an open group.
        row = [t for t in svg_texts if c["x"] < t[1] < c["x"] + c["w"]
               and (abs(t[2] - (c["y"] + PAD_TOP + (CAPTION_H if c["caption"] else 0) + TITLE_H / 2)) < 0.01 if not c["open"]
                    else c["y"] < t[2] < c["y"] + 30)]
        ok = any(t[0] == c["name"] or t[0].startswith(c["name"] + "  ·  ")
                 or (t[0].endswith("…") and len(t[0]) > 1 and c["name"].startswith(t[0][:-1])) for t in row)
        assert ok, f"{c['key']}: title {c['name']!r} not in its title row in the SVG: {row}"
        if not c["open"]:
            title_x = min(t[1] for t in row if t[0].rstrip("…") and c["name"].startswith(t[0].rstrip("…")))
            assert abs(title_x - (c["x"] + PAD_X)) < 0.01, f"{c['key']}: title at x={title_x}, card at {c['x']}"
        titled += 1
    return {"svg": svg, "titled": titled, "cards": len(cards), "texts": len(canvas_texts)}


def _looks_alike(app, browser, svg: str, tmp_path: Path, name: str) -> None:
    """The canvas's own pixels (no minimap or hint over them) against the SVG rendered by Chromium."""
    canvas_png = base64.b64decode(app.js("() => document.getElementById('graph').toDataURL('image/png')").split(",", 1)[1])
    page = browser.new_page(viewport=VIEW)
    try:
        page.set_content(f"<html><body style='margin:0'>{svg}</body></html>")
        svg_png = page.locator("svg").screenshot()
        (tmp_path / f"{name}-canvas.png").write_bytes(canvas_png)
        (tmp_path / f"{name}-svg.png").write_bytes(svg_png)
        got = page.evaluate(IMAGE_DIFF, [base64.b64encode(canvas_png).decode(), base64.b64encode(svg_png).decode()])
    finally:
        page.close()
    print(f"{name}: canvas vs SVG: mean block difference {got['diff']:.2f}/255, blocks that differ {got['bad']:.2%}")
    assert got["w"] > 100 and got["h"] > 100
    assert got["diff"] < 2 and got["bad"] < 0.001, f"the SVG does not look like the canvas ({name}): {got}"


def test_every_card_on_the_canvas_is_in_the_svg_with_the_same_title_and_place(browser, served, close_pages, tmp_path):
    server, cid, _ = served
    app = open_app(browser, server.url_for(cid), viewport=VIEW)
    close_pages.append(app)
    assert app.js("() => window.tensorviz.camera.s") >= 0.6  # full cards: titles, tags, lines

    first = _check_view(app, tmp_path, "first")
    assert first["titled"] >= 3
    _looks_alike(app, browser, first["svg"], tmp_path, "first")

    # Opened: the stack's first block, with expanded group headers and weight lines.
    version = app.scene_version
    app.js("() => window.tensorviz.expandToDepth(3)")
    app.wait_scene_after(version)
    app.js("() => window.tensorviz.readable()")
    key = app.js("() => window.tensorviz.keys().find((k) => window.tensorviz.itemInfo(k).weights.length > 0)")
    assert key, "no op card lists its weights"
    app.js("(k) => window.tensorviz.center(k)", key)
    opened = _check_view(app, tmp_path, "opened")
    assert opened["titled"] >= 3
    # The weight lines of the op in the middle (a name that loses its start, its shape whole).
    info = app.js("(k) => window.tensorviz.itemInfo(k)", key)
    texts = [t[0] for t in _svg_texts(ET.fromstring(opened["svg"]))]
    for line in info["lines"][info["weightStart"]:]:
        name, _, rest = line.partition("  ")
        assert any(t == line or (t.startswith("…") and t.endswith("  " + rest) and name.endswith(t[1:-len(rest) - 2]))
                   for t in texts), f"weight line {line!r} of {key} not in the SVG"
    _looks_alike(app, browser, opened["svg"], tmp_path, "opened")

    # Far: Fit, below the titles' level of detail (boxes and far labels only).
    app.js("() => window.tensorviz.fit()")
    far = _check_view(app, tmp_path, "fit")
    assert far["cards"] >= 5
    _looks_alike(app, browser, far["svg"], tmp_path, "fit")
    assert app.unexpected_errors() == []


def test_opaque_nodes_are_hatched_dashed_and_tagged_in_the_svg_as_on_the_canvas(browser, served, close_pages, tmp_path):
    server, _, flat = served
    app = open_app(browser, server.url_for(flat), viewport=VIEW)
    close_pages.append(app)
    app.js("() => window.tensorviz.readable()")
    assert app.js("() => window.tensorviz.center('n6')")  # every 7th synthetic node is an opaque `while`
    view = _check_view(app, tmp_path, "opaque")
    root = ET.fromstring(view["svg"])
    box = app.js("""() => { const r = window.tensorviz.itemRect('n6'); const c = window.tensorviz.camera;
                          return { x: (r.x - c.tx) / c.s, y: (r.y - c.ty) / c.s }; }""")
    card = [r for r in root.iter(f"{SVG_NS}rect") if r.get("x") is not None
            and abs(float(r.get("x")) - box["x"]) < 0.05 and abs(float(r.get("y")) - box["y"]) < 0.05]
    assert any(r.get("fill") == "url(#hatch)" and r.get("stroke-dasharray") == "5 3" for r in card), [r.attrib for r in card]
    assert root.find(f"{SVG_NS}defs/{SVG_NS}pattern[@id='hatch']") is not None
    assert any(t[0] == "opaque" for t in _svg_texts(root))
    _looks_alike(app, browser, view["svg"], tmp_path, "opaque")
    assert app.unexpected_errors() == []
