// Card geometry: how big each kind of card is and how it is drawn, one object per kind
// (Netron's grapher blocks own `measure` and `update`). The layout worker imports this
// file (a module worker) to size the cards it lays out; the renderer and the SVG export
// draw the same content in the boxes the layout gave them (drawlist.js). Measuring and
// drawing walk the same rows and slots with the same fonts, so a card's size and its
// drawing cannot drift apart.
//
// A card's *content* is the view model's display entry for an item (viewmodel.js display):
//   {kind: "node" | "function" | "group" | "chunk" | "stack" | "in" | "out", title,
//    lines: [string], tag: string | null, weightStart?: number (lines from here on are
//    weights), weights?: [value id] (the values those lines name), toggle?: bool (an op
//    card that opens: a function call to its kernels, a boundary to its bodies, a module
//    drawn as one call; groups, chunks and stacks always have one), op?: string (what
//    colours an op card's strip), opaque?: bool, caption?: string (the module an op card
//    stands for: `q_proj · Linear`), parts?: [{text, font, tone}] (a pill's texts, each in
//    a CARD_STYLE font), look?, role?, quiet?: bool (a parameter's smaller pill)}
// and `inner` {w, h} on an expanded container: its frame is sized from its inside.
//
// A box card (an op, a function call, a closed group, chunk or stack), top to bottom:
//   padTop | caption row (when it has one) | title row: title … tag chip, toggle room |
//   one row per line | padBottom
// left and right padX; weight lines carry a bullet. A pill: its parts side by side, centred.
// A frame (an expanded container): a header band (its class and path, `Block · h.3`, the
// modules inside that ran nothing, its twins), then its inside at (groupPadX, groupHeader).

import { HATCH, KIND_WORDING, QUIET_ROLES, formatValue, kindStyle } from "./theme.js";

const SANS = 'system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif';
const MONO = 'ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, Consolas, monospace';

// Fonts and metrics of every card, in world pixels (100 % zoom).
export const CARD_STYLE = Object.freeze({
  fontTitle: `600 13px ${SANS}`,
  fontTag: `600 10px ${SANS}`,
  fontMono: `11.5px ${MONO}`,
  fontHeader: `600 12px ${SANS}`,
  fontLabel: `10.5px ${MONO}`,
  fontBoundaryName: `600 11.5px ${MONO}`, // a capture input's name on its pill
  fontQuiet: `10.5px ${MONO}`, // parameter / buffer / variable / constant pills
  fontCaption: `600 10.5px ${SANS}`, // the module an op card stands for
  fontFarOp: `500 9px ${SANS}`, // far away, an op card's short name (drawlist.js farLabel), whatever the zoom
  farOpPx: 9, // that name's size on screen: drawn once the card is as tall
  farOpLeast: 3, // and cut no shorter than three characters ("mul", "li…")
  padX: 11,
  padTop: 8,
  padBottom: 8,
  titleHeight: 18,
  captionHeight: 14,
  lineHeight: 15,
  tagGap: 10, // between the title and the tag chip
  tagPad: 10, // a tag chip is this much wider than its text
  toggleRoom: 20, // right of the title and lines, for the +/- button
  toggleInset: 16, // the +/- button's centre, from the card's right edge
  toggleRadius: 7,
  bullet: 8, // a weight line's bullet and the space after it
  accent: 4, // an op card's category strip on its left edge
  minCardWidth: 104,
  maxCardWidth: 300,
  minGroupWidth: 180,
  boundaryHeight: 24,
  quietHeight: 19, // the smaller pill of a parameter, buffer, variable or constant
  minPillWidth: 80,
  minQuietPillWidth: 64,
  boundaryGap: 8, // between a pill's name and its shape
  groupPadX: 14,
  groupHeader: 30,
  groupPadBottom: 14,
  labelHeight: 14, // an edge label's background
});
const S = CARD_STYLE;

/**
 * @typedef {import("./theme.js").Palette} Palette
 * @typedef {import("../api.js").PageItem} PageItem
 * @typedef {import("../layout/protocol.js").Size} Size
 */

/**
 * One text of a pill: its words, a CARD_STYLE font key, its tone ("name" | "shape" | "plain").
 * @typedef {{text: string, font: string, tone?: string}} Part
 */

/**
 * A card's content: the view model's display entry for an item (see the top of this file).
 * @typedef {object} CardContent
 * @property {string} kind
 * @property {string} title
 * @property {string[]} lines
 * @property {string | null} [tag]
 * @property {string} [caption]
 * @property {number | null} [weightStart]
 * @property {number[]} [weights]  the value ids its weight lines name
 * @property {boolean} [toggle]
 * @property {string} [op]
 * @property {boolean} [opaque]
 * @property {unknown} [collective]  an op card of a collective (moves data between devices)
 * @property {string | null} [compiler]  the badge of the collectives XLA runs for it (`⇆ XLA ×2`)
 * @property {Part[]} [parts]
 * @property {string} [look]  a pill's: "input" | "quiet" | "plain"
 * @property {string | null} [role]
 * @property {boolean} [quiet]
 * @property {unknown} [fold]  a stack that folds things that are not repetitions
 * @property {Size} [inner]  an expanded container: the size of its inside
 */

/** @typedef {{width: (text: string, font: string) => number}} Measurer  text widths in a CARD_STYLE font */

/**
 * A scene item as the cards read it: its box, its content and the server's item.
 * @typedef {object} SceneItem
 * @property {string} key
 * @property {string} type  "node" | "group" | "chunk" | "stack" | "in" | "out"
 * @property {number} x
 * @property {number} y
 * @property {number} w
 * @property {number} h
 * @property {CardContent} card
 * @property {PageItem} item
 * @property {unknown} [expanded]  its inside, when open
 * @property {PillFit} [_fit]
 */

/** @typedef {{texts: string[], widths: number[], total: number}} PillFit */

/**
 * The primitives (drawlist.js lists them all).
 * @typedef {{t: "rect", x: number, y: number, w: number, h: number, r: number | number[], fill: string,
 *   fa: number, stroke: string | null, lw: number, hair: boolean, dash: number[] | null}} RectPrim
 * @typedef {{t: "text", x: number, y: number, text: string, font: string, fill: string,
 *   align: CanvasTextAlign, baseline: "middle"}} TextPrim
 * @typedef {{t: "toggle", cx: number, cy: number, r: number, sign: "+" | "-", color: string}} TogglePrim
 * @typedef {{t: "far", x: number, y: number, w: number, h: number, text: string, sub?: string, color: string,
 *   padTop: number, bg: string | null, frame?: boolean, op?: boolean,
 *   _far?: {s: number, sub?: string, tries: import("./drawlist.js").FarLabel[]}, _bare?: FarPrim}} FarPrim  _far: its
 *   places measured at the zoom last drawn, _bare: the frame's name without its op count (drawlist.js)
 * @typedef {RectPrim | TextPrim | TogglePrim} CardPrim
 */

/**
 * A card's primitives at one level of detail; `header` and `far` only for a frame.
 * @typedef {{card: CardPrim[], header?: CardPrim[] | null, far?: FarPrim[] | null}} CardPrims
 */

/**
 * The font of a CARD_STYLE font key (`fontTitle`), the mono font for another.
 * @param {string} key
 * @returns {string}
 */
function fontOf(key) {
  const font = /** @type {Record<string, string | number>} */ (S)[key];
  return typeof font === "string" && font ? font : S.fontMono;
}

// ---------------------------------------------------------------- measuring text

// Text widths in a CARD_STYLE font: from a 2D context (the renderer's canvas, the
// worker's OffscreenCanvas), or from character counts (charMeasurer: estimates, and a
// worker without OffscreenCanvas).
/**
 * @param {CanvasRenderingContext2D | OffscreenCanvasRenderingContext2D} ctx
 * @returns {Measurer}
 */
export function canvasMeasurer(ctx) {
  return {
    width(text, font) {
      ctx.font = fontOf(font);
      return ctx.measureText(text).width;
    },
  };
}

/** @type {Record<string, number>} */
const CHAR_WIDTH = { fontTitle: 7.5, fontTag: 6, fontCaption: 6.2 };
/** @type {Measurer} */
export const charMeasurer = { width: (text, font) => String(text).length * (CHAR_WIDTH[font] || 7) };

// ---------------------------------------------------------------- content

// What a boundary pill says: its look ("input" | "quiet" | "plain") and its text parts, each
// with a CARD_STYLE font key and a tone ("name" | "shape" | "plain"). A capture input shows
// its name (`x  f32[2,3,16,16]`), parameters, buffers, variables and constants a smaller,
// lighter pill (`stem.weight  f32[8,3,3,3]`), a value from outside the view `in  f32[8]`.
/**
 * @param {"in" | "out"} side
 * @param {any} v  a value summary of the API (`name`, `role`, `label`)
 * @returns {CardContent}
 */
// eslint-disable-next-line complexity -- one pill look per side and role (input, quiet state, named output, body result, plain)
export function pillContent(side, v) {
  const shape = formatValue(v);
  const name = v && typeof v.name === "string" && v.name ? v.name : null;
  let look = "plain";
  /** @type {string | null} */
  let role = null;
  /** @type {Part[]} */
  let parts = [{ text: `${side}  ${shape}`, font: "fontMono", tone: "plain" }];
  if (side === "in" && name) {
    const quiet = QUIET_ROLES.has(v.role);
    look = quiet ? "quiet" : "input";
    role = v.role || null;
    parts = [
      { text: name, font: quiet ? "fontQuiet" : "fontBoundaryName", tone: "name" },
      { text: shape, font: quiet ? "fontQuiet" : "fontMono", tone: "shape" },
    ];
  } else if (side === "out" && name && v.role === "output") {
    // One of several things the call returned, by its place: `out  aux.pre_logits  f32[1,64]`.
    look = "plain";
    role = v.role;
    parts = [
      { text: `out  ${name}`, font: "fontMono", tone: "name" },
      { text: shape, font: "fontMono", tone: "shape" },
    ];
  } else if (side === "out" && name && v.role === "body_result") {
    // What one iteration of an unexecuted body hands on: `out carry 0 (next iteration)  f32[3]`.
    look = "plain";
    role = v.role;
    parts = [
      { text: `out  ${name}`, font: "fontMono", tone: "name" },
      { text: shape, font: "fontMono", tone: "shape" },
    ];
  }
  return { kind: side, title: parts.map((p) => p.text).join("  "), lines: [], tag: null, parts, look, role, quiet: look === "quiet" };
}

/** @param {string} kind */
const boxed = (kind) => kind === "group" || kind === "chunk" || kind === "stack";
/** @param {string} kind */
const opLike = (kind) => kind === "node" || kind === "function";
/** @param {CardContent} c */
const hasToggle = (c) => boxed(c.kind) || !!c.toggle;
// The height above a box card's title row: its padding, and its caption when it has one.
/** @param {CardContent} c */
const headTop = (c) => S.padTop + (c.caption ? S.captionHeight : 0);

// ---------------------------------------------------------------- the cards

// An op, or a group, chunk or stack drawn closed.
const BOX = {
  /**
   * @param {CardContent} c
   * @param {Measurer} m
   * @returns {Size}
   */
  measure(c, m) {
    const toggle = hasToggle(c) ? S.toggleRoom : 0;
    let w = m.width(c.title, "fontTitle") + toggle;
    if (c.tag) w += m.width(c.tag, "fontTag") + S.tagPad + S.tagGap;
    if (c.caption) w = Math.max(w, m.width(c.caption, "fontCaption"));
    const ws = c.weightStart ?? c.lines.length;
    c.lines.forEach((line, i) => {
      w = Math.max(w, m.width(line, "fontMono") + toggle + (i >= ws ? S.bullet : 0));
    });
    return {
      w: Math.max(S.minCardWidth, Math.min(S.maxCardWidth, Math.ceil(w + 2 * S.padX))),
      h: Math.ceil(headTop(c) + S.titleHeight + c.lines.length * S.lineHeight + S.padBottom),
    };
  },
};

// A boundary pill: its parts, in their fonts, side by side.
const PILL = {
  /**
   * @param {CardContent} c
   * @param {Measurer} m
   * @returns {Size}
   */
  measure(c, m) {
    const parts = c.parts && c.parts.length ? c.parts : [{ text: c.title, font: "fontMono" }];
    let w = (parts.length - 1) * S.boundaryGap + 2 * S.padX;
    for (const p of parts) w += m.width(p.text, p.font);
    return {
      w: Math.max(c.quiet ? S.minQuietPillWidth : S.minPillWidth, Math.min(S.maxCardWidth, Math.ceil(w))),
      h: c.quiet ? S.quietHeight : S.boundaryHeight,
    };
  },
};

// An expanded container: its inside, plus the header band and the padding around it.
export const FRAME = {
  inset: { x: S.groupPadX, y: S.groupHeader },
  /**
   * @param {Size} inner
   * @returns {Size}
   */
  measure(inner) {
    return { w: Math.max(inner.w + 2 * S.groupPadX, S.minGroupWidth), h: inner.h + S.groupHeader + S.groupPadBottom };
  },
};

// The size of a card with this content: a frame when it has an inside.
/**
 * @param {CardContent} c
 * @param {Measurer} m
 * @returns {Size}
 */
export function measureCard(c, m) {
  if (c.inner) return FRAME.measure(c.inner);
  return c.kind === "in" || c.kind === "out" ? PILL.measure(c, m) : BOX.measure(c, m);
}

// An op card laid out for the screen (Expand all: the layout worker's job.wrap) is at least
// as wide as its far name needs at the zoom from which its height holds that name (9 px
// on screen, drawlist.js farLabel): the whole name where it has at most four letters
// (`mean`: cut, `me…` would be no narrower), else its shortest cut (`li…`). A short op on a
// short card (a norm's `mean`, 24 px wide at a 4-layer Llama's Fit) said nothing at all.
/**
 * @param {CardContent} c
 * @param {Size} size  its measured size
 * @param {Measurer} m
 * @returns {Size}
 */
export function screenCard(c, size, m) {
  if (c.inner || !opLike(c.kind)) return size;
  const name = shortOp(c.title);
  const least = name.length <= S.farOpLeast + 1 ? name : name.slice(0, S.farOpLeast - 1) + "…";
  const zoom = S.farOpPx / size.h; // the least zoom at which its name is drawn
  const need = Math.ceil((m.width(least, "fontFarOp") + 2 + 2) / zoom); // 1 px a side, and rounding
  return need > size.w ? { w: Math.min(S.maxCardWidth, need), h: size.h } : size;
}

// ---------------------------------------------------------------- drawing
// Primitives as drawlist.js documents them; `it` is a scene item: its box (x, y, w, h), its
// content (`card`) and the server's item (`item`, for its look: kind, opaque, wording).

/**
 * @param {number} x @param {number} y @param {number} w @param {number} h
 * @param {number | number[]} r  corner radius, or one per corner
 * @param {string} fill
 * @param {string | null} [stroke]
 * @param {number} [lw]
 * @param {number[] | null} [dash]
 * @param {number} [fa]  fill opacity
 * @param {boolean} [hair]  a stroke 1 screen px wide
 * @returns {RectPrim}
 */
export const rect = (x, y, w, h, r, fill, stroke = null, lw = 1, dash = null, fa = 1, hair = false) =>
  ({ t: "rect", x, y, w, h, r, fill, fa, stroke, lw, hair, dash });
/**
 * @param {number} x @param {number} y @param {string} s @param {string} font @param {string} fill
 * @param {CanvasTextAlign} [align]
 * @returns {TextPrim}
 */
export const text = (x, y, s, font, fill, align = "left") => ({ t: "text", x, y, text: s, font, fill, align, baseline: "middle" });

/** @type {[RegExp, string][]} */
const OP_ACCENT = [
  [/^(dot_general|conv|matmul|mm|bmm|linear|addmm|einsum|ragged_dot)/, "#3b82f6"],
  [/^(exp|log|tanh|logistic|relu|gelu|silu|softmax|erf|sigmoid|max$|min$)/, "#ef6c4a"],
  [/^(reshape|transpose|broadcast|squeeze|expand_dims|concatenate|slice|dynamic_slice|gather|scatter|pad|view|permute|select_n|convert_element_type)/, "#16a34a"],
  [/^(reduce_|argmax|argmin|cumsum|sum|mean)/, "#9333ea"],
  [/^(while|cond|scan|pjit|custom_|call|remat|checkpoint)/, "#d97706"],
];

/** @param {string} op */
export function accentFor(op) {
  for (const [re, color] of OP_ACCENT) if (re.test(op)) return color;
  return "#94a3b8";
}

// Where a box card's parts go inside its box: the title row's and the lines' centres, the
// room the texts may take, and where the tag chip and the toggle sit (world coordinates).
/** @param {SceneItem} it */
function boxSlots(it) {
  const c = it.card;
  const toggle = hasToggle(c) ? S.toggleRoom : 0;
  const room = it.w - 2 * S.padX - toggle;
  const top = headTop(c);
  return {
    x: it.x + S.padX,
    room,
    captionY: it.y + S.padTop + S.captionHeight / 2,
    titleY: it.y + top + S.titleHeight / 2,
    lineY: (/** @type {number} */ i) => it.y + top + S.titleHeight + (i + 0.5) * S.lineHeight,
    tagRight: it.x + it.w - S.padX - toggle,
    toggleX: toggle ? it.x + it.w - S.toggleInset : null,
  };
}

// The primitives of a card at a level of detail (band: 0 far, 1 titles, 2 everything) into
// `dl` {card, header, far}; header and far only for a frame.
/**
 * @typedef {CanvasRenderingContext2D | OffscreenCanvasRenderingContext2D} Ctx  measures texts
 */

/**
 * @param {CardPrims} dl
 * @param {SceneItem} it
 * @param {Ctx} ctx
 * @param {Palette} p
 * @param {number} band
 */
export function drawCard(dl, it, ctx, p, band) {
  const kind = (it.card && it.card.kind) || it.type;
  if (it.expanded) drawFrame(dl, it, ctx, p, band);
  else if (opLike(kind)) drawOp(dl, it, ctx, p, band);
  else if (boxed(kind)) drawClosedGroup(dl, it, ctx, p, band);
  else drawPill(dl.card, it, ctx, p, band);
}

// An op card: a kernel, or a function call (a second sheet behind it: its kernels are
// inside), with the module it stands for on its caption row.
/**
 * @param {CardPrims} dl @param {SceneItem} it @param {Ctx} ctx @param {Palette} p @param {number} band
 */
// eslint-disable-next-line complexity -- an op card's parts drawn in order, each only when present
function drawOp(dl, it, ctx, p, band) {
  const out = dl.card;
  const c = it.card;
  const opaque = !!c.opaque;
  const collective = !!c.collective && !opaque; // moves data between devices: it stands out
  const accent = opaque ? p.opaqueStroke : collective ? p.collectiveStroke : accentFor(c.op ?? c.title ?? "");
  if (band === 0) {
    out.push(rect(it.x, it.y, it.w, it.h, 0, opaque ? p.opaqueStroke : collective ? p.collectiveFill : p.cardFill));
    out.push(rect(it.x, it.y, it.w, Math.min(it.h, 6), 0, c.compiler ? p.compilerStroke : accent));
    // too small for its text: summarised by its op's short name (semantic zoom); the
    // compiler's collectives keep their colour on its top strip
    dl.far = [{ t: "far", x: it.x, y: it.y, w: it.w, h: it.h, text: shortOp(c.title), color: p.cardText, padTop: 0, bg: null, op: true }];
    return;
  }
  if (c.kind === "function") out.push(rect(it.x + 3, it.y + 3, it.w, it.h, 6, p.cardFill, p.cardStroke, 1));
  out.push(rect(it.x, it.y, it.w, it.h, 6, opaque ? HATCH : collective ? p.collectiveFill : p.cardFill,
    opaque ? p.opaqueStroke : collective ? p.collectiveStroke : p.cardStroke, opaque || collective ? 1.8 : 1, opaque ? [5, 3] : null));
  out.push(rect(it.x, it.y, S.accent, it.h, [6, 0, 0, 6], accent));
  if (c.caption) {
    const at = boxSlots(it);
    ctx.font = S.fontCaption;
    out.push(text(at.x, at.captionY, truncateStart(ctx, c.caption, it.w - 2 * S.padX), S.fontCaption, p.kinds.module ? p.kinds.module.text : p.cardMuted));
  }
  boxTexts(out, it, ctx, p, band, p.cardText, opaque ? p.opaqueStroke : collective ? p.collectiveStroke : null, accent);
  compilerBadge(out, it, ctx, p);
}

// The collectives the compiler runs for an op (or inside a closed group): a chip astride
// the card's top edge, in the compiler's colour, apart from the program's own collectives.
/**
 * @param {CardPrim[]} out @param {SceneItem} it @param {Ctx} ctx @param {Palette} p
 */
function compilerBadge(out, it, ctx, p) {
  const badge = it.card.compiler;
  if (!badge) return;
  ctx.font = S.fontTag;
  const w = ctx.measureText(badge).width + S.tagPad;
  const x = it.x + it.w - w - 8;
  out.push(rect(x, it.y - 8, w, 16, 8, p.compilerStroke, null, 1, null, 1));
  out.push(text(x + S.tagPad / 2, it.y + 0.5, badge, S.fontTag, p.background));
}

/**
 * @param {CardPrims} dl @param {SceneItem} it @param {Ctx} ctx @param {Palette} p @param {number} band
 */
function drawClosedGroup(dl, it, ctx, p, band) {
  const out = dl.card;
  const kind = it.type === "chunk" ? "chunk" : /** @type {string} */ (it.item.kind); // every group has one
  if (it.item && it.item.twin && it.item.twin.count > 1 && band > 0) {
    // Identical blocks anywhere in the model share a mark (Model Explorer's identical groups).
    out.push(rect(it.x - 3, it.y + 6, 3, it.h - 12, 0, twinColour(p)));
  }
  const ks = kindStyle(p, kind);
  if (band === 0) {
    out.push(rect(it.x, it.y, it.w, it.h, 0, ks.fill, ks.stroke, 1, null, 1, true));
    out.push(rect(it.x, it.y, it.w, Math.min(it.h, 6), 0, ks.stroke));
    dl.far = [{ t: "far", x: it.x, y: it.y, w: it.w, h: it.h, text: it.card.title, color: ks.text, padTop: 7, bg: null }];
    return;
  }
  // A second sheet behind the card says "there is more inside"; a stack of identical
  // blocks shows a deeper pile.
  // (A plumbing card or an expert's lane folds things that are not repetitions: one sheet.)
  for (const d of it.type === "stack" && !it.card.fold ? [8, 4] : [4]) out.push(rect(it.x + d, it.y + d, it.w, it.h, 7, ks.fill, ks.stroke, 1));
  out.push(rect(it.x, it.y, it.w, it.h, 7, ks.fill, ks.stroke, 1.4, kind === "body" ? [6, 4] : null)); // body: a template, not executed
  boxTexts(out, it, ctx, p, band, ks.text, ks.stroke, ks.stroke);
  compilerBadge(out, it, ctx, p);
}

// A box card's texts: the title row (title, tag chip, toggle), then its lines, the
// weights last (a rule, then one quiet line each: a long name loses its start).
/**
 * @param {CardPrim[]} out @param {SceneItem} it @param {Ctx} ctx @param {Palette} p @param {number} band
 * @param {string} color @param {string | null} tagColor @param {string | null} toggleColor
 */
function boxTexts(out, it, ctx, p, band, color, tagColor, toggleColor) {
  const c = it.card;
  const at = boxSlots(it);
  let titleRoom = at.room;
  if (c.tag && band === 2) {
    ctx.font = S.fontTag;
    const tagW = ctx.measureText(c.tag).width + S.tagPad;
    const tx = at.tagRight - tagW;
    out.push(rect(tx, at.titleY - 8, tagW, 16, 8, tagColor || p.cardMuted, null, 1, null, 0.14));
    out.push(text(tx + S.tagPad / 2, at.titleY + 0.5, c.tag, S.fontTag, tagColor || p.cardMuted));
    titleRoom -= tagW + S.tagGap;
  }
  ctx.font = S.fontTitle;
  out.push(text(at.x, at.titleY, truncate(ctx, c.title, titleRoom), S.fontTitle, color));
  if (band === 2 && at.toggleX !== null) out.push({ t: "toggle", cx: at.toggleX, cy: at.titleY, r: S.toggleRadius, sign: "+", color: toggleColor || color });
  if (band < 2 || !c.lines.length) return;
  ctx.font = S.fontMono;
  const ws = c.weightStart ?? c.lines.length;
  c.lines.forEach((l, i) => {
    const y = at.lineY(i);
    if (i === ws) out.push(rect(at.x, y - S.lineHeight / 2 - 0.5, at.room, 1, 0, p.quietStroke));
    if (i >= ws) {
      out.push(rect(at.x, y - 2, 4, 4, 0, p.quietText));
      out.push(text(at.x + S.bullet, y, truncateStart(ctx, l, at.room - S.bullet), S.fontMono, p.quietText));
    } else {
      out.push(text(at.x, y, truncate(ctx, l, at.room), S.fontMono, p.cardMuted));
    }
  });
}

// What an op card says far away: its op without the namespace and overload
// (`aten::mul.Tensor` → `mul`), a function call's name as it is (`linear`).
/** @param {unknown} title */
export function shortOp(title) {
  const t = String(title ?? "");
  const bare = t.includes("::") ? t.slice(t.lastIndexOf("::") + 2) : t;
  return bare.split(".")[0] || t;
}

// What an expanded frame is called far away (semantic zoom): its own name first, since a
// long name is cut at the end (`h.3 · Block`, `layers.0 · LlamaDecoderLayer`), and how many
// ops it holds; a scope says its kind (`jit main`).
/** @param {SceneItem} it */
export function farTitle(it) {
  /** @type {Partial<PageItem>} */
  const item = it.item || {};
  const name = String(item.label ?? it.key);
  // the top module is named by its class (`LlamaForCausalLM`), said once
  const head = item.class ? (item.class === name ? name : `${name} · ${item.class}`)
    : it.type === "chunk" ? name : `${item.kind || ""} ${name}`.trim();
  return head;
}

/** @param {Palette} p */
function twinColour(p) {
  return p.highlight || p.select;
}

// An op count in en-US grouping (format.js's grouped(), which draw/ may not import):
// without Intl, whose first use loads locale data (16-43 ms on the way to the first paint).
/** @param {number} n */
function opsGrouped(n) {
  return Number.isInteger(n) ? String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",") : n.toLocaleString("en-US");
}

/**
 * @param {CardPrims} dl @param {SceneItem} it @param {Ctx} ctx @param {Palette} p @param {number} band
 */
// eslint-disable-next-line complexity -- a frame's title, badges, pills and caption drawn in order, each only when present
function drawFrame(dl, it, ctx, p, band) {
  // An opened control-flow boundary node holds its unexecuted bodies: drawn in the
  // control-flow colour, tagged "opaque"; templates (kind body) have a dashed frame.
  const isBoundary = it.type === "node";
  const shardMap = isBoundary && !it.item.opaque; // a shard_map: its body runs on every device, nothing opaque
  const perShard = shardMap && (/** @type {Array<{shards?: number}>} */ (it.item.bodies || [])).some((b) => !!b.shards); // partial-manual
  const kind = it.type === "chunk" ? "chunk" : isBoundary ? (shardMap ? (perShard ? "per shard" : "per device") : "opaque") : /** @type {string} */ (it.item.kind);
  const ks = kindStyle(p, isBoundary ? "cond" : kind);
  // A module frame is titled by its class and path (`Block · transformer.h.3`).
  const name = String(it.item.title || it.item.label || it.key);
  dl.card.push(rect(it.x, it.y, it.w, it.h, 9, ks.fill, ks.stroke, 1.4, kind === "body" || isBoundary ? [6, 4] : null, 0.55, band === 0));
  const n = Number(it.item.node_count);
  const summary = n > 0 ? `${opsGrouped(n)} op${n === 1 ? "" : "s"}` : "";
  dl.far = [{ t: "far", x: it.x, y: it.y, w: it.w, h: it.h, text: farTitle(it), sub: summary, color: ks.text, padTop: 3, bg: ks.fill, frame: true }];
  if (band === 0) return;
  /** @type {CardPrim[]} */
  const h = [];
  h.push(rect(it.x, it.y, it.w, S.groupHeader - 4, [9, 9, 0, 0], ks.fill));
  const y = it.y + (S.groupHeader - 4) / 2;
  ctx.font = S.fontTag;
  const chipX = it.x + 10;
  const tw = ctx.measureText(kind).width + S.tagPad;
  h.push(rect(chipX, y - 8, tw, 16, 8, ks.stroke));
  h.push(text(chipX + S.tagPad / 2, y + 0.5, kind, S.fontTag, p.background));
  const nb = isBoundary ? (it.item.bodies || []).length : 0;
  // A module's class and path say what it is; a scope of the trace says it is one (not a layer).
  const wording = shardMap ? (perShard ? "its body: the program each shard of its manual axes runs on its own shard"
    : "its body: the program every device runs on its own shard")
    : isBoundary ? `${nb} ${nb === 1 ? "body" : "bodies"}: templates, not executed`
    : kind === "module" ? "" : kind === "function" ? [it.item.function, it.item.where].filter(Boolean).join(" · ")
      : it.item.template || it.item.honest || (KIND_WORDING[kind] || "").replace(kind + " · ", "");
  const bits = [name];
  if (wording && wording !== kind) bits.push(wording);
  const twin = it.item.twin;
  if (twin && twin.count > 1) bits.push(twinWords(twin));
  const idle = idleWords(it.item);
  if (idle) bits.push(idle);
  const full = bits.join("  ·  ");
  const textX = chipX + tw + 8;
  ctx.font = S.fontHeader;
  h.push(text(textX, y, truncate(ctx, full, it.x + it.w - S.padX - S.toggleRoom - textX), S.fontHeader, ks.text));
  if (band === 2) h.push({ t: "toggle", cx: it.x + it.w - S.toggleInset, cy: y, r: S.toggleRadius, sign: "-", color: ks.stroke });
  dl.header = h;
  dl.far = null; // the header names it
}

// The modules inside a group that ran no op (eval-mode dropout), named in its card and
// its frame's header instead of drawn, saying why they are not there:
// `ran no op: attn_dropout, resid_dropout`.
/** @param {PageItem | null | undefined} item */
export function idleWords(item) {
  const idle = (item && item.idle) || [];
  if (!idle.length) return "";
  const names = idle.slice(0, 3).map((x) => String(x.name || x.title || x.key));
  const total = (item && item.idle_total) ?? idle.length;
  return `ran no op: ${names.join(", ")}${total > names.length ? ` +${total - names.length}` : ""}`;
}

// A block with the same structure as others elsewhere (Model Explorer's identical
// groups), said in words: `≡ same as 8 other blocks (9 of 9)`.
/** @param {{count: number, index: number}} twin */
export function twinWords(twin) {
  const others = twin.count - 1;
  return `≡ same as ${others} other block${others === 1 ? "" : "s"} (${twin.index + 1} of ${twin.count})`;
}

/**
 * @param {CardPrim[]} out @param {SceneItem} it @param {Ctx} ctx @param {Palette} p @param {number} band
 */
function drawPill(out, it, ctx, p, band) {
  const c = it.card;
  const look = c.look === "quiet"
    ? { fill: p.quietFill, stroke: p.quietStroke, name: p.quietText, shape: p.quietMuted, dash: c.role === "buffer" || c.role === "const" }
    : c.look === "input"
      ? { fill: p.inputFill, stroke: p.inputStroke, name: p.inputText, shape: p.boundaryMuted, dash: false }
      : { fill: p.boundaryFill, stroke: p.boundaryStroke, name: p.boundaryText, shape: p.boundaryText, dash: false };
  out.push(rect(it.x, it.y, it.w, it.h, it.h / 2, look.fill, look.stroke, 1, look.dash ? [3, 2] : null));
  if (band === 0) return;
  const { texts, widths, total } = pillFit(it, ctx);
  let x = it.x + (it.w - total) / 2;
  const y = it.y + it.h / 2 + 0.5;
  (c.parts || []).forEach((part, i) => {
    out.push(text(x, y, texts[i], fontOf(part.font), part.tone === "shape" ? look.shape : look.name));
    x += widths[i] + S.boundaryGap;
  });
}

// How a pill's texts fit its laid-out width (cached on the scene item): the shape always
// stays whole; a long name loses its start (`…norm.running_mean`), where a dotted path
// repeats what the enclosing groups say.
/**
 * @param {SceneItem} it
 * @param {Ctx} ctx
 * @returns {PillFit}
 */
export function pillFit(it, ctx) {
  if (!it._fit) it._fit = fitParts(ctx, it.card.parts || [], it.w - 2 * S.padX);
  return it._fit;
}

/**
 * @param {Ctx} ctx
 * @param {Part[]} parts
 * @param {number} maxW
 * @returns {PillFit}
 */
function fitParts(ctx, parts, maxW) {
  const widths = parts.map((part) => {
    ctx.font = fontOf(part.font);
    return ctx.measureText(part.text).width;
  });
  const texts = parts.map((part) => part.text);
  const gap = S.boundaryGap * (parts.length - 1);
  let total = widths.reduce((a, b) => a + b, 0) + gap;
  if (total > maxW && parts.length > 1) {
    ctx.font = fontOf(parts[0].font);
    const room = maxW - gap - widths.slice(1).reduce((a, b) => a + b, 0);
    const name = parts[0].text;
    let lo = 0;
    let hi = name.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (ctx.measureText("…" + name.slice(name.length - mid)).width <= room) lo = mid;
      else hi = mid - 1;
    }
    texts[0] = "…" + name.slice(name.length - lo);
    widths[0] = ctx.measureText(texts[0]).width;
    total = widths.reduce((a, b) => a + b, 0) + gap;
  } else if (total > maxW) {
    ctx.font = fontOf(parts[0].font);
    texts[0] = truncate(ctx, texts[0], maxW);
    widths[0] = ctx.measureText(texts[0]).width;
    total = widths[0];
  }
  return { texts, widths, total };
}

/**
 * @param {Ctx} ctx
 * @param {unknown} s
 * @param {number} maxW
 * @returns {string}
 */
export function truncate(ctx, s, maxW) {
  const t = String(s);
  if (ctx.measureText(t).width <= maxW) return t;
  let lo = 0;
  let hi = t.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText(t.slice(0, mid) + "…").width <= maxW) lo = mid;
    else hi = mid - 1;
  }
  return t.slice(0, lo) + "…";
}

// `name  shape[  shared]` within maxW: the name loses its start, the rest stays whole.
/**
 * @param {Ctx} ctx
 * @param {string} s
 * @param {number} maxW
 * @returns {string}
 */
function truncateStart(ctx, s, maxW) {
  if (ctx.measureText(s).width <= maxW) return s;
  const cut = s.indexOf("  ");
  if (cut < 0) return truncate(ctx, s, maxW);
  const name = s.slice(0, cut);
  const rest = s.slice(cut);
  let lo = 0;
  let hi = name.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText("…" + name.slice(name.length - mid) + rest).width <= maxW) lo = mid;
    else hi = mid - 1;
  }
  return lo ? "…" + name.slice(name.length - lo) + rest : truncate(ctx, s, maxW);
}

// ---------------------------------------------------------------- edge labels

// The box an edge label's background covers, from its anchor {x, y (its middle), w (its
// text's width)}: the layout worker keeps these boxes off cards and off each other, the
// executors paint the background there.
/**
 * @param {{x: number, y: number, w: number}} l
 * @returns {{x: number, y: number, w: number, h: number}}
 */
export function labelRect(l) {
  return { x: l.x - 2, y: l.y - S.labelHeight / 2, w: l.w + 4, h: S.labelHeight };
}

// ---------------------------------------------------------------- hit geometry

// Which weight line of an op card a world point is on: the weight's index, or -1.
/**
 * @param {SceneItem} it
 * @param {number} wx
 * @param {number} wy
 * @returns {number}
 */
export function weightAt(it, wx, wy) {
  const c = it.card;
  if (it.expanded || !c || !opLike(c.kind) || c.weightStart === undefined || c.weightStart === null) return -1;
  const row = Math.floor((wy - it.y - headTop(c) - S.titleHeight) / S.lineHeight);
  const k = row - c.weightStart;
  const ws = c.weights || [];
  if (!(k >= 0 && k < ws.length && k < c.lines.length - c.weightStart && wx >= it.x && wx <= it.x + it.w)) return -1;
  return c.lines[c.weightStart + k].startsWith("+") ? -1 : k; // "+N more" is not a weight
}

// Whether a world point on an expanded container is on its header (else: on its inside).
/**
 * @param {{y: number}} it
 * @param {number} wy
 */
export function onFrameHeader(it, wy) {
  return wy <= it.y + S.groupHeader;
}
