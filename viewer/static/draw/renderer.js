// How the scene is drawn: a <canvas> renderer with a camera, viewport culling and level
// of detail, plus the minimap. It knows nothing about the API; it draws what the view
// model composed (viewmodel.js) and reports what is under the pointer.

import { accentFor, pillFit, weightAt } from "./card.js";
import { buildDrawList, paintList } from "./drawlist.js";
import {
  LOD_TEXT,
  MAX_ZOOM,
  MIN_ZOOM,
  READABLE_SCALE,
  LEGIBLE_SCALE,
  FIRST_SCALE,
  HATCH_TILE,
  kindStyle,
  readPalette,
} from "./theme.js";

/**
 * @typedef {import("./drawlist.js").DrawItem} DrawItem
 * @typedef {import("./drawlist.js").DrawContainer} DrawContainer
 * @typedef {import("./drawlist.js").DrawEnv} DrawEnv
 * @typedef {import("./drawlist.js").DrawList} DrawList
 * @typedef {import("./drawlist.js").FarDrawn} FarDrawn
 * @typedef {import("./theme.js").Palette} Palette
 * @typedef {{x: number, y: number, w: number, h: number}} Rect  a world rectangle
 * @typedef {{x0: number, y0: number, x1: number, y1: number}} View  the world rectangle shown
 */

/**
 * The scene the view model composed (model/viewmodel.js) as the renderer draws it: the
 * root container, every laid-out item by key, and its size.
 * @typedef {{root: DrawContainer, byKey: Map<string, DrawItem>, w: number, h: number}} Scene
 */

export class Renderer {
  /**
   * @param {HTMLElement} canvas  a <canvas>
   * @param {HTMLElement | null} minimap  a <canvas>
   */
  constructor(canvas, minimap) {
    this.canvas = /** @type {HTMLCanvasElement} */ (canvas);
    this.ctx = /** @type {CanvasRenderingContext2D} */ (this.canvas.getContext("2d", { alpha: false }));
    this.minimap = /** @type {HTMLCanvasElement | null} */ (minimap);
    this.mctx = this.minimap ? this.minimap.getContext("2d") : null;
    /** @type {Scene | null} */
    this.scene = null;
    /** @type {{key: string, x: number, y: number, cam: {s: number, tx: number, ty: number}} | null} */
    this.followed = null; // the card Readable centred on, followed while layouts settle (keepFollowed)
    this.cam = { tx: 0, ty: 0, s: 1 };
    /** @type {string | null} */
    this.selected = null;
    /** @type {string | null} */
    this.flash = null;
    /** @type {Set<string> | null} */
    this.multi = null; // keys selected together (Show in Graph: a source line's items)
    /** @type {Set<string> | null} */
    this.cursor = null; // keys outlined lightly (the editor's cursor line)
    this.palette = readPalette();
    this.dpr = window.devicePixelRatio || 1;
    this.frameQueued = false;
    /** @type {number[]} */
    this.drawMs = [];
    /** @type {number | null} */
    this.firstPaintAt = null;
    /** @type {((ms: number, frameTime: number) => void) | null} */
    this.onDraw = null;
    /** @type {HTMLCanvasElement | null} */
    this.minimapCache = null;
    /** @type {CanvasPattern | null} */
    this.hatch = null;
    this.width = 0;
    this.height = 0;
    // Set by each draw: the world rectangle drawn, what it drew, and the minimap's transform.
    /** @type {View | undefined} */
    this.view = undefined;
    /** @type {{items: number, edges: number} | undefined} */
    this.stats = undefined;
    /** @type {{k: number, ox: number, oy: number} | undefined} */
    this.minimapXform = undefined;
    this._insetRight = 0; // CSS px of the canvas covered by a side panel
    // What floats over the canvas at its bottom (app.js sets them): the hint bar's height,
    // and the minimap's box at the bottom right (null while it is hidden). Fit keeps the
    // graph out from under them.
    this.hintHeight = 0;
    /** @type {{w: number, h: number} | null} */
    this.minimapBox = null;
    /** @type {((ctx: CanvasRenderingContext2D, renderer: Renderer) => void) | null} */
    this.overlay = null; // draws over the items, under the selection (diff.js)
    /** @type {DrawList} */
    this.dl = []; // the frame's draw list, reused
    /** @type {FarDrawn[]} */
    this.farDrawn = []; // the far names the last frame drew (semantic zoom), for the hooks
    // heat: null, or (scene item) => a fill colour or null (the cost panel's heat map);
    // view and stats are set by drawListFor before each build.
    this.env = /** @type {DrawEnv} */ (/** @type {unknown} */ ({ ctx: this.ctx, palette: this.palette, s: 1, view: null, stats: null, heat: null }));
    this.hatchFn = () => this.hatchPattern();
    this.resize();
  }

  setPalette() {
    this.palette = readPalette();
    this.hatch = null;
    this.minimapCache = null;
    this.requestDraw();
  }

  resize() {
    const rect = this.canvas.getBoundingClientRect();
    this.dpr = window.devicePixelRatio || 1;
    const w = Math.max(1, rect.width);
    const h = Math.max(1, rect.height);
    // Keep what is at the centre of the view there when a panel opens or closes.
    if (this.width) {
      this.cam.tx += (w - this.width) / 2;
      this.cam.ty += (h - this.height) / 2;
    }
    this.width = w;
    this.height = h;
    this.canvas.width = Math.round(this.width * this.dpr);
    this.canvas.height = Math.round(this.height * this.dpr);
    if (this.minimap) {
      const m = this.minimap.getBoundingClientRect();
      this.minimap.width = Math.round(Math.max(1, m.width) * this.dpr);
      this.minimap.height = Math.round(Math.max(1, m.height) * this.dpr);
      this.minimapCache = null;
    }
    this.requestDraw();
  }

  // Cards coloured by `heat(item)` (a CSS colour or null), or as usual when null.
  /** @param {DrawEnv["heat"]} heat */
  setHeat(heat) {
    this.env.heat = heat;
    this.minimapCache = null;
    this.requestDraw();
  }

  /** @param {Scene | null} scene */
  setScene(scene) {
    this.scene = scene;
    this.minimapCache = null;
    this.keepFollowed();
    this.requestDraw();
  }

  // After Readable, the card it centred on stays centred while the containers around it
  // are laid out for real (an estimated container in view gets its real layout, and what
  // is in it moves): until the camera is moved some other way, the view moves with the card.
  keepFollowed() {
    const f = this.followed;
    if (!f || !this.scene) return;
    const c = this.cam;
    if (c.s !== f.cam.s || c.tx !== f.cam.tx || c.ty !== f.cam.ty) {
      this.followed = null; // the person (or Fit, a search) moved the view since
      return;
    }
    const it = this.scene.byKey.get(f.key);
    if (!it) return;
    c.tx += (f.x - it.x) * c.s;
    c.ty += (f.y - it.y) * c.s;
    this.followed = { key: f.key, x: it.x, y: it.y, cam: { s: c.s, tx: c.tx, ty: c.ty } };
  }

  // ------------------------------------------------------------------ camera

  /**
   * @param {number} sx
   * @param {number} sy
   * @returns {[number, number]}
   */
  toWorld(sx, sy) {
    return [(sx - this.cam.tx) / this.cam.s, (sy - this.cam.ty) / this.cam.s];
  }

  /**
   * @param {number} wx
   * @param {number} wy
   * @returns {[number, number]}
   */
  toScreen(wx, wy) {
    return [wx * this.cam.s + this.cam.tx, wy * this.cam.s + this.cam.ty];
  }

  /**
   * @param {number} dx
   * @param {number} dy
   */
  panBy(dx, dy) {
    this.cam.tx += dx;
    this.cam.ty += dy;
    this.requestDraw();
  }

  /**
   * @param {number} sx
   * @param {number} sy
   * @param {number} factor
   * @param {boolean} [allowBelowMin]
   */
  zoomAt(sx, sy, factor, allowBelowMin = false) {
    const min = allowBelowMin ? 1e-4 : Math.min(MIN_ZOOM, this.cam.s);
    const s = Math.max(min, Math.min(MAX_ZOOM, this.cam.s * factor));
    const [wx, wy] = this.toWorld(sx, sy);
    this.cam.s = s;
    this.cam.tx = sx - wx * s;
    this.cam.ty = sy - wy * s;
    this.requestDraw();
  }

  // A side panel covers the right of the canvas (the inspector, the setup form).
  get insetRight() {
    return this._insetRight;
  }

  /** @param {number} px */
  set insetRight(px) {
    const grew = (px || 0) > this._insetRight;
    this._insetRight = px || 0;
    if (grew) this.revealSelected();
  }

  // The selected item, when a side panel now covers it, moved into the part of the canvas
  // left visible (nothing moves when it is in sight already: a double-click's second
  // click still lands on what its first one selected).
  revealSelected() {
    const it = this.selected && this.scene && this.scene.byKey.get(this.selected);
    if (!it) return;
    const view = this.width - this._insetRight;
    const [x0] = this.toScreen(it.x, it.y);
    const [x1] = this.toScreen(it.x + it.w, it.y);
    if (x1 <= view - 8) return;
    // Its right edge in sight, or its middle when it is wider than what is left.
    const want = it.w * this.cam.s > view - 48 ? view / 2 - (x0 + x1) / 2 : view - 24 - x1;
    this.cam.tx += want;
    this.requestDraw();
  }

  // The part of the canvas a Fit uses: beside a side panel, above the hint bar, and beside
  // or above the minimap, whichever leaves the larger graph ({x, y, w, h} in CSS px).
  /**
   * @param {{w: number, h: number}} b  what is to fit
   * @returns {Rect}
   */
  fitArea(b) {
    const view = this.width - this.insetRight;
    const hint = this.hintHeight;
    const m = this.minimapBox;
    const above = { x: 0, y: 0, w: view, h: this.height - Math.max(hint, m ? m.h : 0) };
    if (!m) return above;
    const beside = { x: 0, y: 0, w: view - m.w, h: this.height - hint };
    const k = (/** @type {Rect} */ a) => Math.min(a.w / Math.max(b.w, 1), a.h / Math.max(b.h, 1));
    return k(beside) > k(above) ? beside : above;
  }

  // Fit never zooms past 100 %: a small graph is shown at readable size, not blown up.
  fitScale() {
    if (!this.scene) return 1;
    const pad = 32;
    const a = this.fitArea(this.scene);
    return Math.min((a.w - 2 * pad) / this.scene.w, (a.h - 2 * pad) / this.scene.h, READABLE_SCALE);
  }

  // Fit may go below MIN_ZOOM: the whole graph, however small.
  fit() {
    const scene = this.scene;
    if (!scene) return;
    const s = this.fitScale();
    const a = this.fitArea(scene);
    this.cam.s = s;
    this.cam.tx = a.x + (a.w - scene.w * s) / 2;
    this.cam.ty = a.y + (a.h - scene.h * s) / 2;
    this.requestDraw();
  }

  // Back to legible cards, centred on a world point (default: the card nearest the view's
  // centre, never an empty stretch of a frame).
  /**
   * @param {number} [wx]
   * @param {number} [wy]
   */
  readable(wx, wy) {
    /** @type {DrawItem | null} */
    let it = null;
    if (wx === undefined) {
      it = this.nearestCard();
      if (it) [wx, wy] = [it.x + it.w / 2, it.y + Math.min(it.h, this.height / READABLE_SCALE) / 2];
      else [wx, wy] = this.toWorld((this.width - this.insetRight) / 2, this.height / 2);
    }
    this.cam.s = READABLE_SCALE;
    this.cam.tx = (this.width - this.insetRight) / 2 - wx * this.cam.s;
    this.cam.ty = this.height / 2 - /** @type {number} */ (wy) * this.cam.s; // given with wx, or set above
    const c = this.cam;
    this.followed = it && it.key ? { key: it.key, x: it.x, y: it.y, cam: { s: c.s, tx: c.tx, ty: c.ty } } : null;
    this.requestDraw();
  }

  // The laid-out card (not a frame: an item not expanded) nearest the centre of the view,
  // looked for in the frames around that centre first; a boundary pill ("in"/"out") only
  // where no card is in sight; null without one.
  /** @returns {DrawItem | null} */
  nearestCard() {
    if (!this.scene) return null;
    const [cx, cy] = this.toWorld((this.width - this.insetRight) / 2, this.height / 2);
    const dist = (/** @type {DrawItem} */ it) => {
      const dx = Math.max(it.x - cx, 0, cx - (it.x + it.w));
      const dy = Math.max(it.y - cy, 0, cy - (it.y + it.h));
      return dx * dx + dy * dy;
    };
    let best = /** @type {DrawItem | null} */ (null); // set inside visit
    let bestD = Infinity;
    let pill = /** @type {DrawItem | null} */ (null);
    let pillD = Infinity;
    /**
     * @param {DrawContainer} container
     * @param {number} depth
     */
    const visit = (container, depth) => {
      for (const it of container.items) {
        if (it.expanded) {
          // A frame far from the centre cannot hold a nearer card than one found already.
          if (depth < 64 && dist(it) < bestD) visit(it.expanded, depth + 1);
          continue;
        }
        const d = dist(it);
        if (it.type === "in" || it.type === "out") {
          if (d < pillD) [pill, pillD] = [it, d];
        } else if (d < bestD) [best, bestD] = [it, d];
      }
    };
    visit(this.scene.root, 0);
    // A card in sight at readable detail beats a nearer pill; a pill beats a card that
    // far (the frames around the centre not laid out to their cards yet).
    const near = Math.min(this.width - this.insetRight, this.height) / 2 / READABLE_SCALE;
    if (best && (!pill || bestD <= pillD || bestD <= near * near)) return best;
    return pill || best;
  }

  // The smallest world rectangle around `keys` laid out in the scene (null: none is).
  /**
   * @param {Iterable<string>} keys
   * @returns {Rect | null}
   */
  boundsOf(keys) {
    if (!this.scene) return null;
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const k of keys) {
      const it = this.scene.byKey.get(k);
      if (!it) continue;
      x0 = Math.min(x0, it.x);
      y0 = Math.min(y0, it.y);
      x1 = Math.max(x1, it.x + it.w);
      y1 = Math.max(y1, it.y + it.h);
    }
    return x0 === Infinity ? null : { x: x0, y: y0, w: x1 - x0, h: y1 - y0 };
  }

  // Everything in world rectangle `b` in view, centred, at most at readable size (out
  // from under the hint bar and the minimap, as Fit).
  /** @param {Rect} b */
  fitRect(b) {
    const pad = 48;
    const a = this.fitArea(b);
    const s = Math.max(1e-4, Math.min((a.w - 2 * pad) / Math.max(b.w, 1), (a.h - 2 * pad) / Math.max(b.h, 1), READABLE_SCALE));
    this.cam.s = s;
    this.cam.tx = a.x + a.w / 2 - (b.x + b.w / 2) * s;
    this.cam.ty = a.y + a.h / 2 - (b.y + b.h / 2) * s;
    this.requestDraw();
  }

  // Whether any part of world rectangle `b` is on screen (beside the side panel).
  /** @param {Rect} b */
  onScreen(b) {
    const [x0, y0] = this.toScreen(b.x, b.y);
    const [x1, y1] = this.toScreen(b.x + b.w, b.y + b.h);
    return x1 > 0 && y1 > 0 && x0 < this.width - this.insetRight && y0 < this.height;
  }

  /**
   * @param {Rect} item
   * @param {number} [scale]
   */
  centerOn(item, scale) {
    if (scale !== undefined) this.cam.s = scale;
    const s = this.cam.s;
    this.cam.tx = (this.width - this.insetRight) / 2 - (item.x + item.w / 2) * s;
    this.cam.ty = this.height / 2 - (item.y + Math.min(item.h, this.height / s) / 2) * s;
    this.requestDraw();
  }

  // The first view: at a zoom where titles and lines are legible. The whole graph when it
  // fits at that zoom; otherwise the top of the graph, centred on its inputs (the capture
  // inputs' pills, where reading starts).
  home() {
    const scene = this.scene;
    if (!scene) return;
    if (this.fitScale() >= LEGIBLE_SCALE) return this.fit();
    const s = FIRST_SCALE;
    const root = scene.root;
    // a pill's item is its boundary value (a parameter drawn inside its op: `weight`)
    const inputs = root.items.filter((it) => it.type === "in" && !(it.item && /** @type {{weight?: boolean}} */ (it.item).weight));
    const anchor = inputs.length ? inputs : root.items.slice(0, 1);
    const x0 = Math.min(...anchor.map((it) => it.x));
    const x1 = Math.max(...anchor.map((it) => it.x + it.w));
    const y0 = Math.min(...anchor.map((it) => it.y));
    const view = this.width - this.insetRight;
    this.cam.s = s;
    // Centre the inputs, but never leave the graph's left edge inside the screen for nothing.
    let tx = view / 2 - ((x0 + x1) / 2) * s;
    if (scene.w * s <= view) tx = (view - scene.w * s) / 2;
    else tx = Math.min(24, Math.max(view - 24 - scene.w * s, tx));
    this.cam.tx = tx;
    this.cam.ty = 24 - Math.max(0, y0 - 10) * s;
    // The stack of blocks the first view opened on is on screen without scrolling (a
    // ConvNeXt's 27 blocks sit in its third stage, below the stem and the first stages):
    // its card is brought up to two thirds of the screen, and across into view.
    const stack = [...scene.byKey.values()].find((it) => it.type === "stack" && !(it.card && it.card.fold));
    if (stack && stack.y * s + this.cam.ty > this.height * 0.67) this.cam.ty = this.height * 0.67 - stack.y * s;
    if (stack && (stack.x * s + this.cam.tx < 0 || (stack.x + stack.w) * s + this.cam.tx > view)) {
      this.cam.tx = view / 2 - (stack.x + stack.w / 2) * s;
    }
    // Not one card on the first screen (the inputs stand over the middle of a wide
    // container whose cards begin at its left: a generate loop's first 400 ops): across to
    // the topmost card instead of an empty stretch.
    const cards = [...scene.byKey.values()].filter((it) => !it.expanded && it.type !== "in" && it.type !== "out");
    const seen = (/** @type {{x: number, y: number, w: number, h: number}} */ it) => (it.x + it.w) * s + this.cam.tx > 0 &&
      it.x * s + this.cam.tx < view && (it.y + it.h) * s + this.cam.ty > 0 && it.y * s + this.cam.ty < this.height;
    if (cards.length && !cards.some(seen)) {
      const top = cards.reduce((a, b) => (b.y < a.y || (b.y === a.y && b.x < a.x) ? b : a));
      this.cam.tx = view / 2 - (top.x + top.w / 2) * s;
    }
    this.requestDraw();
  }

  // ------------------------------------------------------------------ drawing

  requestDraw() {
    if (this.frameQueued) return;
    this.frameQueued = true;
    requestAnimationFrame((t) => {
      this.frameQueued = false;
      this.draw(t);
    });
  }

  /** @param {number} frameTime */
  draw(frameTime) {
    const t0 = performance.now();
    const ctx = this.ctx;
    const p = this.palette;
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.fillStyle = p.background;
    ctx.fillRect(0, 0, this.canvas.width, this.canvas.height);
    if (this.scene) {
      const { s, tx, ty } = this.cam;
      const d = this.dpr;
      ctx.setTransform(s * d, 0, 0, s * d, tx * d, ty * d);
      const [x0, y0] = this.toWorld(0, 0);
      const [x1, y1] = this.toWorld(this.width, this.height);
      this.view = { x0, y0, x1, y1 };
      this.stats = { items: 0, edges: 0 };
      // The scene comes from the draw list (drawlist.js), which the SVG export shares.
      const list = this.drawListFor(this.view, s, this.dl, this.stats);
      this.farDrawn = [];
      paintList(ctx, list, s, this.hatchFn, this.farDrawn);
      if (this.overlay) this.overlay(ctx, this);
      this.drawSelection();
      if (this.firstPaintAt === null && this.stats.items > 0) this.firstPaintAt = performance.now();
    }
    this.drawMinimap();
    const ms = performance.now() - t0;
    this.drawMs.push(ms);
    if (this.drawMs.length > 600) this.drawMs.splice(0, 300);
    if (this.onDraw) this.onDraw(ms, frameTime);
  }

  // The draw list of what a view (world rectangle) shows at zoom s: the canvas draws
  // it each frame (into a reused array), the SVG export serializes it (export.js).
  /**
   * @param {View} view
   * @param {number} s
   * @param {DrawList} [out]
   * @param {{items: number, edges: number}} [stats]
   * @returns {DrawList}
   */
  drawListFor(view, s, out = this.dl, stats = { items: 0, edges: 0 }) {
    out.length = 0;
    const env = this.env;
    env.palette = this.palette;
    env.s = s;
    env.view = view;
    env.stats = stats;
    if (this.scene) buildDrawList(out, this.scene.root, env);
    return out;
  }

  /**
   * @param {number} x @param {number} y @param {number} w @param {number} h
   */
  visible(x, y, w, h) {
    const v = /** @type {View} */ (this.view); // after a draw
    return x + w >= v.x0 && y + h >= v.y0 && x <= v.x1 && y <= v.y1;
  }

  /**
   * @param {number} x @param {number} y @param {number} w @param {number} h @param {number} r
   */
  roundRect(x, y, w, h, r) {
    const ctx = this.ctx;
    ctx.beginPath();
    if (ctx.roundRect) ctx.roundRect(x, y, w, h, r);
    else ctx.rect(x, y, w, h);
  }

  hatchPattern() {
    if (this.hatch) return this.hatch;
    const c = document.createElement("canvas");
    c.width = c.height = 8;
    const g = /** @type {CanvasRenderingContext2D} */ (c.getContext("2d"));
    g.fillStyle = this.palette.opaqueFill;
    g.fillRect(0, 0, 8, 8);
    g.strokeStyle = this.palette.opaqueHatch;
    g.lineWidth = 1.5;
    g.beginPath();
    for (const [ax, ay, bx, by] of HATCH_TILE) {
      g.moveTo(ax, ay);
      g.lineTo(bx, by);
    }
    g.stroke();
    this.hatch = this.ctx.createPattern(c, "repeat");
    return this.hatch;
  }

  // How a boundary pill's texts fit its laid-out width (card.js).
  /** @param {DrawItem} it */
  pillFit(it) {
    return pillFit(it, this.ctx);
  }

  // Which weight line of a node card a world point is on: the weight's index, or -1
  // (none is readable below LOD_TEXT).
  /**
   * @param {DrawItem} it
   * @param {number} wx
   * @param {number} wy
   */
  weightAt(it, wx, wy) {
    return this.cam.s < LOD_TEXT ? -1 : weightAt(it, wx, wy);
  }

  // eslint-disable-next-line complexity -- the outline of each kind of selected thing (item, edge, stack, pill)
  drawSelection() {
    const ctx = this.ctx;
    const s = this.cam.s;
    // The cursor's line: a light dashed outline; a line shown in the graph: the selection's.
    if (this.scene && this.cursor && this.cursor.size) {
      ctx.save();
      ctx.globalAlpha = 0.6;
      ctx.setLineDash([6 / Math.min(1, s), 4 / Math.min(1, s)]);
      ctx.lineWidth = Math.max(2, 2 / s);
      ctx.strokeStyle = this.palette.highlight;
      for (const key of this.cursor) {
        const it = this.scene.byKey.get(key);
        if (!it) continue;
        this.roundRect(it.x - 5, it.y - 5, it.w + 10, it.h + 10, 10);
        ctx.stroke();
      }
      ctx.restore();
    }
    if (this.scene && this.multi && this.multi.size) {
      ctx.lineWidth = Math.max(2.5, 2.5 / s);
      ctx.strokeStyle = this.palette.select;
      for (const key of this.multi) {
        const it = key !== this.selected && this.scene.byKey.get(key);
        if (!it) continue;
        this.roundRect(it.x - 3, it.y - 3, it.w + 6, it.h + 6, 9);
        ctx.stroke();
      }
    }
    /** @type {[string | null, string, number][]} */
    const marks = [[this.flash, this.palette.highlight, 4], [this.selected, this.palette.select, 2.5]];
    for (const [key, color, width] of marks) {
      if (!key || !this.scene) continue;
      const it = this.scene.byKey.get(key);
      if (!it) continue;
      ctx.lineWidth = Math.max(width, width / s);
      ctx.strokeStyle = color;
      this.roundRect(it.x - 3, it.y - 3, it.w + 6, it.h + 6, 9);
      ctx.stroke();
    }
  }

  // ------------------------------------------------------------------ minimap

  drawMinimap() {
    if (!this.mctx || !this.scene) return;
    const m = /** @type {HTMLCanvasElement} */ (this.minimap); // mctx is its context
    const ctx = this.mctx;
    const scene = this.scene;
    const W = m.width;
    const H = m.height;
    const pad = 6 * this.dpr;
    const k = Math.min((W - 2 * pad) / this.scene.w, (H - 2 * pad) / this.scene.h);
    const ox = (W - this.scene.w * k) / 2;
    const oy = (H - this.scene.h * k) / 2;
    this.minimapXform = { k: k / this.dpr, ox: ox / this.dpr, oy: oy / this.dpr };
    if (!this.minimapCache) {
      const c = document.createElement("canvas");
      c.width = W;
      c.height = H;
      const g = /** @type {CanvasRenderingContext2D} */ (c.getContext("2d"));
      g.fillStyle = this.palette.background;
      g.fillRect(0, 0, W, H);
      g.setTransform(k, 0, 0, k, ox, oy);
      /**
       * @param {DrawContainer} container
       * @param {number} budget  levels left to go into
       */
      const visit = (container, budget) => {
        for (const it of container.items) {
          if (it.expanded) {
            const ks = kindStyle(this.palette, it.type === "chunk" ? "chunk" : /** @type {string} */ (it.item.kind));
            g.fillStyle = ks.fill;
            g.fillRect(it.x, it.y, it.w, it.h);
            g.strokeStyle = ks.stroke;
            g.lineWidth = 1 / k;
            g.strokeRect(it.x, it.y, it.w, it.h);
            if (it.w * k > 3 && budget > 0) visit(it.expanded, budget - 1);
          } else {
            g.fillStyle = it.type === "node" ? (it.item.opaque ? this.palette.opaqueStroke : accentFor(it.item.label || "")) : kindStyle(this.palette, it.type === "chunk" ? "chunk" : /** @type {string} */ (it.item.kind)).stroke;
            g.fillRect(it.x, it.y, Math.max(it.w, 1 / k), Math.max(it.h, 1 / k));
          }
        }
      };
      visit(scene.root, 12);
      this.minimapCache = c;
    }
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.drawImage(this.minimapCache, 0, 0);
    const [x0, y0] = this.toWorld(0, 0);
    const [x1, y1] = this.toWorld(this.width, this.height);
    ctx.strokeStyle = this.palette.select;
    ctx.lineWidth = 1.5 * this.dpr;
    ctx.fillStyle = this.palette.select;
    ctx.globalAlpha = 0.12;
    ctx.fillRect(ox + x0 * k, oy + y0 * k, (x1 - x0) * k, (y1 - y0) * k);
    ctx.globalAlpha = 1;
    ctx.strokeRect(ox + x0 * k, oy + y0 * k, (x1 - x0) * k, (y1 - y0) * k);
  }

  // A point on the minimap (CSS px) → the world point it shows.
  /**
   * @param {number} mx
   * @param {number} my
   * @returns {[number, number] | null}
   */
  minimapToWorld(mx, my) {
    const t = this.minimapXform;
    if (!t) return null;
    return [(mx - t.ox) / t.k, (my - t.oy) / t.k];
  }
}
