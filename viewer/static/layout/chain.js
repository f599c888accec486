// ELK's answer for a container that is one chain, made without ELK: the first view of a
// deep model is a few containers of this shape (an input pill, a card or a stack of
// blocks, an output pill), and waiting for ELK to load and warm up in the layout worker
// (1.6 MB parsed, 0.3 s on an idle machine and up to a second beside a busy server) was
// the first paint's longest wait. The worker loads ELK for the first container that is
// not a chain.
//
// A chain: items 0..n-1 with an edge from each to the next and no other, laid out with
// options listed in elk-options.js CHAIN_OPTIONS (not a row: that changes ELK's answer),
// every size a whole number of pixels. ELK's layered algorithm puts one item per layer; Brandes-Köpf
// placement with a balanced alignment lines the items up on the widest one's centre, each
// edge runs straight down from its source's bottom centre to its target's top centre; the
// padding and the spacing between layers are the worker's options. The answer has ELK's
// form (children with x, y, width, height; edges with one section each), so the worker
// reads it the way it reads ELK's (readLayout). tests/viewer/browser/test_chain_layout.py
// checks it equals ELK's own on chains of random sizes.

/**
 * @typedef {import("../vendor/elk.js").ElkNode} ElkNode
 * @typedef {import("../vendor/elk.js").ElkEdge} ElkEdge
 */

/**
 * ELK's layout of `graph` (an ELK graph as the worker builds it: children with width and
 * height, edges with one source and one target) when it is a chain, else null.
 * @param {ElkNode} graph
 * @param {number} pad  the padding around the items (the worker's elk.padding, every side)
 * @param {number} gap  between two layers (elk.layered.spacing.nodeNodeBetweenLayers)
 * @param {boolean} [whole]  network-simplex placement (the worker's COLUMN_OPTIONS): ELK
 *   puts the edges on the widest item's centre rounded up to a whole pixel, and each item
 *   on a whole pixel, centred on that line (rounded down)
 * @returns {ElkNode | null}
 */
export function chainLayout(graph, pad, gap, whole = false) {
  const children = graph.children || [];
  const edges = graph.edges || [];
  const from = chainSources(children, edges);
  // Whole pixels (card sizes are: card.js rounds them up): then every figure below is exact
  // and equals ELK's to the last bit; ELK's own sums differ from these in the last bits of
  // fractional sizes, so those are left to ELK.
  if (!from || !wholePixels(children, pad, gap)) return null;
  let wide = 0;
  for (const c of children) wide = Math.max(wide, /** @type {number} */ (c.width));
  const centre = whole ? Math.ceil(pad + wide / 2) : pad + wide / 2;
  /** @type {{x: number, y: number, w: number, h: number}[]} */
  const boxes = [];
  let y = pad;
  for (const c of children) {
    const w = /** @type {number} */ (c.width);
    const h = /** @type {number} */ (c.height);
    boxes.push({ x: whole ? Math.floor(centre - w / 2) : pad + (wide - w) / 2, y, w, h });
    y += h + gap;
  }
  return {
    id: graph.id,
    children: children.map((c, i) => ({ id: c.id, x: boxes[i].x, y: boxes[i].y, width: boxes[i].w, height: boxes[i].h })),
    edges: edges.map((e, k) => {
      const s = boxes[from[k]];
      const t = boxes[from[k] + 1];
      return { ...e, sections: [{ startPoint: { x: centre, y: s.y + s.h }, endPoint: { x: centre, y: t.y } }] };
    }),
    width: wide + 2 * pad,
    height: y - gap + pad,
  };
}

/**
 * For a chain (each item's one edge to the next, no other edge), each edge's source
 * position; else null.
 * @param {ElkNode[]} children
 * @param {ElkEdge[]} edges
 * @returns {number[] | null}
 */
function chainSources(children, edges) {
  if (children.length === 0 || edges.length !== children.length - 1) return null;
  /** @type {Map<string, number>} */
  const at = new Map(children.map((c, i) => [c.id, i]));
  /** @type {number[]} */
  const from = [];
  const seen = new Set();
  for (const e of edges) {
    const s = e.sources.length === 1 && e.targets.length === 1 ? at.get(e.sources[0]) : undefined;
    if (s === undefined || at.get(e.targets[0]) !== s + 1 || seen.has(s)) return null;
    seen.add(s);
    from.push(s);
  }
  return from;
}

/**
 * @param {ElkNode[]} children
 * @param {number} pad
 * @param {number} gap
 */
function wholePixels(children, pad, gap) {
  return Number.isInteger(pad) && Number.isInteger(gap) && children.every((c) => Number.isInteger(c.width) && Number.isInteger(c.height));
}
