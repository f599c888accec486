// Diff mode: what changed between the capture on screen and another one (api/diff,
// viewer/server/diffview.py). Changes are highlighted on the graph (added, changed, "something
// was removed here", and "a change is inside" on the groups on the way down) and listed
// in this panel to step through; each entry opens its group and centres the change.
//
// app.js makes the panel once the graph is on screen and starts it; it starts again by
// itself when a recapture replaces the graph in place. The renderer calls the overlay this
// panel installs after it has drawn the items (renderer.overlay).

import { el } from "../dom.js";
import { Panel } from "./panel.js";

/** @type {Record<string, string>} */
const MARK = { added: "+", changed: "~", removed: "−", "removed-inside": "−", contains: "" };

/**
 * One change of `api/diff` (viewer/server/diffview.py).
 * @typedef {object} DiffChange
 * @property {string} key  the item it is shown on ("g-1": the whole program)
 * @property {string} status  "added" | "removed" | "changed"
 * @property {string} type  the item's type
 * @property {string} title
 * @property {string} [path]
 * @property {string} [detail]  its facts, "; " between them
 * @property {string[]} [item_path]
 */

/**
 * `api/diff`: the changes against another capture, counted, and each item's mark.
 * @typedef {object} DiffAnswer
 * @property {DiffChange[]} changes  (the first ones, of `changes_total`)
 * @property {number} [changes_total]
 * @property {Record<string, number>} [counts]  e.g. `groups_added`
 * @property {Record<string, string>} marks  item key -> "added" | "changed" | "removed" | "removed-inside" | "contains"
 * @property {{label?: string}} [a]  the other capture
 */

/**
 * What the diff panel reads of the store (model/store.js).
 * @typedef {import("./panel.js").PanelStore & {
 *   capture: {diff?: {label: string, against: string} | null} | null,
 *   model: {stackOf: Map<string, string>},
 *   unfold: (stackKey: string) => Promise<unknown>,
 * }} DiffStore
 */

/** @typedef {(target: {key: string, item_path?: string[], type: string}) => Promise<unknown>} Jump */

/** @extends {Panel<DiffStore>} */
export class DiffPanel extends Panel {
  // stage: where the panel floats; jump(result): open the way to an item and focus it.
  /**
   * @param {DiffStore} store
   * @param {HTMLElement} stage
   * @param {{api: import("../api.js").Api, renderer: import("../draw/renderer.js").Renderer, jump: Jump,
   *   banners: import("./banners.js").Banners}} parts
   */
  constructor(store, stage, { api, renderer, jump, banners }) {
    super(store, "diff", el("section", { id: "diff-panel", class: "diff-panel", "aria-label": "Changes" }));
    stage.append(this.root);
    this.api = api;
    this.renderer = renderer;
    this.jumpTo = jump;
    this.banners = banners;
    /** @type {DiffAnswer | null} */
    this.data = null; // the api/diff answer
    /** @type {string | null} */
    this.against = null;
    this.index = -1;
    this.loading = false;
    /** @type {string | null} */
    this.error = null;
    /** @type {Record<string, string> | null} */
    this.palette = null;
    renderer.overlay = (ctx, r) => this.drawOverlay(ctx, r);
    document.addEventListener("keydown", (e) => this.onKey(e));
    // A recapture in place: the new capture's offer, against the graph it replaced.
    store.on("capture", (/** @type {{live?: boolean}} */ { live }) => live && this.start());
  }

  get offer() {
    return this.store.capture && this.store.capture.diff;
  }

  // The capture on screen (again, after a recapture in place): the previous capture's diff
  // is dropped, and this one's is shown (?diff=) or offered, if any.
  start() {
    this.data = null;
    this.index = -1;
    this.error = null;
    this.close();
    this.banners.drop("diff");
    const wanted = new URLSearchParams(location.search).get("diff");
    if (wanted) {
      this.show(wanted);
      return;
    }
    this.#offer();
  }

  #offer() {
    const offer = this.offer;
    if (!offer) return;
    this.banners.set("diff", "info", "Changes", `Compare with the ${offer.label}?`, [
      el("button", { type: "button", onclick: () => this.show(offer.against) }, "Show changes"),
    ]);
  }

  /** @param {KeyboardEvent} e */
  onKey(e) {
    const t = /** @type {HTMLElement | null} */ (e.target);
    if (!this.data || (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT"))) return;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "n" || e.key === "]") this.step(1);
    else if (e.key === "p" || e.key === "[") this.step(-1);
    else return;
    e.preventDefault();
  }

  /** @param {string} [against]  which capture: "previous", or a file the server names */
  async show(against = "previous") {
    this.loading = true;
    this.error = null;
    this.banners.set("diff", "info", "Changes", "Comparing the captures…");
    try {
      this.data = await this.api.get("diff", { against });
      this.against = against;
    } catch (err) {
      this.error = /** @type {Error} */ (err).message || String(err);
      this.data = null;
      this.banners.set("diff", "error", "Changes", `No diff: ${this.error}`);
      return;
    } finally {
      this.loading = false;
    }
    this.banners.drop("diff");
    this.index = -1;
    this.render();
    this.open();
    this.renderer.requestDraw();
  }

  hide() {
    this.data = null;
    this.index = -1;
    this.close();
    this.renderer.requestDraw();
    this.#offer();
  }

  /** @param {number} d  -1 the previous change, 1 the next */
  step(d) {
    const n = this.data ? this.data.changes.length : 0;
    if (!n) return;
    this.go((this.index + d + n) % n);
  }

  /** @param {number} i */
  async go(i) {
    const c = this.data && this.data.changes[i];
    if (!c) return;
    this.index = i;
    this.paintActive();
    const renderer = this.renderer;
    if (c.key === "g-1") {
      renderer.fit();
      return;
    }
    await this.jumpTo({ key: c.key, item_path: c.item_path, type: c.type });
    // Opening a stack can leave the target folded in a smaller stack of its later
    // siblings (h.1 … h.2 after h.0 opens): open those too, a few levels at most.
    for (let k = 0; k < 4 && renderer.scene && !renderer.scene.byKey.get(c.key); k++) {
      const sk = this.store.model.stackOf.get(c.key);
      if (!sk) break;
      await this.store.unfold(sk);
      await this.jumpTo({ key: c.key, item_path: c.item_path, type: c.type });
    }
    // Something removed is shown on the group that lost it: fit that whole group, so that
    // its "removed here" outline is on screen even when the group is larger than the view.
    const it = renderer.scene && renderer.scene.byKey.get(c.key);
    if (c.status === "removed" && it && it.expanded) {
      const pad = 40;
      const fit = Math.min((renderer.width - renderer.insetRight - 360) / (it.w + pad), renderer.height / (it.h + pad));
      if (fit < renderer.cam.s) renderer.centerOn(it, Math.max(fit, 0.02));
    }
  }

  // ------------------------------------------------------------------ the list

  render() {
    const d = /** @type {DiffAnswer} */ (this.data);
    /** @type {Record<string, number>} */
    const counts = d.counts || {};
    const total = d.changes_total ?? d.changes.length;
    const line = (/** @type {string} */ what) =>
      ["added", "removed", "changed"]
        .map((s) => /** @type {[string, number]} */ ([s, counts[`${what}_${s}`] || 0]))
        .filter(([, n]) => n)
        .map(([s, n]) => `${n} ${s}`)
        .join(", ") || "none";
    const list = el("ol", { class: "diff-list", role: "listbox", "aria-label": "Changes" });
    d.changes.forEach((c, i) => {
      const li = el(
        "li",
        { class: `diff-item ${c.status}`, role: "option", "data-index": String(i), "aria-selected": "false",
          title: [c.path, c.detail].filter(Boolean).join("\n") },
        el("span", { class: `diff-badge ${c.status}` }, MARK[c.status] || "~"),
        el("span", { class: "diff-title" }, c.title),
        el("span", { class: "diff-detail" }, [c.type === "node" && c.path ? c.path : null, c.detail].filter(Boolean).join(" · ")),
      );
      li.addEventListener("click", () => this.go(i));
      list.append(li);
    });
    if (!d.changes.length) list.append(el("li", { class: "diff-empty" }, "No differences: the same groups, ops, shapes, dtypes, shardings, params and parameter tensors."));
    const side = d.a || {};
    this.root.replaceChildren(
      el(
        "div",
        { class: "diff-head" },
        el("div", {}, el("div", { class: "kicker" }, "Changes"), el("div", { class: "diff-against", title: side.label || "" }, `against ${side.label || "the other capture"}`)),
        el("button", { type: "button", class: "icon", title: "Previous change (p)", "aria-label": "Previous change", onclick: () => this.step(-1) }, "↑"),
        el("button", { type: "button", class: "icon", title: "Next change (n)", "aria-label": "Next change", onclick: () => this.step(1) }, "↓"),
        el("button", { type: "button", class: "icon", title: "Leave diff mode", "aria-label": "Close changes", onclick: () => this.hide() }, "×"),
      ),
      el(
        "div",
        { class: "diff-counts" },
        el("span", {}, `groups: ${line("groups")}`),
        el("span", {}, `nodes: ${line("nodes")}`),
        counts.parameters_changed || counts.parameters_added || counts.parameters_removed ? el("span", {}, `parameters: ${line("parameters")}`) : null,
        total > d.changes.length ? el("span", {}, `showing ${d.changes.length} of ${total}`) : null,
      ),
      list,
      el("div", { class: "diff-current", id: "diff-current", hidden: true }),
      el("div", { class: "diff-legend" },
        el("span", { class: "diff-badge added" }, "+"), " added ",
        el("span", { class: "diff-badge changed" }, "~"), " changed ",
        el("span", { class: "diff-badge removed" }, "−"), " removed here ",
        el("span", { class: "diff-badge contains" }, "…"), " a change inside"),
    );
  }

  paintActive() {
    for (const li of this.root.querySelectorAll(".diff-item")) {
      const on = Number(li.dataset.index) === this.index;
      li.setAttribute("aria-selected", String(on));
      if (on) li.scrollIntoView({ block: "nearest" });
    }
    // The whole of the active change, one fact a line (the list row is cut to one line).
    const box = this.root.querySelector("#diff-current");
    const data = /** @type {DiffAnswer} */ (this.data);
    const c = data.changes[this.index];
    box.replaceChildren();
    box.hidden = !c;
    if (!c) return;
    box.append(el("div", { class: "diff-current-title" }, `${this.index + 1} of ${data.changes.length}: ${c.title}`));
    if (c.path && c.type === "node") box.append(el("div", { class: "diff-current-path" }, c.path));
    for (const part of String(c.detail || "").split("; ")) box.append(el("div", {}, part));
  }

  // ------------------------------------------------------------------ drawing

  // The mark of a scene item: its own, or for a stack card the strongest of its members'.
  /**
   * @param {string} key
   * @returns {string | null}
   */
  markOf(key) {
    const marks = /** @type {DiffAnswer} */ (this.data).marks;
    if (marks[key]) return marks[key];
    if (key.startsWith("s")) {
      // The card stands for its members: their own mark when all share it (every block
      // changed), else "a change is inside" (one of three blocks added).
      /** @type {Set<string>} */
      const seen = new Set();
      let members = 0;
      for (const [member, sk] of this.store.model.stackOf) {
        if (sk !== key) continue;
        members++;
        seen.add(marks[member] || "");
      }
      if (!members || (seen.size === 1 && seen.has(""))) return null;
      const [only] = seen;
      return seen.size === 1 && (only === "added" || only === "changed") ? only : "contains";
    }
    return null;
  }

  // Marks of the items now on screen: {key: status}.
  drawn() {
    /** @type {Record<string, string>} */
    const out = {};
    const r = this.renderer;
    if (!r.scene || !this.data) return out;
    for (const key of r.scene.byKey.keys()) {
      const m = this.markOf(key);
      if (m) out[key] = m;
    }
    return out;
  }

  /**
   * @param {CanvasRenderingContext2D} ctx
   * @param {import("../draw/renderer.js").Renderer} r
   */
  drawOverlay(ctx, r) {
    if (!this.data || !r.scene) return;
    if (!this.palette) {
      this.palette = colours();
      matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => (this.palette = colours()));
    }
    const palette = this.palette;
    const s = r.cam.s;
    for (const [key, it] of r.scene.byKey) {
      const mark = this.markOf(key);
      if (!mark || !r.visible(it.x - 8, it.y - 8, it.w + 16, it.h + 16)) continue;
      const color = palette[mark];
      const own = mark !== "contains";
      ctx.save();
      ctx.lineWidth = Math.max(own ? 3 : 1.5, (own ? 3 : 1.5) / s);
      ctx.strokeStyle = color;
      ctx.setLineDash(mark === "contains" || mark === "removed-inside" ? [6 / Math.max(s, 0.2), 4 / Math.max(s, 0.2)] : []);
      r.roundRect(it.x - 5, it.y - 5, it.w + 10, it.h + 10, 10);
      ctx.stroke();
      const sign = MARK[mark];
      if (sign && it.w * s > 12) {
        // A badge on the top-left corner, readable at any zoom.
        const rad = Math.max(8, 8 / s);
        ctx.setLineDash([]);
        ctx.fillStyle = color;
        ctx.beginPath();
        ctx.arc(it.x - 5, it.y - 5, rad, 0, Math.PI * 2);
        ctx.fill();
        ctx.fillStyle = "#fff";
        ctx.font = `700 ${rad * 1.6}px system-ui, sans-serif`;
        ctx.textAlign = "center";
        ctx.textBaseline = "middle";
        ctx.fillText(sign, it.x - 5, it.y - 5 + rad * 0.05);
      }
      ctx.restore();
    }
  }
}

/** @returns {Record<string, string>} */
function colours() {
  const css = getComputedStyle(document.documentElement);
  const v = (/** @type {string} */ name) => css.getPropertyValue(name).trim();
  return {
    added: v("--diff-added"),
    changed: v("--diff-changed"),
    removed: v("--diff-removed"),
    "removed-inside": v("--diff-removed"),
    contains: v("--diff-contains"),
  };
}
