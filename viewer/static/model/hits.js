// Hit testing on a composed scene (model/viewmodel.js composes it): the item or edge under
// a world point, and the edges touching an item.

import { onFrameHeader } from "../draw/card.js";

/**
 * A composed scene as hit testing reads it: containers of laid-out items (an open one
 * holds its own container, `expanded`) and the edges drawn between them, whose points
 * are relative to their container.
 * @typedef {import("../draw/card.js").SceneItem & {expanded?: Container | null}} Item
 * @typedef {object} SceneEdge
 * @property {string} source  an item key
 * @property {string} target
 * @property {string} [label]
 * @property {unknown} [value]  the value's id
 * @property {number[][]} points
 * @typedef {{x: number, y: number, w: number, h: number, items: Item[], edges: SceneEdge[]}} Container
 * @typedef {{root: Container}} Scene
 */

// The innermost item under a world point (a container's header is the container), or null.
/**
 * @param {Scene} scene
 * @param {number} x
 * @param {number} y
 * @returns {Item | null}
 */
export function itemAt(scene, x, y) {
  /** @type {Item | null} */
  let hit = null;
  const visit = (/** @type {Container} */ container) => {
    for (const it of container.items) {
      if (x < it.x || y < it.y || x > it.x + it.w || y > it.y + it.h) continue;
      hit = it;
      if (it.expanded && !onFrameHeader(it, y)) visit(it.expanded);
      return;
    }
  };
  visit(scene.root);
  return hit;
}

// The edge under a world point (within `tol` world units of it), innermost container
// first, or null: {source, target, label, value}.
/**
 * @param {Scene} scene
 * @param {number} x
 * @param {number} y
 * @param {number} tol
 * @returns {{source: string, target: string, label: string | undefined, value: unknown} | null}
 */
export function edgeAt(scene, x, y, tol) {
  let best = /** @type {SceneEdge | null} */ (null); // set inside visit
  let bestD = tol;
  const visit = (/** @type {Container} */ c) => {
    if (x < c.x - tol || y < c.y - tol || x > c.x + c.w + tol || y > c.y + c.h + tol) return;
    for (const it of c.items) if (it.expanded) visit(it.expanded);
    for (const e of c.edges) {
      const pts = e.points;
      for (let i = 0; i + 1 < pts.length; i++) {
        const d = segmentDistance(x - c.x, y - c.y, pts[i], pts[i + 1]);
        if (d < bestD) {
          bestD = d;
          best = e;
        }
      }
    }
  };
  visit(scene.root);
  return best && { source: best.source, target: best.target, label: best.label, value: best.value };
}

// Every drawn edge touching `key`, with its container, for highlighting.
/**
 * @param {Scene} scene
 * @param {string} key
 * @returns {{c: Container, e: SceneEdge}[]}
 */
export function edgesOf(scene, key) {
  /** @type {{c: Container, e: SceneEdge}[]} */
  const out = [];
  const visit = (/** @type {Container} */ c) => {
    for (const e of c.edges) if (e.source === key || e.target === key) out.push({ c, e });
    for (const it of c.items) if (it.expanded) visit(it.expanded);
  };
  visit(scene.root);
  return out;
}

// How far point (x, y) is from the segment a-b.
/**
 * @param {number} x
 * @param {number} y
 * @param {number[]} a
 * @param {number[]} b
 */
function segmentDistance(x, y, a, b) {
  const dx = b[0] - a[0];
  const dy = b[1] - a[1];
  const len2 = dx * dx + dy * dy;
  const t = len2 ? Math.max(0, Math.min(1, ((x - a[0]) * dx + (y - a[1]) * dy) / len2)) : 0;
  return Math.hypot(x - (a[0] + t * dx), y - (a[1] + t * dy));
}
