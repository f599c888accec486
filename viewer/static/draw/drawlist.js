// The draw list: what the visible part of a laid-out scene looks like at a zoom, as
// plain primitives in world coordinates. This walks the scene (culling, specks, edges and
// their labels, level of detail); each card's own primitives come from card.js, the
// module that also sizes cards for the layout worker. The canvas renderer executes the
// list with a 2D context (renderer.js) and the SVG export serializes the same list
// (export.js), so the two cannot drift apart.
//
// Primitives (plain objects; `t` says which):
//   rect    {x, y, w, h, r, fill, fa, stroke, lw, hair, dash}  r: number | corner list | 0
//           (square); fa: fill opacity; hair: the stroke is 1 screen px wide, whatever
//           the zoom; fill HATCH: the opaque hatch pattern
//   text    {x, y, text, font, fill, align, baseline}  text already truncated (measured
//           with the canvas's measureText); baseline "middle"
//   toggle  {cx, cy, r, sign, color}  the +/- circle of a group or boundary node (a sign
//           half the radius long)
//   far     {x, y, w, h, text, sub?, color, padTop, bg, frame?}  a name at constant screen
//           size (and, for a frame, what it holds: "70 ops"), laid out for the zoom by
//           farLabel() (both executors call it)
//   farlabels {list: [far]}  every far name of the frame, outer frames first: each is
//           drawn where it does not cover one drawn before it (semantic zoom)
//   edges   {ox, oy, list, simple, labels, stroke, labelFill, labelBg}  one container's
//           visible edges: a point list per edge relative to (ox, oy), arrows unless
//           simple (far: hairlines); labels {text, x, y, w} (x, y relative to (ox, oy)) on a
//           background, placed by the layout worker where they cover no card and no other
//           label (layout.worker.js placeLabels)
//   specks  {rects, fill}  sub-pixel items, x/y/w/h flattened
// A list may hold a nested list (a card's cached primitives): executors recurse.
//
// Card primitives are built only for visible items and cached on the scene item per
// level of detail and palette, so a frame allocates little beyond the list itself.

import { CARD_STYLE as S, drawCard, labelRect } from "./card.js";
import { HATCH, LOD_ARROWS, LOD_EDGE_LABELS, LOD_TEXT, LOD_TITLE } from "./theme.js";

/**
 * @typedef {import("./card.js").CardPrim} CardPrim
 * @typedef {import("./card.js").CardPrims} CardPrims
 * @typedef {import("./card.js").FarPrim} FarPrim
 * @typedef {import("./card.js").Ctx} Ctx
 * @typedef {import("./theme.js").Palette} Palette
 * @typedef {import("../layout/protocol.js").LabelSpot} LabelSpot
 * @typedef {import("../layout/protocol.js").Box} Box
 */

/**
 * The primitives this module adds to card.js's (see the list above), and a draw list.
 * @typedef {{t: "farlabels", list: FarPrim[]}} FarLabelsPrim
 * @typedef {{t: "edges", ox: number, oy: number, list: number[][][], simple: boolean, labels: LabelSpot[],
 *   stroke: string, labelFill: string, labelBg: string}} EdgesPrim
 * @typedef {{t: "specks", rects: number[], fill: string}} SpecksPrim
 * @typedef {(CardPrim | FarLabelsPrim | EdgesPrim | SpecksPrim | DrawList)[]} DrawList
 */

/**
 * The composed scene as the draw list reads it (model/viewmodel.js composes it): each
 * container's laid-out items (an open one holds its own container) and its edges, whose
 * points are relative to it; `_dl`, `_bb`: what is cached on them.
 * @typedef {CardPrims & {band: number, p: Palette}} CachedPrims
 * @typedef {import("./card.js").SceneItem & {expanded?: DrawContainer | null, _dl?: CachedPrims}} DrawItem
 * @typedef {{source: string, target: string, points: number[][], labelBox?: LabelSpot | null, _bb?: number[]}} DrawEdge
 * @typedef {{x: number, y: number, items: DrawItem[], edges: DrawEdge[]}} DrawContainer
 */

/**
 * What a draw list is built for.
 * @typedef {object} DrawEnv
 * @property {Ctx} ctx  measures texts
 * @property {Palette} palette
 * @property {number} s  the zoom
 * @property {{x0: number, y0: number, x1: number, y1: number}} view  the world rectangle shown
 * @property {{items: number, edges: number}} stats
 * @property {((it: DrawItem) => string | null) | null} [heat]  the heat map's colour of a closed card
 * @property {{q: FarPrim, depth: number}[] | null} [far]  the far names gathered while building
 */

/**
 * A far name laid out for the zoom (farLabel).
 * @typedef {{text: string, font: string, px: number, x: number, y: number, bg: Box | null,
 *   sub: {text: string, font: string, y?: number} | null, beside: boolean, box: Box}} FarLabel
 * @typedef {Box[] & {cells?: Map<string, Box[]>}} Placed  the names drawn so far this frame
 */

// Level of detail: 0 far (boxes and far labels), 1 titles, 2 titles, tags and lines.
/** @param {number} s */
export function bandOf(s) {
  return s < LOD_TITLE ? 0 : s < LOD_TEXT ? 1 : 2;
}

// Below ~1.5px between layers an edge is no longer a line one can follow.
export const MIN_EDGE_SCALE = 0.035;
const OP_NAMES_LAST = 1e6;

// The whole visible scene into `out` (cleared by the caller). env: {ctx (for
// measureText), palette, s (zoom), view {x0, y0, x1, y1} world, stats {items, edges}}.
/**
 * @param {DrawList} out
 * @param {DrawContainer} root
 * @param {DrawEnv} env
 * @returns {DrawList}
 */
export function buildDrawList(out, root, env) {
  /** @type {{q: FarPrim, depth: number}[]} */
  const far = [];
  env.far = far;
  container(out, root, env, 0);
  if (far.length) {
    // Outer frames first: when two names would overlap, the one that says more wins.
    far.sort((a, b) => a.depth - b.depth);
    out.push({ t: "farlabels", list: far.map((f) => f.q) });
  }
  env.far = null;
  return out;
}

/**
 * @param {DrawEnv["view"]} v
 * @param {number} x @param {number} y @param {number} w @param {number} h
 */
const visible = (v, x, y, w, h) => x + w >= v.x0 && y + h >= v.y0 && x <= v.x1 && y <= v.y1;

/**
 * @param {DrawList} out
 * @param {DrawContainer} c
 * @param {DrawEnv} env
 * @param {number} depth
 */
// eslint-disable-next-line complexity -- one container's frame, title and contents at each level of detail
function container(out, c, env, depth) {
  const { s, view } = env;
  if (s >= MIN_EDGE_SCALE) edges(out, c, env);
  /** @type {number[] | null} */
  let specks = null;
  const far = /** @type {{q: FarPrim, depth: number}[]} */ (env.far);
  for (const it of c.items) {
    if (!visible(view, it.x, it.y, it.w, it.h)) continue;
    env.stats.items++;
    if (it.w * s < 2.5 && it.h * s < 2.5 && !it.expanded) {
      // Sub-pixel: a speck is enough, all of them in one path.
      if (!specks) specks = [];
      specks.push(it.x, it.y, Math.max(it.w, 1 / s), Math.max(it.h, 1 / s));
      continue;
    }
    const dl = cardList(it, env);
    out.push(dl.card);
    // outer frames first, then the cards in them; op names last: a frame's or a group's
    // name says more than an op's
    if (dl.far) {
      for (const q of dl.far) {
        // A frame's op count ("70 ops") stands for ops too small to read: where they carry
        // their names, it would only cover the names of the ops under it.
        // (The name without it is kept beside the name: a new one each frame would be
        // measured again each frame.)
        const said = q.sub && it.expanded && namesOps(it.expanded, s) ? (q._bare ||= { ...q, sub: undefined, _far: undefined }) : q;
        far.push({ q: said, depth: q.op ? OP_NAMES_LAST + depth : it.expanded ? depth : depth + 0.5 });
      }
    }
    if (!it.expanded) continue;
    if (dl.header && visible(view, it.x, it.y, it.w, S.groupHeader)) out.push(dl.header);
    // An expanded group too small to read is drawn as its frame only (its name and op
    // count still say what it is).
    if (it.w * s < 24 && it.h * s < 24) continue;
    container(out, it.expanded, env, depth + 1);
  }
  if (specks) out.push({ t: "specks", rects: specks, fill: env.palette.cardStroke });
}

// Whether most of the cards a container holds, at any depth, are tall enough at zoom s to
// carry their far names.
/**
 * @param {DrawContainer} c
 * @param {number} s
 */
function namesOps(c, s) {
  const [cards, named] = tallCards(c, s);
  return cards > 0 && named * 2 >= cards;
}

// [the cards a container holds at any depth, those at least FAR_OP_PX tall at zoom s],
// kept on the container for the zoom last asked.
/** @type {WeakMap<DrawContainer, {s: number, counts: [number, number]}>} */
const tallMemo = new WeakMap();
/**
 * @param {DrawContainer} c
 * @param {number} s
 * @returns {[number, number]}
 */
function tallCards(c, s) {
  const memo = tallMemo.get(c);
  if (memo && memo.s === s) return memo.counts;
  let cards = 0;
  let named = 0;
  for (const it of c.items) {
    if (it.expanded) {
      const [k, n] = tallCards(it.expanded, s);
      cards += k;
      named += n;
    } else if (it.type !== "in" && it.type !== "out") {
      cards += 1;
      if (it.h * s >= FAR_OP_PX) named += 1;
    }
  }
  /** @type {[number, number]} */
  const counts = [cards, named];
  tallMemo.set(c, { s, counts });
  return counts;
}

/**
 * @param {DrawList} out
 * @param {DrawContainer} c
 * @param {DrawEnv} env
 */
function edges(out, c, env) {
  if (!c.edges.length) return;
  const { s, view } = env;
  /** @type {number[][][]} */
  const list = [];
  /** @type {LabelSpot[]} */
  const labels = [];
  /** @type {Set<string> | null} */
  let seen = null;
  for (const e of c.edges) {
    const bb = e._bb || (e._bb = bboxOf(e.points, c.x, c.y));
    if (!visible(view, bb[0], bb[1], bb[2] - bb[0], bb[3] - bb[1])) continue;
    env.stats.edges++;
    list.push(e.points);
    // Labels where the layout placed them (none where there was no room: the shape shows
    // on hover); a boundary pill already says its value's shape.
    if (s >= LOD_EDGE_LABELS && e.labelBox && !e.source.startsWith("in:") && !e.target.startsWith("out:")) {
      const k = e.source + "|" + e.labelBox.text;
      if (!seen) seen = new Set();
      if (seen.has(k)) continue;
      seen.add(k);
      labels.push(e.labelBox);
    }
  }
  const p = env.palette;
  if (list.length) out.push({ t: "edges", ox: c.x, oy: c.y, list, simple: s < LOD_ARROWS, labels, stroke: p.edge, labelFill: p.edgeLabel, labelBg: p.edgeLabelBg });
}

/**
 * @param {number[][]} points
 * @param {number} ox
 * @param {number} oy
 */
function bboxOf(points, ox, oy) {
  let x0 = Infinity;
  let y0 = Infinity;
  let x1 = -Infinity;
  let y1 = -Infinity;
  for (const [x, y] of points) {
    if (x < x0) x0 = x;
    if (y < y0) y0 = y;
    if (x > x1) x1 = x;
    if (y > y1) y1 = y;
  }
  return [ox + x0 - 40, oy + y0, ox + x1 + 80, oy + y1]; // room for the label
}

// One item's primitives at the zoom's level of detail (cached per band and palette):
// {card, header?, far?}; header and far only for an expanded group.
/**
 * @param {DrawItem} it
 * @param {DrawEnv} env
 * @returns {CachedPrims}
 */
export function cardList(it, env) {
  const band = bandOf(env.s);
  // The heat map (panels/cost.js): a closed card filled with its colour, an open frame as it is.
  const heat = env.heat && !it.expanded ? env.heat(it) : null;
  const p = heat ? heatPalette(env.palette, heat) : env.palette;
  const c = it._dl;
  if (c && c.band === band && c.p === p) return c;
  /** @type {CachedPrims} */
  const dl = { band, p, card: [], header: null, far: null };
  drawCard(dl, it, env.ctx, p, band);
  it._dl = dl;
  return dl;
}

// The palette with every card fill (ops, groups of every kind) replaced by a heat colour:
// one derived palette per base palette and colour, so cached card lists stay valid.
/** @type {WeakMap<Palette, Map<string, Palette>>} */
const heatPalettes = new WeakMap();
/**
 * @param {Palette} p
 * @param {string} colour
 * @returns {Palette}
 */
function heatPalette(p, colour) {
  let byColour = heatPalettes.get(p);
  if (!byColour) heatPalettes.set(p, (byColour = new Map()));
  let got = byColour.get(colour);
  if (!got) {
    /** @type {Palette["kinds"]} */
    const kinds = {};
    // the card's own text colour for every line: muted grey is too faint on the hot colours
    for (const [k, v] of Object.entries(p.kinds)) kinds[k] = { ...v, fill: colour, text: p.cardText };
    got = { ...p, cardFill: colour, cardMuted: p.cardText, kinds };
    byColour.set(colour, got);
  }
  return got;
}

const FAR_PX = 10.5; // a far name's size on screen, whatever the zoom
const FAR_OP_PX = S.farOpPx; // an op card's short name: smaller, so that it shows on smaller cards
const FAR_OP_WEIGHT = 500; // and less bold: narrower, so that more of it fits a card (S.fontFarOp)
const FAR_SUB_PX = 9.5; // the op count under it
const FAR_LEAST = 8; // a frame's name cut shorter than this says nothing
const FAR_OP_LEAST = S.farOpLeast; // a card's name, likewise ("mul", "cat", "lin…")
const FAR_BESIDE_PX = 200; // a name over or beside a frame too narrow for it, at most this wide
const FAR_FAMILY = S.fontHeader.split("px ")[1]; // the far names' font family

// Far away, an item still says what it is (semantic zoom): its name at a constant 10.5px
// on screen, always horizontal (never down a frame's side: issue 36 item 6). A frame or a
// closed group is named across its top when its box holds the name (or at least eight
// letters of it). A frame too narrow for that (a norm's short chain at Fit after Expand
// all, a deep model's thin column) has its own name (`input_layernorm`, without its class)
// across its top all the same, running on past its right edge on the frame's colour
// (`over`), or beside its top right corner when the frame is too narrow for any letter
// inside it (under 14.5 px, `beside`); where that would cover a name drawn already, the
// name is cut to what the frame holds (at least three letters and "…"; the whole name
// shows as the canvas's tooltip under the pointer, app.js). A frame says how many ops it
// holds under its name when there is room ("70 ops": its ops are too small to read). An op
// card too small for its own text is summarised by its op's short name at 9 px, centred
// in it (`op: true`), as soon as the card holds three letters of it. `placed`: the names
// drawn so far this frame (world boxes); a name that would cover one of them is not
// drawn. Null when it is not drawn at this zoom.
// The measuring (fonts set, texts cut to fit) depends on the zoom only, not on what is
// drawn around the name: it is kept on the prim for the zoom last asked (`_far`), so that a
// frame panned at one zoom measures no text (at Fit after Expand all, 1,500 frames' names
// are tried every frame, and measuring them was most of the redraw); only the placing
// against the names drawn so far is done again.
/**
 * @param {FarPrim} f
 * @param {number} s  the zoom
 * @param {Ctx} ctx
 * @param {Placed | null} [placed]
 * @returns {FarLabel | null}
 */
export function farLabel(f, s, ctx, placed = null) {
  const memo = f._far;
  const tries = memo && memo.s === s && memo.sub === f.sub ? memo.tries : farTries(f, s, ctx);
  if (tries !== (memo && memo.tries)) f._far = { s, sub: f.sub, tries };
  for (const t of tries) {
    const box = { ...t.box };
    if (placed && !placeDown(placed, box, s, f)) continue;
    const dy = box.y - t.box.y; // moved down below a name it met, with its op count
    const sub = t.sub ? { text: t.sub.text, font: t.sub.font, y: /** @type {number} */ (t.sub.y) + dy } : null;
    return { text: t.text, font: t.font, px: t.px, x: t.x, y: t.y + dy, bg: t.bg ? box : null, sub, beside: t.beside, box };
  }
  return null;
}

// The places a far name may take at zoom s, in order of preference, measured but not
// placed (farLabel tries them against the names drawn): none, one, or for a frame too
// narrow for its name inside, its whole name over or beside it, then the name cut to the
// frame.
/**
 * @param {FarPrim} f
 * @param {number} s
 * @param {Ctx} ctx
 * @returns {FarLabel[]}
 */
// eslint-disable-next-line complexity -- a far name's places tried in order of preference
function farTries(f, s, ctx) {
  const sw = f.w * s;
  const sh = f.h * s;
  const width = farWidth(ctx, f.op ? FAR_OP_WEIGHT : 600, (f.op ? FAR_OP_PX : FAR_PX) / s);
  const least = Math.min(f.frame ? FAR_LEAST : FAR_OP_LEAST, f.text.length);
  const margin = f.op ? 2 : 8; // an op's name may come nearer its card's sides
  const inside = sw >= 16 + margin && sh >= (f.op ? FAR_OP_PX : FAR_PX + 3.5)
    ? fitText(width, f.text, f.w - margin / s, least) : null;
  /** @type {FarLabel[]} */
  const tries = [];
  /** @param {FarLabel | null} t */
  const add = (t) => t && tries.push(t);
  if (inside || !f.frame || sw < 2 || sh < 10) {
    if (inside) add(farMeasured(f, s, ctx, width, inside, "in"));
    return tries;
  }
  // too narrow for its name inside: its own name (`input_layernorm`, not its class)
  // across its top, past its right edge, as little as it can cover
  const own = f.text.split(" · ")[0];
  const whole = fitText(width, own, FAR_BESIDE_PX / s, Math.min(least, own.length));
  if (whole) add(farMeasured(f, s, ctx, width, whole, sw < FAR_PX + 4 ? "beside" : "over"));
  if (sw < 24 || sh < 14) return tries;
  const cut = fitText(width, f.text, f.w - 8 / s, Math.min(FAR_OP_LEAST, f.text.length));
  if (cut) add(farMeasured(f, s, ctx, width, cut, "in"));
  return tries;
}

// A far name `t` measured in (or, for a narrow frame, over or beside) the top of `f`, with
// its op count under it where there is room; null where it would be wider than what it
// names. Not placed yet: `box` is where it goes unless it meets a name drawn (farLabel).
/**
 * @param {FarPrim} f
 * @param {number} s
 * @param {Ctx} ctx
 * @param {Width} width  of a text in f's far font at zoom s
 * @param {string} t
 * @param {"in" | "over" | "beside"} where
 * @returns {FarLabel | null}
 */
function farMeasured(f, s, ctx, width, t, where) {
  const px = (f.op ? FAR_OP_PX : FAR_PX) / s;
  const font = width.font;
  const tw = width(t);
  const subPx = FAR_SUB_PX / s;
  const beside = where === "beside";
  /** @type {{text: string, font: string, y?: number} | null} */
  let sub = null;
  let subW = 0;
  if (f.sub) {
    const subWidth = farWidth(ctx, 400, subPx);
    subW = subWidth(f.sub);
    const room = f.h * s >= FAR_PX + FAR_SUB_PX + 10 && (where !== "in" || subW <= f.w - 8 / s);
    if (room) sub = { text: f.sub, font: subWidth.font };
    else subW = 0;
  }
  let x;
  let y;
  let box;
  if (f.op) {
    x = f.x + (f.w - tw) / 2;
    y = f.y + (f.h - px) / 2;
    box = { x: x - 2 / s, y: y - 1 / s, w: tw + 4 / s, h: px + 3 / s };
  } else {
    x = beside ? f.x + f.w + 4 / s : f.x + 4 / s;
    y = f.y + f.padTop / s;
    if (sub) sub.y = y + px + 2 / s;
    box = { x: x - 2 / s, y: y - 1 / s, w: Math.max(tw, subW) + 4 / s, h: px + 3 / s + (sub ? subPx + 2 / s : 0) };
  }
  if (where === "in" && Math.max(x + tw, box.x + box.w - 2 / s) > f.x + f.w + 0.5 / s) return null; // never wider than what it names
  // a frame's name on its own colour, over whatever it covers (bg: its box once placed)
  return { text: t, font, px, x, y, bg: f.bg ? box : null, sub, beside: where !== "in", box };
}

// Places a frame's name `box` (moving it, world units); where it meets a name drawn
// already (its parent's, across the parent's top, where the frame starts right under it),
// it may start below that name while the frame is tall enough. False: not placed.
/**
 * @param {Placed} placed
 * @param {Box} box
 * @param {number} s
 * @param {FarPrim} f
 */
function placeDown(placed, box, s, f) {
  let hit = place(placed, box, s);
  if (hit && f.frame) {
    const dy = hit.y + hit.h + 2 / s - box.y;
    if (dy > 0 && box.y + dy + box.h <= f.y + f.h) {
      box.y += dy;
      hit = place(placed, box, s);
    }
  }
  return !hit;
}

// Adds `box` to the names placed this frame unless it covers one of them (then that one
// is returned, and nothing is added). The boxes are kept in screen cells of 128 px too
// (`placed.cells`), so that a frame with thousands of op names compares each with its
// neighbours only.
/**
 * @param {Placed} placed
 * @param {Box} box
 * @param {number} s
 * @returns {Box | null}
 */
function place(placed, box, s) {
  const cell = 128 / s;
  const cells = placed.cells || (placed.cells = new Map());
  /** @type {string[]} */
  const keys = [];
  for (let cx = Math.floor(box.x / cell); cx <= Math.floor((box.x + box.w) / cell); cx++) {
    for (let cy = Math.floor(box.y / cell); cy <= Math.floor((box.y + box.h) / cell); cy++) keys.push(cx + "," + cy);
  }
  for (const k of keys) {
    for (const b of cells.get(k) || []) {
      if (box.x < b.x + b.w && b.x < box.x + box.w && box.y < b.y + b.h && b.y < box.y + box.h) return b;
    }
  }
  for (const k of keys) {
    const list = cells.get(k);
    if (list) list.push(box);
    else cells.set(k, [box]);
  }
  placed.push(box);
  return null;
}

// `text` as it fits in `room` (world units, in the context's font): whole, or cut with an
// ellipsis to the longest start that fits, but never shorter than `least` characters (null).
/**
 * @param {Width} width
 * @param {string} text
 * @param {number} room
 * @param {number} least
 * @returns {string | null}
 */
function fitText(width, text, room, least) {
  if (width(text) <= room) return text;
  const cut = (/** @type {number} */ n) => text.slice(0, n - 1) + "…";
  if (least >= text.length || width(cut(least)) > room) return null;
  let lo = least;
  let hi = text.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (width(cut(mid)) <= room) lo = mid;
    else hi = mid - 1;
  }
  return cut(lo);
}

// The width of a text in a far font of `weight` at `px` (world units): a text's width is
// proportional to the font's size (the canvas measures unhinted advances), so each text is
// measured once per weight, at REF_PX, and scaled; a zoom measures only the cuts it has
// not met (zooming at Fit after Expand all would otherwise measure 1,500 names a frame).
/** @typedef {((text: string) => number) & {font: string}} Width */
const REF_PX = 100;
/** @type {Map<string, number>} */
const perPx = new Map(); // weight|text -> width at 1 px
/**
 * @param {Ctx} ctx
 * @param {number} weight
 * @param {number} px
 * @returns {Width}
 */
function farWidth(ctx, weight, px) {
  const ref = `${weight} ${REF_PX}px ${FAR_FAMILY}`;
  const width = (/** @type {string} */ text) => {
    const k = weight + "|" + text;
    let w = perPx.get(k);
    if (w === undefined) {
      if (perPx.size >= 20000) perPx.clear();
      ctx.font = ref;
      w = ctx.measureText(text).width / REF_PX;
      perPx.set(k, w);
    }
    return w * px;
  };
  return Object.assign(width, { font: `${weight} ${px}px ${FAR_FAMILY}` });
}

// ---------------------------------------------------------------- canvas executor

// Paints a draw list on a 2D context already transformed to world coordinates at zoom s.
// hatch: () => the opaque hatch CanvasPattern. `far`: collects the far names drawn
// ({text, sub, outside, box}), for the hooks.
/**
 * A far name as it was drawn (for the hooks).
 * @typedef {{text: string, full: string, sub: string | null, beside: boolean, frame: boolean,
 *   op: boolean, px: number, box: Box, of: Box}} FarDrawn
 */

/**
 * @param {CanvasRenderingContext2D} ctx
 * @param {DrawList} list
 * @param {number} s
 * @param {() => CanvasPattern | string | null} hatch
 * @param {FarDrawn[] | null} [far]
 */
// eslint-disable-next-line complexity -- the paint loop, one case per display-list entry kind
export function paintList(ctx, list, s, hatch, far = null) {
  for (let i = 0; i < list.length; i++) {
    const q = list[i];
    if (Array.isArray(q)) {
      paintList(ctx, q, s, hatch, far);
      continue;
    }
    switch (q.t) {
      case "rect": {
        const fill = q.fill === HATCH ? hatch() : q.fill;
        // Corners rounded by under half a pixel look square: a square rect is far cheaper
        // to fill and stroke than a path (1,500 frames at Fit after Expand all).
        if (!q.r || (typeof q.r === "number" && q.r * s < 0.5 && !q.dash)) {
          if (fill) {
            ctx.fillStyle = fill;
            if (q.fa !== 1) ctx.globalAlpha = q.fa;
            ctx.fillRect(q.x, q.y, q.w, q.h);
            if (q.fa !== 1) ctx.globalAlpha = 1;
          }
          if (q.stroke) {
            ctx.lineWidth = q.hair ? 1 / s : q.lw;
            ctx.strokeStyle = q.stroke;
            ctx.strokeRect(q.x, q.y, q.w, q.h);
          }
          break;
        }
        ctx.beginPath();
        if (ctx.roundRect) ctx.roundRect(q.x, q.y, q.w, q.h, q.r);
        else ctx.rect(q.x, q.y, q.w, q.h);
        if (fill) {
          ctx.fillStyle = fill;
          if (q.fa !== 1) ctx.globalAlpha = q.fa;
          ctx.fill();
          if (q.fa !== 1) ctx.globalAlpha = 1;
        }
        if (q.stroke) {
          ctx.lineWidth = q.hair ? 1 / s : q.lw;
          ctx.strokeStyle = q.stroke;
          if (q.dash) ctx.setLineDash(q.dash);
          ctx.stroke();
          if (q.dash) ctx.setLineDash([]);
        }
        break;
      }
      case "text":
        ctx.font = q.font;
        ctx.textAlign = q.align;
        ctx.textBaseline = q.baseline;
        ctx.fillStyle = q.fill;
        ctx.fillText(q.text, q.x, q.y);
        break;
      case "toggle":
        ctx.beginPath();
        ctx.arc(q.cx, q.cy, q.r, 0, Math.PI * 2);
        ctx.strokeStyle = q.color;
        ctx.lineWidth = 1.2;
        ctx.stroke();
        ctx.beginPath();
        ctx.moveTo(q.cx - q.r / 2, q.cy);
        ctx.lineTo(q.cx + q.r / 2, q.cy);
        if (q.sign === "+") {
          ctx.moveTo(q.cx, q.cy - q.r / 2);
          ctx.lineTo(q.cx, q.cy + q.r / 2);
        }
        ctx.stroke();
        break;
      case "farlabels": {
        /** @type {Placed} */
        const placed = [];
        ctx.textAlign = "left";
        ctx.textBaseline = "top";
        for (const item of q.list) {
          const f = farLabel(item, s, ctx, placed);
          if (!f) continue;
          if (far) far.push({ text: f.text, full: item.text, sub: f.sub ? f.sub.text : null, beside: f.beside, frame: !!item.frame, op: !!item.op, px: f.px, box: f.box, of: { x: item.x, y: item.y, w: item.w, h: item.h } });
          if (f.bg) {
            ctx.fillStyle = /** @type {string} */ (item.bg);
            ctx.fillRect(f.bg.x, f.bg.y, f.bg.w, f.bg.h);
          }
          ctx.fillStyle = item.color;
          ctx.font = f.font;
          ctx.fillText(f.text, f.x, f.y);
          if (f.sub) {
            ctx.font = f.sub.font;
            ctx.fillText(f.sub.text, f.x, /** @type {number} */ (f.sub.y));
          }
        }
        break;
      }
      case "specks": {
        const path = new Path2D();
        const r = q.rects;
        for (let k = 0; k < r.length; k += 4) path.rect(r[k], r[k + 1], r[k + 2], r[k + 3]);
        ctx.fillStyle = q.fill;
        ctx.fill(path);
        break;
      }
      case "edges":
        drawEdges(ctx, q, s);
        break;
    }
  }
}

/**
 * @param {CanvasRenderingContext2D} ctx
 * @param {EdgesPrim} q
 * @param {number} s
 */
function drawEdges(ctx, q, s) {
  const { ox, oy, list, simple } = q;
  ctx.lineWidth = simple ? 1 / s : 1.25;
  ctx.strokeStyle = q.stroke;
  ctx.beginPath();
  for (const pts of list) {
    ctx.moveTo(ox + pts[0][0], oy + pts[0][1]);
    if (simple || pts.length === 2) {
      for (let i = 1; i < pts.length; i++) ctx.lineTo(ox + pts[i][0], oy + pts[i][1]);
    } else {
      for (let i = 1; i < pts.length - 1; i++) ctx.arcTo(ox + pts[i][0], oy + pts[i][1], ox + pts[i + 1][0], oy + pts[i + 1][1], 7);
      ctx.lineTo(ox + pts[pts.length - 1][0], oy + pts[pts.length - 1][1]);
    }
  }
  ctx.stroke();
  if (!simple) {
    ctx.fillStyle = q.stroke;
    ctx.beginPath();
    for (const pts of list) {
      const [ax, ay] = pts[pts.length - 2];
      const [bx, by] = pts[pts.length - 1];
      const ang = Math.atan2(by - ay, bx - ax);
      const L = 7;
      const x = ox + bx;
      const y = oy + by;
      ctx.moveTo(x, y);
      ctx.lineTo(x - L * Math.cos(ang - 0.42), y - L * Math.sin(ang - 0.42));
      ctx.lineTo(x - L * Math.cos(ang + 0.42), y - L * Math.sin(ang + 0.42));
      ctx.closePath();
    }
    ctx.fill();
  }
  if (q.labels.length) {
    ctx.font = S.fontLabel;
    ctx.textBaseline = "middle";
    ctx.textAlign = "left";
    for (const l of q.labels) {
      const b = labelRect(l);
      ctx.fillStyle = q.labelBg;
      ctx.fillRect(ox + b.x, oy + b.y, b.w, b.h);
      ctx.fillStyle = q.labelFill;
      ctx.fillText(l.text, ox + l.x, oy + l.y);
    }
  }
}
