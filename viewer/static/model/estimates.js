// Estimated layouts: a container's box without ELK, from cheap facts and from how the
// real layouts so far compared with their estimates (the graph model's sizing job; the
// model asks for estimates and reports each real layout it gets, model/viewmodel.js).

import { FRAME, charMeasurer, measureCard } from "../draw/card.js";
import { layoutKey } from "../layout/layout-client.js";

/**
 * @typedef {import("../api.js").PageItem} PageItem
 * @typedef {import("../draw/card.js").CardContent} CardContent
 * @typedef {import("../layout/protocol.js").Size} Size
 * @typedef {import("../layout/protocol.js").Box} Box
 * @typedef {import("../layout/protocol.js").Layout} Layout
 * @typedef {import("../layout/layout-client.js").LayoutClient} LayoutClient
 */

/**
 * A container's display list as the estimates read it (model/viewmodel.js display): its
 * layout signature, its cards by position, the positions of the open containers inside
 * it, and whether its page is still to be fetched.
 * @typedef {{sig: string, items: CardContent[], inner: unknown[], pending?: boolean}} Display
 */

/** @typedef {Layout & {estimated: true}} Estimate  a layout made without ELK, no edges */

export class LayoutEstimates {
  // `itemOf`: the model's container key -> its item (in its parent's answer), read here;
  // `layout`: the layout client, whose screen and `wrapping` say whether a tall estimate
  // is cut into columns as a real layout would be (wrappedEstimate).
  /**
   * @param {Map<string, PageItem>} itemOf
   * @param {LayoutClient | null} [layout]
   */
  constructor(itemOf, layout = null) {
    this.itemOf = itemOf;
    this.layout = layout;
    // How real layouts compared with their column estimates so far (log ratios: sums and
    // sums of squares), for leaf containers and for containers of containers.
    this.ratios = [{ w: 0, w2: 0, h: 0, h2: 0, n: 0 }, { w: 0, w2: 0, h: 0, h2: 0, n: 0 }];
    /** @type {Set<string>} */
    this.learned = new Set(); // layout keys already counted in `ratios`
    /** @type {Map<string, {lk: string, layout: Estimate}>} */
    this.estimates = new Map(); // container key -> {lk, layout}: an estimate stays until its parent is laid out again
    /** @type {Map<string, Size>} */
    this.structSizes = new Map(); // a group's `structure` -> the size of a real layout of one such group
    this.perOp = { w: 0, h: 0, n: 0 }; // log width and log height per op of real group layouts, for unfetched ones
  }

  // A container's estimated layout: the one it has for the same content and inner boxes
  // (an estimate stays put while it is out of view), or a new one (`fresh`: its parent is
  // laid out again, so the estimate may learn from what was laid out since).
  /**
   * @param {string} key
   * @param {Display} d
   * @param {(Size | null | undefined)[]} boxes  the open containers' boxes, by item position
   * @param {boolean} [fresh]
   * @returns {Estimate}
   */
  estimateFor(key, d, boxes, fresh = false) {
    const lk = layoutKey(d.sig, boxes);
    const had = this.estimates.get(key);
    if (!fresh && had && had.lk === lk) return had.layout;
    const layout = d.pending ? this.estimateUnfetched(key) : this.estimateLayout(d, boxes);
    this.estimates.set(key, { lk, layout });
    return layout;
  }

  // A container laid out without ELK, from cheap facts: its cards' sizes (measured by
  // character counts), the boxes of the containers inside it (real, held or estimated
  // themselves), in one column in program order, then scaled by how real layouts of
  // containers of the same kind (leaf or not) compared with their own column so far.
  // No edges: it is drawn only as a frame until it is in view, and then laid out for real.
  /**
   * @param {Display} d
   * @param {(Size | null | undefined)[]} boxes
   * @returns {Estimate}
   */
  estimateLayout(d, boxes) {
    const sizes = d.items.map((it, i) => sizeOf(it, boxes[i]));
    const col = columnLayout(sizes);
    const r = this.ratios[d.inner.length ? 1 : 0];
    if (r.n < 1) return col;
    // One standard deviation above the mean ratio: most real layouts then fit the box
    // held for them, and laying them out moves nothing around them.
    /** @param {number} sum @param {number} sum2 */
    const up = (sum, sum2) => {
      const mean = sum / r.n;
      const sd = r.n > 1 ? Math.sqrt(Math.max(0, sum2 / r.n - mean * mean)) : 0.1;
      return Math.exp(mean + sd);
    };
    let maxW = 0;
    let maxH = 0;
    for (const b of sizes) {
      maxW = Math.max(maxW, b.w);
      maxH = Math.max(maxH, b.h);
    }
    const w = Math.max(maxW + 20, Math.ceil(col.w * up(r.w, r.w2)));
    const h = Math.max(maxH + 20, Math.ceil(col.h * up(r.h, r.h2)));
    const ky = (h - 20 - maxH) / Math.max(1, col.h - 20 - maxH);
    const boxesOut = col.boxes.map((b) => ({ x: (w - b.w) / 2, y: 10 + Math.min(h - 20 - b.h, (b.y - 10) * ky), w: b.w, h: b.h }));
    /** @type {Estimate} */
    const est = { w, h, boxes: boxesOut, edges: [], estimated: true };
    return this.layout && this.layout.wrapping ? wrappedEstimate(est, this.layout.screen) || est : est;
  }

  // A container not fetched yet: the size of a real layout of a group with the same
  // structure, else its op count times the height per op of the real group layouts so far
  // (and their width), a tenth over.
  /**
   * @param {string} key
   * @returns {Estimate}
   */
  estimateUnfetched(key) {
    /** @type {Partial<PageItem>} */
    const item = this.itemOf.get(key) || {};
    const same = item.structure && this.structSizes.get(item.structure);
    if (same) return { w: same.w, h: same.h, boxes: [], edges: [], estimated: true };
    const ops = Math.max(1, Number(item.node_count) || Number(item.child_count) || 1);
    const p = this.perOp;
    const perOp = p.n ? Math.exp(p.h / p.n) : 100;
    const w = p.n ? Math.exp(p.w / p.n) : 240;
    return { w: Math.ceil(w * 1.1), h: Math.ceil(Math.max(60, ops * perOp * 1.1)), boxes: [], edges: [], estimated: true };
  }

  // How a real layout compared with its own column estimate (log ratios, running mean),
  // and, for a group, how big it is per op and for its structure.
  /**
   * @param {string} lk  the layout key
   * @param {Display} d
   * @param {(Size | null | undefined)[]} boxes
   * @param {Size} real  the real layout
   * @param {string | null} key  the container's key
   * @param {boolean} open  the container is an open item (not the root)
   */
  learn(lk, d, boxes, real, key, open) {
    if (this.learned.has(lk)) return;
    this.learned.add(lk);
    const item = key && this.itemOf.get(key);
    if (open && item && item.type === "group" && Number(item.node_count) > 0) {
      if (item.structure) this.structSizes.set(item.structure, { w: real.w, h: real.h });
      this.perOp.w += Math.log(real.w);
      this.perOp.h += Math.log(real.h / Number(item.node_count));
      this.perOp.n += 1;
    }
    if (d.items.length < 3) return;
    const col = columnLayout(d.items.map((it, i) => sizeOf(it, boxes[i])));
    const r = this.ratios[d.inner.length ? 1 : 0];
    const lw = Math.log(Math.max(0.05, real.w / col.w));
    const lh = Math.log(Math.max(0.05, real.h / col.h));
    r.w += lw;
    r.w2 += lw * lw;
    r.h += lh;
    r.h2 += lh * lh;
    r.n += 1;
  }
}

// A card's size by character counts; an open container's from the box of its inside.
/**
 * @param {CardContent} it
 * @param {Size | null | undefined} inner
 * @returns {Size}
 */
function sizeOf(it, inner) {
  return inner ? FRAME.measure(inner) : measureCard(it, charMeasurer);
}

// Cards in one column, in program order, with ELK's spacing between layers and padding.
/**
 * @param {Size[]} sizes
 * @returns {Estimate}
 */
function columnLayout(sizes) {
  let w = 0;
  for (const b of sizes) w = Math.max(w, b.w);
  /** @type {Box[]} */
  const boxes = [];
  let y = 10;
  for (const b of sizes) {
    boxes.push({ x: 10 + (w - b.w) / 2, y, w: b.w, h: b.h });
    y += b.h + 40;
  }
  return { w: Math.ceil(w + 20), h: Math.ceil(Math.max(y - 40, 10) + 10), boxes, edges: [], estimated: true };
}

// An estimated layout (one column) taller than the screen, cut into columns side by side
// as the layout worker cuts a real one (layout.worker.js wrapColumns), for the number of
// columns that fits the screen best; null when one column fits it as well.
/**
 * @param {Estimate} est
 * @param {Size | null} screen
 * @returns {Estimate | null}
 */
export function wrappedEstimate(est, screen) {
  if (!screen || est.boxes.length < 6 || est.h <= screen.h * 1.15 || est.h / Math.max(1, est.w) <= (screen.h / screen.w) * 1.3) {
    return null;
  }
  /** @param {Size} l */
  const scale = (l) => Math.min(screen.w / Math.max(1, l.w), screen.h / Math.max(1, l.h));
  const order = est.boxes.map((b, i) => /** @type {[Box, number]} */ ([b, i])).sort((a, b) => a[0].y - b[0].y);
  const total = order.reduce((sum, [b]) => sum + b.h + 30, 0);
  /** @type {Estimate | null} */
  let best = null;
  for (let k = 2; k <= 64; k++) {
    const target = total / k;
    /** @type {Box[]} */
    const boxes = new Array(est.boxes.length);
    let x = 10;
    let y = 10;
    let colW = 0;
    let h = 0;
    let used = 1;
    for (const [b, i] of order) {
      if (y > 10 && y + b.h > 10 + target && used < k) {
        x += colW + 36;
        y = 10;
        colW = 0;
        used += 1;
      }
      boxes[i] = { x, y, w: b.w, h: b.h };
      y += b.h + 30;
      colW = Math.max(colW, b.w);
      h = Math.max(h, y);
    }
    /** @type {Estimate} */
    const laid = { w: Math.ceil(x + colW + 10), h: Math.ceil(h), boxes, edges: [], estimated: true, wrapped: used };
    if (!best || scale(laid) > scale(best)) best = laid;
    if (laid.h < screen.h * 0.6) break;
  }
  return best && scale(best) > scale(est) * 1.05 ? best : null;
}
