// A fast layered layout for a container too big for ELK within a frame's budget
// (layout.worker.js chooses it by size: FAST_ITEMS, FAST_PAIRS). ELK's layered algorithm
// took 11 s on a Llama generate loop's 603 cards and 703 wired pairs; this one lays the
// same container out in tens of milliseconds, in the same shape: top to bottom, one
// layer per step of the data flow, orthogonal edges.
//
// The steps are Sugiyama's, each in its plainest form:
// 1. layers: the longest path from the sources, in program order (a back edge, if any, is
//    turned round); a source with no inputs (a constant, a parameter-free input) sits just
//    above its first use, as ELK's network-simplex layering puts it;
// 2. order within a layer: program order, then a few sweeps of the barycentre of each
//    card's neighbours in the layer before (long edges pass through one lane per layer);
// 3. across: each card as near the median of its neighbours as its order allows (the
//    pool-adjacent-violators solution of "close to where its neighbours are, in order,
//    never overlapping"), alternating down and up;
// 4. edges: down from the source's bottom, across in a lane of the gap between two layers
//    (lanes assigned so that no two overlap), down into the target's top.

/**
 * @typedef {import("./protocol.js").LayoutJob} LayoutJob
 * @typedef {import("./protocol.js").Layout} Layout
 * @typedef {import("./protocol.js").LayoutEdge} LayoutEdge
 * @typedef {import("./protocol.js").Box} Box
 * @typedef {import("./protocol.js").Size} Size
 */

import { labelPoint } from "./wrap.js";

/**
 * The graph being laid out: real cards first (by position), then one lane per layer a
 * long edge passes (`w` 0). `up[v]`/`down[v]`: neighbours in the layer above/below.
 * @typedef {object} Graph
 * @property {number[]} layer
 * @property {number[]} w
 * @property {number[]} h
 * @property {number[][]} up
 * @property {number[][]} down
 * @property {{s: number, t: number, path: number[], flipped: boolean}[]} pairs  each wired pair once,
 *   its path from the upper end to the lower (lanes between)
 */

// Containers at least this big are laid out here first: ELK's time grows faster than
// its input (41 cards 90 ms; 398 cards and 703 pairs 4.5 s; 603 cards 11 s).
export const FAST_ITEMS = 150;
export const FAST_PAIRS = 300;
const LAYER_GAP = 40; // between two layers, at least
const NODE_GAP = 28; // between two cards of a layer
const LANE_GAP = 10; // between a lane and its neighbour
const TRACK = 8; // between two horizontal runs in one gap
const TRACKS_TALL = 160; // a gap's runs take this much height at most (then closer than TRACK)
const PAD = 10;
const SWEEPS = 4;
const LOOSE_ROW = 8; // cards wired to nothing: in one row up to this many

/**
 * @param {LayoutJob} job
 * @returns {boolean}  whether `job` is too big for ELK within the frame budget
 */
export function tooBigForElk(job) {
  if (job.row) return false; // bodies side by side: few, and ELK keeps them in one row
  if (job.items.length >= FAST_ITEMS) return true;
  /** @type {Set<string>} */
  const pairs = new Set();
  for (const e of job.edges) if (e.s !== e.t) pairs.add(`${e.s}>${e.t}`);
  return pairs.size >= FAST_PAIRS;
}

/**
 * @param {LayoutJob} job
 * @param {Size[]} sizes  each item's card, by position
 * @returns {Layout}
 */
export function layeredLayout(job, sizes) {
  const n = sizes.length;
  const { pairs, pairOf } = wiredPairs(job, n);
  const g = buildGraph(n, sizes, pairs, job.row);
  const order = orderLayers(g, n);
  const x = placeAcross(g, order);
  const ys = layerTops(g, order, x);
  return route(job, g, x, ys, pairOf);
}

// Each wired pair once (edges between the same two items share a route, as in the ELK
// graph), and for each job edge the pair it is drawn with (-1: a loop or a missing end).
/**
 * @param {LayoutJob} job
 * @param {number} n
 */
function wiredPairs(job, n) {
  /** @type {Map<string, number>} */
  const seen = new Map();
  /** @type {[number, number][]} */
  const pairs = [];
  const pairOf = job.edges.map((e) => {
    if (e.s === e.t || !(e.s >= 0 && e.s < n) || !(e.t >= 0 && e.t < n)) return -1;
    const key = `${e.s}>${e.t}`;
    let k = seen.get(key);
    if (k === undefined) {
      k = pairs.length;
      seen.set(key, k);
      pairs.push([e.s, e.t]);
    }
    return k;
  });
  return { pairs, pairOf };
}

// Layers by the longest path from the sources, in program order; a card whose inputs
// come after it (a back edge) keeps its place and the edge is turned round.
/**
 * @param {number} n
 * @param {[number, number][]} pairs
 * @param {boolean | undefined} row  a row of bodies: every card in one layer
 * @returns {{layer: number[], flipped: boolean[]}}
 */
function layering(n, pairs, row) {
  const layer = new Array(n).fill(0);
  const flipped = pairs.map(() => false);
  if (row) return { layer, flipped };
  const outs = adjacency(n, pairs, 0);
  const ins = adjacency(n, pairs, 1);
  const topo = topoOrder(n, pairs, outs);
  const rank = new Array(n);
  topo.forEach((v, i) => (rank[v] = i));
  pairs.forEach(([s, t], k) => (flipped[k] = rank[s] > rank[t]));
  for (const v of topo) {
    for (const k of ins[v]) if (!flipped[k]) layer[v] = Math.max(layer[v], layer[pairs[k][0]] + 1);
    for (const k of outs[v]) if (flipped[k]) layer[v] = Math.max(layer[v], layer[pairs[k][1]] + 1);
  }
  sinkSources(n, pairs, layer, flipped, ins, outs);
  stackLoose(n, layer, ins, outs);
  return { layer, flipped };
}

// Cards wired to nothing (as ELK packs separate components) go below the rest in rows of
// about the square root of their number, not all in the top layer side by side.
/**
 * @param {number} n
 * @param {number[]} layer
 * @param {number[][]} ins
 * @param {number[][]} outs
 */
function stackLoose(n, layer, ins, outs) {
  const loose = [];
  let below = 0;
  for (let v = 0; v < n; v++) {
    if (ins[v].length || outs[v].length) below = Math.max(below, layer[v] + 1);
    else loose.push(v);
  }
  if (loose.length <= LOOSE_ROW) return;
  const row = Math.max(LOOSE_ROW, Math.ceil(Math.sqrt(loose.length * 2)));
  loose.forEach((v, i) => (layer[v] = below + Math.floor(i / row)));
}

// A card with nothing above it moves down to just above the first card it feeds.
/**
 * @param {number} n
 * @param {[number, number][]} pairs
 * @param {number[]} layer
 * @param {boolean[]} flipped
 * @param {number[][]} ins
 * @param {number[][]} outs
 */
function sinkSources(n, pairs, layer, flipped, ins, outs) {
  for (let v = n - 1; v >= 0; v--) {
    const above = ins[v].some((k) => !flipped[k]) || outs[v].some((k) => flipped[k]);
    if (above) continue;
    let first = Infinity;
    for (const k of outs[v]) if (!flipped[k]) first = Math.min(first, layer[pairs[k][1]]);
    for (const k of ins[v]) if (flipped[k]) first = Math.min(first, layer[pairs[k][0]]);
    if (first !== Infinity && first - 1 > layer[v]) layer[v] = first - 1;
  }
}

/**
 * @param {number} n
 * @param {[number, number][]} pairs
 * @param {0 | 1} end  0: by source (the pairs leaving each card), 1: by target
 * @returns {number[][]}
 */
function adjacency(n, pairs, end) {
  /** @type {number[][]} */
  const out = Array.from({ length: n }, () => []);
  pairs.forEach((p, k) => out[p[end]].push(k));
  return out;
}

// Kahn's order, the lowest position first among the ready; when none is ready (a cycle),
// the lowest position not yet placed goes next.
/**
 * @param {number} n
 * @param {[number, number][]} pairs
 * @param {number[][]} outs
 * @returns {number[]}
 */
function topoOrder(n, pairs, outs) {
  const indeg = new Array(n).fill(0);
  for (const [, t] of pairs) indeg[t]++;
  const done = new Array(n).fill(false);
  /** @type {number[]} */
  const order = [];
  /** @type {number[]} */
  let ready = [];
  for (let v = 0; v < n; v++) if (!indeg[v]) ready.push(v);
  let next = 0; // the lowest position perhaps not yet placed
  while (order.length < n) {
    if (!ready.length) {
      while (done[next]) next++;
      ready = [next];
    }
    ready.sort((a, b) => b - a);
    const v = /** @type {number} */ (ready.pop());
    if (done[v]) continue;
    done[v] = true;
    order.push(v);
    for (const k of outs[v]) {
      const t = pairs[k][1];
      if (!done[t] && --indeg[t] === 0) ready.push(t);
    }
  }
  return order;
}

// The cards and, for each pair more than one layer apart, a lane in each layer between.
/**
 * @param {number} n
 * @param {Size[]} sizes
 * @param {[number, number][]} pairs
 * @param {boolean | undefined} row
 * @returns {Graph}
 */
function buildGraph(n, sizes, pairs, row) {
  const { layer, flipped } = layering(n, pairs, row);
  const w = sizes.map((s) => s.w);
  const h = sizes.map((s) => s.h);
  /** @type {number[][]} */
  const up = Array.from({ length: n }, () => []);
  /** @type {number[][]} */
  const down = Array.from({ length: n }, () => []);
  /** @type {Graph["pairs"]} */
  const routes = [];
  pairs.forEach(([s, t], k) => {
    const [a, b] = flipped[k] ? [t, s] : [s, t];
    const path = [a];
    for (let l = layer[a] + 1; l < layer[b]; l++) {
      const lane = layer.length;
      layer.push(l);
      w.push(0);
      h.push(0);
      up.push([]);
      down.push([]);
      path.push(lane);
    }
    path.push(b);
    for (let i = 0; i + 1 < path.length; i++) {
      down[path[i]].push(path[i + 1]);
      up[path[i + 1]].push(path[i]);
    }
    routes.push({ s, t, path, flipped: flipped[k] });
  });
  return { layer, w, h, up, down, pairs: routes };
}

// Each layer's order: the cards in program order, then barycentre sweeps among them; the
// lanes of long edges after the cards, in the order of their upper ends (swept the same
// way among themselves). With lanes between cards, each layer's card stood a lane's width
// further right than the one above it, and a 400-op chain with residual edges drifted
// across the screen; beside the cards, the chain stands straight and the long edges run
// down its right, as ELK draws them.
/**
 * @param {Graph} g
 * @param {number} n  real cards (the rest are lanes)
 * @returns {number[][]}
 */
function orderLayers(g, n) {
  let depth = 1;
  for (const l of g.layer) depth = Math.max(depth, l + 1);
  /** @type {number[][]} */
  const layers = Array.from({ length: depth }, () => []);
  const key = new Array(g.layer.length).fill(0);
  for (let v = 0; v < n; v++) key[v] = v;
  for (const p of g.pairs) for (let i = 1; i + 1 < p.path.length; i++) key[p.path[i]] = n + key[p.path[0]];
  for (let v = 0; v < g.layer.length; v++) layers[g.layer[v]].push(v);
  for (const l of layers) l.sort((a, b) => key[a] - key[b]);
  const pos = new Array(g.layer.length).fill(0);
  layers.forEach((l) => l.forEach((v, i) => (pos[v] = i)));
  for (let sweep = 0; sweep < SWEEPS; sweep++) {
    const downward = sweep % 2 === 0;
    const seq = downward ? layers.slice(1) : layers.slice(0, -1).reverse();
    for (const l of seq) {
      const ranked = l.map((v, i) => {
        const nb = downward ? g.up[v] : g.down[v];
        const bary = nb.length ? nb.reduce((s, u) => s + pos[u], 0) / nb.length : pos[v];
        return [v < n ? 0 : 1, bary, i, v];
      }).sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]);
      ranked.forEach((r, i) => (l[i] = r[3]));
      l.forEach((v, i) => (pos[v] = i));
    }
  }
  return layers;
}

// x of each card's left side, as Brandes and Köpf place a layered graph, in one pass:
// each card is aligned under its main neighbour in the layer above (a card before a lane,
// then the one wired most: the chain it continues, not a constant beside it; a lane under
// its own), unless that
// one has a card aligned under it already or the alignment would cross one made left of
// it; each aligned run is one block, one x for all of it, and the blocks are packed from
// the left as each layer's order asks. A chain stands straight however long it is (the
// median of neighbours, followed sweep after sweep, let a 400-op chain drift across).
/**
 * @param {Graph} g
 * @param {number[][]} layers
 * @returns {number[]}
 */
function placeAcross(g, layers) {
  const size = g.layer.length;
  const root = alignBlocks(g, layers);
  /** @type {[number, number][][]} */
  const after = Array.from({ length: size }, () => []); // block -> [block to its right, least distance]
  const waits = new Array(size).fill(0);
  for (const l of layers) for (let i = 0; i + 1 < l.length; i++) {
    const a = l[i];
    const b = l[i + 1];
    const space = g.w[a] && g.w[b] ? NODE_GAP : LANE_GAP;
    after[root[a]].push([root[b], (g.w[a] + g.w[b]) / 2 + space]);
    waits[root[b]]++;
  }
  const centre = new Array(size).fill(0);
  const ready = [];
  let blocks = 0;
  for (let v = 0; v < size; v++) if (root[v] === v) {
    blocks++;
    if (!waits[v]) ready.push(v);
  }
  let placed = 0;
  while (ready.length) {
    const r = /** @type {number} */ (ready.pop());
    placed++;
    for (const [b, d] of after[r]) {
      centre[b] = Math.max(centre[b], centre[r] + d);
      if (--waits[b] === 0) ready.push(b);
    }
  }
  if (placed < blocks) return packed(g, layers); // (not reached: alignments never cross)
  let min = Infinity;
  const x = g.layer.map((_, v) => centre[root[v]] - g.w[v] / 2);
  for (const v of x) min = Math.min(min, v);
  return x.map((v) => Math.round(v - min + PAD)); // whole pixels: a run across is there or not
}

// Each card's block: the card at the top of the run it is aligned in.
/**
 * @param {Graph} g
 * @param {number[][]} layers
 * @returns {number[]}
 */
function alignBlocks(g, layers) {
  const size = g.layer.length;
  const pos = new Array(size).fill(0);
  layers.forEach((l) => l.forEach((v, i) => (pos[v] = i)));
  // a card before a lane (a chain is not continued through a long edge), then the most wired
  const rank = (/** @type {number} */ v) => (g.w[v] ? size : 0) + g.up[v].length + g.down[v].length;
  const root = Array.from({ length: size }, (_, v) => v);
  const taken = new Array(size).fill(false);
  for (let k = 1; k < layers.length; k++) {
    let last = -1; // the rightmost position aligned to in the layer above
    for (const v of layers[k]) {
      let main = -1;
      for (const u of g.up[v]) if (main < 0 || rank(u) > rank(main) || (rank(u) === rank(main) && u > main)) main = u;
      if (main < 0 || taken[main] || pos[main] <= last) continue;
      taken[main] = true;
      root[v] = root[main];
      last = pos[main];
    }
  }
  return root;
}

// Each layer packed from the left in its order (what placeAcross falls back on).
/**
 * @param {Graph} g
 * @param {number[][]} layers
 * @returns {number[]}
 */
function packed(g, layers) {
  const x = new Array(g.layer.length).fill(PAD);
  for (const l of layers) {
    let at = PAD;
    for (const v of l) {
      x[v] = at;
      at += g.w[v] + (g.w[v] ? NODE_GAP : LANE_GAP);
    }
  }
  return x;
}

// The positions nearest `want` (weighted least squares) with each at least `span` after
// the one before: pool adjacent violators on want[i] - offset[i].
/**
 * @param {number[]} want
 * @param {number[]} span  each one's width and gap after it
 * @param {number[]} [weight]  how much each one's own wish counts (1 each by default)
 * @returns {number[]}
 */
export function inOrder(want, span, weight) {
  const offset = [];
  let at = 0;
  for (let i = 0; i < want.length; i++) {
    offset.push(at);
    at += span[i];
  }
  /** @type {{sum: number, mass: number, count: number}[]} */
  const blocks = [];
  for (let i = 0; i < want.length; i++) {
    const w = weight ? weight[i] : 1;
    blocks.push({ sum: (want[i] - offset[i]) * w, mass: w, count: 1 });
    while (blocks.length > 1) {
      const b = blocks[blocks.length - 1];
      const a = blocks[blocks.length - 2];
      if (a.sum / a.mass <= b.sum / b.mass) break;
      a.sum += b.sum;
      a.mass += b.mass;
      a.count += b.count;
      blocks.pop();
    }
  }
  const out = [];
  for (const b of blocks) for (let k = 0; k < b.count; k++) out.push(b.sum / b.mass + offset[out.length]);
  return out;
}

// Where each layer starts (top), each as tall as its tallest card, the gap below it as
// tall as its horizontal runs need; and those runs, per gap, each with its track.
/**
 * @param {Graph} g
 * @param {number[][]} layers
 * @param {number[]} x
 */
function layerTops(g, layers, x) {
  const tracks = layers.map(() => 0);
  const runs = runsByGap(g, x, layers.length);
  runs.forEach((list, l) => (tracks[l] = assignTracks(list)));
  const top = [];
  const height = layers.map((l) => l.reduce((m, v) => Math.max(m, g.h[v]), 0));
  // a gap's tracks closer together where there are many: at most TRACKS_TALL between them
  const step = tracks.map((t) => Math.min(TRACK, TRACKS_TALL / Math.max(1, t)));
  let y = PAD;
  for (let l = 0; l < layers.length; l++) {
    top.push(y);
    y += height[l] + Math.max(LAYER_GAP, 2 * 14 + tracks[l] * step[l]);
  }
  return { top, height, runs, step };
}

/**
 * A horizontal run of an edge in the gap below layer `l`: from x0 to x1 (either way).
 * @typedef {{x0: number, x1: number, track: number}} Run
 */

// Each pair's horizontal runs, by the gap they are in (the ends of a run: where the edge
// leaves the card above and enters the one below, ports spread across a card's width).
/**
 * @param {Graph} g
 * @param {number[]} x
 * @param {number} depth
 * @returns {Map<string, Run>[]}  per gap, `pair:step` → its run
 */
function runsByGap(g, x, depth) {
  /** @type {Map<string, Run>[]} */
  const runs = Array.from({ length: depth }, () => new Map());
  const ports = portsOf(g, x);
  g.pairs.forEach((p, k) => {
    for (let i = 0; i + 1 < p.path.length; i++) {
      const a = p.path[i];
      const b = p.path[i + 1];
      const x0 = portX(g, x, ports, a, b, true);
      const x1 = portX(g, x, ports, b, a, false);
      if (x0 !== x1) runs[g.layer[a]].set(`${k}:${i}`, { x0, x1, track: 0 });
    }
  });
  return runs;
}

// A card's edges leave its bottom (enter its top) spread across its middle, in the order
// of where their other ends are; a lane has one point.
/**
 * @param {Graph} g
 * @param {number[]} x
 */
function portsOf(g, x) {
  const centre = (/** @type {number} */ v) => x[v] + g.w[v] / 2;
  /** @type {Map<string, number>} */
  const at = new Map();
  const spread = (/** @type {number} */ v, /** @type {number[]} */ others, /** @type {string} */ side) => {
    if (!g.w[v] || others.length < 2) return;
    const sorted = [...new Set(others)].sort((a, b) => centre(a) - centre(b));
    const width = Math.min(g.w[v] * 0.6, (sorted.length - 1) * 8);
    sorted.forEach((u, i) => at.set(`${side}${v}>${u}`, Math.round(centre(v) - width / 2 + (width * i) / Math.max(1, sorted.length - 1))));
  };
  for (let v = 0; v < g.layer.length; v++) {
    spread(v, g.down[v], "d");
    spread(v, g.up[v], "u");
  }
  return at;
}

/**
 * @param {Graph} g
 * @param {number[]} x
 * @param {Map<string, number>} ports
 * @param {number} v
 * @param {number} other
 * @param {boolean} bottom
 */
function portX(g, x, ports, v, other, bottom) {
  const got = ports.get(`${bottom ? "d" : "u"}${v}>${other}`);
  return got === undefined ? Math.round(x[v] + g.w[v] / 2) : got;
}

// Interval colouring: each run the first track free where it starts; the tracks used.
/**
 * @param {Map<string, Run>} runs
 * @returns {number}
 */
function assignTracks(runs) {
  const list = [...runs.values()].sort((a, b) => Math.min(a.x0, a.x1) - Math.min(b.x0, b.x1));
  /** @type {number[]} */
  const ends = [];
  for (const r of list) {
    const lo = Math.min(r.x0, r.x1);
    let t = ends.findIndex((e) => e + LANE_GAP <= lo);
    if (t < 0) {
      t = ends.length;
      ends.push(0);
    }
    ends[t] = Math.max(r.x0, r.x1);
    r.track = t;
  }
  return ends.length;
}

// The boxes (each card centred in its layer's height) and every edge's route.
/**
 * @param {LayoutJob} job
 * @param {Graph} g
 * @param {number[]} x
 * @param {{top: number[], height: number[], runs: Map<string, Run>[], step: number[]}} ys
 * @param {number[]} pairOf
 * @returns {Layout}
 */
function route(job, g, x, ys, pairOf) {
  const n = job.items.length;
  const yOf = (/** @type {number} */ v) => ys.top[g.layer[v]] + (ys.height[g.layer[v]] - g.h[v]) / 2;
  /** @type {Box[]} */
  const boxes = [];
  for (let v = 0; v < n; v++) boxes.push({ x: x[v], y: yOf(v), w: g.w[v], h: g.h[v] });
  const ports = portsOf(g, x);
  const paths = g.pairs.map((p, k) => pairPoints(g, x, ys, ports, p, k));
  /** @type {LayoutEdge[]} */
  const edges = [];
  pairOf.forEach((k, e) => {
    if (k < 0) return;
    const points = paths[k].map((pt) => [...pt]);
    edges.push({ e, points, labelAt: labelPoint(points) });
  });
  let w = 0;
  let h = 0;
  for (const b of boxes) {
    w = Math.max(w, b.x + b.w);
    h = Math.max(h, b.y + b.h);
  }
  for (const le of edges) for (const [px, py] of le.points) {
    w = Math.max(w, px);
    h = Math.max(h, py);
  }
  return { w: Math.ceil(w + PAD), h: Math.ceil(h + PAD), boxes, edges, fast: true };
}

// One pair's points, from its source to its target: down out of the upper card, across
// in its track of each gap, down through each lane, into the lower card.
/**
 * @param {Graph} g
 * @param {number[]} x
 * @param {{top: number[], height: number[], runs: Map<string, Run>[], step: number[]}} ys
 * @param {Map<string, number>} ports
 * @param {Graph["pairs"][number]} p
 * @param {number} k
 * @returns {number[][]}
 */
function pairPoints(g, x, ys, ports, p, k) {
  const path = p.path;
  const first = path[0];
  const l0 = g.layer[first];
  /** @type {number[][]} */
  const pts = [[portX(g, x, ports, first, path[1], true), ys.top[l0] + (ys.height[l0] + g.h[first]) / 2]];
  for (let i = 0; i + 1 < path.length; i++) {
    const a = path[i];
    const b = path[i + 1];
    const l = g.layer[a];
    const bottom = ys.top[l] + ys.height[l];
    const run = ys.runs[l].get(`${k}:${i}`);
    const xb = run ? portX(g, x, ports, b, a, false) : pts[pts.length - 1][0];
    if (run) {
      const y = bottom + 14 + run.track * ys.step[l];
      pts.push([run.x0, y], [run.x1, y]);
    }
    const lb = g.layer[b];
    const topB = ys.top[lb] + (ys.height[lb] - g.h[b]) / 2;
    pts.push([xb, topB]);
    if (!g.w[b] && i + 2 < path.length) pts.push([xb, ys.top[lb] + ys.height[lb]]);
  }
  const out = dropStraight(pts);
  return p.flipped ? out.reverse() : out;
}

// Points in the middle of a straight run add nothing.
/** @param {number[][]} pts */
function dropStraight(pts) {
  const out = [pts[0]];
  for (let i = 1; i < pts.length; i++) {
    const p = pts[i];
    const prev = out[out.length - 1];
    if (Math.abs(p[0] - prev[0]) < 0.01 && Math.abs(p[1] - prev[1]) < 0.01) continue;
    if (i + 1 < pts.length) {
      const next = pts[i + 1];
      const colinear = (Math.abs(prev[0] - p[0]) < 0.01 && Math.abs(p[0] - next[0]) < 0.01) ||
        (Math.abs(prev[1] - p[1]) < 0.01 && Math.abs(p[1] - next[1]) < 0.01);
      if (colinear) continue;
    }
    out.push(p);
  }
  return out;
}
