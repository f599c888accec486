// The canvas's pointer and wheel: pan, pinch and wheel zoom, the minimap, hover tips (an
// edge's value, a far name cut short), click to select, double-click to open. Moved out of
// app.js, which wires it once the renderer exists; the store, the open/close of a
// container and the inspector come as an argument.

import { $ } from "./dom.js";

/**
 * @typedef {import("./draw/renderer.js").Renderer} Renderer
 * @typedef {import("./model/store.js").Store} Store
 * @typedef {import("./panels/inspector.js").Inspector} Inspector
 */

/**
 * @param {Renderer} r
 * @param {HTMLElement} canvas
 * @param {HTMLElement} minimap
 * @param {{store: Store, toggle: (key: string) => Promise<unknown>, inspector: Inspector}} app  the page's store, its open/close
 *   of a container and the inspector (a double-click that opens leaves it as it was)
 */
export function wireCanvas(r, canvas, minimap, { store, toggle, inspector }) {
  /** @type {Map<number, [number, number]>} */
  const pointers = new Map();
  /** @type {{x: number, y: number, moved: number} | null} */
  let drag = null;
  /** @type {{d: number} | null} */
  let pinch = null;
  /**
   * @param {MouseEvent} e
   * @returns {[number, number]}
   */
  const local = (e) => {
    const rect = canvas.getBoundingClientRect();
    return [e.clientX - rect.left, e.clientY - rect.top];
  };
  // Whether the inspector was open before a click sequence began: a double-click that
  // expands a group leaves it as it was (its first click selected the group).
  let inspectorBefore = false;
  // A mouse event's detail counts the clicks of a sequence (a pointer event's is 0).
  canvas.addEventListener("mousedown", (e) => {
    if (e.detail <= 1) inspectorBefore = inspector.isOpen;
  });
  canvas.addEventListener("pointerdown", (e) => {
    canvas.focus({ preventScroll: true });
    canvas.setPointerCapture(e.pointerId);
    pointers.set(e.pointerId, local(e));
    if (pointers.size === 1) {
      const [x, y] = local(e);
      drag = { x, y, moved: 0 };
    } else if (pointers.size === 2) {
      const [a, b] = [...pointers.values()];
      pinch = { d: Math.hypot(a[0] - b[0], a[1] - b[1]) };
      drag = null;
    }
  });
  canvas.addEventListener("pointermove", (e) => {
    const [x, y] = local(e);
    if (pointers.has(e.pointerId)) pointers.set(e.pointerId, [x, y]);
    if (pinch && pointers.size === 2) {
      const [a, b] = [...pointers.values()];
      const d = Math.hypot(a[0] - b[0], a[1] - b[1]);
      if (pinch.d > 0) r.zoomAt((a[0] + b[0]) / 2, (a[1] + b[1]) / 2, d / pinch.d);
      pinch.d = d;
      return;
    }
    if (drag) {
      const dx = x - drag.x;
      const dy = y - drag.y;
      drag.moved += Math.abs(dx) + Math.abs(dy);
      drag.x = x;
      drag.y = y;
      if (drag.moved > 3) canvas.classList.add("dragging");
      r.panBy(dx, dy);
      return;
    }
    const [wx, wy] = r.toWorld(x, y);
    const hit = store.model.hitTest(wx, wy);
    canvas.classList.toggle("pointing", !!hit && hit.type !== "in" && hit.type !== "out");
    const cut = cutName(r, wx, wy);
    edgeTip(cut ? { label: cut } : hit ? null : store.model.edgeAt(wx, wy, 5 / r.cam.s), x, y);
  });
  canvas.addEventListener("pointerleave", () => edgeTip(null));
  /** @param {PointerEvent} e */
  const end = (e) => {
    pointers.delete(e.pointerId);
    if (pointers.size < 2) pinch = null;
    if (drag && e.type === "pointerup" && drag.moved <= 3) {
      const [x, y] = local(e);
      const [wx, wy] = r.toWorld(x, y);
      const hit = store.model.hitTest(wx, wy);
      const w = hit ? r.weightAt(hit, wx, wy) : -1;
      // A weight line (w >= 0) is found only on an op card that has weights (card.js weightAt).
      if (hit && w >= 0) store.selectWeight(hit.key, /** @type {number[]} */ (hit.card.weights)[w]);
      else store.select(hit ? hit.key : null);
    }
    drag = null;
    canvas.classList.remove("dragging");
  };
  canvas.addEventListener("pointerup", end);
  canvas.addEventListener("pointercancel", end);
  canvas.addEventListener("dblclick", (e) => {
    const [x, y] = local(e);
    const [wx, wy] = r.toWorld(x, y);
    const hit = store.model.hitTest(wx, wy);
    if (hit && store.canOpen(hit.key)) {
      // The group stays selected (Enter toggles it back); the inspector its first click
      // opened closes again.
      const wasOpen = inspectorBefore;
      toggle(hit.key).then(() => {
        if (!wasOpen) inspector.close();
      });
    }
  });
  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    const [x, y] = local(e);
    // Trackpad pinch arrives as ctrl+wheel with small deltas; a mouse wheel as lines.
    const unit = e.deltaMode === 1 ? 16 : 1;
    const k = e.ctrlKey ? 0.01 : 0.0015;
    r.zoomAt(x, y, Math.exp(-e.deltaY * unit * k));
  }, { passive: false });

  // Minimap: click or drag to move the view.
  let mmDrag = false;
  /** @param {PointerEvent} e */
  const mmMove = (e) => {
    const rect = minimap.getBoundingClientRect();
    const w = r.minimapToWorld(e.clientX - rect.left, e.clientY - rect.top);
    if (!w) return;
    r.cam.tx = r.width / 2 - w[0] * r.cam.s;
    r.cam.ty = r.height / 2 - w[1] * r.cam.s;
    r.requestDraw();
  };
  minimap.addEventListener("pointerdown", (e) => {
    mmDrag = true;
    minimap.setPointerCapture(e.pointerId);
    mmMove(e);
  });
  minimap.addEventListener("pointermove", (e) => mmDrag && mmMove(e));
  minimap.addEventListener("pointerup", () => (mmDrag = false));
}

// The value an edge carries, shown where the pointer is on it (its label may be shortened
// or left out where there was no room).
/**
 * @param {{label?: string} | null} edge  null: none (the tip hides)
 * @param {number} [x]  where the pointer is on the canvas
 * @param {number} [y]
 */
export function edgeTip(edge, x = 0, y = 0) {
  const tip = $("edge-tip");
  if (!edge || !edge.label) {
    tip.hidden = true;
    return;
  }
  tip.textContent = edge.label;
  tip.style.left = `${Math.round(x + 12)}px`;
  tip.style.top = `${Math.round(y + 14)}px`;
  tip.hidden = false;
}

// The whole name of a far name drawn cut short (drawlist.js farLabel) under world point
// (wx, wy), shown where the pointer is as an edge's value is; null where there is none.
/**
 * @param {Renderer} r
 * @param {number} wx
 * @param {number} wy
 */
export function cutName(r, wx, wy) {
  const f = r.farDrawn.find((d) => d.text !== d.full && d.box && wx >= d.box.x && wx <= d.box.x + d.box.w
    && wy >= d.box.y && wy <= d.box.y + d.box.h);
  return f ? f.full : null;
}
