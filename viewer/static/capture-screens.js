// What the page says about the capture on screen: its title, the coverage banner, the
// failure page, the mesh legend and the compiled program's banner, from `api/capture` (viewer/API.md). Moved out of app.js,
// which calls them when the store's capture changes; what they call back in the page comes
// as an argument.

import { $, el, clear, jsonView } from "./dom.js";
import { describeState } from "./model/weights.js";
import { memoryLine } from "./model/viewmodel.js";
import { formatBytes, formatFlops, grouped } from "./format.js";

/** @typedef {import("./panels/banners.js").Banners} Banners */

/** @typedef {import("./panels/inspector.js").Frame} Frame */

/**
 * A capture's failure (`api/capture` `failure`, viewer/API.md): what failed and at which
 * stage, the message (cut by the server to what a person reads) and the frames that raised.
 * @typedef {object} Failure
 * @property {string} [type]
 * @property {string} [message]
 * @property {string} [stage]  "internal": TensorViz's own failure, not the model's
 * @property {{text: string, cut: boolean, lines?: number}} [readable]
 * @property {Frame[]} [frames]
 * @property {{after: number, text: string}[]} [repeated_frames]  deep recursion, in Python's words
 * @property {Record<string, unknown>} [details]
 */

/**
 * The mesh legend of a program split across devices (`api/capture` `mesh_legend`): each
 * mesh's axes, the devices in words, and what one device holds (`per_device_memory`).
 * @typedef {object} MeshLegend
 * @property {{id: number, text: string, devices: number | null}[]} [meshes]
 * @property {string | null} [devices]
 * @property {boolean} [simulated]
 * @property {Record<string, number> | null} [memory]
 */

/**
 * The compiled program in words (`api/capture` `compiled`): status, counts, XLA's figures.
 * @typedef {object} CompiledWords
 * @property {string} [status]  "compiled" | "skipped" | "timeout" | "failed" | "pending" (compiling: the figures follow the graph)
 * @property {string} [reason]
 * @property {number} [seconds]
 * @property {number} [devices]
 * @property {number} [count]
 * @property {number} [attributed]
 * @property {number} [unattributed]
 * @property {string} [kinds]
 * @property {string} [unattributed_kinds]
 * @property {number} [bytes_sent_per_device]
 * @property {{flops?: number}} [cost]
 * @property {{peak?: number}} [memory]
 * @property {number} [limit_seconds]  pending: the most the compile may take
 */

/**
 * `api/capture` as the app reads it (viewer/API.md).
 * @typedef {object} CaptureSummary
 * @property {number} id
 * @property {string} [title]
 * @property {string} [framework]
 * @property {string} [backend]
 * @property {{nodes?: number, template_nodes?: number, per_device_nodes?: number}} [counts]
 * @property {{scope?: string, status?: string, reasons?: string[], effects?: string}} [coverage]
 * @property {{name?: string, model?: string, framework?: string}} [recipe]
 * @property {Failure | null} [failure]
 * @property {{files?: string[]} | null} [stale]
 * @property {Record<string, any>} [meta]  what the worker recorded (arbitrary JSON)
 * @property {MeshLegend | null} [mesh_legend]
 * @property {CompiledWords} [compiled]  the program as XLA compiled it (capture.graph.compiled words)
 * @property {boolean} [setup]  false: this server has no setup form
 * @property {unknown} [vocabulary]  the words for group kinds and value roles (theme.js setVocabulary)
 */

/** @param {CaptureSummary} c */
// Counts grouped by format.js, not toLocaleString: the page's first use of Intl loads its
// locale data (16-43 ms in a fresh page, on the way to the first paint).
export function renderTitle(c) {
  const t = $("title");
  clear(t);
  t.append(el("strong", {}, c.title || "capture"));
  const counts = c.counts || {};
  const bits = [c.framework, c.backend, counts.nodes !== undefined ? `${grouped(counts.nodes)} nodes` : null].filter(Boolean);
  // Template nodes of unexecuted control-flow bodies are counted apart from the program; a
  // shard_map body is no template (every device runs it): its nodes are said as such.
  if (counts.template_nodes) bits.push(`${grouped(counts.template_nodes)} in unexecuted bodies`);
  if (counts.per_device_nodes) bits.push(`${grouped(counts.per_device_nodes)} in shard_map bodies (run per device)`);
  t.append(el("span", { class: "title-bits" }, bits.join(" · ")));
  t.title = `${c.title || ""} (${bits.join(", ")})`;
  document.title = `${c.title || "capture"} — TensorViz`;
}

/**
 * @param {CaptureSummary} c
 * @param {{banners: Banners, showAbout: () => void}} app  the page's banners; its "About this capture"
 */
// eslint-disable-next-line complexity -- the coverage banner's one sentence, a clause per coverage fact
export function renderCoverage(c, { banners, showAbout }) {
  const cov = c.coverage || {};
  if (c.failure) return;
  const parts = [];
  if (cov.scope === "traced_program") {
    parts.push("Traced program: shapes and dtypes are inferred from the trace for the saved inputs, not measured from an eager run.");
  } else if (cov.scope === "abstract_forward") {
    // A Torch forward on fake tensors: nothing ran, nothing was measured.
    parts.push("Abstract: shapes only, nothing was computed. The model was built and run on fake tensors (no weights, no statistics, no bytes measured).");
  } else if (cov.scope) {
    parts.push(`Eager execution (${cov.scope.replace(/_/g, " ")}): values were measured from a real forward.`);
  }
  const partial = cov.status === "partial";
  if (partial) {
    const reasons = (cov.reasons || []).join(", ") || "unspecified";
    let why = `Partial coverage (${reasons}).`;
    if ((cov.reasons || []).includes("opaque_kernel")) {
      why += " Unexpanded subprograms (cond, scan, while…) keep their boundary and output shapes; no branch or iteration is reported as executed.";
      const tb = c.meta && c.meta.bodies;
      if (tb && tb.converted) why += " Their bodies open as templates, as traced, not executed.";
    }
    if ((cov.reasons || []).includes("untracked_buffer_update")) {
      const names = (c.meta && c.meta.untracked_buffer_updates) || [];
      why += ` The run changed buffers that no recorded op shows${names.length ? ": " + names.join(", ") : ""}.`;
    }
    parts.push(why);
  }
  if (cov.effects === "incomplete") parts.push("Effects are incomplete.");
  if (cov.effects === "writes_state") {
    // The forward changed the model's own state (a KV cache, running statistics): said, never "no effects".
    const names = (c.meta && c.meta.state_writes) || [];
    parts.push(`The forward writes the model's state: ${names.slice(0, 4).join(", ")}${names.length > 4 ? ` and ${names.length - 4} more` : ""}.`);
  }
  const level = partial || cov.effects === "incomplete" ? "warn" : "info";
  const kind = partial ? "Partial" : cov.scope === "traced_program" ? "Traced program"
    : cov.scope === "abstract_forward" ? "Abstract" : "Eager";
  const text = el("span", { class: "banner-text" }, parts.join(" "));
  // Where the parameters came from: fresh initialization is not trained weights.
  const weights = describeState(c);
  if (weights) {
    text.append(" ", el("span", { class: `banner-state ${weights.origin}`, "data-state": weights.label, title: weights.note || "" }, weights.headline));
  }
  const about = el("button", { type: "button", title: "What this capture is: framework, recipe, where its parameters came from", onclick: () => showAbout() }, "About this capture");
  const b = banners.set("coverage", level, kind, text, [about]);
  b.dataset.scope = cov.scope || "";
  b.dataset.status = cov.status || "";
}

/**
 * @param {CaptureSummary} c  a failed capture
 * @param {{banners: Banners, revealFrame: (frame: Frame, target: null) => unknown, setStatus: (text: string) => void}} app  what the page does with them
 */
// eslint-disable-next-line complexity -- fills the failure page's fields in order, each only when the failure has it
export function showFailure(c, { banners, revealFrame, setStatus }) {
  const f = c.failure;
  if (!f) return;
  $("failure").hidden = false;
  $("stage").classList.add("failed");
  document.body.classList.add("capture-failed"); // no graph: the canvas tools go away
  $("failure-title").textContent = f.type || "Capture failed";
  // TensorViz's own failure is said to be so, never shown as the model's.
  $("failure-kicker").textContent = f.stage === "internal" ? "TensorViz failed (a bug in TensorViz, not in your model)" : "Capture failed";
  // The server cuts the message to what a person reads; the whole text stays one click away.
  const readable = f.readable || { text: f.message || "", cut: false };
  $("failure-message").textContent = readable.text;
  const whole = $("failure-whole");
  whole.hidden = !readable.cut;
  if (readable.cut) {
    $("failure-whole-summary").textContent = `The whole message (${(readable.lines ?? 0) > 1 ? readable.lines + " lines" : (f.message || "").length + " characters"})`;
    $("failure-whole-text").textContent = f.message || "";
  }
  const facts = $("failure-facts");
  clear(facts);
  const rows = [["stage", f.stage], ["framework", c.framework], ["backend", c.backend], ["profile", c.recipe && c.recipe.model]];
  for (const [k, v] of rows) if (v) facts.append(el("dt", {}, k), el("dd", {}, String(v)));
  const frames = $("failure-frames");
  clear(frames);
  // Deep recursion: after a frame, how many more times the frames before it repeat (server's words).
  const repeats = new Map((f.repeated_frames || []).map((r) => /** @type {[number, string]} */ ([r.after, r.text])));
  (f.frames || []).forEach((fr, i) => {
    frames.append(el("li", {}, el("button", { type: "button", class: "frame-link", onclick: () => revealFrame(fr, null) },
      `${fr.file}:${fr.line}${fr.column ? ":" + fr.column : ""}`, el("span", { class: "fn" }, fr.function || ""))));
    if (repeats.has(i)) frames.append(el("li", { class: "frame-repeat" }, repeats.get(i)));
  });
  $("failure-frames-title").hidden = !(f.frames && f.frames.length);
  const details = $("failure-details");
  if (f.details && Object.keys(f.details).length) {
    $("failure-details-title").hidden = false;
    details.replaceWith(Object.assign(jsonView(f.details), { id: "failure-details" }));
  }
  banners.set("failure", "error", "Failed", `Capture failed at ${f.stage || "trace"}: ${readable.text || f.type}`);
  setStatus("");
}

// The mesh legend (a program split across devices): each mesh's axes, the devices and
// whether they were simulated, and what one device holds; the server words it
// (`mesh_legend`). Its "Per device shapes" toggle shows only with a mesh.
let meshDetails = false; // the mesh legend's details shown (its "details" button)

/** @param {CaptureSummary | null} c */
// eslint-disable-next-line complexity -- the legend's mesh rows, its details and the compiled program's line, each only when present
export function renderMeshLegend(c) {
  const legend = c && !c.failure ? c.mesh_legend : null;
  $("mesh-legend").hidden = !legend;
  if (!legend) return;
  // The legend holds the "Per device shapes" toggle (the toolbar has no room left).
  const box = $("mesh-rows");
  box.replaceChildren();
  // One line each: the meshes (the same axes named by the recipe and again by the
  // program, a Mesh and its AbstractMesh, are one row), and the keys; the rest (devices,
  // memory, the compiled program) behind "details", so the graph's corner stays free.
  /** @type {Map<string, number[]>} */
  const rows = new Map();
  for (const m of legend.meshes || []) {
    const k = `${m.text} · ${m.devices} devices`;
    rows.set(k, [...(rows.get(k) || []), m.id]);
  }
  for (const [k, ids] of rows) {
    box.append(el("div", { class: "mesh-row" }, el("span", { class: "mesh-name" }, rows.size > 1 ? `mesh ${ids.join(", ")}` : "mesh"),
      " ", el("span", { class: "mesh-axes" }, k.split(" · ")[0]), ` · ${k.split(" · ")[1]}`));
  }
  // The compiler's key only where a compiler adds collectives (JAX: XLA); a Torch program's
  // collectives are all its own.
  const xlaKey = c && c.framework !== "torch" ? [" · ", el("span", { class: "mesh-compiler" }, "⇆ XLA"), " the compiler adds"] : [];
  box.append(el("div", { class: "mesh-row mesh-key" }, el("span", { class: "mesh-collective" }, "⇄ collective"),
    " the program writes", ...xlaKey));
  const compiling = c && c.compiled && c.compiled.status === "pending" ? c.compiled : null;
  if (compiling) { // the graph first: XLA's figures replace this line in place when they arrive
    const nd = compiling.devices || 1;
    box.append(el("div", { class: "mesh-row compiling", "data-compiling": String(nd) },
      `compiling for ${nd} device${nd === 1 ? "" : "s"}…`));
  }
  const more = el("div", { class: "mesh-more", id: "mesh-more" });
  more.hidden = !meshDetails;
  if (legend.devices) more.append(el("div", { class: legend.simulated ? "mesh-row simulated" : "mesh-row" }, String(legend.devices)));
  const memory = memoryLine(legend.memory); // worded as group cards word it
  if (memory) more.append(el("div", { class: "mesh-row" }, memory));
  // the key's example split over the capture's own first axis (`dp=2 × tp=2`: dp)
  const first = legend.meshes && legend.meshes[0] ? String(legend.meshes[0].text || "").split(/[=\s]/)[0] : "";
  const axis = first || "data";
  more.append(el("div", { class: "mesh-row mesh-key" }, `f32[8@${axis},16]: dimension 0 split over ${axis}`));
  const compiled = c ? c.compiled : null;
  if (compiled && compiled.status === "compiled") {
    const n = compiled.count || 0;
    const lost = compiled.unattributed || 0;
    more.append(el("div", { class: "mesh-row", "data-compiled": String(n) },
      n ? `compiled: ${n} collective${n === 1 ? "" : "s"} (${compiled.kinds || ""})${lost ? `, ${lost} on no op` : ""}`
        : "compiled: no communication"));
    // XLA's own figures for the program one device runs, beside TensorViz's bound above
    const xla = [];
    if (compiled.cost && typeof compiled.cost.flops === "number") xla.push(formatFlops(compiled.cost.flops));
    if (compiled.memory && typeof compiled.memory.peak === "number") xla.push(`peak ${formatBytes(compiled.memory.peak)}`);
    if (xla.length) more.append(el("div", { class: "mesh-row" }, `XLA per device: ${xla.join(" · ")}`));
  } else if (compiled && compiled.status !== "pending") {
    more.append(el("div", { class: "mesh-row simulated" }, `not compiled (${compiled.status})`));
  } else if (c && c.framework !== "torch") {
    more.append(el("div", { class: "mesh-row mesh-key" }, "compiler collectives: not known (compile = \"on\")"));
  }
  const toggle = el("button", { type: "button", class: "mesh-details", "aria-expanded": String(meshDetails),
    onclick: () => {
      meshDetails = !meshDetails;
      more.hidden = !meshDetails;
      toggle.setAttribute("aria-expanded", String(meshDetails));
      toggle.textContent = meshDetails ? "less" : "details";
    } }, meshDetails ? "less" : "details");
  box.append(more);
  const aside = $("mesh-legend");
  for (const old of aside.querySelectorAll(".mesh-details")) old.remove();
  aside.append(toggle); // beside "Per device shapes"
}

// The compiled program's banner: the collectives XLA runs that map onto no op (counted,
// never hidden), or why it was not compiled.
/**
 * @param {CaptureSummary | null} c
 * @param {{banners: Banners}} app  the page's banners
 */
// eslint-disable-next-line complexity -- one banner's wording per compile outcome (none, not compiled, compiled, ops on no op)
export function renderCompiledBanner(c, { banners }) {
  const compiled = c && !c.failure ? c.compiled : null;
  if (!compiled) {
    banners.drop("compiled");
    return;
  }
  if (compiled.status === "pending") {
    const nd = compiled.devices || 1;
    const limit = compiled.limit_seconds ? ` (at most ${Number(compiled.limit_seconds)} s)` : "";
    banners.set("compiled", "info", "Compiling", `XLA is compiling the program for ${nd} device${nd === 1 ? "" : "s"}${limit}; ` +
      "the collectives it adds (⇆ XLA), its per-device FLOPs and memory appear here when it finishes.");
    return;
  }
  if (compiled.status !== "compiled") {
    banners.set("compiled", "warn", "Not compiled", `The compiler's collectives and per-device figures are not shown: ${compiled.reason || compiled.status}`);
    return;
  }
  const lost = compiled.unattributed || 0;
  const n = compiled.count || 0;
  const nd = compiled.devices || 1;
  const head = `XLA compiled the program for ${nd} device${nd === 1 ? "" : "s"} in ${Number(compiled.seconds || 0).toFixed(2)} s: ` +
    `${n} collective${n === 1 ? "" : "s"} (${compiled.kinds || "none"}), ${compiled.attributed || 0} drawn on their ops (⇆ XLA)`;
  if (lost) banners.set("compiled", "warn", "Compiled", `${head}; ${lost} map onto no op: ${compiled.unattributed_kinds || ""}.`);
  else banners.set("compiled", "info", "Compiled", `${head}.`);
}
