// The search box and its results: results as you type (debounced; a newer query wins),
// grouped under the layer that holds them (the server's `layers`), each row telling its
// result apart (kind, class or op, where it sits, shape), filters by op, class, shape and
// dtype offered from what the results hold (or typed inline, `op:addmm`), arrows and
// Enter to pick, and a jump that opens the path to the result and focuses it. The results
// (filters, summary, list) are this panel; the query, filters and results are its own
// working state.

import { el, clear } from "../dom.js";
import { grouped } from "../format.js";
import { ROOT } from "../model/items.js";
import { Panel } from "./panel.js";

// The filters the server takes, in the order the bar shows them: its key in
// `api/search`, the word on the control, the facet of a result it reads.
const FILTERS = [
  { key: "op", word: "op" },
  { key: "class", word: "class" },
  { key: "shape", word: "shape" },
  { key: "dtype", word: "dtype" },
];
/**
 * One result of `api/search` (viewer/API.md): an item or a value, where it sits (`layer`,
 * `item_path`, `path` the group ids down to it), why it matched, its facets.
 * @typedef {object} SearchResult
 * @property {string} type  "node" | "group" | "chunk" | "value"
 * @property {number | string} [id]
 * @property {string} [key]
 * @property {string} [label]
 * @property {string} [sublabel]
 * @property {string} [where]
 * @property {string} [why]
 * @property {boolean} [elided]
 * @property {string | null} [layer]  the key of the layer it sits in (null: top level)
 * @property {string[]} [item_path]
 * @property {number[]} [path]
 * @property {number | null} [producer]  a value: the node that made it
 * @property {Record<string, any>} [facets]  op, class, shape, dtype
 */

/**
 * `api/search`: the results (the first `limit`), the layers they sit in, the filters the
 * query typed (`op:addmm`), and whether there were more.
 * @typedef {object} SearchAnswer
 * @property {SearchResult[]} results
 * @property {{key: string | null, title: string, count?: number, id?: number}[]} [layers]
 * @property {Record<string, unknown>} [filters]
 * @property {boolean} [truncated]
 * @property {number} [total]
 */

/** @typedef {{key: string | null, title: string, count?: number, id?: number}} Layer */

/**
 * What the search panel reads of the store (model/store.js).
 * @typedef {import("./panel.js").PanelStore & {
 *   reveal: (key: string, options: {itemPath?: string[], groupIds?: number[]}) => Promise<unknown>,
 *   scene: import("../draw/renderer.js").Scene | null,
 *   selectWeight: (nodeKey: string, value: number) => void,
 * }} SearchStore
 */

const LIMIT = 50;
const MAX_CHOICES = 40; // options per filter control, the most frequent first

/** @extends {Panel<SearchStore>} */
export class SearchPanel extends Panel {
  // input: the search field; root: the results panel (filters, summary and the list
  // `#search-list` inside it). focus(key): select and centre an item laid out;
  // setStatus(text), banners: the page's status and banners.
  /**
   * @param {SearchStore} store
   * @param {HTMLElement} input  the search field, an <input>
   * @param {HTMLElement} root
   * @param {{api: import("../api.js").Api, focus: (key: string) => Promise<unknown>, setStatus: (text: string) => void,
   *   banners: import("./banners.js").Banners}} parts
   */
  constructor(store, input, root, { api, focus, setStatus, banners }) {
    super(store, "search", root);
    this.input = /** @type {HTMLInputElement} */ (input);
    this.list = /** @type {HTMLElement} */ (root.querySelector("#search-list"));
    this.bar = /** @type {HTMLElement} */ (root.querySelector("#search-filters"));
    this.summary = /** @type {HTMLElement} */ (root.querySelector("#search-summary"));
    this.api = api;
    this.focus = focus;
    this.setStatus = setStatus;
    this.banners = banners;
    /** @type {SearchAnswer | null} */
    this.answer = null; // the last api/search answer shown
    /** @type {SearchResult[]} */
    this.ordered = []; // the results in the order they are listed (by layer)
    this.active = -1;
    this.query = "";
    /** @type {Record<string, string>} */
    this.filters = {}; // chosen with the controls: {op, class, shape, dtype}
    /** @type {string | null} */
    this.error = null;
    /** @type {string | null} */
    this.refocus = null; // the filter control to focus once the answer is painted
    this.seq = 0;
    this.#wire();
  }

  #wire() {
    const input = this.input;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer = undefined;
    input.addEventListener("input", () => {
      clearTimeout(timer);
      if (!input.value.trim()) this.filters = {};
      timer = setTimeout(() => this.run(input.value.trim()), 140);
    });
    input.addEventListener("keydown", (e) => {
      const n = this.ordered.length;
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        if (!n) return;
        if (!this.isOpen) this.open();
        this.activate((this.active + (e.key === "ArrowDown" ? 1 : -1) + n) % n);
      } else if ((e.key === "PageDown" || e.key === "PageUp") && n) {
        e.preventDefault();
        this.activate(Math.max(0, Math.min(n - 1, this.active + (e.key === "PageDown" ? 8 : -8))));
      } else if (e.key === "Enter") {
        e.preventDefault();
        clearTimeout(timer);
        const pick = async () => {
          if (!this.answer || this.query !== input.value.trim()) await this.run(input.value.trim());
          const r = this.ordered[Math.max(0, this.active)];
          if (r) this.jump(r);
        };
        pick();
      }
    });
    input.addEventListener("focus", () => this.answer && (this.query || this.hasFilters()) && this.open());
    document.addEventListener("pointerdown", (e) => {
      if (!(/** @type {Element} */ (e.target)).closest(".search")) this.close();
    });
  }

  hasFilters() {
    return FILTERS.some((f) => this.filters[f.key]);
  }

  /** @param {string} q */
  async run(q) {
    const seq = ++this.seq;
    this.query = q;
    if (!q && !this.hasFilters()) {
      this.answer = null;
      this.ordered = [];
      this.close();
      return;
    }
    /** @type {SearchAnswer} */
    let res;
    let error = null;
    try {
      res = await this.api.search(q, LIMIT, this.filters);
    } catch (err) {
      res = { results: [], layers: [] };
      error = /** @type {Error} */ (err).message || String(err);
    }
    if (seq !== this.seq) return; // a newer query is on its way
    this.answer = res;
    this.error = error;
    this.ordered = listed(res);
    this.active = this.ordered.length ? 0 : -1;
    this.paint();
  }

  /** @param {number} i */
  activate(i) {
    this.active = i;
    for (const option of this.list.querySelectorAll("li[role=option]")) {
      const li = /** @type {HTMLElement} */ (option);
      const on = Number(li.dataset.index) === i;
      li.setAttribute("aria-selected", String(on));
      if (on) {
        li.scrollIntoView({ block: "nearest" });
        this.input.setAttribute("aria-activedescendant", li.id);
      }
    }
  }

  paint() {
    /** @type {SearchAnswer} */
    const res = this.answer || { results: [], layers: [] };
    this.paintFilters(res);
    this.paintSummary(res);
    const ul = this.list;
    clear(ul);
    ul.dataset.query = this.query; // what the list answers (tests wait on it)
    this.input.removeAttribute("aria-activedescendant");
    const layers = new Map((res.layers || []).map((l) => [l.key, l]));
    let index = 0;
    for (const [layerKey, rows] of byLayer(this.ordered)) {
      const layer = layers.get(layerKey) || { key: layerKey, title: layerKey === null ? "top level" : layerKey, count: rows.length };
      ul.append(this.layerHead(layer, rows));
      for (const r of rows) ul.append(this.row(r, index++));
    }
    if (res.truncated) {
      ul.append(el("li", { class: "more", role: "presentation" },
        `Showing ${grouped(this.ordered.length)} of ${grouped(/** @type {number} */ (res.total))}: refine the search or add a filter`));
    }
    this.open();
    if (this.active >= 0) this.activate(this.active);
  }

  // "4 layers · 48 matches", or why there is nothing to show.
  /** @param {SearchAnswer} res */
  paintSummary(res) {
    const box = this.summary;
    clear(box);
    box.className = "search-summary";
    if (this.error) {
      box.classList.add("failed");
      box.append(`Search failed: ${this.error}`);
      return;
    }
    const active = activeFilters(res, this.filters);
    if (!this.ordered.length) {
      box.classList.add("none");
      const what = this.query ? `No match for “${this.query}”` : "No match";
      const narrowed = active.length ? ` with ${active.map(([k, v]) => `${k} ${v}`).join(", ")}` : "";
      box.append(el("strong", {}, what + narrowed + "."), " ",
        active.length ? "Remove a filter, or search for an op, a module path or class, a shape (8,128) or a file:line."
          : "Search for an op, a module path or class, a value name, a shape (8,128) or a file:line.");
      return;
    }
    const layers = (res.layers || []).length;
    const total = res.total ?? this.ordered.length;
    box.append(`${grouped(total)} ${total === 1 ? "match" : "matches"}`,
      layers > 1 || (layers === 1 && /** @type {Layer[]} */ (res.layers)[0].key !== null) ? ` in ${grouped(layers)} ${layers === 1 ? "layer" : "layers"}` : "",
      res.truncated ? ` (first ${grouped(this.ordered.length)} shown)` : "");
  }

  // One control per filter, its choices the values the results hold (the most frequent
  // first, with their counts); an inline filter (`op:addmm` in the query) shows as chosen.
  /** @param {SearchAnswer} res */
  // eslint-disable-next-line complexity -- one chip per facet the answer has
  paintFilters(res) {
    const bar = this.bar;
    clear(bar);
    /** @type {Record<string, unknown>} */
    const echo = res.filters || {};
    const counts = facetCounts(res.results || []);
    for (const f of FILTERS) {
      const chosen = this.filters[f.key] || "";
      const typed = !chosen && echo[f.key] !== null && echo[f.key] !== undefined ? filterText(f.key, echo[f.key]) : "";
      const select = el("select", { "data-filter": f.key, "aria-label": `Filter by ${f.word}`, title: typed ? `typed in the query: ${f.key}:${typed}` : `Only results whose ${f.word} is…` });
      select.append(el("option", { value: "" }, `any ${f.word}`));
      /** @type {[string, number | null][]} */
      const choices = [...(counts[f.key] || new Map())].sort((a, b) => b[1] - a[1] || String(a[0]).localeCompare(String(b[0]))).slice(0, MAX_CHOICES);
      if (typed) select.append(el("option", { value: typed, selected: true }, `${typed} (typed)`));
      if (chosen && !choices.some(([v]) => v === chosen)) choices.unshift([chosen, null]);
      for (const [v, n] of choices) {
        select.append(el("option", { value: v, selected: v === chosen }, n === null ? v : `${v}  (${n})`));
      }
      if (typed) select.disabled = true;
      else select.disabled = choices.length === 0 && !chosen;
      select.addEventListener("change", () => this.setFilter(f.key, select.value));
      const box = el("label", { class: "filter" + (chosen || typed ? " on" : ""), "data-filter": f.key }, el("span", {}, f.word), select);
      if (chosen) {
        box.append(el("button", { type: "button", class: "clear", "aria-label": `Remove the ${f.word} filter`, title: "Remove this filter",
          onclick: () => this.setFilter(f.key, "") }, "×"));
      }
      bar.append(box);
    }
    bar.append(el("span", { class: "hint" }, "or type op:NAME class:NAME shape:8,128 dtype:f32"));
    // The controls are made again with every answer: a keyboard user stays on the one used.
    if (this.refocus) {
      const again = /** @type {HTMLSelectElement | null} */ (bar.querySelector(`select[data-filter="${this.refocus}"]`));
      if (again && !again.disabled) again.focus();
      this.refocus = null;
    }
  }

  /**
   * @param {string} key
   * @param {string} value  "" removes it
   */
  setFilter(key, value) {
    if (value) this.filters[key] = value;
    else delete this.filters[key];
    this.refocus = key;
    this.run(this.input.value.trim());
  }

  // A layer's heading: its title (class and path), how many results sit under it; it
  // reveals the layer itself.
  /**
   * @param {Layer} layer
   * @param {SearchResult[]} rows
   */
  layerHead(layer, rows) {
    const key = layer.key;
    const path = key && rows[0] && rows[0].item_path ? rows[0].item_path.slice(0, rows[0].item_path.indexOf(key) + 1) : null;
    const li = el("li", { class: "layer-head", role: "presentation", "data-layer": key === null ? "" : key, title: key ? `Show ${layer.title}` : "" },
      el("span", { class: "layer-title" }, layer.title), el("span", { class: "layer-count" }, grouped(layer.count ?? rows.length)));
    if (key && path && path.length) {
      li.classList.add("link");
      li.addEventListener("pointerdown", (/** @type {PointerEvent} */ e) => {
        e.preventDefault();
        this.jump({ key, type: "group", id: layer.id, item_path: path });
      });
    }
    return li;
  }

  // A result's row: kind; its label with the class (a module) and the key; where it sits
  // and why it matched; its shape.
  /**
   * @param {SearchResult} r
   * @param {number} i
   */
  // eslint-disable-next-line complexity -- one result's row, each part only when present
  row(r, i) {
    const fx = r.facets || {};
    const shape = (fx.shape || []).join(", ");
    const kind = r.type;
    const title = el("span", { class: "rlabel" }, r.label || `${r.type} ${r.id}`);
    if (kind === "group" && fx.class) title.append(" ", el("span", { class: "rclass" }, fx.class));
    if (r.elided) title.append(" ", el("span", { class: "rnote", title: "bookkeeping: not drawn unless Kernels is on" }, "elided"));
    title.append(" ", el("span", { class: "rkey" }, r.key || ""));
    let detail;
    if (kind === "node") detail = r.where ?? r.sublabel;
    else if (kind === "group") detail = fx.class && String(r.sublabel || "").startsWith(`${fx.class} · `) ? /** @type {string} */ (r.sublabel).slice(fx.class.length + 3) : r.sublabel;
    else detail = r.sublabel;
    const li = el("li", { role: "option", id: `search-opt-${i}`, "aria-selected": String(i === this.active), "data-index": String(i), "data-key": r.key || "", "data-type": kind },
      el("span", { class: "pill rtype" + (kind === "group" ? " kind" : "") }, kind),
      title,
      el("span", { class: "rshape", title: shape }, shape),
      el("span", { class: "rwhy" }, [detail, r.why === "filter" ? "" : r.why].filter(Boolean).join("  ·  ")));
    li.addEventListener("pointerdown", (/** @type {PointerEvent} */ e) => {
      e.preventDefault();
      this.jump(r);
    });
    li.addEventListener("pointermove", () => this.active !== i && this.activate(i));
    return li;
  }

  // Opens the way to a search result (or any result-like {key, item_path, type, id}) and
  // focuses it. A parameter drawn inside its ops is shown on the first op that uses it.
  /** @param {SearchResult} result */
  // eslint-disable-next-line complexity -- a result revealed: its path opened, fetched, focused, each able to fail
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
      this.banners.set("load", "error", "Error", `Could not open ${key}: ${/** @type {Error} */ (err).message || err}`);
      return;
    }
    this.setStatus("");
    const scene = store.scene;
    if (!scene) return;
    if (!scene.byKey.get(key) && key.startsWith("in:")) {
      const holder = scene.byKey.get(itemPath && itemPath.length > 1 ? itemPath[itemPath.length - 2] : ROOT);
      const container = holder && holder.expanded ? holder.expanded : scene.root;
      const value = Number(key.slice(3));
      const op = container.items.find((it) => it.type === "node"
        && (/** @type {{weights?: {value: number}[]}} */ (it.item).weights || []).some((w) => w.value === value));
      if (op) {
        await this.focus(op.key);
        store.selectWeight(op.key, value);
        /** @type {HTMLElement} */ (document.getElementById("graph")).focus({ preventScroll: true });
      }
      return;
    }
    if (!scene.byKey.get(key)) return;
    await this.focus(key);
    /** @type {HTMLElement} */ (document.getElementById("graph")).focus({ preventScroll: true });
  }
}

// The results in the order they are listed: layers in order of first appearance (the
// server's `layers`), each layer's results in the server's order (best first).
/**
 * @param {SearchAnswer} res
 * @returns {SearchResult[]}
 */
function listed(res) {
  /** @type {SearchResult[]} */
  const out = [];
  for (const rows of byLayer(res.results || []).values()) out.push(...rows);
  return out;
}

/**
 * @param {SearchResult[]} results
 * @returns {Map<string | null, SearchResult[]>}
 */
function byLayer(results) {
  /** @type {Map<string | null, SearchResult[]>} */
  const by = new Map();
  for (const r of results) {
    const k = r.layer ?? null;
    if (!by.has(k)) by.set(k, []);
    /** @type {SearchResult[]} */ (by.get(k)).push(r);
  }
  return by;
}

// How many results hold each value of each facet (a result counts once per value).
/**
 * @param {SearchResult[]} results
 * @returns {Record<string, Map<string, number>>}
 */
function facetCounts(results) {
  /** @type {Record<string, Map<string, number>>} */
  const counts = {};
  for (const f of FILTERS) counts[f.key] = new Map();
  for (const r of results) {
    const fx = r.facets || {};
    for (const f of FILTERS) {
      const vs = Array.isArray(fx[f.key]) ? fx[f.key] : fx[f.key] ? [fx[f.key]] : [];
      for (const v of new Set(vs)) counts[f.key].set(v, (counts[f.key].get(v) || 0) + 1);
    }
  }
  return counts;
}

// The filters in force, as [key, text]: chosen with a control, else typed in the query.
/**
 * @param {SearchAnswer} res
 * @param {Record<string, string>} chosen
 * @returns {string[][]}
 */
function activeFilters(res, chosen) {
  /** @type {Record<string, unknown>} */
  const echo = res.filters || {};
  return FILTERS.map((f) => [f.key, chosen[f.key] || (echo[f.key] !== null && echo[f.key] !== undefined ? filterText(f.key, echo[f.key]) : "")])
    .filter(([, v]) => v);
}

/**
 * @param {string} key
 * @param {unknown} v
 */
function filterText(key, v) {
  return key === "shape" && Array.isArray(v) ? `[${v.join(",")}]` : String(v);
}
