// The draw list: what the visible part of a laid-out scene looks like at a zoom, as
// plain primitives in world coordinates. One builder holds the card rules (shapes, text
// positions, truncation, level of detail); the canvas renderer executes the list with a
// 2D context (renderer.js) and the SVG export serializes the same list (export.js), so
// the two cannot drift apart.
//
// Primitives (plain objects; `t` says which):
//   rect    {x, y, w, h, r, fill, fa, stroke, lw, hair, dash}  r: number | corner list | 0
//           (square); fa: fill opacity; hair: the stroke is 1 screen px wide, whatever
//           the zoom; fill HATCH: the opaque hatch pattern
//   text    {x, y, text, font, fill, align, baseline}  text already truncated (measured
//           with the canvas's measureText); baseline "middle"
//   toggle  {cx, cy, sign, color}  the +/- circle of a group or boundary node
//   far     {x, y, w, h, text, color, padTop, bg}  a name at constant screen size, laid
//           out for the zoom by farLabel() (both executors call it)
//   edges   {ox, oy, list, simple, labels, stroke, labelFill, labelBg}  one container's
//           visible edges: a point list per edge relative to (ox, oy), arrows unless
//           simple (far: hairlines); labels {text, x, y, w} (x, y relative to (ox, oy)) on a
//           background
//   specks  {rects, fill}  sub-pixel items, x/y/w/h flattened
// A list may hold a nested list (a card's cached primitives): executors recurse.
//
// Card primitives are built only for visible items and cached on the scene item per
// level of detail and palette, so a frame allocates little beyond the list itself.

import { CARD_STYLE as S, KIND_WORDING, LOD_EDGE_LABELS, LOD_TEXT, LOD_TITLE, boundaryContent, kindStyle } from "./theme.js";

export const HATCH = "url(#hatch)";

const OP_ACCENT = [
  [/^(dot_general|conv|matmul|mm|bmm|linear|addmm|einsum|ragged_dot)/, "#3b82f6"],
  [/^(exp|log|tanh|logistic|relu|gelu|silu|softmax|erf|sigmoid|max$|min$)/, "#ef6c4a"],
  [/^(reshape|transpose|broadcast|squeeze|expand_dims|concatenate|slice|dynamic_slice|gather|scatter|pad|view|permute|select_n|convert_element_type)/, "#16a34a"],
  [/^(reduce_|argmax|argmin|cumsum|sum|mean)/, "#9333ea"],
  [/^(while|cond|scan|pjit|custom_|call|remat|checkpoint)/, "#d97706"],
];

export function accentFor(op) {
  for (const [re, color] of OP_ACCENT) if (re.test(op)) return color;
  return "#94a3b8";
}

// Level of detail: 0 far (boxes and far labels), 1 titles, 2 titles, tags and lines.
export function bandOf(s) {
  return s < LOD_TITLE ? 0 : s < LOD_TEXT ? 1 : 2;
}

// Below ~1.5px between layers an edge is no longer a line one can follow.
export const MIN_EDGE_SCALE = 0.035;

const rect = (x, y, w, h, r, fill, stroke = null, lw = 1, dash = null, fa = 1, hair = false) =>
  ({ t: "rect", x, y, w, h, r, fill, fa, stroke, lw, hair, dash });
const text = (x, y, s, font, fill, align = "left") => ({ t: "text", x, y, text: s, font, fill, align, baseline: "middle" });

// The whole visible scene into `out` (cleared by the caller). env: {ctx (for
// measureText), palette, s (zoom), view {x0, y0, x1, y1} world, stats {items, edges}}.
export function buildDrawList(out, root, env) {
  container(out, root, env);
  return out;
}

const visible = (v, x, y, w, h) => x + w >= v.x0 && y + h >= v.y0 && x <= v.x1 && y <= v.y1;

function container(out, c, env) {
  const { s, view } = env;
  if (s >= MIN_EDGE_SCALE) edges(out, c, env);
  let specks = null;
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
    if (!it.expanded) {
      out.push(dl.card);
      continue;
    }
    out.push(dl.card);
    if (dl.header && visible(view, it.x, it.y, it.w, S.groupHeader)) out.push(dl.header);
    // An expanded group too small to read is drawn as its frame only.
    if (it.w * s < 24 && it.h * s < 24) continue;
    container(out, it.expanded, env);
    // Drawn after the contents, so that edges inside do not run over it.
    if (dl.far) out.push(dl.far);
  }
  if (specks) out.push({ t: "specks", rects: specks, fill: env.palette.cardStroke });
}

function edges(out, c, env) {
  if (!c.edges.length) return;
  const { s, view } = env;
  const list = [];
  const labels = [];
  let seen = null;
  for (const e of c.edges) {
    const bb = e._bb || (e._bb = bboxOf(e.points, c.x, c.y));
    if (!visible(view, bb[0], bb[1], bb[2] - bb[0], bb[3] - bb[1])) continue;
    env.stats.edges++;
    list.push(e.points);
    // A boundary pill already says its value's shape: its edge needs no label.
    if (s >= LOD_EDGE_LABELS && e.label && e.labelAt && !e.source.startsWith("in:") && !e.target.startsWith("out:")) {
      const k = e.source + "|" + e.label;
      if (!seen) seen = new Set();
      if (seen.has(k)) continue;
      seen.add(k);
      if (!e._lab) {
        env.ctx.font = S.fontLabel;
        e._lab = { text: e.label, x: e.labelAt[0] + 5, y: e.labelAt[1], w: env.ctx.measureText(e.label).width }; // relative to (ox, oy)
      }
      labels.push(e._lab);
    }
  }
  const p = env.palette;
  if (list.length) out.push({ t: "edges", ox: c.x, oy: c.y, list, simple: s < LOD_TITLE, labels, stroke: p.edge, labelFill: p.edgeLabel, labelBg: p.edgeLabelBg });
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

// One item's primitives at the zoom's level of detail (cached per band and palette):
// {card, header?, far?}; header and far only for an expanded group.
export function cardList(it, env) {
  const band = bandOf(env.s);
  const p = env.palette;
  const c = it._dl;
  if (c && c.band === band && c.p === p) return c;
  const dl = { band, p, card: [], header: null, far: null };
  if (it.expanded) expandedGroup(dl, it, env.ctx, p, band);
  else if (it.type === "node") node(dl.card, it, env.ctx, p, band);
  else if (it.type === "group" || it.type === "chunk" || it.type === "stack") collapsedGroup(dl.card, it, env.ctx, p, band);
  else boundary(dl.card, it, env.ctx, p, band);
  it._dl = dl;
  return dl;
}

function node(out, it, ctx, p, band) {
  const n = it.item;
  const opaque = !!n.opaque;
  if (band === 0) {
    out.push(rect(it.x, it.y, it.w, it.h, 0, opaque ? p.opaqueStroke : p.cardFill));
    out.push(rect(it.x, it.y, it.w, Math.min(it.h, 6), 0, accentFor(n.label || "")));
    return;
  }
  out.push(rect(it.x, it.y, it.w, it.h, 6, opaque ? HATCH : p.cardFill, opaque ? p.opaqueStroke : p.cardStroke, opaque ? 1.6 : 1, opaque ? [5, 3] : null));
  // Category accent on the left edge.
  out.push(rect(it.x, it.y, 4, it.h, [6, 0, 0, 6], opaque ? p.opaqueStroke : accentFor(n.label || "")));
  cardText(out, it, ctx, p, band, n.label || it.key, opaque ? "opaque" : null, p.cardText, opaque ? p.opaqueStroke : null);
  if (n.bodies && n.bodies.length && band === 2) out.push({ t: "toggle", cx: it.x + it.w - 16, cy: it.y + it.h - 14, sign: "+", color: p.opaqueStroke });
}

function collapsedGroup(out, it, ctx, p, band) {
  const kind = it.type === "chunk" ? "chunk" : it.item.kind;
  const ks = kindStyle(p, kind);
  const stack = it.type === "stack";
  const title = it.item.label || it.key;
  if (band === 0) {
    out.push(rect(it.x, it.y, it.w, it.h, 0, ks.fill, ks.stroke, 1, null, 1, true));
    out.push(rect(it.x, it.y, it.w, Math.min(it.h, 6), 0, ks.stroke));
    out.push({ t: "far", x: it.x, y: it.y, w: it.w, h: it.h, text: title, color: ks.text, padTop: 7, bg: null });
    return;
  }
  // A second sheet behind the card says "there is more inside"; a stack of identical
  // blocks shows a deeper pile.
  for (const d of stack ? [8, 4] : [4]) out.push(rect(it.x + d, it.y + d, it.w, it.h, 7, ks.fill, ks.stroke, 1));
  out.push(rect(it.x, it.y, it.w, it.h, 7, ks.fill, ks.stroke, 1.4, kind === "body" ? [6, 4] : null)); // body: a template, not executed
  cardText(out, it, ctx, p, band, title, stack ? `×${it.item.stack_count}` : kind, ks.text, ks.stroke);
  if (band === 2) out.push({ t: "toggle", cx: it.x + it.w - 16, cy: it.y + 14, sign: "+", color: ks.stroke });
}

function cardText(out, it, ctx, p, band, title, tag, color, tagColor) {
  if (band === 0) return;
  const x = it.x + S.padX;
  let y = it.y + S.padTop + S.titleHeight / 2;
  const boxed = it.type === "group" || it.type === "chunk" || it.type === "stack";
  const maxW = it.w - 2 * S.padX - (boxed ? 14 : 0);
  let tagW = 0;
  if (tag && band === 2) {
    ctx.font = S.fontTag;
    tagW = ctx.measureText(tag).width + 10;
    const tx = it.x + it.w - S.padX - tagW - (boxed ? 18 : 0);
    out.push(rect(tx, y - 8, tagW, 16, 8, tagColor || p.cardMuted, null, 1, null, 0.14));
    out.push(text(tx + 5, y + 0.5, tag, S.fontTag, tagColor || p.cardMuted));
  }
  ctx.font = S.fontTitle;
  out.push(text(x, y, truncate(ctx, title, maxW - (tagW ? tagW + 6 : 0)), S.fontTitle, color));
  if (band < 2) return;
  const lines = it.lines || it._cardLines || [];
  if (!lines.length) return;
  ctx.font = S.fontMono;
  y = it.y + S.padTop + S.titleHeight + S.lineHeight / 2;
  const ws = it.weightStart ?? lines.length;
  lines.forEach((l, i) => {
    if (i === ws) {
      // The weights this op consumes: a rule, then one quiet line each (names in full).
      out.push(rect(x, y - S.lineHeight / 2 - 0.5, maxW, 1, 0, p.quietStroke));
    }
    if (i >= ws) {
      // A weight line keeps its shape whole; a long name loses its start (as on pills).
      out.push(rect(x, y - 2, 4, 4, 0, p.quietText));
      out.push(text(x + 8, y, truncateStart(ctx, l, maxW - 8), S.fontMono, p.quietText));
    } else {
      out.push(text(x, y, truncate(ctx, l, maxW), S.fontMono, p.cardMuted));
    }
    y += S.lineHeight;
  });
}

function expandedGroup(dl, it, ctx, p, band) {
  // An opened control-flow boundary node holds its unexecuted bodies: drawn in the
  // control-flow colour, tagged "opaque"; templates (kind body) have a dashed frame.
  const isBoundary = it.type === "node";
  const kind = it.type === "chunk" ? "chunk" : isBoundary ? "opaque" : it.item.kind;
  const ks = kindStyle(p, isBoundary ? "cond" : kind);
  const name = it.item.label || it.key;
  dl.card.push(rect(it.x, it.y, it.w, it.h, 9, ks.fill, ks.stroke, 1.4, kind === "body" || isBoundary ? [6, 4] : null, 0.55, band === 0));
  if (band === 0) {
    dl.far = [{ t: "far", x: it.x, y: it.y, w: it.w, h: it.h, text: `${kind} ${name}`, color: ks.text, padTop: 3, bg: ks.fill }];
    return;
  }
  // Header band.
  const h = [];
  h.push(rect(it.x, it.y, it.w, S.groupHeader - 4, [9, 9, 0, 0], ks.fill));
  const y = it.y + (S.groupHeader - 4) / 2;
  ctx.font = S.fontTag;
  const tw = ctx.measureText(kind).width + 10;
  h.push(rect(it.x + 10, y - 8, tw, 16, 8, ks.stroke));
  h.push(text(it.x + 15, y + 0.5, kind, S.fontTag, p.background));
  const nb = isBoundary ? (it.item.bodies || []).length : 0;
  const wording = isBoundary ? `${nb} ${nb === 1 ? "body" : "bodies"}: templates, not executed`
    : it.item.template || it.item.honest || (KIND_WORDING[kind] || "").replace(kind + " · ", "");
  const full = wording && wording !== kind ? `${name}  ·  ${wording}` : name;
  ctx.font = S.fontHeader;
  h.push(text(it.x + 18 + tw, y, truncate(ctx, full, it.w - tw - 48), S.fontHeader, ks.text));
  if (band === 2) h.push({ t: "toggle", cx: it.x + it.w - 16, cy: y, sign: "-", color: ks.stroke });
  dl.header = h;
}

// A boundary pill. A capture input shows its name (`x  f32[2,3,16,16]`) on an accented
// pill; parameters, buffers, variables and constants a smaller, lighter one
// (`stem.weight  f32[8,3,3,3]`); a value from a node outside the view `in  f32[8]`.
function boundary(out, it, ctx, p, band) {
  const { content: c, fit } = pillText(it, ctx);
  const look = c.look === "quiet"
    ? { fill: p.quietFill, stroke: p.quietStroke, name: p.quietText, shape: p.quietMuted, dash: c.role === "buffer" || c.role === "const" }
    : c.look === "input"
      ? { fill: p.inputFill, stroke: p.inputStroke, name: p.inputText, shape: p.boundaryMuted, dash: false }
      : { fill: p.boundaryFill, stroke: p.boundaryStroke, name: p.boundaryText, shape: p.boundaryText, dash: false };
  out.push(rect(it.x, it.y, it.w, it.h, it.h / 2, look.fill, look.stroke, 1, look.dash ? [3, 2] : null));
  if (band === 0) return;
  const { texts, widths, total } = fit;
  let x = it.x + (it.w - total) / 2;
  const y = it.y + it.h / 2 + 0.5;
  c.parts.forEach((part, i) => {
    out.push(text(x, y, texts[i], S[part.font] || S.fontMono, part.tone === "shape" ? look.shape : look.name));
    x += widths[i] + S.boundaryGap;
  });
}

// What a boundary pill says and how its text fits its laid-out width (cached on the item).
export function pillText(it, ctx) {
  if (!it._bc) it._bc = boundaryContent(it.type, it.item);
  if (!it._bt) it._bt = fitBoundary(ctx, it._bc.parts, it.w - 2 * S.padX + 2);
  return { content: it._bc, fit: it._bt };
}

// Far away, a group still says what it is: its name at a constant 10.5px on screen, when
// its box is large enough on screen to hold it. Null when it is not drawn at this zoom.
export function farLabel(f, s, ctx) {
  const sw = f.w * s;
  if (sw < 34 || f.h * s < 14) return null;
  const maxChars = Math.floor((sw - 8) / 6.2);
  if (maxChars < 3) return null;
  const px = 10.5 / s;
  const t = f.text.length > maxChars ? f.text.slice(0, maxChars - 1) + "…" : f.text;
  const font = `600 ${px}px ${S.fontHeader.split("px ")[1]}`;
  const x = f.x + 4 / s;
  const y = f.y + f.padTop / s;
  let bg = null;
  if (f.bg) {
    ctx.font = font;
    bg = { x: x - 2 / s, y: y - 1 / s, w: ctx.measureText(t).width + 4 / s, h: px + 3 / s };
  }
  return { text: t, font, px, x, y, bg };
}

export function truncate(ctx, text, maxW) {
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

// ---------------------------------------------------------------- canvas executor

// Paints a draw list on a 2D context already transformed to world coordinates at zoom s.
// hatch: () => the opaque hatch CanvasPattern.
export function paintList(ctx, list, s, hatch) {
  for (let i = 0; i < list.length; i++) {
    const q = list[i];
    if (Array.isArray(q)) {
      paintList(ctx, q, s, hatch);
      continue;
    }
    switch (q.t) {
      case "rect": {
        const fill = q.fill === HATCH ? hatch() : q.fill;
        if (!q.r) {
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
        ctx.arc(q.cx, q.cy, 7, 0, Math.PI * 2);
        ctx.strokeStyle = q.color;
        ctx.lineWidth = 1.2;
        ctx.stroke();
        ctx.beginPath();
        ctx.moveTo(q.cx - 3.5, q.cy);
        ctx.lineTo(q.cx + 3.5, q.cy);
        if (q.sign === "+") {
          ctx.moveTo(q.cx, q.cy - 3.5);
          ctx.lineTo(q.cx, q.cy + 3.5);
        }
        ctx.stroke();
        break;
      case "far": {
        const f = farLabel(q, s, ctx);
        if (!f) break;
        ctx.font = f.font;
        ctx.textAlign = "left";
        ctx.textBaseline = "top";
        if (f.bg) {
          ctx.fillStyle = q.bg;
          ctx.fillRect(f.bg.x, f.bg.y, f.bg.w, f.bg.h);
        }
        ctx.fillStyle = q.color;
        ctx.fillText(f.text, f.x, f.y);
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
      const x = ox + l.x;
      const y = oy + l.y;
      ctx.fillStyle = q.labelBg;
      ctx.fillRect(x - 2, y - 7, l.w + 4, 14);
      ctx.fillStyle = q.labelFill;
      ctx.fillText(l.text, x, y);
    }
  }
}
