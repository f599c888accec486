// How the scene is drawn: a <canvas> renderer with a camera, viewport culling and level
// of detail, plus the minimap. It knows nothing about the API; it draws what the view
// model composed (viewmodel.js) and reports what is under the pointer.

import {
  CARD_STYLE as S,
  KIND_WORDING,
  LOD_EDGE_LABELS,
  LOD_TEXT,
  LOD_TITLE,
  MAX_ZOOM,
  MIN_ZOOM,
  READABLE_SCALE,
  LEGIBLE_SCALE,
  FIRST_SCALE,
  boundaryContent,
  kindStyle,
  readPalette,
} from "./theme.js";

const OP_ACCENT = [
  [/^(dot_general|conv|matmul|mm|bmm|linear|addmm|einsum|ragged_dot)/, "#3b82f6"],
  [/^(exp|log|tanh|logistic|relu|gelu|silu|softmax|erf|sigmoid|max$|min$)/, "#ef6c4a"],
  [/^(reshape|transpose|broadcast|squeeze|expand_dims|concatenate|slice|dynamic_slice|gather|scatter|pad|view|permute|select_n|convert_element_type)/, "#16a34a"],
  [/^(reduce_|argmax|argmin|cumsum|sum|mean)/, "#9333ea"],
  [/^(while|cond|scan|pjit|custom_|call|remat|checkpoint)/, "#d97706"],
];

function accentFor(op) {
  for (const [re, color] of OP_ACCENT) if (re.test(op)) return color;
  return "#94a3b8";
}

export class Renderer {
  constructor(canvas, minimap) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d", { alpha: false });
    this.minimap = minimap;
    this.mctx = minimap ? minimap.getContext("2d") : null;
    this.scene = null;
    this.cam = { tx: 0, ty: 0, s: 1 };
    this.selected = null;
    this.hover = null;
    this.flash = null;
    this.palette = readPalette();
    this.dpr = window.devicePixelRatio || 1;
    this.frameQueued = false;
    this.drawMs = [];
    this.firstPaintAt = null;
    this.onDraw = null;
    this.minimapCache = null;
    this.hatch = null;
    this.insetRight = 0; // CSS px of the canvas covered by a side panel
    this.overlay = null; // (ctx, renderer) => draws over the items, under the selection (diff.js)
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

  setScene(scene) {
    this.scene = scene;
    this.minimapCache = null;
    this.requestDraw();
  }

  // ------------------------------------------------------------------ camera

  toWorld(sx, sy) {
    return [(sx - this.cam.tx) / this.cam.s, (sy - this.cam.ty) / this.cam.s];
  }

  toScreen(wx, wy) {
    return [wx * this.cam.s + this.cam.tx, wy * this.cam.s + this.cam.ty];
  }

  panBy(dx, dy) {
    this.cam.tx += dx;
    this.cam.ty += dy;
    this.requestDraw();
  }

  zoomAt(sx, sy, factor, allowBelowMin = false) {
    const min = allowBelowMin ? 1e-4 : Math.min(MIN_ZOOM, this.cam.s);
    const s = Math.max(min, Math.min(MAX_ZOOM, this.cam.s * factor));
    const [wx, wy] = this.toWorld(sx, sy);
    this.cam.s = s;
    this.cam.tx = sx - wx * s;
    this.cam.ty = sy - wy * s;
    this.requestDraw();
  }

  // Fit never zooms past 100 %: a small graph is shown at readable size, not blown up.
  fitScale() {
    if (!this.scene) return 1;
    const pad = 32;
    return Math.min((this.width - this.insetRight - 2 * pad) / this.scene.w, (this.height - 2 * pad) / this.scene.h, READABLE_SCALE);
  }

  // Fit may go below MIN_ZOOM: the whole graph, however small.
  fit() {
    if (!this.scene) return;
    const s = this.fitScale();
    this.cam.s = s;
    this.cam.tx = (this.width - this.insetRight - this.scene.w * s) / 2;
    this.cam.ty = (this.height - this.scene.h * s) / 2;
    this.requestDraw();
  }

  // Back to legible cards, centred on a world point (default: the view's centre).
  readable(wx, wy) {
    if (wx === undefined) [wx, wy] = this.toWorld(this.width / 2, this.height / 2);
    this.cam.s = READABLE_SCALE;
    this.cam.tx = this.width / 2 - wx * this.cam.s;
    this.cam.ty = this.height / 2 - wy * this.cam.s;
    this.requestDraw();
  }

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
    if (!this.scene) return;
    if (this.fitScale() >= LEGIBLE_SCALE) return this.fit();
    const s = FIRST_SCALE;
    const root = this.scene.root;
    const inputs = root.items.filter((it) => it.type === "in" && !(it.item && it.item.weight));
    const anchor = inputs.length ? inputs : root.items.slice(0, 1);
    const x0 = Math.min(...anchor.map((it) => it.x));
    const x1 = Math.max(...anchor.map((it) => it.x + it.w));
    const y0 = Math.min(...anchor.map((it) => it.y));
    const view = this.width - this.insetRight;
    this.cam.s = s;
    // Centre the inputs, but never leave the graph's left edge inside the screen for nothing.
    let tx = view / 2 - ((x0 + x1) / 2) * s;
    if (this.scene.w * s <= view) tx = (view - this.scene.w * s) / 2;
    else tx = Math.min(24, Math.max(view - 24 - this.scene.w * s, tx));
    this.cam.tx = tx;
    this.cam.ty = 24 - Math.max(0, y0 - 10) * s;
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
      this.drawContainer(this.scene.root, 0);
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

  visible(x, y, w, h) {
    const v = this.view;
    return x + w >= v.x0 && y + h >= v.y0 && x <= v.x1 && y <= v.y1;
  }

  drawContainer(c, depth) {
    const s = this.cam.s;
    // Below ~1.5px between layers an edge is no longer a line one can follow: skip them.
    if (s >= 0.035) this.drawEdges(c);
    let specks = null;
    for (const it of c.items) {
      if (!this.visible(it.x, it.y, it.w, it.h)) continue;
      this.stats.items++;
      if (it.w * s < 2.5 && it.h * s < 2.5 && !it.expanded) {
        // Sub-pixel: a speck is enough, all of them in one path.
        if (!specks) specks = new Path2D();
        specks.rect(it.x, it.y, Math.max(it.w, 1 / s), Math.max(it.h, 1 / s));
        continue;
      }
      if (it.expanded) this.drawExpandedGroup(it, depth);
      else if (it.type === "node") this.drawNode(it);
      else if (it.type === "group" || it.type === "chunk" || it.type === "stack") this.drawCollapsedGroup(it);
      else this.drawBoundary(it);
    }
    if (specks) {
      this.ctx.fillStyle = this.palette.cardStroke;
      this.ctx.fill(specks);
    }
  }

  drawEdges(c) {
    const ctx = this.ctx;
    const s = this.cam.s;
    if (!c.edges.length) return;
    const simple = s < LOD_TITLE;
    ctx.lineWidth = simple ? 1 / s : 1.25;
    ctx.strokeStyle = this.palette.edge;
    ctx.beginPath();
    const arrows = [];
    const labels = [];
    const seenLabel = new Set();
    for (const e of c.edges) {
      const bb = e._bb || (e._bb = bboxOf(e.points, c.x, c.y));
      if (!this.visible(bb[0], bb[1], bb[2] - bb[0], bb[3] - bb[1])) continue;
      this.stats.edges++;
      const pts = e.points;
      const ox = c.x;
      const oy = c.y;
      ctx.moveTo(ox + pts[0][0], oy + pts[0][1]);
      if (simple || pts.length === 2) {
        for (let i = 1; i < pts.length; i++) ctx.lineTo(ox + pts[i][0], oy + pts[i][1]);
      } else {
        for (let i = 1; i < pts.length - 1; i++) {
          ctx.arcTo(ox + pts[i][0], oy + pts[i][1], ox + pts[i + 1][0], oy + pts[i + 1][1], 7);
        }
        ctx.lineTo(ox + pts[pts.length - 1][0], oy + pts[pts.length - 1][1]);
      }
      if (!simple) arrows.push(pts, ox, oy);
      // A boundary pill already says its value's shape: its edge needs no label.
      if (s >= LOD_EDGE_LABELS && e.label && e.labelAt && !e.source.startsWith("in:") && !e.target.startsWith("out:")) {
        const k = e.source + "|" + e.label;
        if (!seenLabel.has(k)) {
          seenLabel.add(k);
          labels.push(e, ox, oy);
        }
      }
    }
    ctx.stroke();
    if (arrows.length) {
      ctx.fillStyle = this.palette.edge;
      ctx.beginPath();
      for (let i = 0; i < arrows.length; i += 3) {
        const pts = arrows[i];
        const ox = arrows[i + 1];
        const oy = arrows[i + 2];
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
    if (labels.length) {
      ctx.font = S.fontLabel;
      ctx.textBaseline = "middle";
      ctx.textAlign = "left";
      for (let i = 0; i < labels.length; i += 3) {
        const e = labels[i];
        const x = labels[i + 1] + e.labelAt[0] + 5;
        const y = labels[i + 2] + e.labelAt[1];
        const w = e._lw || (e._lw = ctx.measureText(e.label).width);
        ctx.fillStyle = this.palette.edgeLabelBg;
        ctx.fillRect(x - 2, y - 7, w + 4, 14);
        ctx.fillStyle = this.palette.edgeLabel;
        ctx.fillText(e.label, x, y);
      }
    }
  }

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
    const g = c.getContext("2d");
    g.fillStyle = this.palette.opaqueFill;
    g.fillRect(0, 0, 8, 8);
    g.strokeStyle = this.palette.opaqueHatch;
    g.lineWidth = 1.5;
    g.beginPath();
    g.moveTo(-2, 10);
    g.lineTo(10, -2);
    g.moveTo(-2, 2);
    g.lineTo(2, -2);
    g.moveTo(6, 10);
    g.lineTo(10, 6);
    g.stroke();
    this.hatch = this.ctx.createPattern(c, "repeat");
    return this.hatch;
  }

  drawNode(it) {
    const ctx = this.ctx;
    const p = this.palette;
    const s = this.cam.s;
    const n = it.item;
    const opaque = !!n.opaque;
    if (s < LOD_TITLE) {
      ctx.fillStyle = opaque ? p.opaqueStroke : p.cardFill;
      ctx.fillRect(it.x, it.y, it.w, it.h);
      ctx.fillStyle = accentFor(n.label || "");
      ctx.fillRect(it.x, it.y, it.w, Math.min(it.h, 6));
      return;
    }
    this.roundRect(it.x, it.y, it.w, it.h, 6);
    ctx.fillStyle = opaque ? this.hatchPattern() : p.cardFill;
    ctx.fill();
    ctx.lineWidth = opaque ? 1.6 : 1;
    ctx.strokeStyle = opaque ? p.opaqueStroke : p.cardStroke;
    if (opaque) ctx.setLineDash([5, 3]);
    ctx.stroke();
    if (opaque) ctx.setLineDash([]);
    // Category accent on the left edge.
    ctx.fillStyle = opaque ? p.opaqueStroke : accentFor(n.label || "");
    this.roundRect(it.x, it.y, 4, it.h, [6, 0, 0, 6]);
    ctx.fill();
    this.drawCardText(it, n.label || it.key, opaque ? "opaque" : null, p.cardText, opaque ? p.opaqueStroke : null);
    if (n.bodies && n.bodies.length && s >= LOD_TEXT) this.drawToggle(it.x + it.w - 16, it.y + it.h - 14, "+", p.opaqueStroke);
  }

  drawCollapsedGroup(it) {
    const ctx = this.ctx;
    const p = this.palette;
    const s = this.cam.s;
    const kind = it.type === "chunk" ? "chunk" : it.item.kind;
    const ks = kindStyle(p, kind);
    const stack = it.type === "stack";
    if (s < LOD_TITLE) {
      ctx.fillStyle = ks.fill;
      ctx.fillRect(it.x, it.y, it.w, it.h);
      ctx.lineWidth = 1 / s;
      ctx.strokeStyle = ks.stroke;
      ctx.strokeRect(it.x, it.y, it.w, it.h);
      ctx.fillStyle = ks.stroke;
      ctx.fillRect(it.x, it.y, it.w, Math.min(it.h, 6));
      this.farLabel(it, it.item.label || it.key, ks.text, 7);
      return;
    }
    // A second sheet behind the card says "there is more inside"; a stack of identical
    // blocks shows a deeper pile.
    for (const d of stack ? [8, 4] : [4]) {
      this.roundRect(it.x + d, it.y + d, it.w, it.h, 7);
      ctx.fillStyle = ks.fill;
      ctx.fill();
      ctx.lineWidth = 1;
      ctx.strokeStyle = ks.stroke;
      ctx.stroke();
    }
    this.roundRect(it.x, it.y, it.w, it.h, 7);
    ctx.fillStyle = ks.fill;
    ctx.fill();
    ctx.lineWidth = 1.4;
    if (kind === "body") ctx.setLineDash([6, 4]); // a template, not executed
    ctx.stroke();
    ctx.setLineDash([]);
    this.drawCardText(it, it.item.label || it.key, stack ? `×${it.item.stack_count}` : kind, ks.text, ks.stroke);
    if (s >= LOD_TEXT) this.drawToggle(it.x + it.w - 16, it.y + 14, "+", ks.stroke);
  }

  // Far away, a group still says what it is: its name at a constant 11px on screen,
  // when its box is large enough on screen to hold it.
  farLabel(it, text, color, padTop, bg) {
    const s = this.cam.s;
    const sw = it.w * s;
    if (sw < 34 || it.h * s < 14) return;
    const ctx = this.ctx;
    const px = 10.5 / s;
    const maxChars = Math.floor((sw - 8) / 6.2);
    if (maxChars < 3) return;
    const t = text.length > maxChars ? text.slice(0, maxChars - 1) + "…" : text;
    ctx.font = `600 ${px}px ${S.fontHeader.split("px ")[1]}`;
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    const x = it.x + 4 / s;
    const y = it.y + padTop / s;
    if (bg) {
      const w = ctx.measureText(t).width;
      ctx.fillStyle = bg;
      ctx.fillRect(x - 2 / s, y - 1 / s, w + 4 / s, px + 3 / s);
    }
    ctx.fillStyle = color;
    ctx.fillText(t, x, y);
  }

  drawToggle(cx, cy, sign, color) {
    const ctx = this.ctx;
    ctx.beginPath();
    ctx.arc(cx, cy, 7, 0, Math.PI * 2);
    ctx.strokeStyle = color;
    ctx.lineWidth = 1.2;
    ctx.stroke();
    ctx.beginPath();
    ctx.moveTo(cx - 3.5, cy);
    ctx.lineTo(cx + 3.5, cy);
    if (sign === "+") {
      ctx.moveTo(cx, cy - 3.5);
      ctx.lineTo(cx, cy + 3.5);
    }
    ctx.stroke();
  }

  drawCardText(it, title, tag, color, tagColor) {
    const s = this.cam.s;
    if (s < LOD_TITLE) return;
    const ctx = this.ctx;
    const p = this.palette;
    const x = it.x + S.padX;
    let y = it.y + S.padTop + S.titleHeight / 2;
    const boxed = it.type === "group" || it.type === "chunk" || it.type === "stack";
    const maxW = it.w - 2 * S.padX - (boxed ? 14 : 0);
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    let tagW = 0;
    if (tag && s >= LOD_TEXT) {
      ctx.font = S.fontTag;
      tagW = (it._tagW ||= ctx.measureText(tag).width + 10);
      const tx = it.x + it.w - S.padX - tagW - (boxed ? 18 : 0);
      this.roundRect(tx, y - 8, tagW, 16, 8);
      ctx.fillStyle = tagColor || p.cardMuted;
      ctx.globalAlpha = 0.14;
      ctx.fill();
      ctx.globalAlpha = 1;
      ctx.fillStyle = tagColor || p.cardMuted;
      ctx.fillText(tag, tx + 5, y + 0.5);
    }
    ctx.font = S.fontTitle;
    ctx.fillStyle = color;
    const titleKey = "_t" + Math.round(maxW - tagW);
    if (!it[titleKey]) it[titleKey] = truncate(ctx, title, maxW - (tagW ? tagW + 6 : 0));
    ctx.fillText(it[titleKey], x, y);
    if (s < LOD_TEXT) return;
    const lines = it._lines || (it._lines = linesOf(it));
    if (!lines.length) return;
    ctx.font = S.fontMono;
    ctx.fillStyle = p.cardMuted;
    y = it.y + S.padTop + S.titleHeight + S.lineHeight / 2;
    const ws = it.weightStart ?? lines.length;
    // A weight line keeps its shape whole; a long name loses its start (as on pills).
    if (!it._tl) it._tl = lines.map((l, i) => (i >= ws ? truncateStart(ctx, l, maxW - 8) : truncate(ctx, l, maxW)));
    it._tl.forEach((l, i) => {
      if (i === ws) {
        // The weights this op consumes: a rule, then one quiet line each (names in full).
        ctx.fillStyle = p.quietStroke;
        ctx.fillRect(x, y - S.lineHeight / 2 - 0.5, maxW, 1);
        ctx.fillStyle = p.quietText;
      }
      if (i >= ws) {
        ctx.fillStyle = p.quietText;
        ctx.fillRect(x, y - 2, 4, 4);
        ctx.fillText(l, x + 8, y);
      } else {
        ctx.fillText(l, x, y);
      }
      y += S.lineHeight;
    });
  }

  // Which weight line of a node card a world point is on: the weight's index, or -1.
  weightAt(it, wx, wy) {
    if (it.type !== "node" || it.weightStart === null || it.weightStart === undefined || this.cam.s < LOD_TEXT) return -1;
    const row = Math.floor((wy - it.y - S.padTop - S.titleHeight) / S.lineHeight);
    const k = row - it.weightStart;
    const ws = (it.item && it.item.weights) || [];
    if (!(k >= 0 && k < ws.length && k < it.lines.length - it.weightStart && wx >= it.x && wx <= it.x + it.w)) return -1;
    return it.lines[it.weightStart + k].startsWith("+") ? -1 : k; // "+N more" is not a weight
  }

  drawExpandedGroup(it, depth) {
    const ctx = this.ctx;
    const p = this.palette;
    const s = this.cam.s;
    // An opened control-flow boundary node holds its unexecuted bodies: drawn in the
    // control-flow colour, tagged "opaque"; templates (kind body) have a dashed frame.
    const boundary = it.type === "node";
    const kind = it.type === "chunk" ? "chunk" : boundary ? "opaque" : it.item.kind;
    const ks = kindStyle(p, boundary ? "cond" : kind);
    this.roundRect(it.x, it.y, it.w, it.h, 9);
    ctx.fillStyle = ks.fill;
    ctx.globalAlpha = 0.55;
    ctx.fill();
    ctx.globalAlpha = 1;
    ctx.lineWidth = s < LOD_TITLE ? 1 / s : 1.4;
    ctx.strokeStyle = ks.stroke;
    if (kind === "body" || boundary) ctx.setLineDash([6, 4]);
    ctx.stroke();
    ctx.setLineDash([]);
    // Header band.
    if (s >= LOD_TITLE && this.visible(it.x, it.y, it.w, S.groupHeader)) {
      this.roundRect(it.x, it.y, it.w, S.groupHeader - 4, [9, 9, 0, 0]);
      ctx.fillStyle = ks.fill;
      ctx.fill();
      ctx.textBaseline = "middle";
      ctx.textAlign = "left";
      const y = it.y + (S.groupHeader - 4) / 2;
      ctx.font = S.fontTag;
      const tag = kind;
      const tw = ctx.measureText(tag).width + 10;
      this.roundRect(it.x + 10, y - 8, tw, 16, 8);
      ctx.fillStyle = ks.stroke;
      ctx.fill();
      ctx.fillStyle = p.background;
      ctx.fillText(tag, it.x + 15, y + 0.5);
      ctx.font = S.fontHeader;
      ctx.fillStyle = ks.text;
      const name = it.item.label || it.key;
      const maxW = it.w - tw - 48;
      const hk = "_h" + Math.round(maxW);
      if (!it[hk]) {
        const nb = boundary ? (it.item.bodies || []).length : 0;
        const wording = boundary ? `${nb} ${nb === 1 ? "body" : "bodies"}: templates, not executed`
          : it.item.template || it.item.honest || (KIND_WORDING[kind] || "").replace(kind + " · ", "");
        const full = wording && wording !== kind ? `${name}  ·  ${wording}` : name;
        it[hk] = truncate(ctx, full, maxW);
      }
      ctx.fillText(it[hk], it.x + 18 + tw, y);
      if (s >= LOD_TEXT) this.drawToggle(it.x + it.w - 16, y, "-", ks.stroke);
    }
    // An expanded group too small to read is drawn as its frame only.
    if (it.w * s < 24 && it.h * s < 24) return;
    this.drawContainer(it.expanded, depth + 1);
    // Drawn after the contents, so that edges inside do not run over it.
    if (s < LOD_TITLE) this.farLabel(it, `${kind} ${it.item.label || it.key}`, ks.text, 3, ks.fill);
  }

  // A boundary pill. A capture input shows its name (`x  f32[2,3,16,16]`) on an accented
  // pill; parameters, buffers, variables and constants a smaller, lighter one
  // (`stem.weight  f32[8,3,3,3]`); a value from a node outside the view `in  f32[8]`.
  drawBoundary(it) {
    const ctx = this.ctx;
    const p = this.palette;
    const s = this.cam.s;
    const { content: c, fit } = this.pillText(it);
    const look = c.look === "quiet"
      ? { fill: p.quietFill, stroke: p.quietStroke, name: p.quietText, shape: p.quietMuted, dash: c.role === "buffer" || c.role === "const" }
      : c.look === "input"
        ? { fill: p.inputFill, stroke: p.inputStroke, name: p.inputText, shape: p.boundaryMuted, dash: false }
        : { fill: p.boundaryFill, stroke: p.boundaryStroke, name: p.boundaryText, shape: p.boundaryText, dash: false };
    this.roundRect(it.x, it.y, it.w, it.h, it.h / 2);
    ctx.fillStyle = look.fill;
    ctx.fill();
    ctx.lineWidth = 1;
    ctx.strokeStyle = look.stroke;
    if (look.dash) ctx.setLineDash([3, 2]);
    ctx.stroke();
    if (look.dash) ctx.setLineDash([]);
    if (s < LOD_TITLE) return;
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    const { texts, widths, total } = fit;
    let x = it.x + (it.w - total) / 2;
    const y = it.y + it.h / 2 + 0.5;
    c.parts.forEach((part, i) => {
      ctx.font = S[part.font] || S.fontMono;
      ctx.fillStyle = part.tone === "shape" ? look.shape : look.name;
      ctx.fillText(texts[i], x, y);
      x += widths[i] + S.boundaryGap;
    });
  }

  // What a boundary pill says and how its text fits its laid-out width (cached).
  pillText(it) {
    if (!it._bc) it._bc = boundaryContent(it.type, it.item);
    if (!it._bt) it._bt = fitBoundary(this.ctx, it._bc.parts, it.w - 2 * S.padX + 2);
    return { content: it._bc, fit: it._bt };
  }

  drawSelection() {
    const ctx = this.ctx;
    const s = this.cam.s;
    for (const [key, color, width] of [[this.flash, this.palette.highlight, 4], [this.selected, this.palette.select, 2.5]]) {
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
    const m = this.minimap;
    const ctx = this.mctx;
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
      const g = c.getContext("2d");
      g.fillStyle = this.palette.background;
      g.fillRect(0, 0, W, H);
      g.setTransform(k, 0, 0, k, ox, oy);
      const visit = (container, budget) => {
        for (const it of container.items) {
          if (it.expanded) {
            const ks = kindStyle(this.palette, it.type === "chunk" ? "chunk" : it.item.kind);
            g.fillStyle = ks.fill;
            g.fillRect(it.x, it.y, it.w, it.h);
            g.strokeStyle = ks.stroke;
            g.lineWidth = 1 / k;
            g.strokeRect(it.x, it.y, it.w, it.h);
            if (it.w * k > 3 && budget > 0) visit(it.expanded, budget - 1);
          } else {
            g.fillStyle = it.type === "node" ? (it.item.opaque ? this.palette.opaqueStroke : accentFor(it.item.label || "")) : kindStyle(this.palette, it.type === "chunk" ? "chunk" : it.item.kind).stroke;
            g.fillRect(it.x, it.y, Math.max(it.w, 1 / k), Math.max(it.h, 1 / k));
          }
        }
      };
      visit(this.scene.root, 12);
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
  minimapToWorld(mx, my) {
    const t = this.minimapXform;
    if (!t) return null;
    return [(mx - t.ox) / t.k, (my - t.oy) / t.k];
  }
}

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

function truncate(ctx, text, maxW) {
  text = String(text);
  if (ctx.measureText(text).width <= maxW) return text;
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText(text.slice(0, mid) + "…").width <= maxW) lo = mid;
    else hi = mid - 1;
  }
  return text.slice(0, lo) + "…";
}

// `name  shape[  shared]` within maxW: the name loses its start, the rest stays whole.
function truncateStart(ctx, text, maxW) {
  if (ctx.measureText(text).width <= maxW) return text;
  const cut = text.indexOf("  ");
  if (cut < 0) return truncate(ctx, text, maxW);
  const name = text.slice(0, cut);
  const rest = text.slice(cut);
  let lo = 0;
  let hi = name.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText("…" + name.slice(name.length - mid) + rest).width <= maxW) lo = mid;
    else hi = mid - 1;
  }
  return lo ? "…" + name.slice(name.length - lo) + rest : truncate(ctx, text, maxW);
}

// A pill's parts within maxW: the shape always stays whole; a long name loses its start
// (`…norm.running_mean`), where a dotted path repeats what the enclosing groups say.
function fitBoundary(ctx, parts, maxW) {
  const widths = parts.map((part) => {
    ctx.font = S[part.font] || S.fontMono;
    return ctx.measureText(part.text).width;
  });
  const texts = parts.map((part) => part.text);
  const gap = S.boundaryGap * (parts.length - 1);
  let total = widths.reduce((a, b) => a + b, 0) + gap;
  if (total > maxW && parts.length > 1) {
    ctx.font = S[parts[0].font] || S.fontMono;
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
    ctx.font = S[parts[0].font] || S.fontMono;
    texts[0] = truncate(ctx, texts[0], maxW);
    widths[0] = ctx.measureText(texts[0]).width;
    total = widths[0];
  }
  return { texts, widths, total };
}

function linesOf(it) {
  return it.lines || it._cardLines || [];
}
