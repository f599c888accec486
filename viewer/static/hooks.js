// `window.tensorviz`: what the browser tests and benchmarks read and do (README "Hooks").
// Read-only views of the store, the renderer and the layout client, and the same actions a
// person's clicks and keys take; no behaviour hides here.

import { CARD_STYLE, canvasMeasurer, drawCard, labelRect, measureCard } from "./draw/card.js";

// page: {store, layout, renderer(), settler(), lines, search, diff(), actions: {toggle,
// expandAll, collapseAll, expandToDepth, setWeightPills}, marks}
export function installHooks(page) {
  const { store, layout, lines, search, actions, cost } = page;
  const r = () => page.renderer();
  const inScene = (key) => {
    const rr = r();
    return (rr && rr.scene && rr.scene.byKey.get(key)) || null;
  };
  window.tensorviz = {
    // The viewer's state and its named actions (model/store.js): tests subscribe to its
    // change events and call its actions.
    store,
    // The cost panel (panels/cost.js): its rows as drawn, the heat map and the device, and
    // the heat colour each card is drawn with.
    cost: cost && {
      open: () => (cost.open(), cost.refresh()),
      rows: () => cost.rowsShown(),
      setHeat: (metric) => cost.setHeat(metric),
      setDevice: (name) => cost.setDevice(name),
      heatOf: (key) => {
        const rr = r();
        const it = rr && rr.scene && rr.scene.byKey.get(key);
        return it && rr.env.heat ? rr.env.heat(it) : null;
      },
    },
    marks: page.marks,
    get ready() {
      return store.ready;
    },
    get error() {
      return store.error;
    },
    get firstPaintMs() {
      return r() ? r().firstPaintAt : null;
    },
    get layoutMs() {
      return store.model ? store.model.lastLayoutMs : null;
    },
    get layoutJobs() {
      return layout.jobCount;
    },
    get layoutSuperseded() {
      return layout.superseded;
    },
    // Where the last relayout's time went (viewmodel.js timings: fetch, jobs, layout, compose…).
    get timings() {
      const m = store.model;
      return m ? { ...m.timings, log: m.timingLog.slice(), jobs: layout.recent.slice(-20) } : null;
    },
    get layoutTotalMs() {
      return layout.totalMs;
    },
    // When the first layout request went to the workers (performance.now(), from navigation).
    get layoutStartMs() {
      return layout.firstRequestAt;
    },
    get camera() {
      return r() ? { ...r().cam } : null;
    },
    get selected() {
      return store.selected;
    },
    get expanded() {
      return store.model ? [...store.model.expanded] : [];
    },
    // How many times the graph on screen was replaced in place by its recapture.
    get liveUpdates() {
      return store.liveUpdates;
    },
    get captureId() {
      return store.capture ? store.capture.id : null;
    },
    get sceneVersion() {
      return store.model ? store.model.version : 0;
    },
    sceneStats() {
      const rr = r();
      return rr && rr.scene ? { items: rr.scene.count, w: rr.scene.w, h: rr.scene.h, drawn: rr.stats, drawMs: rr.drawMs.slice(-120) } : null;
    },
    // The on-screen rectangle (CSS px, relative to the canvas) of an item, if laid out.
    itemRect(key) {
      const it = inScene(key);
      if (!it) return null;
      const [x, y] = r().toScreen(it.x, it.y);
      return { x, y, w: it.w * r().cam.s, h: it.h * r().cam.s };
    },
    keys() {
      const rr = r();
      return rr && rr.scene ? [...rr.scene.byKey.keys()] : [];
    },
    // Centres an item that is laid out, without selecting it.
    center(key) {
      const it = inScene(key);
      if (it) r().centerOn(it);
      return !!it;
    },
    // What an item is, by meaning, for tests that check layout: kind ("node" | "group" |
    // "chunk" | "stack" | "in" | "out"), name (op, group name, value name), path (the group
    // path, "Wrapped/gpt/transformer/h.3"), role (a boundary value's role; a group's class).
    itemInfo(key) {
      const m = store.model;
      const it = m && m.scene && m.scene.byKey.get(key);
      if (!it) return null;
      const item = it.item || {};
      const name = it.type === "in" || it.type === "out" ? item.name ?? null : item.label ?? null;
      const path = m.paths.get(key) ?? (m.paths.get(it.parentKey) ?? null);
      const role = it.type === "in" || it.type === "out" ? item.role ?? null : item.class ?? null;
      const weights = item.single ? item.single.weights : item.weights;
      return {
        kind: it.type, name, path, role, weight: !!item.weight,
        members: item.members ? [...item.members] : null,
        weights: (weights || []).map((w) => w.name),
        lines: [...it.card.lines], weightStart: it.card.weightStart ?? null,
        // How it is drawn (draw/card.js content): "node" | "function" (an op card) |
        // "group" | "chunk" | "stack" | "in" | "out", its title and caption (the module a
        // one-op group stands for), whether it is a frame, and the item's server card.
        card: it.card.kind, title: it.card.title, caption: it.card.caption ?? null, open: !!it.expanded,
        server: item.card ?? null, period: item.period ?? null,
      };
    },
    // A laid-out card's geometry (draw/card.js): the box the layout worker gave it, the size
    // the page measures for the same content (a frame: for its inside), what it draws at
    // readable detail (its texts, with their measured widths, and toggles, in world units)
    // and the texts its content says in full.
    card(key) {
      const rr = r();
      const it = inScene(key);
      if (!it) return null;
      const measured = measureCard(it.expanded ? { inner: { w: it.expanded.w, h: it.expanded.h } } : it.card, canvasMeasurer(rr.ctx));
      const dl = { card: [], header: null, far: null };
      drawCard(dl, it, rr.ctx, rr.palette, 2);
      const texts = [];
      const toggles = [];
      for (const q of [...dl.card, ...(dl.header || [])]) {
        if (q.t === "text") {
          rr.ctx.font = q.font;
          texts.push({ text: q.text, x: q.x, y: q.y, w: rr.ctx.measureText(q.text).width });
        } else if (q.t === "toggle") toggles.push({ cx: q.cx, cy: q.cy, r: q.r });
      }
      const c = it.card;
      return {
        kind: it.type, open: !!it.expanded, box: { x: it.x, y: it.y, w: it.w, h: it.h }, measured, texts, toggles,
        says: [c.title, c.caption, c.tag, ...c.lines, ...(c.parts || []).map((p) => p.text)].filter(Boolean),
        padX: CARD_STYLE.padX, maxWidth: CARD_STYLE.maxCardWidth, header: CARD_STYLE.groupHeader,
      };
    },
    // The edge labels laid out in the scene, per container: each label's box and text (world
    // coordinates), and the boxes of the container's cards (for overlap checks).
    edgeLabels() {
      const m = store.model;
      const out = [];
      const visit = (c) => {
        const labels = [];
        const seen = new Set();
        for (const e of c.edges) {
          if (!e.labelBox || e.source.startsWith("in:") || e.target.startsWith("out:")) continue;
          const k = e.source + "|" + e.labelBox.text;
          if (seen.has(k)) continue; // drawn once (drawlist.js)
          seen.add(k);
          const b = labelRect(e.labelBox);
          labels.push({ text: e.labelBox.text, full: e.label, x: c.x + b.x, y: c.y + b.y, w: b.w, h: b.h });
        }
        const cards = c.items.map((it) => ({ key: it.key, x: it.x, y: it.y, w: it.w, h: it.h }));
        const unlabelled = c.edges.filter((e) => e.label && !e.labelBox && !e.source.startsWith("in:") && !e.target.startsWith("out:")).length;
        out.push({ key: c.key, labels, cards, unlabelled });
        for (const it of c.items) if (it.expanded) visit(it.expanded);
      };
      if (m && m.scene) visit(m.scene.root);
      return out;
    },
    // The edge under a canvas point (CSS px), as the hover tooltip shows it.
    edgeAt(x, y) {
      const rr = r();
      if (!rr || !store.model) return null;
      const [wx, wy] = rr.toWorld(x, y);
      return store.model.edgeAt(wx, wy, 5 / rr.cam.s);
    },
    // The far names (semantic zoom) the last frame drew, all horizontal: {text, full, sub,
    // beside (over or beside the top of a frame too narrow for it), frame, op (an op
    // card's name), px (its font size, world), box (world), of (the box of the item it names)}.
    farDrawn() {
      const rr = r();
      return rr ? rr.farDrawn.map((f) => ({ ...f, box: f.box ? { ...f.box } : null })) : [];
    },
    // Show in Graph (a source line's items selected, in view) and the editor's cursor line.
    get lineShown() {
      const l = lines.line;
      return l ? { file: l.file, line: l.line, call: l.call, calls: l.calls, keys: [...l.keys], shown: l.shown } : null;
    },
    get multiSelected() {
      return store.multi ? [...store.multi] : [];
    },
    get cursorShown() {
      const c = lines.cursorShown;
      return c ? { ...c, keys: [...c.keys] } : null;
    },
    showLine: (file, line, call) => lines.show(file, line, call),
    // `{wrap: false}`: laid out in one run top to bottom, as before the screen was taken
    // into account (benchmarks compare the two).
    expandAll: (options) => actions.expandAll(options),
    // Containers whose layout is still an estimate (out of view after Expand all), and a
    // promise that resolves once the view shows none.
    estimatedKeys: () => (store.model ? store.model.estimatedKeys() : []),
    settle: () => (page.settler() ? page.settler().now() : Promise.resolve()),
    collapseAll: () => actions.collapseAll(),
    expandToDepth: (n) => actions.expandToDepth(n),
    setWeightPills: (on) => actions.setWeightPills(on),
    get weightPills() {
      return store.weightPills;
    },
    // Every kernel everywhere (the toolbar's Kernels), resolving once laid out.
    setKernels: (on) => actions.setKernels(on),
    get kernels() {
      return store.kernels;
    },
    // Shapes as one device holds them (the toolbar's Per device), resolving once laid out.
    setPerDevice: (on) => actions.setPerDevice(on),
    get perDevice() {
      return store.perDevice;
    },
    fit: () => r() && r().fit(),
    readable: () => r() && r().readable(),
    panBy: (dx, dy) => r() && r().panBy(dx, dy),
    zoomAt: (x, y, f) => r() && r().zoomAt(x, y, f, true),
    toggle: (key) => actions.toggle(key),
    jump: (result) => search.jump(result),
    // What a boundary pill ("in:V" / "out:V") draws: its look ("input" | "quiet" | "plain"),
    // the value's role and name, and its text parts as fitted to the laid-out width.
    pill(key) {
      const it = inScene(key);
      if (!it || (it.type !== "in" && it.type !== "out")) return null;
      const fit = r().pillFit(it);
      return { look: it.card.look, role: it.card.role, name: it.item.name ?? null, texts: [...fit.texts], w: it.w, h: it.h };
    },
  };
  // Diff mode (panels/diff.js), once the graph is on screen.
  Object.defineProperty(window.tensorviz, "diff", {
    get() {
      const d = page.diff();
      if (!d) return undefined;
      return {
        get active() {
          return !!d.data;
        },
        get offered() {
          return !!d.offer;
        },
        get error() {
          return d.error;
        },
        get changes() {
          return d.data ? d.data.changes.map((c) => ({ ...c })) : [];
        },
        get counts() {
          return d.data ? { ...d.data.counts } : null;
        },
        get index() {
          return d.index;
        },
        // Marks of the items now on screen: {key: status}.
        drawn: () => d.drawn(),
        show: (against) => d.show(against),
        step: (k) => d.step(k),
        go: (i) => d.go(i),
        hide: () => d.hide(),
      };
    },
  });
}
