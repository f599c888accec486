// A container's last real layout grown to hold the grown boxes of the containers inside it
// (GraphModel.plan reuses it instead of asking ELK again): moved out of model/viewmodel.js.

import { FRAME, labelRect } from "../draw/card.js";

/**
 * @typedef {import("../api.js").Api} Api
 * @typedef {import("../api.js").Page} Page
 * @typedef {import("../api.js").PageItem} PageItem
 * @typedef {import("../api.js").PageStack} PageStack
 * @typedef {import("../api.js").PageValue} PageValue
 * @typedef {import("../layout/layout-client.js").LayoutClient} LayoutClient
 * @typedef {import("../layout/layout-client.js").RequestJob} RequestJob
 * @typedef {import("../layout/layout-client.js").RequestItem} RequestItem
 * @typedef {import("../layout/protocol.js").Layout} Layout
 * @typedef {import("../layout/protocol.js").LabelSpot} LabelSpot
 * @typedef {import("../layout/protocol.js").Size} Size
 * @typedef {import("../layout/protocol.js").Box} Box
 * @typedef {import("../draw/card.js").CardContent} CardContent
 * @typedef {import("../draw/card.js").SceneItem} CardSceneItem
 * @typedef {import("./paths.js").SavedPaths} SavedPaths
 */

/**
 * @typedef {import("./view-types.js").ItemValue} ItemValue
 * @typedef {import("./view-types.js").ItemCost} ItemCost
 * @typedef {import("./view-types.js").BodySummary} BodySummary
 * @typedef {import("./view-types.js").DeviceMemory} DeviceMemory
 * @typedef {import("./view-types.js").Collective} Collective
 * @typedef {import("./view-types.js").Wrapper} Wrapper
 * @typedef {import("./view-types.js").ItemFacts} ItemFacts
 * @typedef {import("./view-types.js").ViewItem} ViewItem
 * @typedef {import("./view-types.js").StackFacts} StackFacts
 * @typedef {import("./view-types.js").ViewStack} ViewStack
 * @typedef {import("./view-types.js").PageEdge} PageEdge
 * @typedef {import("./view-types.js").ViewPage} ViewPage
 * @typedef {import("./view-types.js").Entry} Entry
 * @typedef {import("./view-types.js").DisplayEdge} DisplayEdge
 * @typedef {import("./view-types.js").Display} Display
 * @typedef {import("./view-types.js").PlanEntry} PlanEntry
 * @typedef {import("./view-types.js").Plan} Plan
 * @typedef {import("./view-types.js").Built} Built
 * @typedef {import("./view-types.js").SceneItem} SceneItem
 * @typedef {import("./view-types.js").StackSummary} StackSummary
 * @typedef {import("./view-types.js").BoundaryValue} BoundaryValue
 * @typedef {import("./view-types.js").SceneEdge} SceneEdge
 * @typedef {import("./view-types.js").SceneContainer} SceneContainer
 * @typedef {import("./view-types.js").Scene} Scene
 * @typedef {import("./view-types.js").Timings} Timings
 */

// A real layout with room for the grown boxes of the containers inside it: for each box
// that grew by (dw, dh), everything whose left edge is right of its old right edge moves
// right by dw and everything below its old bottom moves down by dh (boxes, edge points,
// label points). Such a shift keeps boxes apart and edges orthogonal, but it widens the
// container by what runs beside a grown box (residual edges): past a third wider than its
// last layout from ELK, it is laid out again. Null then, when a box shrank (that needs a
// new layout too) or when nothing changed.
/**
 * @param {Layout & {estimated?: boolean, baseW?: number}} layout  its last real layout
 * @param {(Size | null)[]} oldBoxes  the boxes of the containers inside it then, by position
 * @param {(Size | null)[]} newBoxes  and now
 * @returns {(Layout & {grown: true, baseW: number}) | null}
 */
// eslint-disable-next-line complexity -- one geometric shift over boxes, edge points and labels, with its give-up tests
export function grownLayout(layout, oldBoxes, newBoxes) {
  if (!layout || layout.fallback || layout.estimated || oldBoxes.length !== newBoxes.length) return null;
  /** @type {[number, number, number][]} */
  const grow = [];
  for (let i = 0; i < newBoxes.length; i++) {
    const a = oldBoxes[i];
    const b = newBoxes[i];
    if (!a && !b) continue;
    if (!a || !b) return null;
    if (b.w < a.w || b.h < a.h) return null;
    if (b.w > a.w || b.h > a.h) grow.push([i, FRAME.measure(b).w - FRAME.measure(a).w, b.h - a.h]);
  }
  if (!grow.length) return null;
  const boxes = layout.boxes.map((b) => ({ ...b }));
  const edges = layout.edges.map((e) => ({
    ...e,
    points: e.points.map((p) => [p[0], p[1]]),
    labelAt: e.labelAt ? [e.labelAt[0], e.labelAt[1]] : e.labelAt,
    label: e.label ? { ...e.label } : e.label,
  }));
  for (const [i, dw, dh] of grow) {
    const g = boxes[i];
    const xr = g.x + g.w;
    const yb = g.y + g.h;
    for (const b of boxes) {
      if (b === g) continue;
      if (b.x >= xr) b.x += dw;
      if (b.y >= yb) b.y += dh;
    }
    const move = (/** @type {number[]} */ p) => {
      if (p[0] >= xr) p[0] += dw;
      if (p[1] >= yb) p[1] += dh;
    };
    for (const e of edges) {
      e.points.forEach(move);
      if (e.labelAt) move(e.labelAt);
      if (e.label) {
        const at = [e.label.x, e.label.y];
        move(at);
        [e.label.x, e.label.y] = at;
      }
    }
    g.w += dw;
    g.h += dh;
  }
  // The size as the worker reads it from ELK's answer (readLayout): the far corner, padded.
  let w = 0;
  let h = 0;
  for (const b of boxes) {
    w = Math.max(w, b.x + b.w);
    h = Math.max(h, b.y + b.h);
  }
  for (const e of edges) for (const [px, py] of e.points) {
    w = Math.max(w, px);
    h = Math.max(h, py);
  }
  const base = layout.baseW || layout.w;
  if (w + 10 > Math.max(1.35 * base, base + 300)) return null;
  // A label a grown box now covers is dropped (its shape still shows on hover).
  for (const e of edges) {
    const label = e.label;
    if (label && boxes.some((b) => overlaps(labelRect(label), b))) e.label = undefined;
  }
  return { w: Math.ceil(w + 10), h: Math.ceil(h + 10), boxes, edges, grown: true, baseW: base };
}

export const overlaps = (/** @type {Box} */ a, /** @type {Box} */ b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
