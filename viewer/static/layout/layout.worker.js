// Layout Web Worker: lays out one container (the root, a group or a chunk) at a time
// with ELK's layered algorithm, off the main thread.
//
// Its messages are typed in protocol.js, which layout-client.js (the page's side) imports
// too. A request's jobs come in post-order (an expanded child's own job before its
// parent's); each job's items are cards by position (draw/card.js content, with `inner`
// for an expanded container), its edges name items by position.
//
// A newer request wins: between two jobs the worker yields to its event loop, and a
// batch whose seq is no longer the newest is abandoned ("dropped"). Finished layouts are
// cached by signature, which is the container's content (viewmodel.js display lists), so
// expanding one group only lays out that group and its ancestors, and structurally
// identical groups are laid out once.
//
// A module worker (layout-client.js starts it with {type: "module"}): cards are sized by
// the same module that draws them (draw/card.js); ELK comes through its ES-module face.

import { canvasMeasurer, charMeasurer, labelRect, measureCard, screenCard } from "../draw/card.js";
import { ToWorker, done, dropped, layoutError, result, version } from "./protocol.js";
import { WRAP_PIECE_GAP, needsWrap, wrapColumns, placeColumns, topFit, cutAt, labelPoint } from "./wrap.js";
import { layeredLayout, tooBigForElk } from "./layered.js";
import { chainLayout } from "./chain.js";
import { CHAIN_OPTIONS, COLUMN_OPTIONS, DENSE, DENSE_COLUMN_OPTIONS, DENSE_OPTIONS, LAYOUT_OPTIONS, PADDING } from "./elk-options.js";

/**
 * @typedef {import("./protocol.js").LayoutJob} LayoutJob
 * @typedef {import("./protocol.js").Layout} Layout
 * @typedef {import("./protocol.js").LayoutEdge} LayoutEdge
 * @typedef {import("./protocol.js").JobEdge} JobEdge
 * @typedef {import("./protocol.js").LabelSpot} LabelSpot
 * @typedef {import("./protocol.js").LayoutRequest} LayoutRequest
 * @typedef {import("./protocol.js").Box} Box
 * @typedef {import("./protocol.js").Size} Size
 * @typedef {import("../draw/card.js").Measurer} Measurer
 * @typedef {import("../vendor/elk.js").ElkNode} ElkNode
 * @typedef {import("../vendor/elk.js").ElkEdge} ElkEdge
 */

/**
 * A node of ELK's answer: laid out, so placed and sized.
 * @typedef {{id: string, x: number, y: number, width: number, height: number}} LaidNode
 */

/**
 * One container as ELK's graph, its cards' sizes, and its edges ELK was not given:
 * [edge, the edge between the same two items that was given] (they share its route).
 * @typedef {{graph: ElkNode, sizes: Size[], twins: [number, number][]}} Built
 */

// ELK as a library, in this thread, loaded when first needed (loadElk): a container that
// is one chain is laid out without it (chain.js: ELK's own answer for a chain), and the
// first view of a deep model is a few chains, so its first paint does not wait for ELK's
// 1.6 MB to be fetched, parsed and warmed up (0.3 s on an idle machine, up to a second
// beside a busy server), nor share the machine with that work. After a request is done,
// ELK loads anyway (ELK_AFTER_MS later: the page paints meanwhile), so that the next
// container that needs it does not wait.
/** @type {Promise<import("../vendor/elk.js").ElkApi> | null} */
let elkLoading = null;
let ELK_VERSION = "";
const ELK_AFTER_MS = 100;

/** @returns {Promise<import("../vendor/elk.js").ElkApi>} */
function loadElk() {
  if (!elkLoading) {
    elkLoading = import("../vendor/elk.js").then((m) => {
      // `new ELK()` without a workerUrl runs ELK's own in-thread "fake worker". Seeing a
      // worker global, the bundle sets `self.onmessage` to a dispatcher of its own: this
      // file's handler is put back (no message is handled in between: this runs as a
      // microtask of the import, messages are tasks).
      const elk = new m.default();
      self.onmessage = handler;
      ELK_VERSION = m.ELK_VERSION;
      // Warm ELK's code paths once, before the first container that needs it.
      elk.layout({ id: "warm", layoutOptions: { "elk.algorithm": "layered" }, children: [{ id: "a", width: 10, height: 10 }, { id: "b", width: 10, height: 10 }], edges: [{ id: "e", sources: ["a"], targets: ["b"] }] }).catch(() => {});
      return elk;
    }, (err) => {
      elkLoading = null; // asked again by the next container that needs it
      throw err;
    });
  }
  return elkLoading;
}

/** @type {Map<string, Layout>} */
const cache = new Map(); // sig -> layout (bounded, oldest evicted)
const CACHE_MAX = 4000;
let newestSeq = -1;
let running = false;
/** @type {LayoutRequest | null} */
let pending = null;

// Text is measured in this thread's own canvas, in the fonts the page draws with.
/** @type {Measurer} */
let measure = charMeasurer;
try {
  measure = canvasMeasurer(/** @type {OffscreenCanvasRenderingContext2D} */ (new OffscreenCanvas(8, 8).getContext("2d")));
} catch {
  measure = charMeasurer;
}


const ROW_OPTIONS = { ...LAYOUT_OPTIONS, "elk.separateConnectedComponents": "false" };
const STRAIGHT = { "elk.layered.priority.straightness": "1000" };
/** @type {Map<object, Record<string, string>>} */
const DENSE_OF = new Map([
  [ROW_OPTIONS, { ...ROW_OPTIONS, ...DENSE }],
  [COLUMN_OPTIONS, DENSE_COLUMN_OPTIONS],
  [LAYOUT_OPTIONS, DENSE_OPTIONS],
]);

// Each card's size; laid out for the screen, an op card holds its far name (card.js screenCard).
/** @param {LayoutJob} job */
function cardSizes(job) {
  return job.items.map((item) => (job.wrap ? screenCard(item, measureCard(item, measure), measure) : measureCard(item, measure)));
}

// One container as an ELK graph: items by position ("i0"…), edges by position ("e0"…).
/**
 * @param {LayoutJob} job
 * @param {string} id  the prefix of its ids ("" alone, `b3` in a batch)
 * @returns {Built}
 */
function elkGraph(job, id) {
  const sizes = cardSizes(job);
  const children = sizes.map((s, i) => ({ id: `${id}i${i}`, width: s.w, height: s.h }));
  // The blocks of one unfolded stack (viewmodel.js columnsOf) stand in one column: the
  // edges from each block to the next are the ones to draw straight, and the placement
  // that weighs straightness (network simplex) places them, instead of the blocks
  // drifting sideways one step per block along a fan-out (Llama's rotary cos/sin).
  /** @type {Set<string>} */
  const next = new Set();
  for (const col of job.columns || []) for (let k = 0; k + 1 < col.length; k++) next.add(`${col[k]}>${col[k + 1]}`);
  // Edges between the same two items (a KV cache's 192 tensors from one decoding step to
  // the next) go to ELK once and share that route: ELK routes each edge it is given in its
  // own lane, which for a generate loop made 2,422 edges of 703 pairs and a 45 s layout.
  /** @type {ElkEdge[]} */
  const edges = [];
  /** @type {Map<string, number>} */
  const firstOf = new Map();
  /** @type {[number, number][]} */
  const twins = []; // [edge, the edge of the same pair given to ELK]
  job.edges.forEach((e, i) => {
    if (e.s === e.t || !sizes[e.s] || !sizes[e.t]) return;
    const pair = `${e.s}>${e.t}`;
    const first = firstOf.get(pair);
    if (first !== undefined) {
      twins.push([i, first]);
      return;
    }
    firstOf.set(pair, i);
    /** @type {ElkEdge} */
    const edge = { id: `${id}e${i}`, sources: [`${id}i${e.s}`], targets: [`${id}i${e.t}`] };
    if (next.has(`${e.s}>${e.t}`)) edge.layoutOptions = STRAIGHT;
    edges.push(edge);
  });
  // A row job (the bodies of a control-flow boundary: branches side by side) keeps its
  // unconnected items in one layer instead of packing them as separate components.
  const base = job.row ? ROW_OPTIONS : next.size ? COLUMN_OPTIONS : LAYOUT_OPTIONS;
  const layoutOptions = job.wrap ? DENSE_OF.get(base) : base;
  return { graph: { id, layoutOptions, children, edges }, sizes, twins };
}

// ELK's answer for one container (coordinates relative to it) → the layout message.
/**
 * @param {ElkNode} out
 * @param {string} prefix
 * @param {number} count  the container's items
 * @param {[number, number][]} twins
 * @returns {Layout}
 */
function readLayout(out, prefix, count, twins) {
  /** @type {Box[]} */
  const boxes = new Array(count);
  let w = 0;
  let h = 0;
  for (const c of /** @type {LaidNode[]} */ (out.children)) {
    boxes[Number(c.id.slice(prefix.length + 1))] = { x: c.x, y: c.y, w: c.width, h: c.height };
    w = Math.max(w, c.x + c.width);
    h = Math.max(h, c.y + c.height);
  }
  /** @type {LayoutEdge[]} */
  const routed = [];
  for (const e of out.edges || []) {
    /** @type {number[][]} */
    const points = [];
    for (const s of e.sections || []) {
      points.push([s.startPoint.x, s.startPoint.y]);
      for (const b of s.bendPoints || []) points.push([b.x, b.y]);
      points.push([s.endPoint.x, s.endPoint.y]);
    }
    if (points.length < 2) continue;
    for (const [px, py] of points) {
      w = Math.max(w, px);
      h = Math.max(h, py);
    }
    routed.push({ e: Number(e.id.slice(prefix.length + 1)), points, labelAt: labelPoint(points) });
  }
  if (twins.length) {
    const byEdge = new Map(routed.map((r) => [r.e, r]));
    for (const [i, first] of twins) {
      const r = byEdge.get(first);
      if (r) routed.push({ e: i, points: r.points.map((p) => [...p]), labelAt: r.labelAt });
    }
  }
  return { w: Math.ceil(w + 10), h: Math.ceil(h + 10), boxes, edges: routed };
}

/**
 * @param {LayoutJob} job
 * @returns {Promise<Layout>}
 */
async function layoutJob(job) {
  const laid = await elkLayout(job);
  if (!laid.layout) return finish(job, fallbackLayout(job, laid.sizes));
  return finish(job, (await wrapped(job, laid.layout)) || laid.layout, true);
}

// One job laid out by ELK in one run, the blocks of a stack in one line (before any
// wrapping); `layout` null when ELK refuses it (the caller falls back). A job too big for
// ELK within a frame's budget (a generate loop's 603 cards: 11 s) is laid out by the fast
// layered layout instead (layered.js: tens of milliseconds, the same shape).
/**
 * @param {LayoutJob} job
 * @returns {Promise<{layout: Layout | null, sizes: Size[]}>}
 */
async function elkLayout(job) {
  if (tooBigForElk(job)) {
    const sizes = cardSizes(job);
    const layout = layeredLayout(job, sizes);
    alignColumns(job, layout);
    return { layout, sizes };
  }
  const { graph, sizes, twins } = elkGraph(job, "");
  const chain = CHAIN_OPTIONS.get(/** @type {object} */ (graph.layoutOptions));
  let out = chain ? chainLayout(graph, PADDING, chain[0], chain[1]) : null;
  try {
    out = out || (await (await loadElk()).layout(graph, { logging: false, measureExecutionTime: false }));
  } catch {
    return { layout: null, sizes };
  }
  const layout = readLayout(out, "", sizes.length, twins);
  alignColumns(job, layout);
  return { layout, sizes };
}


/**
 * @param {LayoutJob} job
 * @param {Layout} layout
 * @returns {Promise<Layout | null>}
 */
async function wrapped(job, layout) {
  if (!needsWrap(job, layout)) return null;
  const wrap = /** @type {Size & {top?: boolean, around?: Size}} */ (job.wrap);
  const best = wrapColumns(job, layout, wrap);
  const lines = best && cutAt.get(best);
  if (!best || !lines) return best;
  // Each column laid out again on its own: the one run kept room beside its cards for the
  // edges that now go to another column (Llama's attention mask, from the stem to every
  // layer, took a fifth of each column's width), and small ops stood in lanes of their own.
  const again = await relaidColumns(job, layout, lines);
  if (!again) return best;
  // The view's outermost chain: the one Fit shows larger; a container inside it: the
  // smaller one. (Laying out again the next few ways too changed no real capture's Fit,
  // at twice Expand all's time.)
  if (wrap.top) return topFit(again, wrap) > topFit(best, wrap) ? again : best;
  return again.w * again.h < best.w * best.h ? again : best;
}

// The run cut at `lines`, each piece laid out by ELK on its own (its cards and the edges
// between them), the pieces stacked in order into one run again and cut between them
// (placeColumns routes the edges from one piece to another). Null when ELK refuses one.
/**
 * @param {LayoutJob} job
 * @param {Layout} layout  the one run
 * @param {number[]} lines
 * @returns {Promise<Layout | null>}
 */
async function relaidColumns(job, layout, lines) {
  const segOf = (/** @type {number} */ y) => {
    let k = 0;
    while (k < lines.length && y > lines[k]) k++;
    return k;
  };
  const seg = layout.boxes.map((b) => (b ? segOf(b.y + b.h / 2) : -1));
  /** @type {Box[]} */
  const boxes = new Array(job.items.length);
  /** @type {LayoutEdge[]} */
  const edges = [];
  /** @type {number[]} */
  const cuts = [];
  let y = 0;
  let w = 0;
  for (let k = 0; k <= lines.length; k++) {
    /** @type {number[]} */
    const idx = [];
    seg.forEach((s, i) => {
      if (s === k) idx.push(i);
    });
    if (!idx.length) continue;
    const pos = new Map(idx.map((i, j) => [i, j]));
    /** @type {number[]} */
    const edgeOf = [];
    /** @type {JobEdge[]} */
    const inner = [];
    job.edges.forEach((e, i) => {
      const s = pos.get(e.s);
      const t = pos.get(e.t);
      if (s === undefined || t === undefined) return;
      edgeOf.push(i);
      inner.push({ ...e, s, t });
    });
    const columns = (job.columns || []).map((col) => col.filter((i) => pos.has(i)).map((i) => /** @type {number} */ (pos.get(i))))
      .filter((col) => col.length > 1);
    /** @type {LayoutJob} */
    const piece = { ...job, items: idx.map((i) => job.items[i]), edges: inner, columns };
    const laid = (await elkLayout(piece)).layout;
    if (!laid) return null;
    if (y > 0) cuts.push(y - WRAP_PIECE_GAP / 2);
    laid.boxes.forEach((b, j) => {
      if (b) boxes[idx[j]] = { ...b, y: b.y + y };
    });
    for (const le of laid.edges) {
      const points = le.points.map(([px, py]) => [px, py + y]);
      edges.push({ e: edgeOf[le.e], points, labelAt: labelPoint(points) });
    }
    w = Math.max(w, laid.w);
    y += laid.h + WRAP_PIECE_GAP;
  }
  // The edges between pieces: placeColumns routes them again from the boxes alone.
  job.edges.forEach((e, i) => {
    if (seg[e.s] >= 0 && seg[e.t] >= 0 && seg[e.s] !== seg[e.t]) edges.push({ e: i, points: [[0, 0], [0, 0]], labelAt: null });
  });
  return placeColumns(job, { w, h: y, boxes, edges }, cuts);
}

// What the worker adds to ELK's answer: edge labels placed where they fit.
/**
 * @param {LayoutJob} job
 * @param {Layout} layout
 * @param {boolean} [aligned]  alignColumns ran already
 * @returns {Layout}
 */
function finish(job, layout, aligned = false) {
  if (!aligned) alignColumns(job, layout);
  placeLabels(job, layout);
  return layout;
}

// The blocks of one column centred under the first one. ELK draws the edge from a wide
// block to the next straight wherever the two overlap, so each block may still sit a step
// to the side of the one before it (a staircase down the model); each is moved across to
// the first one's centre, unless it would then cover another card, and the ends of its
// edges move with it (a jog half-way along the edge keeps them orthogonal).
/**
 * @param {LayoutJob} job
 * @param {Layout} layout
 */
// eslint-disable-next-line complexity -- straightens each edge end by end, one case per kind of bend
function alignColumns(job, layout) {
  const boxes = layout.boxes;
  for (const col of job.columns || []) {
    const members = new Set(col);
    const at = col.filter((i) => boxes[i]);
    if (at.length < 2) continue;
    // The cards a block must not cover: those outside its column (read once per column,
    // not per try: a 400-layer chunk's column took half a second to align otherwise).
    /** @type {Box[]} */
    const others = [];
    boxes.forEach((o, j) => {
      if (o && !members.has(j)) others.push(o);
    });
    // Where a block would stand centred on `centre`: null when it would cover a card.
    /**
     * @param {number} i
     * @param {number} centre
     * @returns {Box | null}
     */
    const place = (i, centre) => {
      const b = boxes[i];
      const moved = { ...b, x: b.x + centre - (b.x + b.w / 2) };
      if (moved.x < 0 || others.some((o) => meets(moved, o))) return null;
      return moved;
    };
    // The centre most blocks can stand on (one of theirs; the first one's on a tie; each
    // centre counted once: the blocks of a chain mostly share one).
    let best = 0; // set by the first block: every block fits at least 0
    let most = -1;
    const tried = new Set();
    for (const i of at) {
      const centre = boxes[i].x + boxes[i].w / 2;
      if (tried.has(centre)) continue;
      tried.add(centre);
      const fits = at.filter((j) => place(j, centre)).length;
      if (fits > most) [best, most] = [centre, fits];
    }
    for (const i of at) {
      const dx = best - (boxes[i].x + boxes[i].w / 2);
      const moved = Math.abs(dx) >= 1 && place(i, best);
      if (!moved) continue;
      boxes[i] = moved;
      for (const le of layout.edges) {
        const je = job.edges[le.e];
        if (!je) continue;
        if (je.t === i) le.points = shiftEnd(le.points, dx, false);
        if (je.s === i) le.points = shiftEnd(le.points, dx, true);
        le.labelAt = labelPoint(le.points);
      }
    }
  }
  let w = 0;
  for (const b of boxes) if (b) w = Math.max(w, b.x + b.w);
  for (const le of layout.edges) for (const [x] of le.points) w = Math.max(w, x);
  layout.w = Math.max(layout.w, Math.ceil(w + 10));
}

// An edge's points with its first (atStart) or last point moved by dx, orthogonal again:
// the segment into the moved end keeps its direction, with a jog half-way along it.
/**
 * @param {number[][]} points
 * @param {number} dx
 * @param {boolean} atStart
 * @returns {number[][]}
 */
function shiftEnd(points, dx, atStart) {
  const pts = atStart ? points.slice().reverse() : points.slice();
  const n = pts.length;
  const end = [pts[n - 1][0] + dx, pts[n - 1][1]];
  const prev = pts[n - 2];
  let out;
  if (prev[0] === pts[n - 1][0] && n === 2) {
    const mid = (prev[1] + end[1]) / 2;
    out = [prev, [prev[0], mid], [end[0], mid], end];
  } else if (prev[0] === pts[n - 1][0]) {
    // the last run is vertical: move it, and the horizontal run before it now ends there
    out = pts.slice(0, n - 2).concat([[prev[0] + dx, prev[1]], end]);
  } else {
    out = pts.slice(0, n - 1).concat([end]);
  }
  return atStart ? out.reverse() : out;
}

// Edge labels (the value's shape) placed beside their edge where they cover no card and
// no other label: beside the longest vertical runs first, then above horizontal ones; a
// label with no room anywhere is shortened (the dtype dropped), then left out (the shape
// still shows when the pointer is on the edge). One label per value leaving an item (the
// rest of its fan-out says the same), none on edges from an input pill or into an output
// pill (the pill says it).
/**
 * @param {LayoutJob} job
 * @param {Layout} layout
 */
function placeLabels(job, layout) {
  const cards = layout.boxes.filter(Boolean);
  /** @type {Box[]} */
  const placed = [];
  /** @type {Set<string>} */
  const labelled = new Set();
  const free = (/** @type {Box} */ r) => r.x >= 0 && r.y >= 0 && !cards.some((b) => meets(r, b)) && !placed.some((b) => meets(r, b));
  for (const le of layout.edges) {
    const je = job.edges[le.e];
    if (!je || !je.label) continue;
    const from = job.items[je.s];
    const to = job.items[je.t];
    if (!from || !to || from.kind === "in" || to.kind === "out") continue;
    const once = `${je.s}|${je.label}`;
    if (labelled.has(once)) continue;
    for (const text of [je.label, shortLabel(je.label)]) {
      if (!text) continue;
      const spot = labelSpot(le.points, text, measure.width(text, "fontLabel"), free);
      if (spot) {
        le.label = spot;
        placed.push(labelRect(spot));
        labelled.add(once);
        break;
      }
    }
  }
}

/** @param {Box} a @param {Box} b */
const meets = (a, b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
const FRACTIONS = [0.5, 0.3, 0.7, 0.15, 0.85];

// A free place for a label of width `w` along an edge's points, or null.
/**
 * @param {number[][]} points
 * @param {string} text
 * @param {number} w
 * @param {(r: Box) => boolean} free
 * @returns {LabelSpot | null}
 */
function labelSpot(points, text, w, free) {
  const segs = [];
  for (let i = 0; i + 1 < points.length; i++) {
    const [x1, y1] = points[i];
    const [x2, y2] = points[i + 1];
    segs.push({ x1, y1, x2, y2, vertical: x1 === x2, len: Math.abs(y2 - y1) + Math.abs(x2 - x1) });
  }
  segs.sort((a, b) => (Number(b.vertical) - Number(a.vertical)) || (b.len - a.len));
  for (const sg of segs) {
    if (sg.vertical) {
      if (sg.len < 22) continue;
      for (const f of FRACTIONS) {
        const y = sg.y1 + (sg.y2 - sg.y1) * f;
        for (const x of [sg.x1 + 5, sg.x1 - 5 - w]) {
          const spot = { text, x, y, w };
          if (free(labelRect(spot))) return spot;
        }
      }
    } else if (sg.len >= w + 12) {
      const x = (sg.x1 + sg.x2) / 2 - w / 2;
      for (const y of [sg.y1 - 10, sg.y1 + 10]) {
        const spot = { text, x, y, w };
        if (free(labelRect(spot))) return spot;
      }
    }
  }
  return null;
}

// A label that does not fit whole: its shape without the dtype (`[768,2304]`), or nothing.
/** @param {string} label */
function shortLabel(label) {
  const i = label.indexOf("[");
  return i > 0 ? label.slice(i) : "";
}

// Many small containers in one ELK call: each is its own child graph, laid out on its own
// (SEPARATE_CHILDREN), so a batch costs ELK's fixed overhead once instead of per container
// (about half the time of separate calls for 12-item graphs). null when ELK refuses the
// batch: its jobs are then laid out one by one.
/**
 * @param {LayoutJob[]} jobs
 * @returns {Promise<Layout[] | null>}
 */
async function layoutBatch(jobs) {
  const built = jobs.map((job, k) => elkGraph(job, `b${k}`));
  let out;
  try {
    out = await (await loadElk()).layout(
      { id: "batch", layoutOptions: { "elk.algorithm": "fixed", "elk.hierarchyHandling": "SEPARATE_CHILDREN" }, children: built.map((b) => b.graph) },
      { logging: false, measureExecutionTime: false }
    );
  } catch {
    return null;
  }
  const byId = new Map(/** @type {ElkNode[]} */ (out.children).map((c) => [c.id, c]));
  return built.map((b, k) => readLayout(/** @type {ElkNode} */ (byId.get(`b${k}`)), `b${k}`, b.sizes.length, b.twins));
}

// Used only if ELK rejects a graph: program order, top to bottom, never an empty view.
/**
 * @param {LayoutJob} job
 * @param {Size[]} sizes
 * @returns {Layout}
 */
function fallbackLayout(job, sizes) {
  /** @type {Box[]} */
  const boxes = [];
  let y = 10;
  let w = 0;
  for (const s of sizes) {
    boxes.push({ x: 10, y, w: s.w, h: s.h });
    y += s.h + 30;
    w = Math.max(w, s.w + 20);
  }
  /** @type {LayoutEdge[]} */
  const edges = [];
  job.edges.forEach((e, i) => {
    const a = boxes[e.s];
    const b = boxes[e.t];
    if (!a || !b || a === b) return;
    const p = [[a.x + a.w / 2, a.y + a.h], [b.x + b.w / 2, b.y]];
    edges.push({ e: i, points: p, labelAt: [(p[0][0] + p[1][0]) / 2, (p[0][1] + p[1][1]) / 2] });
  });
  return { w, h: y, boxes, edges, fallback: true };
}

/**
 * @param {string} sig
 * @param {Layout} layout
 */
function remember(sig, layout) {
  if (cache.has(sig)) cache.delete(sig);
  cache.set(sig, layout);
  if (cache.size > CACHE_MAX) cache.delete(/** @type {string} */ (cache.keys().next().value));
}

const yieldToEvents = () => new Promise((resolve) => setTimeout(resolve, 0));

const BATCH_ITEMS = 40; // containers up to this many items are batched
const BATCH_TOTAL = 800; // items in one batch at most

/** @param {LayoutRequest} request */
// eslint-disable-next-line complexity -- the worker's batch loop: cache, batch, wrap, finish, yield to a newer request
async function run(request) {
  const t0 = performance.now();
  const jobs = request.jobs;
  let i = 0;
  while (i < jobs.length) {
    if (request.seq !== newestSeq) {
      self.postMessage(dropped(request.seq, request.chunk));
      return;
    }
    const job = jobs[i];
    const j0 = performance.now();
    let layout = cache.get(job.sig);
    if (layout) {
      self.postMessage(result(request.seq, job.sig, layout, 0));
      i++;
      continue;
    }
    // Consecutive small jobs whose children are laid out already go to ELK together.
    /** @type {LayoutJob[]} */
    const batch = [];
    let total = 0;
    for (let k = i; k < jobs.length && batch.length < 256; k++) {
      const next = jobs[k];
      if (next.items.length > BATCH_ITEMS || total + next.items.length > BATCH_TOTAL || cache.has(next.sig) || isChain(next)) break;
      batch.push(next);
      total += next.items.length;
    }
    const layouts = batch.length > 1 ? await layoutBatch(batch) : null;
    if (layouts) {
      for (let k = 0; k < batch.length; k++) {
        alignColumns(batch[k], layouts[k]);
        // A batched container taller than the screen: cut into columns.
        const w = await wrapped(batch[k], layouts[k]);
        if (w) layouts[k] = w;
      }
      layouts.forEach((l, k) => finish(batch[k], l, true));
      const ms = (performance.now() - j0) / batch.length;
      batch.forEach((b, k) => {
        remember(b.sig, layouts[k]);
        self.postMessage(result(request.seq, b.sig, layouts[k], ms));
      });
      i += batch.length;
    } else {
      try {
        layout = await layoutJob(job);
        remember(job.sig, layout);
        self.postMessage(result(request.seq, job.sig, layout, performance.now() - j0));
      } catch (err) {
        // Never leave a container without a layout (its parent waits for its size): the
        // plain one, unless even that fails.
        try {
          layout = finish(job, fallbackLayout(job, job.items.map((item) => measureCard(item, measure))));
          remember(job.sig, layout);
          self.postMessage(result(request.seq, job.sig, layout, performance.now() - j0));
        } catch {
          self.postMessage(layoutError(request.seq, job.sig, String(err && /** @type {Error} */ (err).message || err)));
        }
      }
      i++;
    }
    await yieldToEvents(); // let a newer request arrive and win
  }
  self.postMessage(done(request.seq, request.chunk, performance.now() - t0));
  if (!elkLoading) setTimeout(() => loadElk().catch(() => {}), ELK_AFTER_MS); // a container that needs it says so
}

// Whether a job is laid out as a chain, without ELK (elkLayout): its edges first (each item
// wired to the next and nothing else, with options chain.js reproduces: CHAIN_OPTIONS),
// its cards measured only then (a batch of Expand all's small containers is not measured
// twice).
/** @param {LayoutJob} job */
function isChain(job) {
  const n = job.items.length;
  if (n === 0 || job.row || tooBigForElk(job)) return false;
  /** @type {Set<number>} */
  const from = new Set();
  for (const e of job.edges) {
    if (e.s === e.t) continue;
    if (e.t !== e.s + 1 || e.t >= n) return false;
    from.add(e.s);
  }
  if (from.size !== n - 1) return false;
  const { graph } = elkGraph(job, "");
  const chain = CHAIN_OPTIONS.get(/** @type {object} */ (graph.layoutOptions));
  return !!chain && chainLayout(graph, PADDING, chain[0], chain[1]) !== null;
}

async function pump() {
  if (running) return;
  running = true;
  while (pending) {
    const request = pending;
    pending = null;
    await run(request);
  }
  running = false;
}

/** @param {MessageEvent} event */
function handler(event) {
  const msg = event.data;
  if (msg && msg.type === ToWorker.LAYOUT) {
    newestSeq = Math.max(newestSeq, msg.seq);
    if (pending) self.postMessage(dropped(pending.seq, pending.chunk));
    pending = msg;
    pump();
  } else if (msg && msg.type === ToWorker.VERSION) {
    // Which ELK answered: the test that an upgrade did not break the worker reads it.
    loadElk().then(() => self.postMessage(version(ELK_VERSION, self.onmessage === handler)));
  }
}
self.onmessage = handler;
