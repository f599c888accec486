// The search box and its results: results as you type (debounced; a newer query wins),
// arrows and Enter to pick, and a jump that opens the path to the result and focuses it.
// The results list is this panel; the query and results are its own working state.

import { el, clear } from "../dom.js";
import { ROOT } from "../model/viewmodel.js";
import { Panel } from "./panel.js";

export class SearchPanel extends Panel {
  // input: the search field; list: the results' list (the panel's root). focus(key): select
  // and centre an item laid out; setStatus(text), banners: the page's status and banners.
  constructor(store, input, list, { api, focus, setStatus, banners }) {
    super(store, "search", list);
    this.input = input;
    this.api = api;
    this.focus = focus;
    this.setStatus = setStatus;
    this.banners = banners;
    this.results = [];
    this.truncated = false;
    this.active = -1;
    this.query = "";
    this.seq = 0;
    this.#wire();
  }

  #wire() {
    const input = this.input;
    let timer = null;
    input.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => this.run(input.value.trim()), 140);
    });
    input.addEventListener("keydown", (e) => {
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        if (!this.results.length) return;
        this.active = (this.active + (e.key === "ArrowDown" ? 1 : -1) + this.results.length) % this.results.length;
        this.paint();
      } else if (e.key === "Enter") {
        e.preventDefault();
        clearTimeout(timer);
        const pick = async () => {
          if (!this.results.length || this.query !== input.value.trim()) await this.run(input.value.trim());
          const r = this.results[Math.max(0, this.active)];
          if (r) this.jump(r);
        };
        pick();
      }
    });
    input.addEventListener("focus", () => this.results.length && this.open());
    document.addEventListener("pointerdown", (e) => {
      if (!e.target.closest(".search")) this.close();
    });
  }

  async run(q) {
    const seq = ++this.seq;
    this.query = q;
    if (!q) {
      this.results = [];
      this.close();
      return;
    }
    let res;
    try {
      res = await this.api.search(q, 50);
    } catch (err) {
      res = { results: [], error: err.message };
    }
    if (seq !== this.seq) return; // a newer query is on its way
    this.results = res.results || [];
    this.truncated = !!res.truncated;
    this.active = this.results.length ? 0 : -1;
    this.paint(res.error);
  }

  paint(error) {
    const ul = this.root;
    clear(ul);
    if (!this.results.length) {
      ul.append(el("li", { class: "empty" }, error ? `Search failed: ${error}` : "No matches"));
    }
    this.results.forEach((r, i) => {
      const li = el("li", { role: "option", "aria-selected": String(i === this.active), "data-index": String(i) },
        el("span", { class: "pill rtype" + (r.type === "group" ? " kind" : "") }, r.type),
        el("span", { class: "rlabel" }, r.label || `${r.type} ${r.id}`, " ", el("span", { class: "rkey" }, r.key || "")),
        el("span", { class: "rwhy" }, [r.sublabel, r.why].filter(Boolean).join("  ·  ")));
      li.addEventListener("pointerdown", (e) => {
        e.preventDefault();
        this.jump(r);
      });
      ul.append(li);
    });
    if (this.truncated) ul.append(el("li", { class: "empty" }, "More matches: refine the search"));
    this.open();
  }

  // Opens the way to a search result (or any result-like {key, item_path, type, id}) and
  // focuses it. A parameter drawn inside its ops is shown on the first op that uses it.
  async jump(result) {
    this.close();
    const store = this.store;
    let key = result.key;
    const itemPath = result.item_path;
    if (!key) {
      if (result.type === "node") key = "n" + result.id;
      else if (result.type === "group") key = "g" + result.id;
      else if (result.type === "value" && result.producer !== null && result.producer !== undefined) key = "n" + result.producer;
    }
    if (!key) return;
    this.setStatus("Opening the path…");
    try {
      await store.reveal(key, { itemPath, groupIds: result.path || [] });
    } catch (err) {
      this.banners.set("load", "error", "Error", `Could not open ${key}: ${err.message || err}`);
      return;
    }
    this.setStatus("");
    const scene = store.scene;
    if (!scene) return;
    if (!scene.byKey.get(key) && key.startsWith("in:")) {
      const holder = scene.byKey.get(itemPath && itemPath.length > 1 ? itemPath[itemPath.length - 2] : ROOT);
      const container = holder && holder.expanded ? holder.expanded : scene.root;
      const value = Number(key.slice(3));
      const op = container.items.find((it) => it.type === "node" && (it.item.weights || []).some((w) => w.value === value));
      if (op) {
        await this.focus(op.key);
        store.selectWeight(op.key, value);
        document.getElementById("graph").focus({ preventScroll: true });
      }
      return;
    }
    if (!scene.byKey.get(key)) return;
    await this.focus(key);
    document.getElementById("graph").focus({ preventScroll: true });
  }
}
