// The column wrapping of the layout worker (layout.worker.js): a container taller than the
// screen cut between layers into columns set side by side, and the edges between columns
// routed again; moved out of layout.worker.js, which lays the pieces out again with ELK.


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

// Laid out for the screen it is shown on (job.wrap, {w, h}): a container taller than the
// screen continues in the next column, as Model Explorer splits very large groups, so that
// Fit after Expand all shows cards one can read instead of one thin column. ELK lays the
// container out in one run from top to bottom; wrapColumns then cuts that run where no
// card spans the cut (between layers, where the fewest edges cross) and sets the pieces
// side by side, left to right, each at most as tall as the screen's shape asks. An edge
// whose ends fall in different columns is routed again: down out of its column, along the
// gutter beside it, over the top, and down into its target. The cuts tried: columns of
// about equal height for each count, and columns of unequal height (any few of the cuts
// fewest edges cross). Which one is kept depends on where the container stands: the
// view's outermost chain (job.wrap.top, layout-client.js topJobs) takes the one Fit shows
// largest; a container inside it the most compact one of a shape near the screen's (its
// parent places it among others). Small containers never wrap. Laid out for the screen,
// cards also stand closer together (DENSE): at Fit the space between them is what the
// cards lose.
export const WRAP_MIN_ITEMS = 6;
export const WRAP_TALLER = 1.15; // than the screen, at readable scale
export const WRAP_MAX_COLUMNS = 16;
export const WRAP_GUTTER = 36; // between two columns, before the lanes of edges that cross
export const WRAP_LANE = 6;
export const WRAP_PIECE_GAP = 40; // between two pieces laid out again, stacked before they are set side by side
export const FIT_MARGIN = 64; // Fit's margins, 32 px a side (renderer.js fitScale)
export const FIT_HINT = 41; // the hint bar's strip at the bottom of the canvas (app.js: r.hintHeight)
export const FIT_MINIMAP = { w: 206, h: 146 }; // the minimap's corner (app.js: r.minimapBox)
export const WRAP_BAND = 2.5; // a compact container's shape: at most this much wider or taller than the screen's
export const WRAP_CANDIDATE_CUTS = 10; // the cuts fewest edges cross, tried in any combination
export const WRAP_MAX_CUTS = 4; // of them at once
export const WRAP_WORK = 400000; // items and edges placed, in all, while choosing the cuts
export const WRAP_COLUMN_COST = 0.1; // of area per column more: a column break costs the reader a jump

/**
 * @param {LayoutJob} job
 * @param {Layout} layout
 */
export function needsWrap(job, layout) {
  const wrap = job.wrap;
  if (!wrap || job.row || job.items.length < WRAP_MIN_ITEMS || layout.fallback) return false;
  return layout.h > wrap.h * WRAP_TALLER && layout.h / Math.max(1, layout.w) > (wrap.h / wrap.w) * 1.3;
}

/** @param {Size} l @param {Size} wrap */
export const fitScale = (l, wrap) => Math.min(wrap.w / Math.max(1, l.w), wrap.h / Math.max(1, l.h));

// The places a run laid out from top to bottom can be cut: gaps between cards that no
// card spans, each {y, crossing: how many edges pass it}.
/**
 * @param {LayoutJob} job
 * @param {Layout} layout
 */
export function cutLines(job, layout) {
  const boxes = layout.boxes.map((b, i) => b && { ...b, i }).filter(Boolean).sort((a, b) => a.y - b.y);
  /** @type {{y: number, crossing: number}[]} */
  const cuts = [];
  let bottom = -Infinity;
  for (const b of boxes) {
    if (bottom > -Infinity && b.y - bottom >= 12) cuts.push({ y: (bottom + b.y) / 2, crossing: 0 });
    bottom = Math.max(bottom, b.y + b.h);
  }
  for (const c of cuts) {
    for (const e of job.edges) {
      const a = layout.boxes[e.s];
      const t = layout.boxes[e.t];
      if (a && t && (a.y + a.h / 2 - c.y) * (t.y + t.h / 2 - c.y) < 0) c.crossing += 1;
    }
  }
  return cuts;
}

// The cuts for `k` columns of about equal height: near each k-th of the run, weighing
// how far from it a cut is against how many edges cross it (balanced columns first, a
// cut few edges cross where two are about as near).
/**
 * @param {{y: number, crossing: number}[]} cuts
 * @param {number} height
 * @param {number} k
 * @returns {number[]}
 */
export function cutsFor(cuts, height, k) {
  /** @type {{y: number, crossing: number}[]} */
  const chosen = [];
  const span = height / k;
  for (let j = 1; j < k; j++) {
    const want = (height * j) / k;
    const last = chosen.length ? chosen[chosen.length - 1].y : -Infinity;
    const near = cuts.filter((c) => Math.abs(c.y - want) <= span / 2 && c.y > last + 1);
    if (!near.length) continue;
    const score = (/** @type {{y: number, crossing: number}} */ c) => Math.abs(c.y - want) / span + 0.03 * c.crossing;
    near.sort((a, b) => score(a) - score(b));
    chosen.push(near[0]);
  }
  return chosen.map((c) => c.y).sort((a, b) => a - b);
}

/**
 * @param {LayoutJob} job
 * @param {Layout} layout
 * @param {Size & {top?: boolean, around?: Size}} wrap
 * @returns {Layout | null}
 */
// eslint-disable-next-line complexity -- tries each column count and set of cuts, keeping the best under one work budget
export function wrapColumns(job, layout, wrap) {
  const cuts = cutLines(job, layout);
  if (!cuts.length) return null;
  // Each candidate's size only (columnsSize: what placeColumns would answer, without
  // building its boxes and edges); the layout is built for the one kept. Building every
  // candidate (up to ~500 on a 400-layer chunk) took a third of a second per layout.
  const sizeOf = columnsSizer(job, layout);
  /** @type {ColumnsSize[]} */
  const laids = [];
  /** @type {Set<string>} */
  const tried = new Set();
  const tryLines = (/** @type {number[]} */ lines) => {
    const key = lines.join(",");
    if (!lines.length || tried.has(key)) return null;
    tried.add(key);
    const laid = sizeOf(lines);
    laids.push(laid);
    return laid;
  };
  const built = (/** @type {ColumnsSize} */ l) => {
    const laid = placeColumns(job, layout, l.lines);
    cutAt.set(laid, l.lines);
    return laid;
  };
  for (let k = 2; k <= WRAP_MAX_COLUMNS; k++) {
    const laid = tryLines(cutsFor(cuts, layout.h, k));
    if (laid && laid.h < wrap.h * 0.6) break; // shorter than the screen: more columns only widen it
  }
  // Columns of unequal height too: every choice of up to WRAP_MAX_CUTS of the cuts fewest
  // edges cross (a narrow norm in a column of its own beside a wide attention block, not
  // stacked over it with an empty stretch beside it), as many as a budget allows.
  const few = cuts.slice().sort((a, b) => a.crossing - b.crossing || a.y - b.y).slice(0, WRAP_CANDIDATE_CUTS)
    .map((c) => c.y).sort((a, b) => a - b);
  let budget = Math.max(60, Math.floor(WRAP_WORK / (job.items.length + job.edges.length + 1)));
  /** @type {(from: number, chosen: number[]) => void} */
  const choose = (from, chosen) => {
    for (let i = from; i < few.length && budget > 0; i++) {
      const lines = [...chosen, few[i]];
      budget -= 1;
      tryLines(lines);
      if (lines.length < WRAP_MAX_CUTS) choose(i + 1, lines);
    }
  };
  choose(0, []);
  if (!laids.length) return null;
  if (wrap.top) {
    // The whole view: as large as Fit can show it, in the canvas less Fit's margins (32 px
    // a side) and the hint bar's or the minimap's strip (renderer.js fitArea), with what
    // the containers around it add (topFit).
    laids.sort((a, b) => topFit(b, wrap) - topFit(a, wrap));
    return topFit(laids[0], wrap) > topFit(layout, wrap) * 1.05 ? built(laids[0]) : null;
  }
  // A container inside the view's outermost chain: as compact as it can be (the least area,
  // a column break counting WRAP_COLUMN_COST more), while its shape stays within WRAP_BAND
  // of the screen's; its parent sets it beside or below others (Llama's attention one
  // column, not two half as tall side by side, so that its decoder layer packs tighter).
  const aspect = wrap.w / wrap.h;
  const inBand = (/** @type {Size} */ l) => l.w / l.h >= aspect / WRAP_BAND && l.w / l.h <= aspect * WRAP_BAND;
  /** @type {Layout | ColumnsSize | null} */
  let best = null;
  const cost = (/** @type {Size & {wrapped?: number}} */ l) => l.w * l.h * (1 + WRAP_COLUMN_COST * ((l.wrapped || 1) - 1));
  for (const l of [layout, ...laids]) if (inBand(l) && (!best || cost(l) < cost(best))) best = l;
  if (!best) for (const l of laids) if (!best || fitScale(l, wrap) > fitScale(best, wrap)) best = l;
  return !best || best === layout ? null : built(/** @type {ColumnsSize} */ (best));
}

/** @typedef {{w: number, h: number, wrapped: number, lines: number[]}} ColumnsSize */

// Where each piece of the run cut at `lines` goes (placeColumns): the piece of each box,
// which edges cross from one piece to another, the channel over the columns, and each
// piece's shift.
/**
 * @param {LayoutJob} job
 * @param {Layout} layout
 * @param {number[]} lines
 */
function columnsPlan(job, layout, lines) {
  const segOf = (/** @type {number} */ y) => {
    let k = 0;
    while (k < lines.length && y > lines[k]) k++;
    return k;
  };
  const n = lines.length + 1;
  const boxSeg = layout.boxes.map((b) => (b ? segOf(b.y + b.h / 2) : -1));
  const crossing = job.edges.map((e) => boxSeg[e.s] >= 0 && boxSeg[e.t] >= 0 && boxSeg[e.s] !== boxSeg[e.t]);
  const lanes = Math.max(1, crossing.filter(Boolean).length);
  const top = 10 + lanes * WRAP_LANE + 12; // the channel over the columns the crossing edges take
  const extent = Array.from({ length: n }, () => ({ x0: Infinity, x1: -Infinity, y0: Infinity, y1: -Infinity }));
  layout.boxes.forEach((b, i) => {
    if (!b) return;
    const x = extent[boxSeg[i]];
    x.x0 = Math.min(x.x0, b.x);
    x.x1 = Math.max(x.x1, b.x + b.w);
    x.y0 = Math.min(x.y0, b.y);
    x.y1 = Math.max(x.y1, b.y + b.h);
  });
  // Edges inside one piece widen it where they run beside its cards.
  layout.edges.forEach((le) => {
    const je = job.edges[le.e];
    if (!je || crossing[le.e]) return;
    const x = extent[boxSeg[je.s]];
    for (const [px] of le.points) {
      x.x0 = Math.min(x.x0, px);
      x.x1 = Math.max(x.x1, px);
    }
  });
  const gutter = WRAP_GUTTER + lanes * WRAP_LANE;
  /** @type {{dx: number, dy: number, left: number, right: number, bottom: number}[]} */
  const shift = [];
  let x = 10;
  for (let k = 0; k < n; k++) {
    const e = extent[k];
    if (e.x0 === Infinity) {
      shift.push({ dx: 0, dy: 0, left: x, right: x, bottom: top });
      continue;
    }
    shift.push({ dx: x - e.x0, dy: top - e.y0, left: x, right: x + (e.x1 - e.x0), bottom: top + (e.y1 - e.y0) });
    x += e.x1 - e.x0 + gutter;
  }
  return { n, boxSeg, crossing, shift };
}

// The route of an edge from one column to another (the k-th such): from the bottom of its
// source out of the column, along the gutter beside it, over the top of the columns, and
// down into its target, one lane each, side by side. `a`, `t`: its ends, placed.
/**
 * @param {Box} a
 * @param {Box} t
 * @param {{right: number, bottom: number}} from  its source's column
 * @param {number} k
 * @returns {number[][]}
 */
function crossingRoute(a, t, from, k) {
  const sx = a.x + a.w / 2 + (k % 5) * 4 - 8;
  const below = from.bottom + 12 + k * WRAP_LANE;
  const gx = from.right + 12 + k * WRAP_LANE;
  const over = 10 + k * WRAP_LANE;
  const tx = t.x + t.w / 2 + (k % 5) * 4 - 8;
  return [[sx, a.y + a.h], [sx, below], [gx, below], [gx, over], [tx, over], [tx, t.y]];
}

// The size placeColumns(job, layout, lines) answers, without building its layout.
/**
 * @param {LayoutJob} job
 * @param {Layout} layout
 * @param {number[]} lines
 * @returns {ColumnsSize}
 */
export function columnsSize(job, layout, lines) {
  return columnsSizer(job, layout)(lines);
}

// columnsSize for many cuts of one run: what does not depend on the cuts (each card's
// middle, each edge's ends and the extent of its points) read once.
/**
 * @param {LayoutJob} job
 * @param {Layout} layout
 * @returns {(lines: number[]) => ColumnsSize}
 */
export function columnsSizer(job, layout) {
  const boxes = layout.boxes;
  const nb = boxes.length;
  const mid = new Float64Array(nb);
  for (let i = 0; i < nb; i++) mid[i] = boxes[i] ? boxes[i].y + boxes[i].h / 2 : NaN;
  const routes = layout.edges.filter((le) => job.edges[le.e]);
  const run = {
    job, boxes, mid, seg: new Int32Array(nb),
    from: routes.map((le) => job.edges[le.e].s),
    to: routes.map((le) => job.edges[le.e].t),
    minX: routes.map((le) => Math.min(...le.points.map((p) => p[0]))),
    maxX: routes.map((le) => Math.max(...le.points.map((p) => p[0]))),
    maxY: routes.map((le) => Math.max(...le.points.map((p) => p[1]))),
  };
  return (lines) => {
    const lanes = cutRun(run, lines);
    const pieces = piecesOf(run, lines.length + 1, lanes);
    return { ...sizeOfPieces(run, pieces), wrapped: lines.length + 1, lines };
  };
}

/**
 * @typedef {{job: LayoutJob, boxes: (Box | null)[], mid: Float64Array, seg: Int32Array,
 *   from: number[], to: number[], minX: number[], maxX: number[], maxY: number[]}} SizedRun
 */

// Each card's piece (run.seg) for the cuts at `lines`; returns the lanes over the columns.
/**
 * @param {SizedRun} run
 * @param {number[]} lines
 * @returns {number}
 */
function cutRun(run, lines) {
  const { boxes, mid, seg } = run;
  for (let i = 0; i < boxes.length; i++) {
    if (!boxes[i]) {
      seg[i] = -1;
      continue;
    }
    let k = 0;
    while (k < lines.length && mid[i] > lines[k]) k++;
    seg[i] = k;
  }
  let crossing = 0;
  for (const e of run.job.edges) if (across(seg, e.s, e.t)) crossing++;
  return Math.max(1, crossing);
}

/** @param {Int32Array} seg @param {number} s @param {number} t */
const across = (seg, s, t) => seg[s] >= 0 && seg[t] >= 0 && seg[s] !== seg[t];

// Where each piece goes (placeColumns' shift): its offset, and its right and bottom edges.
/**
 * @param {SizedRun} run
 * @param {number} n  pieces
 * @param {number} lanes
 */
function piecesOf(run, n, lanes) {
  const { boxes, seg } = run;
  const top = 10 + lanes * WRAP_LANE + 12;
  const x0 = new Float64Array(n).fill(Infinity);
  const x1 = new Float64Array(n).fill(-Infinity);
  const y0 = new Float64Array(n).fill(Infinity);
  const y1 = new Float64Array(n).fill(-Infinity);
  boxes.forEach((b, i) => {
    if (!b) return;
    const k = seg[i];
    x0[k] = Math.min(x0[k], b.x);
    x1[k] = Math.max(x1[k], b.x + b.w);
    y0[k] = Math.min(y0[k], b.y);
    y1[k] = Math.max(y1[k], b.y + b.h);
  });
  for (let r = 0; r < run.from.length; r++) {
    if (across(seg, run.from[r], run.to[r])) continue;
    const k = seg[run.from[r]];
    x0[k] = Math.min(x0[k], run.minX[r]);
    x1[k] = Math.max(x1[k], run.maxX[r]);
  }
  const gutter = WRAP_GUTTER + lanes * WRAP_LANE;
  const dx = new Float64Array(n);
  const dy = new Float64Array(n);
  /** @type {{right: number, bottom: number}[]} */
  const shift = [];
  let x = 10;
  for (let k = 0; k < n; k++) {
    if (x0[k] === Infinity) {
      shift.push({ right: x, bottom: top });
      continue;
    }
    dx[k] = x - x0[k];
    dy[k] = top - y0[k];
    shift.push({ right: x + (x1[k] - x0[k]), bottom: top + (y1[k] - y0[k]) });
    x += x1[k] - x0[k] + gutter;
  }
  return { dx, dy, shift };
}

// The far corner of the cards and edges placed (placeColumns' w and h).
/**
 * @param {SizedRun} run
 * @param {{dx: Float64Array, dy: Float64Array, shift: {right: number, bottom: number}[]}} pieces
 * @returns {Size}
 */
function sizeOfPieces(run, { dx, dy, shift }) {
  const { boxes, seg } = run;
  let w = 0;
  let h = 0;
  boxes.forEach((b, i) => {
    if (!b) return;
    w = Math.max(w, b.x + dx[seg[i]] + b.w);
    h = Math.max(h, b.y + dy[seg[i]] + b.h);
  });
  const at = (/** @type {number} */ i) => {
    const b = /** @type {Box} */ (boxes[i]);
    return { x: b.x + dx[seg[i]], y: b.y + dy[seg[i]], w: b.w, h: b.h };
  };
  let lane = 0;
  for (let r = 0; r < run.from.length; r++) {
    const s = run.from[r];
    const t = run.to[r];
    if (!across(seg, s, t)) {
      w = Math.max(w, run.maxX[r] + dx[seg[s]]);
      h = Math.max(h, run.maxY[r] + dy[seg[s]]);
      continue;
    }
    for (const [px, py] of crossingRoute(at(s), at(t), shift[seg[s]], lane++)) {
      w = Math.max(w, px);
      h = Math.max(h, py);
    }
  }
  return { w: Math.ceil(w + 10), h: Math.ceil(h + 10) };
}

// The layout with its run cut at `lines` (y values) and the pieces set side by side.
/**
 * @param {LayoutJob} job
 * @param {Layout} layout
 * @param {number[]} lines
 * @returns {Layout}
 */
export function placeColumns(job, layout, lines) {
  const { n, boxSeg, crossing, shift } = columnsPlan(job, layout, lines);
  const boxes = layout.boxes.map((b, i) => b && { ...b, x: b.x + shift[boxSeg[i]].dx, y: b.y + shift[boxSeg[i]].dy });
  /** @type {LayoutEdge[]} */
  const edges = [];
  let lane = 0;
  for (const le of layout.edges) {
    const je = job.edges[le.e];
    if (!je) continue;
    if (!crossing[le.e]) {
      const sh = shift[boxSeg[je.s]];
      const points = le.points.map(([px, py]) => [px + sh.dx, py + sh.dy]);
      edges.push({ ...le, points, labelAt: labelPoint(points) });
      continue;
    }
    const points = crossingRoute(boxes[je.s], boxes[je.t], shift[boxSeg[je.s]], lane++);
    edges.push({ e: le.e, points, labelAt: labelPoint(points) });
  }
  let w = 0;
  let h = 0;
  for (const b of boxes) if (b) {
    w = Math.max(w, b.x + b.w);
    h = Math.max(h, b.y + b.h);
  }
  for (const le of edges) for (const [px, py] of le.points) {
    w = Math.max(w, px);
    h = Math.max(h, py);
  }
  return { w: Math.ceil(w + 10), h: Math.ceil(h + 10), boxes, edges, wrapped: n };
}

// How large Fit shows a layout on the screen: in the canvas less Fit's margins, above the
// minimap or beside it, over the hint bar, whichever is larger (renderer.js fitArea).
/**
 * @param {Size} l
 * @param {Size & {around?: Size}} wrap  `around`: what the containers around it add (layout-client.js topJobs)
 */
export function topFit(l, wrap) {
  const around = wrap.around || { w: 0, h: 0 };
  l = { w: l.w + around.w, h: l.h + around.h };
  const above = { w: wrap.w - FIT_MARGIN, h: wrap.h - FIT_MINIMAP.h - FIT_MARGIN };
  const beside = { w: wrap.w - FIT_MINIMAP.w - FIT_MARGIN, h: wrap.h - FIT_HINT - FIT_MARGIN };
  return Math.max(fitScale(l, above), fitScale(l, beside));
}

// The cut lines each wrapped candidate was made with (wrapColumns), for relaidColumns.
/** @type {WeakMap<Layout, number[]>} */
export const cutAt = new WeakMap();

// Labels sit beside the middle of the longest vertical run, where they do not cover cards.
/**
 * @param {number[][]} points
 * @returns {number[] | null}
 */
export function labelPoint(points) {
  /** @type {number[] | null} */
  let best = null;
  let bestLen = -1;
  for (let i = 0; i + 1 < points.length; i++) {
    const [x1, y1] = points[i];
    const [x2, y2] = points[i + 1];
    const len = Math.abs(y2 - y1) + (x1 === x2 ? 0 : -1000);
    if (len > bestLen) {
      bestLen = len;
      best = [(x1 + x2) / 2, (y1 + y2) / 2];
    }
  }
  return best;
}
