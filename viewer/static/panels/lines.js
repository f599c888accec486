// A source line in the graph: "Show in Graph" (the line's items selected, the groups
// holding them opened, all in view, a banner stepping through the line's calls: this
// panel) and the editor's cursor line (outlined lightly, nothing opened).

import { el } from "../dom.js";
import { Panel } from "./panel.js";

/**
 * One call of a source line (`api/line`): its items, the item path to each, its op count
 * and where it was called from.
 * @typedef {{keys: string[], paths: Record<string, string[]>, ops: number, where?: string}} LineCall
 */

/**
 * `api/line`: the items of a source line, call by call (the first ones, of `calls_total`).
 * @typedef {{file: string, line: number, calls: LineCall[], calls_total: number}} LineAnswer
 */

/**
 * What the lines panel reads of the store (model/store.js).
 * @typedef {import("./panel.js").PanelStore & {
 *   model: {scene: {byKey: Map<string, unknown>} | null, stackOf: Map<string, string>} | null,
 *   scene: {byKey: Map<string, unknown>} | null,
 *   revealAll: (itemPaths: string[][]) => Promise<boolean>,
 *   selectTogether: (keys: string[]) => void,
 *   outline: (keys: Set<string>) => void,
 * }} LinesStore
 */

/** @extends {Panel<LinesStore>} */
export class LinesPanel extends Panel {
  // renderer(): the page's renderer (null before a graph is drawn); banners, setStatus:
  // the page's banners and status line.
  /**
   * @param {LinesStore} store
   * @param {{api: import("../api.js").Api, banners: import("./banners.js").Banners,
   *   renderer: () => import("../draw/renderer.js").Renderer | null, setStatus: (text: string) => void}} parts
   */
  constructor(store, { api, banners, renderer, setStatus }) {
    super(store, "lines", null);
    this.api = api;
    this.banners = banners;
    this.renderer = renderer;
    this.setStatus = setStatus;
    /** @type {{file: string, line: number, call: number, calls: number, keys: string[], answer: LineAnswer, shown: number} | null} */
    this.line = null; // the line shown
    this.seq = 0;
    this.cursorSeq = 0;
    /** @type {{file?: string, line?: number, keys: string[], seq: number} | null} */
    this.cursorShown = null; // the cursor line outlined last
    store.on("capture", (/** @type {{live?: boolean}} */ { live }) => {
      if (!live) return;
      this.line = null; // another capture's items
      this.close();
    });
  }

  hidden() {
    this.banners.drop("line");
  }

  // The items of call `call` of source line `file:line` (the capture's numbering) selected
  // together, the groups holding them opened (a module the line called stays closed: the
  // call, not its insides), all of them in view, and the banner to step through the calls.
  /**
   * @param {string} file
   * @param {number} line
   * @param {number} [call]
   * @returns {Promise<boolean>} whether it is shown
   */
  // eslint-disable-next-line complexity -- a source line's captures shown: stale, missing, one or many, each said
  async show(file, line, call = 0) {
    const store = this.store;
    const r = this.renderer();
    if (!store.model || !r) return false;
    const seq = ++this.seq;
    /** @type {LineAnswer | null} */
    let answer = this.line && this.line.file === file && this.line.line === line ? this.line.answer : null;
    if (!answer) {
      try {
        answer = /** @type {LineAnswer} */ (await this.api.get("line", { file, line }));
      } catch (err) {
        this.banners.set("line", "error", "Line", `Could not show ${file}:${line}: ${/** @type {Error} */ (err).message || err}`);
        return false;
      }
    }
    if (seq !== this.seq) return false;
    call = Math.max(0, Math.min(Number(call) || 0, answer.calls.length - 1));
    const c = answer.calls[call];
    this.setStatus("Opening the line…");
    const paths = c.keys.map((k) => [...(c.paths[k] || []).slice(0, -1), k]);
    try {
      // Superseded by a relayout already on its way: once more, with what that one opened.
      const ok = (await store.revealAll(paths)) || (await store.revealAll(paths));
      if (!ok || seq !== this.seq) return false;
    } catch (err) {
      this.banners.set("line", "error", "Line", `Could not open ${file}:${line}: ${/** @type {Error} */ (err).message || err}`);
      this.setStatus("");
      return false;
    }
    this.setStatus("");
    const scene = store.scene; // null only before the first layout: then no card is on screen
    const keys = scene ? c.keys.filter((k) => scene.byKey.has(k)) : [];
    this.line = { file: answer.file, line: answer.line, call, calls: answer.calls_total, keys, answer, shown: seq };
    store.selectTogether(keys); // the inspector (on the first item) opens before the fit
    const b = r.boundsOf(keys);
    if (b) r.fitRect(b);
    this.open();
    this.#banner();
    return true;
  }

  // The previous (-1) or next (+1) call of the line shown.
  /** @param {number} d */
  step(d) {
    if (!this.line || !this.isOpen) return false;
    this.show(this.line.file, this.line.line, this.line.call + d);
    return true;
  }

  #banner() {
    const l = /** @type {NonNullable<LinesPanel["line"]>} */ (this.line);
    const c = l.answer.calls[l.call];
    const name = l.file.split("/").pop();
    const ops = `${Number(c.ops).toLocaleString("en-US")} op${c.ops === 1 ? "" : "s"}`;
    const text = `${name}:${l.line} · ${ops}` + (l.calls > 1 ? ` · call ${l.call + 1} of ${l.calls}` : "") + (c.where ? ` (${c.where})` : "");
    const actions = [];
    if (l.calls > 1) {
      actions.push(el("button", { type: "button", "data-call": "previous", title: "Previous call ([)", disabled: l.call === 0 ? "" : null, onclick: () => this.step(-1) }, "◀ Previous call"));
      actions.push(el("button", { type: "button", "data-call": "next", title: "Next call (])", disabled: l.call >= l.answer.calls.length - 1 ? "" : null, onclick: () => this.step(1) }, "Next call ▶"));
    }
    actions.push(el("button", { type: "button", "aria-label": "Close", onclick: () => this.close() }, "×"));
    this.banners.set("line", "info", "Line", text, actions);
  }

  // The editor's cursor line: its items outlined lightly, nothing selected, nothing opened.
  // An item not on screen (inside a closed group, a folded stack or chunk) outlines the
  // nearest item on screen that holds it; the view pans only when none is on screen.
  /** @param {{keys?: string[], file?: string, line?: number}} d  the editor's cursor line and its items */
  // eslint-disable-next-line complexity -- the editor's cursor followed: which capture, which line, which items
  async cursor(d) {
    const store = this.store;
    const m = store.model;
    const r = this.renderer();
    if (!m || !m.scene || !r) return;
    const seq = ++this.cursorSeq;
    const keys = d.keys || [];
    const scene = m.scene;
    const shown = new Set(keys.filter((k) => scene.byKey.has(k)));
    if (shown.size < keys.length && d.file) {
      /** @type {LineAnswer | null} */
      let answer = null;
      try {
        answer = /** @type {LineAnswer} */ (await this.api.get("line", { file: d.file, line: d.line }));
      } catch {
        answer = null; // the outline keeps what is on screen
      }
      if (seq !== this.cursorSeq) return;
      const c = answer && (answer.calls.find((x) => x.keys[0] === keys[0]) || answer.calls[0]);
      for (const k of keys) {
        if (shown.has(k) || !c) continue;
        const path = c.paths[k] || [];
        for (let i = path.length - 1; i >= 0; i--) {
          const pk = path[i];
          const sk = m.stackOf.get(pk);
          const holder = scene.byKey.has(pk) ? pk : sk !== undefined && scene.byKey.has(sk) ? sk : null;
          if (holder) {
            shown.add(holder);
            break;
          }
        }
      }
    }
    store.outline(shown);
    const b = r.boundsOf(shown);
    if (b && !r.onScreen(b)) {
      r.cam.tx = (r.width - r.insetRight) / 2 - (b.x + b.w / 2) * r.cam.s;
      r.cam.ty = r.height / 2 - (b.y + b.h / 2) * r.cam.s;
      r.requestDraw();
    }
    this.cursorShown = { file: d.file, line: d.line, keys: [...shown], seq };
  }
}
