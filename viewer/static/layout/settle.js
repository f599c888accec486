// Estimated containers come true when they come into view.
//
// After Expand all on a big graph the view model lays out for real only what is in view
// and gives every other container an estimated layout (viewmodel.js: plan, settle). This
// watches the camera: shortly after it moves (or at once, when asked), the containers
// the view now shows are laid out for real and the scene is replaced, keeping the item at
// the centre of the screen where it was, so that what a person looks at does not jump.

/**
 * @typedef {import("../model/hits.js").Item} Item
 * @typedef {{x0: number, y0: number, x1: number, y1: number, s: number}} View  the world rectangle shown, and the zoom
 */

/**
 * What settling reads of the graph model: its scene (estimated: how many of its
 * containers have an estimated layout) and the item under a world point.
 * @typedef {object} SettleModel
 * @property {{estimated?: number, byKey: Map<string, Item>} | null} scene
 * @property {(x: number, y: number) => Item | null} hitTest
 */

/**
 * What settling reads of the viewer's store (model/store.js).
 * @typedef {object} SettleStore
 * @property {SettleModel | null} model
 * @property {(view: View) => Promise<boolean>} settle  lays out what `view` shows; false when nothing changed
 */

/**
 * What settling reads of the renderer (draw/renderer.js): the canvas's size, the camera,
 * and its conversions between screen and world.
 * @typedef {object} SettleRenderer
 * @property {number} width
 * @property {number} height
 * @property {number} [insetRight]  the side panel's width over the canvas
 * @property {{s: number}} cam
 * @property {(sx: number, sy: number) => number[]} toWorld
 * @property {(wx: number, wy: number) => number[]} toScreen
 * @property {(dx: number, dy: number) => void} panBy
 * @property {() => void} fit
 */

export class Settler {
  // store: the viewer's store (its model, and its settle action, which shows the new
  // scene); renderer: the Renderer.
  /**
   * @param {SettleStore} store
   * @param {SettleRenderer} renderer
   */
  constructor(store, renderer) {
    this.store = store;
    this.renderer = renderer;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.timer = undefined;
    /** @type {Promise<void> | null} */
    this.running = null;
    this.rounds = 0; // scenes replaced so far (for tests)
  }

  // After the camera moved: settle once it has been still for a moment.
  soon() {
    const m = this.store.model;
    if (!m || !m.scene || !m.scene.estimated) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.now(), 80);
  }

  // Settles now; resolves when nothing in view is estimated any more (or nothing more can
  // be done). `refit`: the camera fits the new scene (after an action that fitted it).
  async now({ refit = false } = {}) {
    clearTimeout(this.timer);
    while (this.running) await this.running;
    this.running = this._run(refit);
    try {
      await this.running;
    } finally {
      this.running = null;
    }
  }

  /** @param {boolean} refit */
  async _run(refit) {
    const r = this.renderer;
    for (let round = 0; round < 6; round++) {
      const m = this.store.model;
      if (!m || !m.scene || !m.scene.estimated) return;
      const view = viewOf(r);
      const anchor = refit ? null : anchorOf(m, r);
      if (!(await this.store.settle(view))) return;
      this.rounds += 1;
      if (refit) r.fit();
      else if (anchor) keep(anchor, m, r);
    }
  }
}

// The world rectangle the canvas shows, and the zoom.
/**
 * @param {SettleRenderer} r
 * @returns {View}
 */
function viewOf(r) {
  const [x0, y0] = r.toWorld(0, 0);
  const [x1, y1] = r.toWorld(r.width - (r.insetRight || 0), r.height);
  return { x0, y0, x1, y1, s: r.cam.s };
}

// The innermost item at the centre of the screen (in the empty space of an open
// container, the item of it nearest the centre), and where it is on screen.
/**
 * @param {SettleModel} m
 * @param {SettleRenderer} r
 * @returns {{key: string, sx: number, sy: number} | null}
 */
function anchorOf(m, r) {
  const cx = (r.width - (r.insetRight || 0)) / 2;
  const cy = r.height / 2;
  const [wx, wy] = r.toWorld(cx, cy);
  let it = m.hitTest(wx, wy);
  while (it && it.expanded && it.expanded.items.length) {
    /** @type {Item | null} */
    let best = null;
    let bestD = Infinity;
    for (const c of it.expanded.items) {
      const dx = Math.max(c.x - wx, 0, wx - (c.x + c.w));
      const dy = Math.max(c.y - wy, 0, wy - (c.y + c.h));
      const d = dx * dx + dy * dy;
      if (d < bestD) {
        bestD = d;
        best = c;
      }
    }
    if (!best || bestD > 0) {
      it = best; // nearest, not under the centre: as deep as it goes
      break;
    }
    it = best;
  }
  if (!it) return null;
  const [sx, sy] = r.toScreen(it.x, it.y);
  return { key: it.key, sx, sy };
}

/**
 * @param {{key: string, sx: number, sy: number}} anchor
 * @param {SettleModel} m
 * @param {SettleRenderer} r
 */
function keep(anchor, m, r) {
  const it = /** @type {NonNullable<SettleModel["scene"]>} */ (m.scene).byKey.get(anchor.key);
  if (!it) return;
  const [sx, sy] = r.toScreen(it.x, it.y);
  r.panBy(anchor.sx - sx, anchor.sy - sy);
}
