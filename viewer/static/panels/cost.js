// What each layer costs, as a table and a heat map (issue 35).
//
// The table lists what the graph draws, at the depth it is drawn: every card and open
// frame of the scene in program order (an open frame's contents under it), with its
// parameters, FLOPs (a multiply-add counts 2), bytes read and written (unfused), its share
// of the program's FLOPs, and on a chosen device profile a roofline time (estimated, not
// measured). A stack card is one row: the run's sums, one block's figure beside them.
// Clicking a column sorts by it (again: the other way; the first column: program order);
// clicking a row selects its card. Under the table: the totals, memory, and every op no
// rule could count (listed, never added as zero). The figures are the server's: each
// item's `cost` (api/children), the totals and times from api/cost.
//
// The heat map colours the closed cards by FLOPs, bytes or parameters (relative to the
// largest card drawn, square-root scale) or by their share of the program's FLOPs
// (absolute, one colour step per decade), with a legend over the canvas.

import { Panel } from "./panel.js";
import { el, clear } from "../dom.js";
import { formatBytes, formatCount, formatFlops, formatTime, grouped } from "../format.js";
import { opTitle } from "../model/viewmodel.js";

/**
 * @typedef {import("../api.js").Api} Api
 * @typedef {import("../draw/renderer.js").Renderer} Renderer
 */

/** @typedef {{tensors?: number, count?: number, bytes?: number}} ParamsCount  parameters: tensors, elements, bytes */

/** @typedef {import("../model/view-types.js").ItemCost} ItemCost  an item's cost (viewer/API.md "Costs on items") */

/**
 * A scene item's server item as the panel reads it (`api/children`; a stack card's is its
 * first member's with the run's label, members, count, parameters and cost: viewmodel.js).
 * @typedef {object} CostItem
 * @property {string} [type]  "node" | "group" | "chunk" | "stack" | "in" | "out"
 * @property {string} [label]
 * @property {string} [path]  a group's module path
 * @property {string} [kind]
 * @property {string} [class]
 * @property {string} [function]  a function group: the function called
 * @property {ItemCost} [cost]
 * @property {ParamsCount} [params]
 * @property {ParamsCount} [stack_params]  a stack's: every member's parameters
 * @property {number} [stack_count]
 * @property {string[]} [members]  a stack's: its members' keys
 */

/**
 * The scene on screen as the panel walks it: containers of laid-out items, an open one
 * holding its own container (`expanded`); boundary pills ("in", "out") cost nothing.
 * @typedef {{key: string, type: string, item: CostItem, expanded?: CostContainer | null}} CostSceneItem
 * @typedef {{items: CostSceneItem[]}} CostContainer
 */

/**
 * What the cost panel reads of the store (model/store.js): the scene on screen and the
 * selected item.
 * @typedef {import("./panel.js").PanelStore & {scene: {root: CostContainer} | null, selected: string | null}} CostStore
 */

/** @typedef {{name: string, label: string, note?: string, memory?: number}} CostDevice  a device profile for time estimates (memory: bytes) */

/**
 * `api/cost?device=NAME`'s roofline times on that device, in seconds (estimates, never
 * measurements): the program's, and each group's and node's by id key (`g3`, `n12`).
 * @typedef {{total: number, groups: Record<string, number>, nodes: Record<string, number>}} CostTimes
 */

/**
 * `api/cost` (viewer/API.md): what the capture costs.
 * @typedef {object} CostTotals
 * @property {true} available
 * @property {number} flops
 * @property {number} bytes_read
 * @property {number} bytes_written
 * @property {boolean} [estimate]
 * @property {ParamsCount} [params]
 * @property {number} activations
 * @property {number} peak_live
 * @property {number} [saved_for_backward]  a training step's
 * @property {Record<string, number>} [flops_by_kind]  matmul, convolution, attention, pointwise, reduction/norm, scan, other
 * @property {number} [flops_per_rank]  a split Torch program: its FLOPs on one rank (the rows' figures); `flops` mixes scopes
 * @property {string} [flops_scope]  a JAX program split across devices: "global" (a per-device row's share: its FLOPs × its devices of it)
 * @property {{kind: string, peak: number, parameters: number, gradients: number, optimizer_state: number, saved_for_backward: number, estimate: boolean, per_device?: {devices: number, peak: number}}} [memory_plan]
 * @property {{op: string, count: number, in_bodies: number, reason: string}[]} [uncounted_ops]
 * @property {Record<string, string>} [notes]  how FLOPs, bytes, memory are counted, in words
 * @property {CostDevice[]} [devices]
 * @property {string} [estimate_note]
 * @property {undefined} [error]  none: only an answer without costs has one
 */

/**
 * `api/cost`'s answer: the totals, or none (a capture made before costs were counted;
 * `error`: the panel's own, when api/cost could not be read).
 * @typedef {CostTotals | {available: false, error?: string}} CostSummary
 */

/** @typedef {"name" | "cls" | "params" | "flops" | "bytes" | "share" | "time"} ColumnKey */

/**
 * A row of the table: an item drawn, its depth among the open frames, and its figures
 * (`flops` undefined: the item has no cost; null: no rule counted it).
 * @typedef {object} CostRow
 * @property {string} key
 * @property {number} depth
 * @property {boolean} open
 * @property {string} type
 * @property {string} name
 * @property {string} cls
 * @property {number | null} params
 * @property {number | null | undefined} flops
 * @property {number | undefined} bytes
 * @property {number} uncounted
 * @property {boolean} estimate
 * @property {boolean} template
 * @property {string | null} perRun  inside a shard_map body: "per device" (its figures are one device's) or
 *   "per shard" (a partial-manual body's: one shard's of its manual axes); null elsewhere
 * @property {number | null} share
 * @property {{flops: number, bytes: number} | null} perBlock
 * @property {number | null | undefined} count  a stack's repetitions
 * @property {Record<string, number> | null} kinds  FLOPs by kind
 * @property {number | null} time
 */

/** @type {Record<string, string>} */
export const HEAT_METRICS = {
  flops: "FLOPs",
  bytes: "Bytes moved",
  params: "Parameters",
  share: "Share of FLOPs",
};
const STEPS = 7; // colours of the heat ramp (--heat-0 … --heat-6 in style.css)
const SHARE_FLOOR = 1e-5; // the share scale's first decade starts here (0.001 %)

/** @type {[ColumnKey, string][]} */
const COLUMNS = [
  ["name", "Layer"], ["cls", "Class / op"], ["params", "Params"], ["flops", "FLOPs"],
  ["bytes", "Bytes"], ["share", "Share"], ["time", "Est. time"],
];

/** @extends {Panel<CostStore>} */
export class CostPanel extends Panel {
  // The panel's controls and parts (#build puts them on the page).
  heatSelect = /** @type {HTMLSelectElement} */ (el("select", { "aria-label": "Heat map", title: "Colour the cards by what they cost", onchange: () => this.setHeat(this.heatSelect.value) },
    el("option", { value: "" }, "Heat map: off"),
    ...Object.entries(HEAT_METRICS).map(([k, v]) => el("option", { value: k }, `Heat map: ${v}`))));
  deviceSelect = /** @type {HTMLSelectElement} */ (el("select", { "aria-label": "Device profile", title: "A device profile for roofline time estimates (estimated, not measured)", onchange: () => this.setDevice(this.deviceSelect.value) },
    el("option", { value: "" }, "Est. time: no device")));
  totals = /** @type {HTMLElement} */ (el("div", { class: "cost-totals" }));
  table = /** @type {HTMLTableElement} */ (el("table", { class: "cost-table" }));
  footer = /** @type {HTMLElement} */ (el("div", { class: "cost-footer" }));

  // renderer(): the page's renderer (null before a graph is drawn); focus(key): select and
  // centre an item; legend: the heat map's legend over the canvas.
  /**
   * @param {CostStore} store
   * @param {HTMLElement} root
   * @param {{api: Api, renderer: () => Renderer | null, focus: (key: string) => unknown, legend: HTMLElement}} parts
   */
  constructor(store, root, { api, renderer, focus, legend }) {
    super(store, "cost", root);
    this.api = api;
    this.renderer = renderer;
    this.focus = focus;
    this.legend = legend;
    /** @type {CostSummary | null} */
    this.summary = null; // api/cost without a device
    this.device = "";
    /** @type {CostTimes | null} */
    this.times = null; // {groups, nodes, total} on this.device
    this.heat = "";
    /** @type {{key: ColumnKey | "order", dir: number}} */
    this.sort = { key: "order", dir: -1 };
    /** @type {CostRow[]} */
    this.rows = [];
    this.#build();
    store.on("scene", () => {
      if (this.isOpen) this.#renderTable();
      if (this.heat) this.#applyHeat();
    });
    store.on("selection", (/** @type {{key: string | null}} */ { key }) => this.#markSelected(key));
    store.on("capture", () => {
      this.summary = null;
      this.times = null;
      if (this.isOpen) this.refresh();
    });
  }

  #build() {
    const head = el("div", { class: "cost-head" },
      el("strong", {}, "What each layer costs"), this.heatSelect, this.deviceSelect,
      el("button", { type: "button", class: "icon", "aria-label": "Close the cost table", title: "Close", onclick: () => this.close() }, "×"));
    clear(this.root);
    this.root.append(head, this.totals, el("div", { class: "cost-scroll" }, this.table), this.footer);
  }

  shown() {
    this.refresh();
  }

  hidden() {}

  async refresh() {
    if (!this.summary) {
      try {
        this.summary = await this.api.cost();
      } catch (err) {
        this.summary = { available: false, error: String((err && /** @type {Error} */ (err).message) || err) };
      }
      this.#fillDevices();
    }
    this.#renderTotals();
    this.#renderTable();
  }

  // ------------------------------------------------------------------ controls

  /** @param {string} name  a device profile's name ("": none) */
  async setDevice(name) {
    this.device = name || "";
    this.deviceSelect.value = this.device;
    this.times = null;
    if (this.device) {
      try {
        /** @type {{times?: CostTimes}} */
        const answer = await this.api.cost(this.device);
        if (this.device === name) this.times = answer.times || null;
      } catch {
        this.times = null;
      }
    }
    this.#renderTotals();
    this.#renderTable();
  }

  /** @param {string | null} metric  a HEAT_METRICS key ("" or null: off) */
  setHeat(metric) {
    this.heat = metric && HEAT_METRICS[metric] ? metric : "";
    this.heatSelect.value = this.heat;
    this.#applyHeat();
  }

  // What the heat map colours each card with, and the legend's scale.
  #applyHeat() {
    const r = this.renderer();
    if (!r) return;
    if (!this.heat) {
      r.setHeat(null);
      this.legend.hidden = true;
      return;
    }
    const metric = this.heat;
    const scene = this.store.scene; // the newest (the renderer may not have taken it yet)
    let max = 0;
    /** @type {CostSceneItem[]} */
    const closed = [];
    if (scene) {
      const walk = (/** @type {CostContainer} */ c) => {
        for (const it of c.items) {
          if (it.expanded) walk(it.expanded);
          else if (it.type !== "in" && it.type !== "out") closed.push(it);
        }
      };
      walk(scene.root);
    }
    const total = this.#totalFlops();
    const valueOf = (/** @type {CostSceneItem} */ it) => metricValue(it.item, metric, total);
    for (const it of closed) max = Math.max(max, valueOf(it) || 0);
    const ramp = heatRamp();
    const colourOf = (/** @type {number | null} */ v) => {
      if (v === null || v === undefined || !(v > 0)) return null;
      let t;
      if (metric === "share") t = Math.max(0, (Math.log10(Math.max(v, SHARE_FLOOR)) - Math.log10(SHARE_FLOOR)) / -Math.log10(SHARE_FLOOR));
      else t = max > 0 ? Math.sqrt(v / max) : 0;
      return ramp[Math.min(STEPS - 1, Math.max(0, Math.round(t * (STEPS - 1))))];
    };
    const byKey = new Map(closed.map((it) => [it.key, colourOf(valueOf(it))]));
    r.setHeat((it) => byKey.get(it.key) || null);
    this.#renderLegend(metric, max, ramp);
  }

  /**
   * @param {string} metric
   * @param {number} max  the largest value of a card drawn
   * @param {string[]} ramp  the heat colours
   */
  #renderLegend(metric, max, ramp) {
    const lg = this.legend;
    clear(lg);
    // How the largest value reads (the share's ends are fixed: none).
    const fmt = metric === "flops" ? formatFlops : metric === "bytes" ? formatBytes : metric === "params" ? formatCount : null;
    const swatches = el("div", { class: "heat-ramp" }, ...ramp.map((c) => {
      const sw = el("span");
      sw.style.background = c; // CSSOM, not a style attribute: the page's CSP allows no inline style
      return sw;
    }));
    const lo = metric === "share" ? "≤0.001 %" : "0";
    const hi = fmt ? fmt(max) : "100 %";
    const scale = metric === "share" ? "of the program's FLOPs, one step per decade" : "square-root scale, largest card drawn";
    lg.append(el("div", { class: "heat-title" }, `Heat map: ${HEAT_METRICS[metric]}`),
      swatches, el("div", { class: "heat-ends" }, el("span", {}, lo), el("span", {}, hi)),
      el("div", { class: "heat-note" }, `${scale}; uncoloured: none or uncounted`));
    if (metric === "flops" || metric === "share") lg.append(el("div", { class: "heat-note" }, "a multiply-add counts 2 FLOPs"));
    lg.hidden = false;
  }

  // ------------------------------------------------------------------ table

  #totalFlops() {
    // a split Torch program's rows are per rank (rank_flops.py): their shares are of its per-rank total
    const s = this.summary;
    if (!s || !s.available) return 0;
    return Number(s.flops_per_rank !== undefined ? s.flops_per_rank : s.flops) || 0;
  }

  // Rows from what the graph draws: each item, in program order, with its frame's insides.
  #sceneRows() {
    const scene = this.store.scene;
    /** @type {CostRow[]} */
    const rows = [];
    if (!scene) return rows;
    const total = this.#totalFlops();
    const times = this.times;
    /**
     * @param {CostContainer} c
     * @param {number} depth
     */
    // eslint-disable-next-line complexity -- one row of the cost table, a cell per column, each only when known
    const walk = (c, depth) => {
      for (const it of c.items) {
        if (it.type === "in" || it.type === "out") continue;
        const item = it.item || {};
        const cost = item.cost || null;
        const params = it.type === "stack" ? item.stack_params : item.params;
        const row = {
          key: it.key, depth, open: !!it.expanded, type: it.type,
          name: rowName(it), cls: item.class || (it.type === "node" ? String(item.label || "") : String(item.kind || "")),
          params: params ? Number(params.count) || 0 : null,
          flops: cost ? cost.flops : undefined, bytes: cost ? cost.bytes : undefined,
          uncounted: cost ? cost.uncounted || 0 : 0, estimate: !!(cost && cost.estimate), template: !!(cost && cost.template),
          perRun: cost && (cost.scope === "per device" || cost.scope === "per shard") ? cost.scope : null,
          share: cost ? shareOf(cost, total) : null,
          perBlock: it.type === "stack" && cost && cost.per_block ? cost.per_block : null,
          count: it.type === "stack" ? item.stack_count : null,
          kinds: cost && cost.flops_by_kind ? cost.flops_by_kind : null,
          time: times ? timeOf(it, times) : null,
        };
        rows.push(row);
        if (it.expanded) walk(it.expanded, depth + 1);
      }
    };
    walk(scene.root, 0);
    return rows;
  }

  // eslint-disable-next-line complexity -- the cost table's header, sort and rows
  #renderTable() {
    if (!this.isOpen) return;
    let rows = this.#sceneRows();
    const { key, dir } = this.sort;
    if (key !== "order") {
      const val = (/** @type {CostRow} */ row) => (key === "name" || key === "cls" ? String(row[key]) : row[key] === null || row[key] === undefined ? -1 : Number(row[key]));
      rows = rows.slice().sort((a, b) => {
        const x = val(a);
        const y = val(b);
        return (x < y ? -1 : x > y ? 1 : 0) * dir;
      });
    }
    this.rows = rows;
    clear(this.table);
    const head = el("tr", {}, ...COLUMNS.filter(([k]) => k !== "time" || this.times).map(([k, label]) => {
      const mark = this.sort.key === k ? (this.sort.dir < 0 ? " ▾" : " ▴") : "";
      return el("th", { scope: "col", "data-key": k, class: k === "name" || k === "cls" ? "" : "num", title: k === "name" ? "Program order" : `Sort by ${label.toLowerCase()}`, onclick: () => this.#sortBy(k) }, label + mark);
    }));
    const body = el("tbody");
    const flat = key !== "order";
    for (const row of rows) {
      const flops = row.flops === undefined ? "" : row.flops === null ? "uncounted"
        : `${row.estimate ? "~" : ""}${formatFlops(row.flops)}${row.perBlock ? ` (${formatFlops(row.perBlock.flops)}/block)` : ""}`;
      const cells = [
        indent(el("td", { class: "cost-name", title: row.name },
          (row.open ? "▾ " : "") + row.name + (row.count ? ` ×${row.count}` : "") + (row.template ? " (per iteration)" : row.perRun ? ` (${row.perRun})` : "")), flat ? 0 : row.depth),
        el("td", { class: "cost-cls" }, row.cls),
        el("td", { class: "num" }, row.params === null || row.params === undefined ? "" : formatCount(row.params)),
        el("td", { class: "num", title: row.uncounted ? `${grouped(row.uncounted)} op(s) inside no rule could count: not in this figure` : kindsText(row.kinds) },
          flops + (row.uncounted && row.flops !== null ? ` +${grouped(row.uncounted)}?` : "")),
        el("td", { class: "num" }, row.bytes === undefined ? "" : formatBytes(row.bytes)),
        el("td", { class: "num", title: row.perRun && row.share !== null ? (row.perRun === "per shard" ? "its FLOPs on one shard × the shards that run it, of the program's global FLOPs" : "its FLOPs on one device × the devices that run it, of the program's global FLOPs") : "" },
          row.share === null ? "" : `${(100 * row.share).toFixed(row.share < 0.001 ? 3 : 1)} %`),
      ];
      if (this.times) cells.push(el("td", { class: "num" }, row.time === null ? "" : formatTime(row.time)));
      const tr = el("tr", { "data-key": row.key, class: row.key === this.store.selected ? "selected" : "", onclick: () => this.focus(row.key) }, ...cells);
      body.append(tr);
    }
    this.table.append(el("thead", {}, head), body);
  }

  /** @param {ColumnKey} key */
  #sortBy(key) {
    if (key === "name") this.sort = { key: "order", dir: -1 };
    else if (this.sort.key === key) this.sort = { key, dir: -this.sort.dir };
    else this.sort = { key, dir: key === "cls" ? 1 : -1 };
    this.#renderTable();
  }

  /** @param {string | null} key */
  #markSelected(key) {
    if (!this.isOpen) return;
    const trs = /** @type {NodeListOf<HTMLTableRowElement>} */ (this.table.querySelectorAll("tr[data-key]"));
    for (const tr of trs) tr.classList.toggle("selected", tr.dataset.key === key);
  }

  #fillDevices() {
    const sel = this.deviceSelect;
    while (sel.options.length > 1) sel.remove(1);
    const s = this.summary;
    for (const d of (s && s.available && s.devices) || []) sel.append(el("option", { value: d.name, title: d.note || "" }, `Est. time on ${d.label}`));
    sel.value = this.device;
  }

  // eslint-disable-next-line complexity -- the totals' lines, each only when the capture has it
  #renderTotals() {
    const s = this.summary;
    clear(this.totals);
    clear(this.footer);
    if (!s) return;
    if (!s.available) {
      this.totals.append(el("p", { class: "muted" }, s.error ? `Could not read the costs: ${s.error}` : "This capture holds no costs (it was made before TensorViz counted them): capture it again."));
      return;
    }
    const p = s.params || {};
    const facts = [
      s.flops_per_rank !== undefined
        ? ["FLOPs", `${formatFlops(s.flops_per_rank)} per rank (recorded: ${formatFlops(s.flops)}, global for DTensor ops, per rank for the others)`]
        : ["FLOPs", `${s.estimate ? "~" : ""}${formatFlops(s.flops)}${s.flops_scope ? ` ${s.flops_scope}` : ""}`],
      ["Bytes moved", `${formatBytes(s.bytes_read + s.bytes_written)} (read ${formatBytes(s.bytes_read)}, written ${formatBytes(s.bytes_written)})`],
      ["Parameters", `${formatCount(p.count || 0)} · ${formatBytes(p.bytes || 0)}`],
      ["Activations", `${formatBytes(s.activations)} · peak live ${formatBytes(s.peak_live)}`],
    ];
    if (s.saved_for_backward !== undefined) facts.push(["Saved for backward", formatBytes(s.saved_for_backward)]);
    const kinds = kindsText(s.flops_by_kind || null);
    if (kinds) facts.splice(1, 0, ["FLOPs by kind", kinds]);
    const plan = s.memory_plan;
    if (plan) facts.push(["Memory needed", memoryText(plan)]);
    if (this.times && this.device) {
      const d = (s.devices || []).find((x) => x.name === this.device);
      facts.push([`Est. time on ${d ? d.label : this.device}`, `${formatTime(this.times.total)} (estimated, not measured)`]);
      const memory = d ? d.memory : undefined;
      if (plan && memory) {
        const split = plan.per_device;  // a mesh: what one of its devices holds
        const label = `${split ? `each of ${split.devices} × ` : ""}${d ? d.label : this.device}`;
        facts.push(["Fits?", fitText(split ? split.peak : plan.peak, memory, label)]);
      }
    }
    this.totals.append(el("dl", { class: "facts" }, ...facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])));
    const unc = s.uncounted_ops || [];
    if (unc.length) {
      this.footer.append(el("div", { class: "cost-uncounted" }, el("strong", {}, "Uncounted (not in any figure): "),
        ...unc.map((u, i) => el("span", { title: u.reason }, `${i ? ", " : ""}${u.op} ×${grouped(u.count + u.in_bodies)}`))));
    } else {
      this.footer.append(el("div", { class: "cost-uncounted ok" }, "Every op was counted by a rule."));
    }
    const notes = s.notes || {};
    const words = [notes.flops, notes.bytes, this.device ? s.estimate_note : null].filter(Boolean);
    this.footer.append(el("div", { class: "cost-notes" }, words.join(". ") + "."));
    const differs = /** @type {Record<string, string> | undefined} */ (/** @type {unknown} */ (notes["differs from FlopCounterMode"]));
    if (differs && typeof differs === "object") {
      this.footer.append(el("div", { class: "cost-notes cost-differs" }, "Differs from FlopCounterMode: ",
        ...Object.entries(differs).map(([rule, why], i) => el("span", { title: String(why) }, `${i ? "; " : ""}${rule}`))));
    }
  }

  // For the hooks: the rows as drawn.
  rowsShown() {
    return this.rows.map((r) => ({ ...r }));
  }
}

/**
 * "10 MiB at the peak of the training step: parameters 2 MiB, gradients 2 MiB, …".
 * @param {{kind: string, peak: number, parameters: number, gradients: number, optimizer_state: number, saved_for_backward: number, estimate: boolean}} plan
 */
function memoryText(plan) {
  const parts = [`parameters ${formatBytes(plan.parameters)}`];
  if (plan.gradients) parts.push(`gradients ${formatBytes(plan.gradients)}`);
  if (plan.optimizer_state) parts.push(`optimizer state ${formatBytes(plan.optimizer_state)}`);
  if (plan.saved_for_backward) parts.push(`saved for backward ${formatBytes(plan.saved_for_backward)}`);
  return `${formatBytes(plan.peak)} at the peak of the ${plan.kind}${plan.estimate ? " (an estimate)" : ""}: ${parts.join(", ")}`;
}

/**
 * "fits on NVIDIA H100 SXM (80 GiB): 10 MiB, 80 GiB to spare" or "does not fit …: … over".
 * @param {number} need
 * @param {number} memory
 * @param {string} label
 */
function fitText(need, memory, label) {
  const head = `${label} (${formatBytes(memory)})`;
  return need <= memory
    ? `fits on ${head}: needs ${formatBytes(need)}, ${formatBytes(memory - need)} to spare`
    : `does not fit on ${head}: needs ${formatBytes(need)}, ${formatBytes(need - memory)} over`;
}

/**
 * "matmul 1.2 GFLOPs (80%), pointwise …": FLOPs by kind, largest first ("" without a split).
 * @param {Record<string, number> | null} kinds
 */
function kindsText(kinds) {
  if (!kinds) return "";
  const all = Object.values(kinds).reduce((a, b) => a + Number(b), 0);
  if (!(all > 0)) return "";
  return Object.entries(kinds).sort((a, b) => Number(b[1]) - Number(a[1]))
    .map(([k, v]) => `${k} ${formatFlops(Number(v))} (${(100 * Number(v) / all).toFixed(1)}%)`).join(", ");
}

/**
 * @param {HTMLElement} td
 * @param {number} depth
 */
function indent(td, depth) {
  td.style.paddingLeft = `${6 + 12 * depth}px`;
  return td;
}

/** @param {CostSceneItem} it */
function rowName(it) {
  const item = it.item || {};
  if (it.type === "stack") return String(item.label || it.key);
  if (it.type === "node") return opTitle(item) || it.key;
  return String(item.path || item.label || it.key);
}

/**
 * What the heat map colours an item by, or null (no figure: uncoloured).
 * @param {CostItem | undefined} item
 * @param {string} metric  a HEAT_METRICS key
 * @param {number} total  the program's FLOPs
 * @returns {number | null}
 */
function metricValue(item, metric, total) {
  if (!item) return null;
  if (metric === "params") {
    const p = item.type === "stack" ? item.stack_params : item.params;
    return p ? Number(p.count) || 0 : null;
  }
  const cost = item.cost;
  if (!cost) return null;
  if (metric === "bytes") return Number(cost.bytes) || 0;
  if (cost.flops === null || cost.flops === undefined) return null;
  if (metric === "share") return shareOf(cost, total);
  return Number(cost.flops);
}

/**
 * An item's share of the program's FLOPs (`total`: its global FLOPs, or a split Torch
 * program's per rank), or null: no figure, or one iteration of an unexecuted body (it says
 * nothing of how often it ran). A shard_map body's figures are one device's: every device
 * runs it, so its share is its FLOPs × its devices (its global figure, as its boundary
 * node's: a shard_map is its body × its devices); a partial-manual one's (scope "per shard")
 * are one shard's of its manual axes: its FLOPs × its shards; null when the count is not known.
 * @param {ItemCost} cost
 * @param {number} total
 * @returns {number | null}
 */
export function shareOf(cost, total) {
  if (cost.flops === null || cost.flops === undefined || !(total > 0) || cost.template) return null;
  if (cost.scope !== "per device" && cost.scope !== "per shard") return Number(cost.flops) / total;
  const runs = cost.scope === "per shard" ? cost.shards : cost.devices;
  return typeof runs === "number" && runs > 0 ? (Number(cost.flops) * runs) / total : null;
}

/**
 * @param {CostSceneItem} it
 * @param {CostTimes} times
 * @returns {number | null}
 */
function timeOf(it, times) {
  if (it.type === "stack") {
    let t = 0;
    for (const k of (it.item && it.item.members) || []) t += Number(times.groups[k] ?? times.nodes[k] ?? 0);
    return t;
  }
  const t = it.key.startsWith("g") ? times.groups[it.key] : times.nodes[it.key];
  return t === undefined ? null : Number(t);
}

function heatRamp() {
  const css = getComputedStyle(document.documentElement);
  const out = [];
  for (let i = 0; i < STEPS; i++) out.push(css.getPropertyValue(`--heat-${i}`).trim() || "#f59a57");
  return out;
}
