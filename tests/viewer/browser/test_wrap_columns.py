"""The column wrapping of a container laid out for the screen (layout/wrap.js): wrapColumns
ranks its candidate cuts (up to ~500 on a 400-layer chunk after Expand all) by size alone,
from columnsSize, and builds only the one it keeps; columnsSize must answer exactly the
size placeColumns' layout has, for any run and any cuts, or the search would keep another
candidate than the one it would have kept building each."""

from __future__ import annotations

import pytest

from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

COMPARE = """async () => {
  const { placeColumns, columnsSize, cutLines, wrapColumns, cutAt } = await import("./static/layout/wrap.js");
  let seed = 7;
  const rnd = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  const differ = [];
  let compared = 0;
  for (let t = 0; t < 150; t++) {
    const n = 6 + Math.floor(rnd() * 60);
    const boxes = [];
    let y = 10;
    for (let i = 0; i < n; i++) {
      const w = 40 + Math.floor(rnd() * 300), h = 20 + Math.floor(rnd() * 200);
      boxes.push({x: 10 + Math.floor(rnd() * 50), y, w, h});
      y += h + 22;
    }
    if (t % 3 === 0) boxes[Math.floor(n / 2)] = null;  // an item without a box
    // A chain with residual edges every third item, routed beside the cards.
    const jobEdges = [];
    for (let i = 0; i + 1 < n; i++) jobEdges.push({s: i, t: i + 1, label: ""});
    for (let i = 0; i + 3 < n; i += 3) jobEdges.push({s: i, t: i + 3, label: ""});
    const edges = [];
    jobEdges.forEach((e, k) => {
      const a = boxes[e.s], b = boxes[e.t];
      if (!a || !b) return;
      edges.push({e: k, points: [[a.x + a.w / 2, a.y + a.h], [a.x + a.w + 20, a.y + a.h + 5], [b.x + b.w / 2, b.y]], labelAt: null});
    });
    const layout = {w: 400, h: y, boxes, edges};
    const job = {sig: "t", items: boxes.map(() => ({kind: "node", title: "x", lines: []})), edges: jobEdges};
    const cuts = cutLines(job, layout).map((c) => c.y);
    for (let r = 0; r < 6; r++) {
      const lines = cuts.filter(() => rnd() < 0.25);
      if (!lines.length) continue;
      const built = placeColumns(job, layout, lines), sized = columnsSize(job, layout, lines);
      compared += 1;
      if (built.w !== sized.w || built.h !== sized.h || built.wrapped !== sized.wrapped) differ.push({lines, built: [built.w, built.h], sized: [sized.w, sized.h]});
    }
  }
  // What wrapColumns keeps is built, with the cuts it was made with (relaidColumns reads them).
  const boxes = Array.from({length: 40}, (_, i) => ({x: 10, y: 10 + i * 80, w: 200, h: 60}));
  const job = {sig: "c", items: boxes.map(() => ({kind: "node", title: "x", lines: []})),
    edges: boxes.slice(1).map((_, i) => ({s: i, t: i + 1, label: ""}))};
  const edges = job.edges.map((e, k) => ({e: k, points: [[110, boxes[e.s].y + 60], [110, boxes[e.t].y]], labelAt: null}));
  const kept = wrapColumns(job, {w: 220, h: 40 * 80 + 10, boxes, edges}, {w: 1600, h: 900, top: true});
  return {compared, differ: differ.slice(0, 3), kept: kept && {wrapped: kept.wrapped, boxes: kept.boxes.length,
    edges: kept.edges.length, lines: cutAt.get(kept) || null, size: columnsSize(job, {w: 220, h: 40 * 80 + 10, boxes, edges}, cutAt.get(kept) || [])}};
}"""


@pytest.fixture(scope="module")
def app(browser):
    server = ViewerServer([synthetic_capture(30)])
    server.start()
    try:
        page = open_app(browser, server.url)
        yield page
        page.page.close()
    finally:
        server.stop()


def test_the_size_of_each_candidate_is_the_size_of_its_layout(app):
    got = app.js(COMPARE)
    assert got["compared"] > 500 and got["differ"] == []
    kept = got["kept"]
    assert kept["wrapped"] > 1 and kept["boxes"] == 40 and kept["edges"] == 39
    assert kept["lines"] and len(kept["lines"]) == kept["wrapped"] - 1
    assert kept["size"]["wrapped"] == kept["wrapped"]
