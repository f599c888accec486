// The banners under the toolbar: one per id (coverage, stale, progress, load, diff, line…),
// replaced in place when set again. Each is one line; a text too long for it opens in
// place (its chevron, or a click on the text) and is also its title. Several banners
// take at most two lines: the most severe (a stale graph's warning) and the newest (a new
// capture ready), the count beside them opens the others (and closes them again); every
// banner's text stays one click away.

import { el, clear } from "../dom.js";

/** @typedef {"ok" | "info" | "warn" | "error"} Level */

/** @type {Record<Level, number>} */
const SEVERITY = { ok: 0, info: 1, warn: 2, error: 3 };

/**
 * A banner's level, as set on its element (`data-level`).
 * @param {HTMLElement | undefined} b
 * @returns {Level}
 */
const levelOf = (b) => /** @type {Level} */ ((b && b.dataset.level) || "ok");

export class Banners {
  /** @param {HTMLElement} holder */
  constructor(holder) {
    this.holder = holder;
    /** @type {Map<string, HTMLElement>} */
    this.byId = new Map();
    /** @type {string[]} */
    this.order = []; // ids, the newest last
    this.expanded = false;
    holder.classList.add("banners-empty");
    this.list = el("div", { class: "banner-list" });
    this.more = el("button", { type: "button", class: "banner-more", "aria-expanded": "false", hidden: true,
      onclick: () => this.toggleAll() });
    holder.append(this.list, this.more);
    // A banner's chevron shows only while its text does not fit its line.
    if (typeof ResizeObserver === "function") new ResizeObserver(() => this.#measure()).observe(this.list);
  }

  /** @param {string} id */
  has(id) {
    return this.byId.has(id);
  }

  /** @param {string} id */
  get(id) {
    return this.byId.get(id) || null;
  }

  // level: "info" | "ok" | "warn" | "error"; kind: the short word on its left; text: a
  // string or an element; actions: buttons after it.
  /**
   * @param {string} id
   * @param {Level} level
   * @param {string} kind
   * @param {string | HTMLElement} text
   * @param {HTMLElement[]} [actions]
   * @returns {HTMLElement} the banner
   */
  set(id, level, kind, text, actions = []) {
    let b = this.byId.get(id);
    if (!b) {
      /** @type {HTMLElement} */
      const made = el("div", { class: "banner", "data-banner": id });
      b = made;
      this.byId.set(id, made);
      this.list.append(made);
    }
    const open = b.classList.contains("open");
    b.className = `banner ${level}` + (open ? " open" : "");
    b.dataset.level = level;
    b.setAttribute("role", level === "error" ? "alert" : "status");
    clear(b);
    b.append(el("span", { class: "banner-kind" }, kind));
    const body = typeof text === "string" ? el("span", { class: "banner-text" }, text) : text;
    if (!body.classList.contains("banner-text")) body.classList.add("banner-text");
    body.title = body.textContent;
    body.addEventListener("click", () => b.classList.contains("truncated") && this.unfold(id));
    // Not a <button>: a banner's own buttons are its actions.
    const chevron = el("span", { class: "banner-unfold", role: "button", tabindex: "0", "aria-label": "Show the whole text",
      onclick: () => this.unfold(id), onkeydown: (/** @type {KeyboardEvent} */ e) => (e.key === "Enter" || e.key === " ") && (e.preventDefault(), this.unfold(id)) });
    b.append(body, chevron);
    for (const a of actions) b.append(a);
    this.order = this.order.filter((x) => x !== id);
    this.order.push(id);
    this.#arrange();
    return b;
  }

  /** @param {string} id */
  drop(id) {
    const b = this.byId.get(id);
    if (b) b.remove();
    this.byId.delete(id);
    this.order = this.order.filter((x) => x !== id);
    this.#arrange();
  }

  // One banner's whole text (or its line again).
  /** @param {string} id */
  unfold(id) {
    const b = this.byId.get(id);
    if (!b) return;
    b.classList.toggle("open");
    this.#measure();
  }

  // Every banner, or the leading ones alone.
  toggleAll() {
    this.expanded = !this.expanded;
    this.#arrange();
  }

  #arrange() {
    const n = this.order.length;
    // Two lead: the most severe (a stale graph's warning) and the newest (what just
    // happened: a new capture ready to open), one line when they are the same banner.
    const newest = this.order[n - 1];
    let worst = newest;
    for (const id of this.order) {
      if (SEVERITY[levelOf(this.byId.get(id))] > SEVERITY[levelOf(this.byId.get(worst))]) worst = id;
    }
    const leads = new Set(n ? [worst, newest] : []);
    const others = this.order.filter((id) => !leads.has(id));
    if (!others.length) this.expanded = false;
    for (const [id, b] of this.byId) b.classList.toggle("lead", leads.has(id));
    this.holder.classList.toggle("banners-empty", n === 0);
    this.holder.classList.toggle("stacked", others.length > 0 && !this.expanded);
    this.more.hidden = !others.length;
    if (others.length) {
      // The count takes the colour of the most severe banner it hides.
      const level = others.map((id) => levelOf(this.byId.get(id)))
        .reduce((a, l) => (SEVERITY[l] > SEVERITY[a] ? l : a), /** @type {Level} */ ("ok"));
      this.more.className = `banner-more ${this.expanded ? "ok" : level}`;
      this.more.textContent = this.expanded ? "fewer ▴" : `+${others.length} more ▾`;
      this.more.title = this.expanded ? "Show the leading banners only"
        : `Show every banner (${others.map((id) => this.byId.get(id)?.querySelector(".banner-kind")?.textContent).join(", ")})`;
      this.more.setAttribute("aria-expanded", String(this.expanded));
    }
    this.#measure();
  }

  #measure() {
    for (const b of this.byId.values()) {
      const text = /** @type {HTMLElement | null} */ (b.querySelector(".banner-text"));
      if (!text) continue;
      const cut = !b.classList.contains("open") && text.scrollWidth > text.clientWidth + 1;
      b.classList.toggle("truncated", cut);
    }
  }
}
