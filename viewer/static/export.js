// Export the current view: PNG from the canvas itself, SVG by re-drawing the visible
// part of the laid-out scene as SVG elements (vector, searchable text).

import { CARD_STYLE as S, KIND_WORDING, boundaryContent, kindStyle } from "./theme.js";

export function exportPng(renderer, stem) {
  renderer.draw(performance.now()); // make sure the canvas holds the current frame
  return new Promise((resolve) => {
    renderer.canvas.toBlob((blob) => {
      if (blob) download(blob, `${stem}.png`);
      resolve(blob);
    }, "image/png");
  });
}

export function exportSvg(renderer, stem) {
  const svg = sceneToSvg(renderer);
  const blob = new Blob([svg], { type: "image/svg+xml" });
  download(blob, `${stem}.svg`);
  return svg;
}

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

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const fmt = (n) => (Math.round(n * 100) / 100).toString();

export function sceneToSvg(renderer) {
  const p = renderer.palette;
  const scene = renderer.scene;
  const [x0, y0] = renderer.toWorld(0, 0);
  const [x1, y1] = renderer.toWorld(renderer.width, renderer.height);
  const out = [];
  const inView = (x, y, w, h) => x + w >= x0 && y + h >= y0 && x <= x1 && y <= y1;
  const text = (x, y, s, font, fill, anchor = "start") =>
    out.push(`<text x="${fmt(x)}" y="${fmt(y)}" fill="${fill}" style="font:${esc(font)}" text-anchor="${anchor}" dominant-baseline="middle">${esc(s)}</text>`);

  const visit = (c) => {
    for (const e of c.edges) {
      const pts = e.points.map(([x, y]) => `${fmt(c.x + x)},${fmt(c.y + y)}`);
      const xs = e.points.map((q) => c.x + q[0]);
      const ys = e.points.map((q) => c.y + q[1]);
      if (!inView(Math.min(...xs), Math.min(...ys), Math.max(...xs) - Math.min(...xs), Math.max(...ys) - Math.min(...ys))) continue;
      out.push(`<polyline points="${pts.join(" ")}" fill="none" stroke="${p.edge}" stroke-width="1.25" marker-end="url(#arrow)"/>`);
      if (e.label && e.labelAt && !e.source.startsWith("in:") && !e.target.startsWith("out:")) text(c.x + e.labelAt[0] + 5, c.y + e.labelAt[1], e.label, S.fontLabel, p.edgeLabel);
    }
    for (const it of c.items) {
      if (!inView(it.x, it.y, it.w, it.h)) continue;
      const kind = it.type === "chunk" ? "chunk" : it.item && it.item.kind;
      if (it.expanded) {
        const ks = kindStyle(p, kind);
        out.push(`<rect x="${fmt(it.x)}" y="${fmt(it.y)}" width="${fmt(it.w)}" height="${fmt(it.h)}" rx="9" fill="${ks.fill}" fill-opacity="0.55" stroke="${ks.stroke}" stroke-width="1.4"/>`);
        const wording = KIND_WORDING[kind] ? KIND_WORDING[kind].replace(kind + " · ", "") : "";
        text(it.x + 12, it.y + 13, `${kind}  ${it.item.label || it.key}${wording && wording !== kind ? "  ·  " + wording : ""}`, S.fontHeader, ks.text);
        visit(it.expanded);
      } else if (it.type === "node") {
        const opaque = !!it.item.opaque;
        out.push(`<rect x="${fmt(it.x)}" y="${fmt(it.y)}" width="${fmt(it.w)}" height="${fmt(it.h)}" rx="6" fill="${opaque ? "url(#hatch)" : p.cardFill}" stroke="${opaque ? p.opaqueStroke : p.cardStroke}"${opaque ? ' stroke-dasharray="5 3" stroke-width="1.6"' : ""}/>`);
        text(it.x + S.padX, it.y + S.padTop + S.titleHeight / 2, it.item.label || it.key, S.fontTitle, p.cardText);
        if (opaque) text(it.x + it.w - S.padX, it.y + S.padTop + S.titleHeight / 2, "opaque", S.fontTag, p.opaqueStroke, "end");
        const ws = it.weightStart ?? (it.lines || []).length; // weight lines: quieter, after a bullet
        (it.lines || []).forEach((l, i) => text(it.x + S.padX + (i >= ws ? 8 : 0), it.y + S.padTop + S.titleHeight + S.lineHeight * (i + 0.5), l, S.fontMono, i >= ws ? p.quietText : p.cardMuted));
      } else if (it.type === "group" || it.type === "chunk" || it.type === "stack") {
        const ks = kindStyle(p, kind);
        if (it.type === "stack") {
          for (const d of [8, 4]) out.push(`<rect x="${fmt(it.x + d)}" y="${fmt(it.y + d)}" width="${fmt(it.w)}" height="${fmt(it.h)}" rx="7" fill="${ks.fill}" stroke="${ks.stroke}"/>`);
        }
        out.push(`<rect x="${fmt(it.x)}" y="${fmt(it.y)}" width="${fmt(it.w)}" height="${fmt(it.h)}" rx="7" fill="${ks.fill}" stroke="${ks.stroke}" stroke-width="1.4"/>`);
        text(it.x + S.padX, it.y + S.padTop + S.titleHeight / 2, it.item.label || it.key, S.fontTitle, ks.text);
        text(it.x + it.w - S.padX, it.y + S.padTop + S.titleHeight / 2, it.type === "stack" ? `×${it.item.stack_count}` : kind, S.fontTag, ks.stroke, "end");
        (it.lines || []).forEach((l, i) => text(it.x + S.padX, it.y + S.padTop + S.titleHeight + S.lineHeight * (i + 0.5), l, S.fontMono, p.cardMuted));
      } else {
        const b = boundaryContent(it.type, it.item || {});
        const look = b.look === "quiet" ? [p.quietFill, p.quietStroke, p.quietText] : b.look === "input" ? [p.inputFill, p.inputStroke, p.inputText] : [p.boundaryFill, p.boundaryStroke, p.boundaryText];
        const dash = b.look === "quiet" && (b.role === "buffer" || b.role === "const") ? ' stroke-dasharray="3 2"' : "";
        out.push(`<rect x="${fmt(it.x)}" y="${fmt(it.y)}" width="${fmt(it.w)}" height="${fmt(it.h)}" rx="${fmt(it.h / 2)}" fill="${look[0]}" stroke="${look[1]}"${dash}/>`);
        text(it.x + it.w / 2, it.y + it.h / 2, b.parts.map((q) => q.text).join("  "), S[b.parts[0].font] || S.fontMono, look[2], "middle");
      }
    }
  };
  if (scene) visit(scene.root);
  const w = x1 - x0;
  const h = y1 - y0;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="${fmt(x0)} ${fmt(y0)} ${fmt(w)} ${fmt(h)}" width="${fmt(renderer.width)}" height="${fmt(renderer.height)}">`,
    `<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="${p.edge}"/></marker>`,
    `<pattern id="hatch" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="8" height="8" fill="${p.opaqueFill}"/><line x1="0" y1="0" x2="0" y2="8" stroke="${p.opaqueHatch}" stroke-width="3"/></pattern></defs>`,
    `<rect x="${fmt(x0)}" y="${fmt(y0)}" width="${fmt(w)}" height="${fmt(h)}" fill="${p.background}"/>`,
    ...out,
    "</svg>",
  ].join("\n");
}
