// The inspector panel: everything the capture retains about the selected node, group,
// chunk or value, fetched on demand (api/node, api/group, api/value), and the capture
// summary. It follows the store's selection: an item selected opens it on that item,
// nothing selected closes it.

import { el, clear, jsonView } from "../dom.js";
import { KIND_WORDING, QUIET_ROLES, ROLE_WORDING, formatValue } from "../draw/theme.js";
import { formatBytes, formatStat } from "../format.js";
import { MORE_OUTPUTS, cardOf } from "../model/items.js";
import { Panel } from "./panel.js";

const NOT_MEASURED =
  "not measured: traced program. Storage aliases, activation statistics and output bytes exist only for PyTorch eager captures.";

const GROUP_MEASURED_ROWS = 12;

/**
 * @typedef {import("../api.js").PageItem} PageItem
 * @typedef {ReturnType<typeof import("../model/weights.js").describeState>} WeightsState
 */

/**
 * A source frame (where an op ran, a module was called or its class defined).
 * @typedef {{file: string, line: number, column?: number, function?: string, library?: boolean, label?: string}} Frame
 */

/**
 * Statistics an eager run measured of a value.
 * @typedef {Record<string, number | null | undefined>} Stats
 */

/**
 * What an eager run measured of a value (Torch captures: `measured`).
 * @typedef {object} Measured
 * @property {Stats} [stats]
 * @property {Stats} [statistics]
 * @property {number | null} [bytes]
 * @property {string} [device]
 * @property {number[]} [strides]
 * @property {number} [storage_offset]
 * @property {string} [layout]
 * @property {number | string | null} [storage]
 * @property {number[]} [aliases]
 * @property {number} [aliases_total]
 * @property {string} [param]  the parameter it is (the tracer's label)
 */

/**
 * A value summary (viewer/API.md): its id, name and role, what formatValue reads (label,
 * dtype, shape), where it comes from and where it goes, and what was measured of it.
 * @typedef {object} ValueSummary
 * @property {number} id
 * @property {string} [name]
 * @property {string} [role]
 * @property {string} [dtype]
 * @property {number[]} [shape]
 * @property {string} [label]
 * @property {number | null} [producer]  the node that made it
 * @property {string} [producer_op]
 * @property {number[]} [uses]  the nodes that read it
 * @property {number} [uses_total]
 * @property {Measured} [measured]
 */

/** @typedef {{id: number, kind: string, name: string}} GroupRef  a group on the way down */

/**
 * `api/node`: an op, where it ran and what it read and wrote.
 * @typedef {object} NodeDetail
 * @property {number} id
 * @property {string} op
 * @property {boolean} [opaque]
 * @property {number | null} [template]  inside an unexecuted body of this node
 * @property {{key: string, name: string, role: string, iterations?: number | null, selected?: string, closed?: string}[]} [bodies]
 * @property {Frame | null} [frame]
 * @property {GroupRef[]} [group_path]
 * @property {{position: number, value?: ValueSummary | null, literal?: unknown}[]} [inputs]
 * @property {ValueSummary[]} [outputs]
 * @property {Record<string, unknown>} [params]
 */

/**
 * `api/group`: a module, scope or function call.
 * @typedef {object} GroupDetail
 * @property {number} id
 * @property {string} kind
 * @property {string} [name]
 * @property {string} [honest]
 * @property {Frame | null} [frame]
 * @property {Frame | null} [class_frame]
 * @property {GroupRef[]} [parent_path]
 * @property {GroupRef[]} [path]
 * @property {Record<string, unknown>} [counts]
 * @property {ValueSummary[]} [inputs]
 * @property {number} [inputs_total]
 * @property {ValueSummary[]} [outputs]
 * @property {number} [outputs_total]
 * @property {Record<string, unknown>} [attrs]
 */

/**
 * `api/value`: the value (itself, or under `value`), its data-dependent sizes, producer and uses.
 * @typedef {Omit<ValueSummary, "producer" | "uses"> & {value?: ValueSummary, symbols?: {name: string, text: string}[],
 *   producer?: number | {id: number} | null, uses?: (number | {id: number, op?: string, positions?: number[]})[]}} ValueDetail
 */

/** @typedef {{file: string, start_line?: number, lines?: string[]}} Source  the lines around a frame */

/**
 * `api/capture` as the inspector reads it (viewer/API.md; `meta` holds what the worker recorded).
 * @typedef {object} CaptureInfo
 * @property {string} [title]
 * @property {string} [framework]
 * @property {string} [framework_version]
 * @property {string} [backend]
 * @property {boolean} [measured]
 * @property {{scope?: string, status?: string}} [coverage]
 * @property {Record<string, unknown>} [counts]
 * @property {{model?: string, device?: string, seed?: number, init?: {factory?: string}}} [recipe]
 * @property {Record<string, any>} [meta]
 */

/**
 * What the inspector reads of the store (model/store.js).
 * @typedef {import("./panel.js").PanelStore & {itemOf: (key: string) => {item?: PageItem} | null | undefined}} InspectorStore
 */

/** @typedef {{key: string, item: PageItem}} ModuleRef  the one-op module a card stands for */

/** @extends {Panel<InspectorStore>} */
export class Inspector extends Panel {
  // onJump(key): select and show an item; onReveal(frame, target): go to source;
  // onToggle(key): open or close a container.
  /**
   * @param {InspectorStore} store
   * @param {HTMLElement} root
   * @param {{api: import("../api.js").Api, onJump: (key: string) => void, onReveal: (frame: Frame, target: string | null) => void,
   *   onToggle: (key: string) => void}} parts
   */
  constructor(store, root, { api, onJump, onReveal, onToggle }) {
    super(store, "inspector", root, { side: true });
    this.api = api;
    this.onJump = onJump;
    this.onReveal = onReveal;
    this.onToggle = onToggle;
    /** @type {CaptureInfo | null} */
    this.capture = null;
    this.body = /** @type {HTMLElement} */ (root.querySelector("#insp-body"));
    this.kicker = /** @type {HTMLElement} */ (root.querySelector("#insp-kicker"));
    this.title = /** @type {HTMLElement} */ (root.querySelector("#insp-title"));
    this.seq = 0;
    /** @type {string | null} */
    this.current = null;
    /** @type {HTMLElement} */ (root.querySelector("#insp-close")).addEventListener("click", () => this.close());
    store.on("capture", (/** @type {{capture: CaptureInfo | null}} */ { capture }) => (this.capture = capture));
    store.on("selection", (/** @type {{key?: string | null, value?: number | null}} */ { key, value }) => {
      if (value !== null && value !== undefined) this.show(`w:${value}`, null);
      else if (key) this.show(key, store.itemOf(key)?.item || null);
      else this.close();
    });
  }

  // Closed: a detail still loading must not open it again.
  hidden() {
    ++this.seq;
    this.current = null;
  }

  /**
   * @param {string} kicker
   * @param {string} title
   */
  head(kicker, title) {
    this.kicker.textContent = kicker;
    this.title.textContent = title;
    clear(this.body);
  }

  // asModule: a one-op module's own details (its card shows its op's view first).
  /**
   * @param {string} key
   * @param {PageItem | null} item
   * @param {{asModule?: boolean}} [options]
   */
  // eslint-disable-next-line complexity -- the inspector's dispatch on what is selected
  async show(key, item, { asModule = false } = {}) {
    const seq = ++this.seq;
    this.current = key;
    this.open();
    const guard = () => seq === this.seq;
    try {
      if (key.startsWith("g") && item && item.type === "group" && cardOf(item) === "op" && item.single && !asModule) {
        // A module that ran one op is drawn as that op: its op's view, the module named on it.
        const single = item.single;
        if (single.type === "node") {
          const d = await this.api.node(Number(single.id));
          if (guard()) this.showNode(d, { key, item });
        } else {
          const d = await this.api.group(Number(single.id));
          if (guard()) this.showGroup(d, key, { key, item });
        }
      } else if (key.startsWith("n")) {
        const d = await this.api.node(Number(key.slice(1)));
        if (guard()) this.showNode(d);
      } else if (key.startsWith("g")) {
        const d = await this.api.group(Number(key.slice(1)));
        if (guard()) this.showGroup(d, key);
      } else if (key.startsWith("c")) {
        this.showChunk(key, item || {});
      } else if (key.startsWith("s")) {
        // A stack of identical blocks: its first member stands for all of them.
        const members = item && /** @type {{members?: string[]}} */ (item).members;
        const first = (members && members[0]) || key.slice(1);
        const d = await this.api.group(Number(first.slice(1)));
        if (guard()) this.showGroup(d, first);
      } else if (key.startsWith(MORE_OUTPUTS)) {
        this.showOutputs(/** @type {{more?: ValueSummary[]}} */ (/** @type {unknown} */ (item || {})).more || []);
      } else if (key.startsWith("in:") || key.startsWith("out:")) {
        const d = await this.api.value(Number(key.split(":")[1]));
        if (guard()) this.showValue(d, key.startsWith("in:") ? "group input" : "group output");
      } else if (key.startsWith("w:")) {
        // A weight line inside an op's card: "w:V".
        const d = await this.api.value(Number(key.slice(2)));
        if (guard()) this.showValue(d, "weight");
      }
    } catch (err) {
      if (!guard()) return;
      this.head("error", key);
      this.body.append(el("p", { class: "note" }, `Could not load details: ${/** @type {Error} */ (err).message || err}`));
    }
  }

  // ---------------------------------------------------------------- node

  // `module`: {key, item} of the one-op module whose card this op is.
  /**
   * @param {NodeDetail} d
   * @param {ModuleRef | null} [module]
   */
  // eslint-disable-next-line complexity -- an op's rows, one per fact, each only when present
  showNode(d, module = null) {
    this.head(`node · n${d.id}`, d.op);
    this.root.dataset.kind = "node";
    if (module) this.moduleLine(module);
    const tags = el("p", {}, el("span", { class: "pill" }, `n${d.id}`), " ");
    if (d.opaque) tags.append(el("span", { class: "pill opaque", title: "An unexpanded subprogram boundary: its body was not traced into the graph" }, "opaque"), " ");
    this.body.append(tags);
    if (d.template !== undefined && d.template !== null) {
      this.body.append(el("p", { class: "note", "data-note": "template" }, `Inside an unexecuted body of n${d.template}: one iteration (or branch) as traced. Nothing says that this op ran.`));
    }
    if (d.opaque && d.bodies && d.bodies.length) {
      this.body.append(el("p", { class: "note", "data-note": "bodies" }, "Control-flow boundary: opaque as a whole (output shapes retained). Its bodies are templates, one iteration as traced: nothing says that a branch or an iteration ran."));
      this.section("Bodies (not executed)");
      const list = el("ul", { class: "rows", "data-section": "bodies" });
      for (const b of d.bodies) {
        const bits = [b.role];
        if (typeof b.iterations === "number") bits.push(`${b.iterations.toLocaleString("en-US")} iterations (static)`);
        else if (b.iterations === null) bits.push("trip count decided at run time");
        if (b.selected) bits.push(b.selected);
        if (b.closed) bits.push(b.closed);
        list.append(el("li", {}, el("code", { "data-body": b.key }, b.name), " ", el("span", { class: "muted" }, bits.join(" · "))));
      }
      this.body.append(list);
      this.body.append(el("div", { class: "actions" }, el("button", { type: "button", "data-action": "open-bodies", onclick: () => this.onToggle("n" + d.id) }, "Open bodies / close")));
    } else if (d.opaque) {
      this.body.append(el("p", { class: "note" }, "Opaque boundary: the subprogram inside was not expanded. Its output shapes are retained; nothing inside it is reported as executed."));
    }
    // Where it came from first; the values it read and wrote below.
    this.frame(d.frame, this.current || `n${d.id}`); // the key shown: a one-op module's card is its op
    if (d.group_path && d.group_path.length) {
      this.section("Scope");
      const crumbs = el("div", { class: "crumbs" });
      d.group_path.forEach((g, i) => {
        if (i) crumbs.append(el("span", { class: "muted" }, " › "));
        crumbs.append(el("button", { type: "button", class: "link-button", title: KIND_WORDING[g.kind] || g.kind, onclick: () => this.onJump("g" + g.id) }, `${g.kind} ${g.name}`));
      });
      this.body.append(crumbs);
    }

    this.section("Inputs");
    const ins = el("ul", { class: "rows", "data-section": "inputs" });
    for (const op of d.inputs || []) {
      const li = el("li", {}, el("span", { class: "pos", title: "argument position" }, `#${op.position}`));
      if (op.value) {
        const v = op.value;
        li.append(el("span", { class: "shape" }, formatValue(v)), " ", el("span", { class: "muted" }, `%${v.id}`));
        const right = el("span", { class: "uses" });
        if (v.producer !== null && v.producer !== undefined) right.append(this.nodeLink(v.producer, `from ${v.producer_op ? v.producer_op + " " : ""}`));
        else if (v.name) right.append(valueName(v));
        else right.append(el("span", { class: "muted" }, "program input"));
        li.append(right);
      } else {
        li.append(el("span", { class: "muted" }, "literal"), " ", el("code", {}, JSON.stringify(op.literal)));
      }
      ins.append(li);
    }
    if (!(d.inputs || []).length) ins.append(el("li", { class: "muted" }, "no inputs"));
    this.body.append(ins);

    this.section("Outputs");
    const outs = el("ul", { class: "rows", "data-section": "outputs" });
    (d.outputs || []).forEach((v, i) => {
      const li = el("li", {}, el("span", { class: "pos", title: "output index" }, `${i}`), el("span", { class: "shape" }, formatValue(v)), " ", el("span", { class: "muted" }, `%${v.id}`));
      const uses = v.uses || [];
      const right = el("span", { class: "uses", "data-uses": String(uses.length) });
      if (!uses.length) right.append(el("span", { class: "muted" }, "unused"));
      else {
        const total = v.uses_total ?? uses.length;
        if (total > 1) right.append(el("span", { class: "muted" }, `used ${total}×: `));
        for (const u of uses.slice(0, 24)) right.append(this.nodeLink(u));
        if (uses.length > 24) right.append(el("span", { class: "muted" }, `+${uses.length - 24}`));
      }
      li.append(right);
      outs.append(li);
    });
    this.body.append(outs);

    this.section("Params");
    const params = d.params || {};
    if (Object.keys(params).length) this.body.append(jsonView(params));
    else this.body.append(el("p", { class: "muted" }, "No params retained."));

    this.measured([
      ...(d.inputs || []).filter((o) => o.value).map((o) => ({ label: `in #${o.position}`, value: o.value })),
      ...(d.outputs || []).map((v, i) => ({ label: `out ${i}`, value: v })),
    ]);
  }

  // The module(s) a one-op card stands for, outermost first, each opening its own
  // details (its call site, class, counts) in place of the op's.
  /** @param {ModuleRef} module */
  moduleLine({ key, item }) {
    /** @type {{key: string, title?: string, name?: string}[]} */
    const ws = item.wrappers && item.wrappers.length ? item.wrappers : [{ key, title: item.title || item.label }];
    const line = el("p", { class: "module-line", "data-section": "module" }, el("span", { class: "muted" }, ws.length > 1 ? "the op of modules " : "the op of module "));
    ws.forEach((w, i) => {
      if (i) line.append(el("span", { class: "muted" }, " › "));
      line.append(el("button", { type: "button", class: "link-button", "data-module": w.key, title: "Show this module's details",
        onclick: () => this.show(w.key, { ...item, key: w.key }, { asModule: true }) }, String(w.title || w.name || w.key)));
    });
    this.body.append(line);
  }

  // A value summary's row in an inputs or outputs list.
  /**
   * @param {ValueSummary} v
   * @param {number} i
   */
  valueRow(v, i) {
    const li = el("li", {}, el("span", { class: "pos" }, String(i)), el("span", { class: "shape" }, formatValue(v)), " ", el("span", { class: "muted" }, `%${v.id}`));
    const right = el("span", { class: "uses" });
    if (v.name) right.append(valueName(v));
    li.append(right);
    return li;
  }

  /**
   * @param {number} id
   * @param {string} [prefix]
   */
  nodeLink(id, prefix = "") {
    return el("button", { type: "button", class: "link-button", "data-node": String(id), onclick: () => this.onJump("n" + id) }, `${prefix}n${id}`);
  }

  /** @param {string} title */
  section(title) {
    this.body.append(el("h3", {}, title));
  }

  // What an eager run measured of each value (entries: {label, value}): a small table of
  // statistics to 4 significant digits (full precision in each cell's title), NaN and Inf
  // counts and bytes, and under each value where it lived (device, strides, storage, aliases).
  /** @param {{label: string, value: {id: number, name?: string, measured?: Measured} | null | undefined}[]} entries */
  // eslint-disable-next-line complexity -- a measured value's rows, one per statistic, each only when present
  measured(entries) {
    this.section("Measured");
    const box = el("div", { "data-section": "measured" });
    const isMeasured = this.capture && this.capture.measured;
    const rows = entries.filter((e) => e.value && e.value.measured);
    if (!isMeasured || !rows.length) {
      // A traced program (any framework's, JAX's among them) measures nothing at all.
      const traced = !this.capture || (this.capture.coverage && this.capture.coverage.scope === "traced_program");
      box.append(el("p", { class: "note" }, traced ? NOT_MEASURED : "not measured for these values."));
      this.body.append(box);
      return;
    }
    const cols = ["min", "max", "mean", "std"];
    const table = el("table", { class: "stats", "data-table": "statistics" },
      el("caption", {}, "statistics"),
      el("thead", {}, el("tr", {}, ...cols.map((c) => el("th", { scope: "col" }, c)), el("th", { scope: "col", title: "elements that are NaN / ±Inf" }, "NaN/Inf"), el("th", { scope: "col" }, "bytes"))));
    const tbody = el("tbody");
    // The graph first: a parameter's statistics are measured after the graph was sent
    // (meta.stats_pending); until the capture that has them replaces this one, "measuring…".
    const meta = /** @type {{stats_pending?: number, stats_missing?: string}} */ ((this.capture && this.capture.meta) || {});
    const measuring = Number(meta.stats_pending) > 0;
    for (const { label, value } of rows) {
      const v = /** @type {{id: number, name?: string, measured?: Measured}} */ (value);
      const m = /** @type {Measured} */ (v.measured);
      const s = m.stats || m.statistics || null;
      tbody.append(el("tr", { class: "stats-value", "data-value": String(v.id) },
        el("th", { colspan: String(cols.length + 2), scope: "rowgroup" }, el("span", { class: "stats-label" }, label), ` %${v.id} `, v.name ? el("code", {}, v.name) : null, " ", el("span", { class: "muted" }, formatValue(v)))));
      const waiting = !s && m.param !== undefined && (measuring || Boolean(meta.stats_missing));
      const cells = waiting
        ? [el("td", { "data-stat": "measuring", colspan: String(cols.length), class: "muted",
            title: measuring ? "a parameter's statistics are measured after the graph is shown" : String(meta.stats_missing) },
          measuring ? "measuring…" : "not measured")]
        : cols.map((c) => {
          const x = s ? s[c] : undefined;
          return el("td", { "data-stat": c, title: x === undefined || x === null ? "" : String(x) }, s ? formatStat(x) : "—");
        });
      const bad = s && (Number(s.nan) > 0 || Number(s.inf) > 0);
      cells.push(el("td", { "data-stat": "nonfinite", class: bad ? "warn" : null }, s && s.nan !== undefined ? `${s.nan} / ${s.inf}` : "—"));
      cells.push(el("td", { "data-stat": "bytes", title: m.bytes !== undefined ? formatBytes(/** @type {number} */ (m.bytes)) : "" }, m.bytes !== undefined && m.bytes !== null ? String(m.bytes) : "—"));
      tbody.append(el("tr", { class: "stats-numbers" }, ...cells));
      /** @type {string[]} */
      const where = [];
      if (m.device) where.push(String(m.device));
      if (m.strides) where.push(`strides [${m.strides.join(", ")}]`);
      if (m.storage_offset) where.push(`offset ${m.storage_offset}`);
      if (m.layout) where.push(String(m.layout));
      if (m.storage !== undefined && m.storage !== null) where.push(`storage ${m.storage}`);
      if (m.aliases && m.aliases.length) {
        const more = m.aliases_total && m.aliases_total > m.aliases.length ? ` +${m.aliases_total - m.aliases.length}` : "";
        where.push(`aliases ${m.aliases.map((a) => "%" + a).join(" ")}${more}`);
      }
      if (where.length) tbody.append(el("tr", { class: "stats-where" }, el("td", { colspan: String(cols.length + 2) }, where.join(" · "))));
    }
    table.append(tbody);
    box.append(table);
    this.body.append(box);
  }

  /**
   * @param {Frame | null | undefined} frame
   * @param {string} target  the key it is shown for
   */
  frame(frame, target) {
    this.section("Source");
    if (!frame) {
      this.body.append(el("p", { class: "muted" }, "No source frame recorded."));
      return;
    }
    this.body.append(this.frameButton(frame, target), el("div", { class: "source-view", id: "source-view" }));
  }

  // A go-to-source link. A library frame (installed code, absolute path) reads as its
  // path below site-packages with "(library)"; the full path is in its title.
  /**
   * @param {Frame} frame
   * @param {string | null} target
   */
  frameButton(frame, target) {
    const where = frame.library
      ? (frame.label || `${frame.file}:${frame.line} (library)`)
      : `${frame.file}:${frame.line}${frame.column ? ":" + frame.column : ""}`;
    /** @type {Record<string, any>} */
    const attrs = { type: "button", class: "frame-link" + (frame.library ? " library" : ""), "data-reveal": "1",
      title: frame.library ? `Go to source (installed library file ${frame.file})` : "Go to source", onclick: () => this.onReveal(frame, target) };
    if (frame.library) attrs["data-library"] = "1";
    return el("button", attrs, where, el("span", { class: "fn" }, frame.function ? `in ${frame.function}` : ""));
  }

  /**
   * @param {string | null} target  the key it is shown for (null: by itself)
   * @param {Source | null} source
   * @param {string | null} message
   * @param {Frame} [frame]
   */
  showSource(target, source, message, frame) {
    if (target && this.current !== target) return;
    let found = /** @type {HTMLElement | null} */ (this.body.querySelector("#source-view"));
    if (!found) {
      this.open();
      if (!target) this.head("source", source ? source.file : "source");
      found = /** @type {HTMLElement} */ (el("div", { class: "source-view", id: "source-view" }));
      this.body.append(found);
    }
    const box = found;
    clear(box);
    if (message) box.append(el("p", { class: "note" }, message));
    if (!source) return;
    const pre = el("pre", { class: "json source", "data-file": source.file });
    const start = source.start_line || 1;
    (source.lines || []).forEach((line, i) => {
      const n = start + i;
      pre.append(el("span", { class: "line" + (frame && n === frame.line ? " current" : "") }, el("span", { class: "ln" }, String(n)), line));
    });
    box.append(el("div", { class: "muted" }, source.file), pre);
    const cur = pre.querySelector(".current");
    if (cur) cur.scrollIntoView({ block: "center" });
  }

  // ---------------------------------------------------------------- the capture itself

  // What this capture is, and where its parameters came from (`weights`: describeState).
  /**
   * @param {CaptureInfo} c
   * @param {WeightsState | null} [weights]
   */
  // eslint-disable-next-line complexity -- the capture's rows, one per fact, each only when present
  showCapture(c, weights) {
    ++this.seq; // a node still loading must not replace this
    this.current = "capture";
    this.open();
    this.head("capture", c.title || "capture");
    this.root.dataset.kind = "capture";
    /** @type {NonNullable<CaptureInfo["recipe"]>} */
    const recipe = c.recipe || {};
    /** @type {NonNullable<CaptureInfo["coverage"]>} */
    const cov = c.coverage || {};
    /** @type {Record<string, unknown>} */
    const counts = c.counts || {};
    const facts = el("dl", { class: "facts", "data-section": "capture-facts" });
    /** @param {string} k @param {unknown} v */
    const add = (k, v) => v !== undefined && v !== null && v !== "" && facts.append(el("dt", {}, k), el("dd", {}, String(v)));
    add("model", recipe.model);
    add("framework", [c.framework, c.framework_version].filter(Boolean).join(" "));
    add("backend", c.backend);
    add("coverage", [cov.scope && cov.scope.replace(/_/g, " "), cov.status].filter(Boolean).join(", "));
    add("device", recipe.device || (c.meta && c.meta.device));
    add("seed", recipe.seed);
    if (recipe.init && recipe.init.factory) add("init factory", recipe.init.factory);
    /** @type {Record<string, any>} */
    const meta = c.meta || {};
    // Torch saved files: what the weights and the batch were loaded from.
    if (typeof meta.checkpoint === "string") add("checkpoint", meta.checkpoint + (meta.checkpoint_strict === false ? " (strict = false)" : ""));
    if (typeof meta.fixture === "string") add("fixture", meta.fixture);
    if (counts.nodes !== undefined) add("nodes", Number(counts.nodes).toLocaleString("en-US"));
    const tb = c.meta && c.meta.bodies;
    const num = (/** @type {unknown} */ x) => Number(x || 0).toLocaleString("en-US");
    if (tb && typeof tb === "object" && (counts.template_bodies || tb.closed)) {
      // Unexecuted control-flow bodies: templates, counted apart from the executed program
      // (api/capture's counts: a shard_map body is none, unless it lies in one).
      const parts = [`${num(counts.template_bodies)} as templates (${num(counts.template_nodes)} nodes, not executed)`];
      if (tb.closed) parts.push(`${num(tb.closed)} left closed (${Object.keys(tb.closed_reasons || {}).join(", ")})`);
      add("control-flow bodies", parts.join("; "));
    }
    // shard_map bodies: executed, once on every device of their mesh (their figures per device).
    if (counts.per_device_bodies) add("shard_map bodies", `${num(counts.per_device_bodies)} (${num(counts.per_device_nodes)} nodes, run per device)`);
    this.body.append(facts);
    if (weights) {
      this.section("Parameters");
      const box = el("div", { "data-section": "state" });
      box.append(el("p", {}, el("span", { class: "pill kind", title: "meta.state, as the capture worker recorded it" }, weights.label)));
      box.append(el("p", { class: `state-headline ${weights.origin}` }, weights.headline));
      if (weights.note) box.append(el("p", { class: "note", "data-note": "state_note" }, weights.note));
      // A checkpoint loaded with strict = false: the keys that did not match, by name.
      /** @type {["missing" | "unexpected", string][]} */
      const lists = [["missing", "Missing keys (kept at initialization)"], ["unexpected", "Unexpected keys (ignored)"]];
      for (const [which, title] of lists) {
        /** @type {string[]} */
        const names = (weights.keys && weights.keys[which]) || [];
        if (!names.length) continue;
        box.append(el("p", { class: "muted" }, `${title}: ${names.length}`));
        box.append(el("ul", { class: "state-lists", "data-keys": which }, names.map((n) => el("li", {}, n))));
      }
      this.body.append(box);
    }
    // The RNG streams the program draws from, and where each key came from
    // (meta.rng_streams: bound by the factory, derived from the seed, given as input…).
    const streams = Array.isArray(meta.rng_streams) ? meta.rng_streams : [];
    if (streams.length) {
      this.section("Random streams");
      const list = el("dl", { class: "facts", "data-section": "rng-streams" });
      for (const s of streams) {
        const note = String(s.note || s.origin || "");
        const where = s.where && !note.includes(s.where) ? ` (${s.where})` : "";
        list.append(el("dt", { "data-origin": String(s.origin || "") }, String(s.name)), el("dd", {}, note + where));
      }
      this.body.append(list);
    }
  }

  // ---------------------------------------------------------------- group / chunk / value

  // `module`: {key, item} when this group is the function call a one-op module's card stands for.
  /**
   * @param {GroupDetail} d
   * @param {string} key
   * @param {ModuleRef | null} [module]
   */
  // eslint-disable-next-line complexity -- a group's rows, one per fact, each only when present
  showGroup(d, key, module = null) {
    this.head(`${d.kind === "function" ? "function" : "group"} · g${d.id}`, d.name || `g${d.id}`);
    this.root.dataset.kind = "group";
    if (module) this.moduleLine(module);
    const wording = d.honest || KIND_WORDING[d.kind] || d.kind;
    this.body.append(el("p", {}, el("span", { class: "pill kind" }, d.kind), " ", el("span", { class: "muted", "data-honest": "1" }, wording)));
    // Where it came from first, as for an op.
    if (d.frame || d.class_frame) {
      this.section("Source");
      const target = this.current;
      const rows = el("dl", { class: "facts", "data-section": "group-frames" });
      if (d.frame) rows.append(el("dt", {}, "called at"), el("dd", {}, this.frameButton(d.frame, target)));
      if (d.class_frame) rows.append(el("dt", {}, "class defined at"), el("dd", {}, this.frameButton(d.class_frame, target)));
      this.body.append(rows, el("div", { class: "source-view", id: "source-view" }));
    }
    const facts = el("dl", { class: "facts" });
    /** @param {string} k @param {unknown} v */
    const add = (k, v) => v !== undefined && v !== null && v !== "" && facts.append(el("dt", {}, k), el("dd", {}, typeof v === "object" ? JSON.stringify(v) : String(v)));
    const path = (d.parent_path || d.path || []).filter((g) => g.id !== d.id);
    if (path.length) add("inside", path.map((g) => `${g.kind} ${g.name}`).join(" › "));
    const counts = d.counts || {};
    for (const [k, v] of Object.entries(counts)) add(k, typeof v === "number" ? v.toLocaleString("en-US") : v);
    this.body.append(facts);
    // What enters and leaves it: a function call's operands and results.
    /** @type {[string, ValueSummary[] | undefined, number | undefined, string][]} */
    const sides = [["Inputs", d.inputs, d.inputs_total, "inputs"], ["Outputs", d.outputs, d.outputs_total, "outputs"]];
    for (const [title, list, total, section] of sides) {
      if (!list) continue;
      this.section(title);
      const ul = el("ul", { class: "rows", "data-section": section });
      list.forEach((v, i) => ul.append(this.valueRow(v, i)));
      if (!list.length) ul.append(el("li", { class: "muted" }, `no ${section}`));
      else if (total && total > list.length) ul.append(el("li", { class: "muted" }, `+${(total - list.length).toLocaleString("en-US")} more`));
      this.body.append(ul);
    }
    if (d.attrs && Object.keys(d.attrs).length) {
      this.section("Attributes");
      this.body.append(jsonView(d.attrs));
    }
    if ((d.inputs || d.outputs) && this.capture && this.capture.measured) {
      // A module's boundary can hold dozens of parameters: the first rows, in order.
      this.measured([
        ...(d.inputs || []).map((v, i) => ({ label: `in ${i}`, value: v })),
        ...(d.outputs || []).map((v, i) => ({ label: `out ${i}`, value: v })),
      ].slice(0, GROUP_MEASURED_ROWS));
    }
    this.body.append(el("div", { class: "actions" }, el("button", { type: "button", onclick: () => this.onToggle(key) }, "Expand / collapse")));
  }

  /**
   * @param {string} key
   * @param {Partial<PageItem>} item
   */
  showChunk(key, item) {
    this.head("chunk", item.label || key);
    this.root.dataset.kind = "chunk";
    this.body.append(el("p", { class: "note" }, "A chunk of a large group, in program order. Groups with many direct children are split into chunks so that each layout stays small; it is not a scope of the program."));
    const facts = el("dl", { class: "facts" });
    if (item.child_count !== undefined) facts.append(el("dt", {}, "items"), el("dd", {}, String(item.child_count)));
    if (item.sublabel) facts.append(el("dt", {}, "range"), el("dd", {}, String(item.sublabel)));
    this.body.append(facts);
    this.body.append(el("div", { class: "actions" }, el("button", { type: "button", onclick: () => this.onToggle(key) }, "Expand / collapse")));
  }

  // The outputs a "+N outputs" pill stands for (model/items.js outputPills): name and shape.
  /** @param {ValueSummary[]} list */
  showOutputs(list) {
    this.head("group outputs", `${list.length} more outputs`);
    this.root.dataset.kind = "outputs";
    this.body.append(el("p", { class: "note" }, "Drawn as one pill. Double-click it (or press Enter) to draw each; again to fold them."));
    const rows = el("dl", { class: "facts", "data-section": "more-outputs" });
    for (const v of list) rows.append(el("dt", {}, v.name ? v.name : `%${v.id}`), el("dd", {}, formatValue(v)));
    this.body.append(rows);
  }

  /**
   * @param {ValueDetail} d
   * @param {string} [kicker]
   */
  // eslint-disable-next-line complexity -- a value's rows, one per fact, each only when present
  showValue(d, kicker = "value") {
    const v = /** @type {ValueDetail} */ (d.value || d);
    this.open();
    this.head(`${kicker} · %${v.id}`, v.name ? v.name : formatValue(v));
    this.root.dataset.kind = "value";
    if (v.name) {
      this.body.append(el("p", { "data-section": "value-name" }, el("span", { class: "pill role role-" + v.role, "data-role": String(v.role || "") }, String(v.role || "value")), " ",
        el("span", { class: "muted", "data-role-wording": "1" }, ROLE_WORDING[/** @type {string} */ (v.role)] || "")));
    }
    const facts = el("dl", { class: "facts" });
    if (v.name) facts.append(el("dt", {}, "name"), el("dd", { "data-name": v.name }, el("code", {}, v.name)));
    facts.append(el("dt", {}, "dtype"), el("dd", {}, String(v.dtype)), el("dt", {}, "shape"), el("dd", {}, `[${(v.shape || []).join(", ")}]`));
    // A data-dependent size of an abstract capture (u0): its bounds and the op that made it (server words).
    for (const s of d.symbols || []) facts.append(el("dt", {}, "symbol"), el("dd", { "data-symbol": String(s.name) }, String(s.text)));
    this.body.append(facts);
    this.section("Produced by");
    let producer = d.producer ?? v.producer;
    if (producer && typeof producer === "object") producer = producer.id;
    const outside = v.role ? `no node: a ${(ROLE_WORDING[v.role] || v.role).split(":")[0]} entering from outside` : "program input";
    this.body.append(producer !== null && producer !== undefined ? this.nodeLink(/** @type {number} */ (producer)) : el("span", { class: "muted" }, outside));
    this.section("Used by");
    const uses = d.uses || v.uses || [];
    const row = el("div", { class: "uses", "data-uses": String(uses.length) });
    for (const u of uses.slice(0, 60)) {
      if (u && typeof u === "object") row.append(this.nodeLink(u.id, (u.op ? u.op + " " : "") + (u.positions && u.positions.length ? `#${u.positions.join(",")} ` : "")));
      else row.append(this.nodeLink(/** @type {number} */ (u)));
    }
    if (!uses.length) row.append(el("span", { class: "muted" }, "no uses"));
    this.body.append(row);
    this.measured([{ label: "value", value: v }]);
  }
}

// A named value entering from outside, as a node's operand: `param stem.weight`.
/** @param {ValueSummary} v */
function valueName(v) {
  const quiet = QUIET_ROLES.has(/** @type {string} */ (v.role));
  return el("span", { class: "value-name" + (quiet ? " quiet" : ""), title: ROLE_WORDING[/** @type {string} */ (v.role)] || "", "data-name": v.name },
    el("span", { class: "muted" }, `${v.role || "input"} `), el("code", {}, v.name));
}
