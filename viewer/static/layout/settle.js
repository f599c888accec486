// Estimated containers come true when they come into view.
//
// After Expand all on a big graph the view model lays out for real only what is in view
// and gives every other container an estimated layout (viewmodel.js: plan, settle). This
// watches the camera: shortly after it moves (or at once, when asked), the containers
// the view now shows are laid out for real and the scene is replaced, keeping the item at
// the centre of the screen where it was, so that what a person looks at does not jump.

export class Settler {
  // store: the viewer's store (its model, and its settle action, which shows the new
  // scene); renderer: the Renderer.
  constructor(store, renderer) {
    this.store = store;
    this.renderer = renderer;
    this.timer = null;
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
function viewOf(r) {
  const [x0, y0] = r.toWorld(0, 0);
  const [x1, y1] = r.toWorld(r.width - (r.insetRight || 0), r.height);
  return { x0, y0, x1, y1, s: r.cam.s };
}

// The innermost item at the centre of the screen (in the empty space of an open
// container, the item of it nearest the centre), and where it is on screen.
function anchorOf(m, r) {
  const cx = (r.width - (r.insetRight || 0)) / 2;
  const cy = r.height / 2;
  const [wx, wy] = r.toWorld(cx, cy);
  let it = m.hitTest(wx, wy);
  while (it && it.expanded && it.expanded.items.length) {
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

function keep(anchor, m, r) {
  const it = m.scene.byKey.get(anchor.key);
  if (!it) return;
  const [sx, sy] = r.toScreen(it.x, it.y);
  r.panBy(anchor.sx - sx, anchor.sy - sy);
}
