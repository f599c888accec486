"""A container that is one chain (an input pill, a card, an output pill: the first view of
a deep model) is laid out by layout/chain.js without ELK, and the layout is ELK's own: on
chains of random whole-pixel sizes, with the worker's options (layout/elk-options.js),
chain.js answers exactly what ELK answers (the plain options, the denser ones of a layout
for the screen, and a stack's column, whose network-simplex placement puts cards on whole
pixels: a wrapped 400-layer chunk's pieces are such chains). The worker loads ELK only for
a container that needs it (or once a request is done), so with ELK's bundle unreachable a
chain still lays out and only another container falls back."""

from __future__ import annotations

import pytest

from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

COMPARE = """async () => {
  const { chainLayout } = await import("./static/layout/chain.js");
  const { CHAIN_OPTIONS, LAYOUT_OPTIONS, PADDING, LAYER_SPACING } = await import("./static/layout/elk-options.js");
  const ELK = (await import("./static/vendor/elk.js")).default;
  const elk = new ELK();
  const graph = (sizes, edges, options = LAYOUT_OPTIONS, edgeOptions = null) => ({id: "", layoutOptions: options,
    children: sizes.map(([w, h], i) => ({id: `i${i}`, width: w, height: h})),
    edges: edges.map(([s, t], k) => ({id: `e${k}`, sources: [`i${s}`], targets: [`i${t}`],
      ...(edgeOptions ? {layoutOptions: edgeOptions} : {})}))});
  const read = (out) => ({
    w: out.width, h: out.height,
    boxes: out.children.map((c) => [c.id, c.x, c.y, c.width, c.height]),
    edges: (out.edges || []).map((e) => [e.id, e.sections.map((s) => [s.startPoint.x, s.startPoint.y,
      (s.bendPoints || []).map((b) => [b.x, b.y]), s.endPoint.x, s.endPoint.y])]),
  });
  // Each of the worker's option sets chain.js answers for: the plain ones, the screen's
  // denser ones, and a stack's column (network-simplex placement, its edges kept straight).
  const byOptions = [];
  for (const [options, [gap, whole]] of CHAIN_OPTIONS) {
    let seed = 12345;
    const rnd = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    const edgeOptions = whole ? {"elk.layered.priority.straightness": "1000"} : null;
    const same = [], differ = [];
    for (let t = 0; t < 120; t++) {
      const n = 1 + Math.floor(rnd() * (t % 2 ? 8 : 30));
      const sizes = Array.from({length: n}, () => [40 + Math.floor(rnd() * 400), 20 + Math.floor(rnd() * 300)]);
      if (t % 5 === 0 && n > 1) sizes[n - 1][0] = sizes[0][0];  // widths tied
      const g = graph(sizes, sizes.slice(1).map((_, i) => [i, i + 1]), options, edgeOptions);
      const mine = chainLayout(JSON.parse(JSON.stringify(g)), PADDING, gap, whole);
      const theirs = await elk.layout(g);
      const a = JSON.stringify(read(theirs)), b = mine && JSON.stringify(read(mine));
      (a === b ? same : differ).push({sizes, elk: a, chain: b});
    }
    byOptions.push({gap, whole, same: same.length, differ: differ.slice(0, 2)});
  }
  const notChains = [
    chainLayout(graph([[50, 20], [60, 20], [70, 20]], [[0, 1], [1, 2], [0, 2]]), PADDING, LAYER_SPACING),  // a skip edge
    chainLayout(graph([[50, 20], [60, 20], [70, 20]], [[0, 2], [2, 1]]), PADDING, LAYER_SPACING),  // out of order
    chainLayout(graph([[50, 20], [60, 20]], []), PADDING, LAYER_SPACING),  // not connected
    chainLayout(graph([[50.5, 20], [60, 20]], [[0, 1]]), PADDING, LAYER_SPACING),  // fractional: ELK's sums
  ];
  return {byOptions, notChains};
}"""


@pytest.fixture
def app(browser, close_pages):
    """The app on a small synthetic capture."""
    server = ViewerServer([synthetic_capture(30)])
    server.start()
    try:
        page = open_app(browser, server.url)
        close_pages.append(page)
        yield page
    finally:
        server.stop()


def test_a_chain_is_laid_out_exactly_as_elk_lays_it_out(app):
    got = app.js(COMPARE)
    assert [(o["gap"], o["whole"]) for o in got["byOptions"]] == [(40, False), (22, False), (40, True), (22, True)]
    for o in got["byOptions"]:
        assert o["differ"] == [] and o["same"] == 120, o
    assert got["notChains"] == [None, None, None, None]


LAYOUT_TWO = """async () => {
  const p = await import("./static/layout/protocol.js");
  const node = (title) => ({kind: "node", title, lines: []});
  return new Promise((resolve, reject) => {
    const w = new Worker("static/layout/layout.worker.js", {type: "module"});
    const results = {};
    w.onerror = (e) => reject(String(e.message || e));
    w.onmessage = (e) => {
      if (e.data.type === p.FromWorker.RESULT) results[e.data.sig] = e.data.layout;
      if (e.data.type === p.FromWorker.DONE || e.data.type === p.FromWorker.ERROR) { w.terminate(); resolve(results); }
    };
    w.postMessage(p.layoutRequest(1, 1, [
      {sig: "chain", items: [node("a"), node("b"), node("c")], edges: [{s: 0, t: 1, label: ""}, {s: 1, t: 2, label: ""}]},
      {sig: "triangle", items: [node("a"), node("b"), node("c")],
       edges: [{s: 0, t: 1, label: ""}, {s: 1, t: 2, label: ""}, {s: 0, t: 2, label: ""}]},
      // A stack's blocks in one column, laid out for the screen (Expand all): taller than
      // the screen, it wraps, and each column is laid out again on its own.
      {sig: "screen", items: Array.from({length: 60}, (_, i) => node(`block ${i}`)),
       edges: Array.from({length: 59}, (_, i) => ({s: i, t: i + 1, label: ""})),
       columns: [Array.from({length: 60}, (_, i) => i)], wrap: {w: 1600, h: 900, top: true}},
    ]));
  });
}"""


def test_a_chain_needs_no_elk_and_other_containers_still_do(app):
    """Also a chain laid out for the screen (Expand all's wrapped 400-layer chunk, laid out
    again as each layer in view comes true: its fifteen pieces were ELK's, 0.3-1 s a time)."""
    with_elk = app.js(LAYOUT_TWO)
    # ELK's bundle unreachable from here on: the worker cannot load it
    app.page.route("**/vendor/elk.bundled-*.js", lambda route: route.abort())
    without = app.js(LAYOUT_TWO)
    assert without["chain"] == with_elk["chain"] and not without["chain"].get("fallback")
    boxes = without["chain"]["boxes"]
    assert boxes[0]["y"] < boxes[1]["y"] < boxes[2]["y"] and len(without["chain"]["edges"]) == 2
    assert not with_elk["triangle"].get("fallback") and without["triangle"]["fallback"] is True
    # A chain laid out for the screen, in a stack's column, and wrapped into columns whose
    # pieces are laid out again: chain.js's each time (ELK's own answer), no ELK needed.
    assert without["screen"] == with_elk["screen"] and not without["screen"].get("fallback")
    assert without["screen"]["wrapped"] > 1
