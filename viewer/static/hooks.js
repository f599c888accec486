// `window.tensorviz`: what the browser tests and benchmarks read and do (README "Hooks").
// Read-only views of the store, the renderer and the layout client, and the same actions a
// person's clicks and keys take; no behaviour hides here.

import { CARD_STYLE, canvasMeasurer, drawCard, labelRect, measureCard, screenCard } from "./draw/card.js";

/**
 * @typedef {import("./draw/renderer.js").Renderer} Renderer
 * @typedef {import("./draw/renderer.js").Scene} RendererScene
 * @typedef {import("./draw/card.js").SceneItem} SceneItem
 * @typedef {import("./draw/card.js").CardPrims} CardPrims
 * @typedef {import("./draw/card.js").CardContent} CardContent
 * @typedef {import("./layout/protocol.js").LabelSpot} LabelSpot
 * @typedef {import("./layout/protocol.js").Size} Size
 */

/**
 * The server's record behind a scene item, as itemInfo reads it: a page item (api.js), a
 * boundary value (`name`, `role`, `weight`: viewmodel.js boundaryItem) or a stack
 * (`members`, `period`: viewmodel.js stackItem); an op card's weights by name.
 * @typedef {import("./api.js").PageItem & {name?: string, role?: string, weight?: boolean, members?: string[],
 *   period?: number, weights?: {name: string}[], single?: {weights?: {name: string}[]}}} ItemRecord
 */

/**
 * The scene the view model composed (model/viewmodel.js compose(); its types:
 * model/view-types.js): each container keyed, each item knowing its container
 * (`parentKey`), each edge with its full label beside the one laid out (`labelBox`).
 * @typedef {import("./model/view-types.js").Scene} ModelScene
 * @typedef {import("./model/view-types.js").SceneContainer} ModelContainer
 */

/**
 * An edge label as edgeLabels lists it: its text as laid out, the full label, its box (world).
 * @typedef {{text: string, full: string | undefined, x: number, y: number, w: number, h: number}} EdgeLabel
 */

/**
 * The renderer's scene (draw/renderer.js) as composed (model/viewmodel.js compose()): it
 * counts its items, and an open item's inside has its size.
 * @typedef {import("./draw/drawlist.js").DrawItem & {expanded?: (import("./draw/drawlist.js").DrawContainer & Size) | null}} DrawnItem
 * @typedef {Omit<RendererScene, "byKey"> & {byKey: Map<string, DrawnItem>, count: number}} DrawnScene
 */

/**
 * What the hooks read of the view model (model/viewmodel.js GraphModel): its scene and
 * memory of group paths, and the figures benchmarks read (`timings`: ms per phase, copied
 * whole).
 * @typedef {object} HooksModel
 * @property {ModelScene | null} scene
 * @property {Map<string, string>} paths  container key -> group path ("Wrapped/gpt/h.3")
 * @property {Iterable<string>} expanded  the open containers' keys
 * @property {number} version
 * @property {number} lastLayoutMs
 * @property {object} timings
 * @property {unknown[]} timingLog
 * @property {() => string[]} estimatedKeys
 * @property {(x: number, y: number, tol: number) => unknown} edgeAt  the edge near a world point
 */

/**
 * What the hooks read of the viewer's store (model/store.js); the store itself is handed
 * to the tests as it is.
 * @typedef {object} HooksStore
 * @property {HooksModel | null} model
 * @property {boolean} ready
 * @property {unknown} error
 * @property {string | null} selected
 * @property {Set<string> | null} multi
 * @property {number} liveUpdates
 * @property {{id: unknown} | null} capture
 * @property {boolean} weightPills
 * @property {boolean} kernels
 * @property {boolean} perDevice
 */

/**
 * What the hooks use of the cost panel (panels/cost.js).
 * @typedef {object} HooksCost
 * @property {() => void} open
 * @property {() => unknown} refresh
 * @property {() => unknown} rowsShown
 * @property {(metric: string | null) => unknown} setHeat
 * @property {(name: string) => unknown} setDevice
 */

/**
 * The page's named actions (app.js), the same a person's clicks and keys take; each
 * answers what the action answers (a promise resolving once laid out).
 * @typedef {object} HooksActions
 * @property {(key: string) => unknown} toggle
 * @property {(options?: {wrap?: boolean}) => unknown} expandAll
 * @property {() => unknown} collapseAll
 * @property {(n: number) => unknown} expandToDepth
 * @property {(on: boolean) => unknown} setWeightPills
 * @property {(on: boolean) => unknown} setKernels
 * @property {(on: boolean) => unknown} setPerDevice
 */

/**
 * The page's parts (app.js); the renderer, the settler and the diff panel exist once a
 * graph can be drawn (null before, and on a failure or setup page).
 * @typedef {object} HooksPage
 * @property {HooksStore} store
 * @property {import("./layout/layout-client.js").LayoutClient} layout
 * @property {() => Renderer | null} renderer
 * @property {() => import("./layout/settle.js").Settler | null} settler
 * @property {import("./panels/lines.js").LinesPanel} lines
 * @property {import("./panels/search.js").SearchPanel} search
 * @property {() => import("./panels/diff.js").DiffPanel | null} diff
 * @property {HooksCost | null} [cost]
 * @property {HooksActions} actions
 * @property {object} marks  performance.now() of the page's milestones, by name (app.js fills it; handed on as is)
 */

/** @param {HooksPage} page */
export function installHooks(page) {
  const { store, layout, lines, search, actions, cost } = page;
  const r = () => page.renderer();
  const drawn = (/** @type {Renderer} */ rr) => /** @type {DrawnScene | null} */ (rr.scene);
  /** @param {string} key */
  const inScene = (key) => {
    const rr = r();
    const scene = rr && drawn(rr);
    return (scene && scene.byKey.get(key)) || null;
  };
  // What `act` answers of the renderer, or null before a graph is drawn.
  /**
   * @template T
   * @param {(rr: Renderer) => T} act
   */
  const withRenderer = (act) => {
    const rr = r();
    return rr && act(rr);
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
      setHeat: (/** @type {string | null} */ metric) => cost.setHeat(metric),
      setDevice: (/** @type {string} */ name) => cost.setDevice(name),
      heatOf: (/** @type {string} */ key) => {
        const rr = r();
        const it = rr && rr.scene && rr.scene.byKey.get(key);
        return rr && it && rr.env.heat ? rr.env.heat(it) : null;
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
      const rr = r();
      return rr ? rr.firstPaintAt : null;
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
      const rr = r();
      return rr ? { ...rr.cam } : null;
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
      const scene = rr && drawn(rr);
      return rr && scene ? { items: scene.count, w: scene.w, h: scene.h, drawn: rr.stats, drawMs: rr.drawMs.slice(-120) } : null;
    },
    // The on-screen rectangle (CSS px, relative to the canvas) of an item, if laid out.
    /** @param {string} key */
    itemRect(key) {
      const rr = r();
      const it = inScene(key);
      if (!rr || !it) return null;
      const [x, y] = rr.toScreen(it.x, it.y);
      return { x, y, w: it.w * rr.cam.s, h: it.h * rr.cam.s };
    },
    keys() {
      const rr = r();
      return rr && rr.scene ? [...rr.scene.byKey.keys()] : [];
    },
    // Centres an item that is laid out, without selecting it.
    /** @param {string} key */
    center(key) {
      const rr = r();
      const it = inScene(key);
      if (rr && it) rr.centerOn(it);
      return !!it;
    },
    // What an item is, by meaning, for tests that check layout: kind ("node" | "group" |
    // "chunk" | "stack" | "in" | "out"), name (op, group name, value name), path (the group
    // path, "Wrapped/gpt/transformer/h.3"), role (a boundary value's role; a group's class).
    /** @param {string} key */
    // eslint-disable-next-line complexity -- the test hook's description of an item, one field per fact
    itemInfo(key) {
      const m = store.model;
      const it = m && m.scene && m.scene.byKey.get(key);
      if (!m || !it) return null;
      const item = /** @type {ItemRecord} */ (it.item || {});
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
    /** @param {string} key */
    card(key) {
      const rr = r();
      const it = inScene(key);
      if (!rr || !it) return null;
      // A frame is measured from its inside alone (measureCard reads `inner` first).
      const inside = it.expanded && /** @type {CardContent} */ ({ inner: { w: it.expanded.w, h: it.expanded.h } });
      const m = canvasMeasurer(rr.ctx);
      const size = measureCard(inside || it.card, m);
      // laid out for the screen (Expand all), an op card is as wide as its far name needs
      const measured = !inside && layout.wrapping && layout.screen ? screenCard(it.card, size, m) : size;
      /** @type {CardPrims} */
      const dl = { card: [], header: null, far: null };
      drawCard(dl, it, rr.ctx, rr.palette, 2);
      /** @type {{text: string, x: number, y: number, w: number}[]} */
      const texts = [];
      /** @type {{cx: number, cy: number, r: number}[]} */
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
      /** @type {{key: string, labels: EdgeLabel[], cards: {key: string, x: number, y: number, w: number, h: number}[], unlabelled: number}[]} */
      const out = [];
      const visit = (/** @type {ModelContainer} */ c) => {
        /** @type {EdgeLabel[]} */
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
    /**
     * @param {number} x
     * @param {number} y
     */
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
    showLine: (/** @type {string} */ file, /** @type {number} */ line, /** @type {number | undefined} */ call) => lines.show(file, line, call),
    // `{wrap: false}`: laid out in one run top to bottom, as before the screen was taken
    // into account (benchmarks compare the two).
    expandAll: (/** @type {{wrap?: boolean} | undefined} */ options) => actions.expandAll(options),
    // Containers whose layout is still an estimate (out of view after Expand all), and a
    // promise that resolves once the view shows none.
    estimatedKeys: () => (store.model ? store.model.estimatedKeys() : []),
    settle: () => {
      const settler = page.settler();
      return settler ? settler.now() : Promise.resolve();
    },
    collapseAll: () => actions.collapseAll(),
    expandToDepth: (/** @type {number} */ n) => actions.expandToDepth(n),
    setWeightPills: (/** @type {boolean} */ on) => actions.setWeightPills(on),
    get weightPills() {
      return store.weightPills;
    },
    // Every kernel everywhere (the toolbar's Kernels), resolving once laid out.
    setKernels: (/** @type {boolean} */ on) => actions.setKernels(on),
    get kernels() {
      return store.kernels;
    },
    // Shapes as one device holds them (the toolbar's Per device), resolving once laid out.
    setPerDevice: (/** @type {boolean} */ on) => actions.setPerDevice(on),
    get perDevice() {
      return store.perDevice;
    },
    fit: () => withRenderer((rr) => rr.fit()),
    readable: () => withRenderer((rr) => rr.readable()),
    panBy: (/** @type {number} */ dx, /** @type {number} */ dy) => withRenderer((rr) => rr.panBy(dx, dy)),
    zoomAt: (/** @type {number} */ x, /** @type {number} */ y, /** @type {number} */ f) => withRenderer((rr) => rr.zoomAt(x, y, f, true)),
    toggle: (/** @type {string} */ key) => actions.toggle(key),
    jump: (/** @type {import("./panels/search.js").SearchResult} */ result) => search.jump(result),
    // What a boundary pill ("in:V" / "out:V") draws: its look ("input" | "quiet" | "plain"),
    // the value's role and name, and its text parts as fitted to the laid-out width.
    /** @param {string} key */
    pill(key) {
      const rr = r();
      const it = inScene(key);
      if (!rr || !it || (it.type !== "in" && it.type !== "out")) return null;
      const fit = rr.pillFit(it);
      const value = /** @type {ItemRecord} */ (it.item); // a boundary value
      return { look: it.card.look, role: it.card.role, name: value.name ?? null, texts: [...fit.texts], w: it.w, h: it.h };
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
        show: (/** @type {string | undefined} */ against) => d.show(against),
        step: (/** @type {number} */ k) => d.step(k),
        go: (/** @type {number} */ i) => d.go(i),
        hide: () => d.hide(),
      };
    },
  });
}
