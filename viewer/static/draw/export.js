// Export the current view: PNG from the canvas itself, SVG by serializing the draw list
// the canvas draws (drawlist.js) as SVG elements: vector, searchable text, the same cards,
// positions, level of detail and truncated strings as on screen.

import { CARD_STYLE as S, labelRect } from "./card.js";
import { HATCH, HATCH_TILE } from "./theme.js";
import { farLabel } from "./drawlist.js";

/**
 * @typedef {import("./drawlist.js").DrawList} DrawList
 * @typedef {import("./drawlist.js").EdgesPrim} EdgesPrim
 * @typedef {import("./drawlist.js").Placed} Placed
 * @typedef {import("./card.js").RectPrim} RectPrim
 * @typedef {import("./card.js").Ctx} Ctx
 * @typedef {import("./theme.js").Palette} Palette
 */

/**
 * What the export reads of the renderer (draw/renderer.js): its canvas and context, the
 * camera, the palette, and the draw list of a view.
 * @typedef {object} ExportRenderer
 * @property {HTMLCanvasElement} canvas
 * @property {CanvasRenderingContext2D} ctx
 * @property {number} width
 * @property {number} height
 * @property {{s: number}} cam
 * @property {Palette} palette
 * @property {(now: number) => void} draw
 * @property {(sx: number, sy: number) => number[]} toWorld
 * @property {(view: {x0: number, y0: number, x1: number, y1: number}, s: number, out: DrawList) => DrawList} drawListFor
 */

/**
 * @param {ExportRenderer} renderer
 * @param {string} stem  the file's name without its extension
 * @returns {Promise<Blob | null>}
 */
export function exportPng(renderer, stem) {
  renderer.draw(performance.now()); // make sure the canvas holds the current frame
  return /** @type {Promise<Blob | null>} */ (new Promise((resolve) => {
    renderer.canvas.toBlob((blob) => {
      if (blob) download(blob, `${stem}.png`);
      resolve(blob);
    }, "image/png");
  }));
}

/**
 * @param {ExportRenderer} renderer
 * @param {string} stem
 */
export function exportSvg(renderer, stem) {
  const svg = sceneToSvg(renderer);
  const blob = new Blob([svg], { type: "image/svg+xml" });
  download(blob, `${stem}.svg`);
  return svg;
}

/**
 * @param {Blob} blob
 * @param {string} name
 */
function download(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 5000);
}

/** @type {Record<string, string>} */
const ENTITIES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
/** @param {unknown} s */
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ENTITIES[c]);
/** @param {number} n */
const fmt = (n) => (Math.round(n * 100) / 100).toString();

/** @param {ExportRenderer} renderer */
export function sceneToSvg(renderer) {
  const p = renderer.palette;
  const s = renderer.cam.s;
  const [x0, y0] = renderer.toWorld(0, 0);
  const [x1, y1] = renderer.toWorld(renderer.width, renderer.height);
  const list = renderer.drawListFor({ x0, y0, x1, y1 }, s, []);
  /** @type {string[]} */
  const out = [];
  serialize(out, list, s, renderer.ctx);
  const w = x1 - x0;
  const h = y1 - y0;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" xml:space="preserve" viewBox="${fmt(x0)} ${fmt(y0)} ${fmt(w)} ${fmt(h)}" width="${fmt(renderer.width)}" height="${fmt(renderer.height)}">`,
    `<defs><pattern id="hatch" width="8" height="8" patternUnits="userSpaceOnUse">${hatchTile(p)}</pattern></defs>`,
    `<rect x="${fmt(x0)}" y="${fmt(y0)}" width="${fmt(w)}" height="${fmt(h)}" fill="${p.background}"/>`,
    ...out,
    "</svg>",
  ].join("\n");
}

// The opaque hatch tile: the same 8×8 strokes as the canvas pattern (renderer.hatchPattern).
/** @param {Palette} p */
function hatchTile(p) {
  const d = HATCH_TILE.map(([ax, ay, bx, by]) => `M${ax},${ay} L${bx},${by}`).join(" ");
  return `<rect width="8" height="8" fill="${p.opaqueFill}"/><path d="${d}" stroke="${p.opaqueHatch}" stroke-width="1.5"/>`;
}

// A draw list (drawlist.js) as SVG elements, in drawing order.
/**
 * @param {string[]} out
 * @param {DrawList} list
 * @param {number} s
 * @param {CanvasRenderingContext2D} ctx
 */
export function serialize(out, list, s, ctx) {
  for (const q of list) {
    if (Array.isArray(q)) {
      serialize(out, q, s, ctx);
      continue;
    }
    if (q.t === "rect") out.push(rectSvg(q, s));
    else if (q.t === "text") out.push(textSvg(ctx, q.x, q.y, q.text, q.font, q.fill, q.baseline, q.align));
    else if (q.t === "toggle") {
      const { cx, cy, r } = q;
      const plus = q.sign === "+" ? ` M${fmt(cx)},${fmt(cy - r / 2)} L${fmt(cx)},${fmt(cy + r / 2)}` : "";
      out.push(`<circle cx="${fmt(cx)}" cy="${fmt(cy)}" r="${fmt(r)}" fill="none" stroke="${q.color}" stroke-width="1.2"/>`
        + `<path d="M${fmt(cx - r / 2)},${fmt(cy)} L${fmt(cx + r / 2)},${fmt(cy)}${plus}" stroke="${q.color}" stroke-width="1.2"/>`);
    } else if (q.t === "farlabels") {
      /** @type {Placed} */
      const placed = [];
      for (const item of q.list) {
        const f = farLabel(item, s, ctx, placed);
        if (!f) continue;
        if (f.bg) out.push(`<rect x="${fmt(f.bg.x)}" y="${fmt(f.bg.y)}" width="${fmt(f.bg.w)}" height="${fmt(f.bg.h)}" fill="${item.bg}"/>`);
        out.push(textSvg(ctx, f.x, f.y, f.text, f.font, item.color, "top"));
        if (f.sub) out.push(textSvg(ctx, f.x, /** @type {number} */ (f.sub.y), f.sub.text, f.sub.font, item.color, "top"));
      }
    } else if (q.t === "specks") {
      const r = q.rects;
      let d = "";
      for (let k = 0; k < r.length; k += 4) d += `M${fmt(r[k])},${fmt(r[k + 1])}h${fmt(r[k + 2])}v${fmt(r[k + 3])}h${fmt(-r[k + 2])}z`;
      out.push(`<path d="${d}" fill="${q.fill}"/>`);
    } else if (q.t === "edges") edgesSvg(out, q, s, ctx);
  }
}

// A text at the canvas's (x, y) for its textBaseline: SVG's alphabetic baseline placed
// where the canvas puts it (dy from the canvas's own metrics for that font), so the text
// sits on the same pixels as on screen.
/**
 * @param {CanvasRenderingContext2D} ctx
 * @param {number} x
 * @param {number} y
 * @param {string} text
 * @param {string} font
 * @param {string} fill
 * @param {CanvasTextBaseline} baseline
 * @param {CanvasTextAlign} [align]
 */
function textSvg(ctx, x, y, text, font, fill, baseline, align = "left") {
  const anchor = align === "center" ? ' text-anchor="middle"' : align === "right" || align === "end" ? ' text-anchor="end"' : "";
  return `<text x="${fmt(x)}" y="${fmt(y)}"${anchor} dy="${fmt(baselineShift(ctx, font, baseline))}" fill="${fill}" style="font:${esc(font)};white-space:pre">${esc(text)}</text>`;
}

/** @type {Map<string, number>} */
const shifts = new Map();

/**
 * @param {CanvasRenderingContext2D} ctx
 * @param {string} font
 * @param {CanvasTextBaseline} baseline
 * @returns {number}
 */
function baselineShift(ctx, font, baseline) {
  const k = baseline + "|" + font;
  let d = shifts.get(k);
  if (d === undefined) {
    // How far the alphabetic baseline lies below the canvas's baseline line: the font's
    // ascent measured from each (fontBoundingBoxAscent: from the textBaseline line, up).
    ctx.font = font;
    ctx.textBaseline = "alphabetic";
    const a0 = ctx.measureText("Hg").fontBoundingBoxAscent;
    ctx.textBaseline = baseline;
    d = a0 - ctx.measureText("Hg").fontBoundingBoxAscent || 0;
    shifts.set(k, d);
  }
  return d;
}

/**
 * @param {RectPrim} q
 * @param {number} s
 */
function rectSvg(q, s) {
  const fill = q.fill ? (q.fill === HATCH ? HATCH : q.fill) : "none";
  let paint = ` fill="${fill}"`;
  if (q.fa !== 1) paint += ` fill-opacity="${q.fa}"`;
  if (q.stroke) {
    paint += ` stroke="${q.stroke}" stroke-width="${fmt(q.hair ? 1 / s : q.lw)}"`;
    if (q.dash) paint += ` stroke-dasharray="${q.dash.join(" ")}"`;
  }
  if (Array.isArray(q.r)) return `<path d="${cornerPath(q.x, q.y, q.w, q.h, q.r)}"${paint}/>`;
  const r = q.r ? ` rx="${fmt(Math.min(q.r, q.w / 2, q.h / 2))}"` : "";
  return `<rect x="${fmt(q.x)}" y="${fmt(q.y)}" width="${fmt(q.w)}" height="${fmt(q.h)}"${r}${paint}/>`;
}

// A rectangle with its own radius per corner [top-left, top-right, bottom-right,
// bottom-left], scaled down as the canvas's roundRect does when they do not fit.
/**
 * @param {number} x @param {number} y @param {number} w @param {number} h
 * @param {number[]} radii
 */
function cornerPath(x, y, w, h, [tl, tr, br, bl]) {
  const f = Math.min(1, w / (tl + tr || 1), w / (bl + br || 1), h / (tl + bl || 1), h / (tr + br || 1));
  [tl, tr, br, bl] = [tl * f, tr * f, br * f, bl * f];
  /** @param {number} r @param {number} ex @param {number} ey */
  const a = (r, ex, ey) => (r ? ` A${fmt(r)},${fmt(r)} 0 0 1 ${fmt(ex)},${fmt(ey)}` : "");
  return `M${fmt(x + tl)},${fmt(y)} L${fmt(x + w - tr)},${fmt(y)}${a(tr, x + w, y + tr)} L${fmt(x + w)},${fmt(y + h - br)}`
    + `${a(br, x + w - br, y + h)} L${fmt(x + bl)},${fmt(y + h)}${a(bl, x, y + h - bl)} L${fmt(x)},${fmt(y + tl)}${a(tl, x + tl, y)} Z`;
}

// One container's edges: rounded polylines with arrowheads (as the canvas draws them),
// hairlines when far; labels on their background.
/**
 * @param {string[]} out
 * @param {EdgesPrim} q
 * @param {number} s
 * @param {CanvasRenderingContext2D} ctx
 */
function edgesSvg(out, q, s, ctx) {
  const { ox, oy } = q;
  const width = q.simple ? fmt(1 / s) : "1.25";
  for (const pts of q.list) {
    if (q.simple || pts.length === 2) {
      out.push(`<polyline points="${pts.map(([x, y]) => `${fmt(ox + x)},${fmt(oy + y)}`).join(" ")}" fill="none" stroke="${q.stroke}" stroke-width="${width}"/>`);
    } else {
      out.push(`<path d="${roundedPath(pts, ox, oy)}" fill="none" stroke="${q.stroke}" stroke-width="${width}"/>`);
    }
    if (q.simple) continue;
    const [ax, ay] = pts[pts.length - 2];
    const [bx, by] = pts[pts.length - 1];
    const ang = Math.atan2(by - ay, bx - ax);
    const x = ox + bx;
    const y = oy + by;
    const L = 7;
    out.push(`<path d="M${fmt(x)},${fmt(y)} L${fmt(x - L * Math.cos(ang - 0.42))},${fmt(y - L * Math.sin(ang - 0.42))} L${fmt(x - L * Math.cos(ang + 0.42))},${fmt(y - L * Math.sin(ang + 0.42))} Z" fill="${q.stroke}"/>`);
  }
  for (const l of q.labels) {
    const b = labelRect(l);
    out.push(`<rect x="${fmt(ox + b.x)}" y="${fmt(oy + b.y)}" width="${fmt(b.w)}" height="${fmt(b.h)}" fill="${q.labelBg}"/>`);
    out.push(textSvg(ctx, ox + l.x, oy + l.y, l.text, S.fontLabel, q.labelFill, "middle"));
  }
}

// The canvas's arcTo corners (radius 7, clamped to the segments) as an SVG path.
/**
 * @param {number[][]} pts
 * @param {number} ox
 * @param {number} oy
 */
function roundedPath(pts, ox, oy) {
  let d = `M${fmt(ox + pts[0][0])},${fmt(oy + pts[0][1])}`;
  for (let i = 1; i < pts.length - 1; i++) {
    const [px, py] = pts[i - 1];
    const [cx, cy] = pts[i];
    const [nx, ny] = pts[i + 1];
    const l1 = Math.hypot(cx - px, cy - py);
    const l2 = Math.hypot(nx - cx, ny - cy);
    const r = Math.min(7, l1 / 2, l2 / 2);
    if (!r || !l1 || !l2) {
      d += ` L${fmt(ox + cx)},${fmt(oy + cy)}`;
      continue;
    }
    const ax = cx - ((cx - px) / l1) * r;
    const ay = cy - ((cy - py) / l1) * r;
    const bx = cx + ((nx - cx) / l2) * r;
    const by = cy + ((ny - cy) / l2) * r;
    d += ` L${fmt(ox + ax)},${fmt(oy + ay)} Q${fmt(ox + cx)},${fmt(oy + cy)} ${fmt(ox + bx)},${fmt(oy + by)}`;
  }
  const last = pts[pts.length - 1];
  return d + ` L${fmt(ox + last[0])},${fmt(oy + last[1])}`;
}
