"""The vendored ELK inside the layout worker: the version the worker loads is the one
vendored, this file's message handler (not the one ELK's bundle installs in a worker
global) answers, and a layout comes back. The worker is a module worker and imports the
UMD bundle through its ES-module face (vendor/elk.js), so the bundle runs parsed as a
module, in strict mode. An ELK upgrade that changes how the bundle behaves in a worker
fails here first."""

from __future__ import annotations

import re

import pytest

from synthetic import synthetic_capture
from viewer.server.app import STATIC_DIR, ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_layout_worker_runs_the_vendored_elk_with_its_own_handler(browser, close_pages):
    (vendored,) = sorted((STATIC_DIR / "vendor").glob("elk.bundled-*.js"))
    version = re.match(r"elk\.bundled-(.+)\.js$", vendored.name).group(1)
    worker = (STATIC_DIR / "layout" / "layout.worker.js").read_text()
    face = (STATIC_DIR / "vendor" / "elk.js").read_text()
    # loaded when first needed (a chain is laid out without it: layout/chain.js)
    assert 'import("../vendor/elk.js")' in worker and "importScripts" not in worker
    assert f'import "./{vendored.name}";' in face and f'ELK_VERSION = "{version}"' in face
    assert "self.document" not in worker + face  # no stub hiding the worker global from ELK
    server = ViewerServer([synthetic_capture(30)])
    server.start()
    try:
        app = open_app(browser, server.url)
        close_pages.append(app)
        # The page's side of the protocol (layout/protocol.js) talks to a fresh worker.
        answer = app.js("""async () => {
          const p = await import("./static/layout/protocol.js");
          return new Promise((resolve, reject) => {
            const w = new Worker("static/layout/layout.worker.js", {type: "module"});
            const seen = [];
            w.onerror = (e) => reject(String(e.message || e));
            w.onmessage = (e) => {
              seen.push(e.data);
              if (e.data.type === p.FromWorker.VERSION) {
                // not a chain (a -> c beside a -> b -> c): ELK lays it out
                w.postMessage(p.layoutRequest(1, 1, [{sig: "t", items: [
                  {kind: "node", title: "a", lines: []}, {kind: "node", title: "b", lines: []},
                  {kind: "node", title: "c", lines: []}],
                  edges: [{s: 0, t: 1, label: ""}, {s: 1, t: 2, label: ""}, {s: 0, t: 2, label: ""}]}]));
              }
              if (e.data.type === p.FromWorker.DONE || e.data.type === p.FromWorker.ERROR) {
                w.terminate();
                resolve({seen, kinds: Object.values(p.FromWorker)});
              }
            };
            w.postMessage(p.versionRequest());
          });
        }""")
        kinds, answer = answer["kinds"], answer["seen"]
        assert {m["type"] for m in answer} <= set(kinds)
        assert answer[0] == {"type": "version", "elk": version, "ownHandler": True}
        (result,) = [m for m in answer if m["type"] == "result"]
        boxes = result["layout"]["boxes"]
        assert len(boxes) == 3 and boxes[0]["y"] < boxes[1]["y"] < boxes[2]["y"]  # layered, downwards
        assert answer[-1] == {"type": "done", "seq": 1, "chunk": 1, "ms": answer[-1]["ms"]}
    finally:
        server.stop()


def test_both_sides_of_the_layout_worker_speak_through_its_protocol_module():
    """Every message to and from the layout worker is made by layout/protocol.js: neither
    side writes a message literal of its own."""
    for name in ("layout.worker.js", "layout-client.js"):
        text = (STATIC_DIR / "layout" / name).read_text()
        assert 'from "./protocol.js"' in text, name
        assert not re.search(r"postMessage\(\s*\{", text), f"{name} posts a message literal"
        assert not re.search(r"""msg\.type === ["']""", text), f"{name} compares a message kind with a literal"


def test_edges_between_the_same_two_items_each_come_back_on_one_shared_route(browser, close_pages):
    """A generate loop hands 192 cache tensors from one step to the next: the worker gives
    ELK one edge per pair of items (ELK routes every edge in a lane of its own, which made
    a real 96-layer Llama's first view a 45 s layout) and every edge of the pair comes back
    routed, on that one route; an edge between other items keeps its own."""
    server = ViewerServer([synthetic_capture(30)])
    server.start()
    try:
        app = open_app(browser, server.url)
        close_pages.append(app)
        answer = app.js("""async () => {
          const p = await import("./static/layout/protocol.js");
          return new Promise((resolve, reject) => {
            const w = new Worker("static/layout/layout.worker.js", {type: "module"});
            w.onerror = (e) => reject(String(e.message || e));
            w.onmessage = (e) => {
              if (e.data.type === p.FromWorker.VERSION) {
                const items = ["a", "b", "c"].map((title) => ({kind: "node", title, lines: []}));
                const edges = [0, 1, 2, 3].map((k) => ({s: 0, t: 1, label: `f32[${k}]`}));
                edges.push({s: 1, t: 2, label: ""}, {s: 0, t: 2, label: ""});
                w.postMessage(p.layoutRequest(1, 1, [{sig: "twins", items, edges}]));
              }
              if (e.data.type === p.FromWorker.RESULT) { w.terminate(); resolve(e.data.layout); }
              if (e.data.type === p.FromWorker.ERROR) { w.terminate(); reject(e.data); }
            };
            w.postMessage(p.versionRequest());
          });
        }""")
        routes = {e["e"]: e["points"] for e in answer["edges"]}
        assert sorted(routes) == [0, 1, 2, 3, 4, 5]
        assert routes[1] == routes[0] and routes[2] == routes[0] and routes[3] == routes[0]
        assert routes[4] != routes[0] and routes[5] != routes[0]
        assert not answer.get("fallback")
    finally:
        server.stop()


def test_a_container_too_big_for_elk_in_a_frame_is_laid_out_by_the_fast_layered_layout(browser, close_pages):
    """A container of FAST_ITEMS cards or more (a generate loop's 603: 11 s in ELK) comes
    back from the worker laid out by layout/layered.js (``fast``), top to bottom, every
    edge routed; a small one still goes to ELK."""
    server = ViewerServer([synthetic_capture(30)])
    server.start()
    try:
        app = open_app(browser, server.url)
        close_pages.append(app)
        got = app.js("""async () => {
          const p = await import("./static/layout/protocol.js");
          const {FAST_ITEMS} = await import("./static/layout/layered.js");
          const chain = (n, sig) => ({sig, items: Array.from({length: n}, (_, i) => ({kind: "node", title: "op" + i, lines: []})),
            edges: Array.from({length: n - 1}, (_, i) => ({s: i, t: i + 1, label: ""}))});
          return new Promise((resolve, reject) => {
            const w = new Worker("static/layout/layout.worker.js", {type: "module"});
            const results = {};
            w.onerror = (e) => reject(String(e.message || e));
            w.onmessage = (e) => {
              if (e.data.type === p.FromWorker.RESULT) results[e.data.sig] = e.data.layout;
              if (e.data.type === p.FromWorker.DONE || e.data.type === p.FromWorker.ERROR) {
                w.terminate();
                resolve({results, n: FAST_ITEMS});
              }
            };
            w.postMessage(p.layoutRequest(1, 1, [chain(12, "small"), chain(FAST_ITEMS + 50, "big")]));
          });
        }""")
        small, big = got["results"]["small"], got["results"]["big"]
        assert not small.get("fast") and big["fast"] is True
        boxes = big["boxes"]
        assert len(boxes) == got["n"] + 50
        assert all(boxes[i]["y"] + boxes[i]["h"] < boxes[i + 1]["y"] for i in range(len(boxes) - 1))
        assert sorted(e["e"] for e in big["edges"]) == list(range(len(boxes) - 1))
    finally:
        server.stop()
