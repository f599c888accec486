// The banners under the toolbar: one per id (coverage, stale, progress, load, diff, line…),
// replaced in place when set again.

import { el, clear } from "../dom.js";

export class Banners {
  constructor(holder) {
    this.holder = holder;
    this.byId = new Map();
  }

  has(id) {
    return this.byId.has(id);
  }

  get(id) {
    return this.byId.get(id) || null;
  }

  // level: "info" | "ok" | "warn" | "error"; kind: the short word on its left; text: a
  // string or an element; actions: buttons after it.
  set(id, level, kind, text, actions = []) {
    let b = this.byId.get(id);
    if (!b) {
      b = el("div", { class: "banner", "data-banner": id, role: level === "error" ? "alert" : "status" });
      this.byId.set(id, b);
      this.holder.append(b);
    }
    b.className = `banner ${level}`;
    clear(b);
    b.append(el("span", { class: "banner-kind" }, kind));
    b.append(typeof text === "string" ? el("span", { class: "banner-text" }, text) : text);
    for (const a of actions) b.append(a);
    return b;
  }

  drop(id) {
    const b = this.byId.get(id);
    if (b) b.remove();
    this.byId.delete(id);
  }
}
