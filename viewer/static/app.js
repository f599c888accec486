// The viewer app: boot and wiring between the API, the store (the viewer's state and its
// named actions), the view model, the renderer and the panels. What the graph means lives
// in viewmodel.js, the state in store.js, how it is drawn in renderer.js; each panel
// (panels/) follows the store.

import { Api, ApiError } from "./api.js";
import { LayoutClient } from "./layout/layout-client.js";
import { ROOT, memoryLine } from "./model/viewmodel.js";
import { Store } from "./model/store.js";
import { Renderer } from "./draw/renderer.js";
import { Settler } from "./layout/settle.js";
import { Inspector } from "./panels/inspector.js";
import { SetupForm } from "./panels/setup.js";
import { Banners } from "./panels/banners.js";
import { exportPng, exportSvg } from "./draw/export.js";
import { FIRST_FIT, READABLE_SCALE, setVocabulary } from "./draw/theme.js";
import { describeState } from "./model/weights.js";
import { el, clear, jsonView } from "./dom.js";
import { DiffPanel } from "./panels/diff.js";
import { LinesPanel } from "./panels/lines.js";
import { SearchPanel } from "./panels/search.js";
import { CostPanel } from "./panels/cost.js";
import { installHooks } from "./hooks.js";
import { formatBytes, formatFlops } from "./format.js";

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
 * @property {string} [status]  "compiled" | "skipped" | "timeout" | "failed"
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
 */

/**
 * `api/capture` as the app reads it (viewer/API.md).
 * @typedef {object} CaptureSummary
 * @property {number} id
 * @property {string} [title]
 * @property {string} [framework]
 * @property {string} [backend]
 * @property {{nodes?: number, template_nodes?: number}} [counts]
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

// An element of the page's markup (index.html) by id. app.js asks only for ids the page
// has (tests/viewer/test_app_markup.py checks each one), so none is missing.
/**
 * @param {string} id
 * @returns {HTMLElement}
 */
const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

// The capture on screen: the store keeps the `api/capture` answer whole (the API client's
// JSON); app.js reads it as the summary it is.
/** @returns {CaptureSummary | null} */
function onScreen() {
  return store.capture;
}

// What went wrong, in words: a thrown error's message, else the thrown value itself.
/** @param {unknown} err */
function errorText(err) {
  const message = err && typeof err === "object" && "message" in err ? err.message : undefined;
  return String(message || err);
}

const params = new URLSearchParams(location.search);
const api = new Api(params.get("capture"));
// Start the layout worker first: ELK parses while the capture summary is fetched.
const layout = new LayoutClient("static/layout/layout.worker.js");
const store = new Store(api, layout);
const banners = new Banners($("banners"));
const SIDE_PANEL_WIDTH = 380; // CSS px the inspector and the setup form cover (style.css)

// The page's parts. The renderer, the settler and the diff panel exist once a graph can be
// drawn (not on a failure or setup page).
/** @type {Renderer | null} */
let renderer = null;
/** @type {Settler | null} */
let settler = null;
/** @type {DiffPanel | null} */
let diff = null;
const inspector = new Inspector(store, $("inspector"), {
  api,
  onJump: (key) => focusItem(key),
  onReveal: (frame, target) => revealFrame(frame, target),
  onToggle: (key) => toggle(key),
});
const setup = new SetupForm(store, $("setup"), {
  api,
  onCaptureStarted: () => {
    captureStartedHere = true;
    // The embedder's own progress may already be here (it is more telling): keep it.
    if (!banners.has("progress")) showProgress({ message: "Capture started…" });
    emptyCapturing("Capturing… the graph opens here as soon as it is ready.");
  },
});
const search = new SearchPanel(store, $("search"), $("search-results"), { api, focus: (key) => focusItem(key), setStatus, banners });
const lines = new LinesPanel(store, { api, banners, renderer: () => renderer, setStatus });
const cost = new CostPanel(store, $("cost"), { api, renderer: () => renderer, focus: (/** @type {string} */ key) => focusItem(key),
  legend: $("heat-legend") });

let captureStartedHere = false; // a capture started from this page: its result opens here
/** @type {string | null} */
let symbol = null; // what the setup page sets up (no capture yet)

/** @type {Record<string, number>} */
const marks = {};
/** @param {string} name */
function mark(name) {
  marks[name] = performance.now();
}

installHooks({
  store, layout, lines, search, marks, cost,
  renderer: () => renderer,
  settler: () => settler,
  diff: () => diff,
  actions: { toggle, expandAll, collapseAll, expandToDepth, setWeightPills, setKernels, setPerDevice },
});

// ------------------------------------------------------------------ the store's events

/**
 * What the store's change events carry (model/store.js); the capture's as app.js reads it.
 * @typedef {import("./model/store.js").StoreEvents} StoreEvents
 * @typedef {{capture: CaptureSummary}} CaptureChange
 */

// Side panels float over the canvas: the renderer centres things in the part left visible.
store.on("panels", (/** @type {StoreEvents["panels"]} */ { side }) => {
  // The page's markup has the workspace (index.html; tests/viewer/test_app_markup.py).
  /** @type {Element} */ (document.querySelector(".workspace")).classList.toggle("panel-open", !!side);
  if (renderer) {
    renderer.selected = store.selected; // the panel may open before the selection reaches the renderer
    renderer.insetRight = side ? SIDE_PANEL_WIDTH : 0;
    overlaysOnCanvas(renderer); // the minimap moved beside the panel
  }
});
store.on("capture", (/** @type {CaptureChange} */ { capture }) => {
  setVocabulary(capture.vocabulary);
  renderTitle(capture);
  renderCoverage(capture);
  renderMeshLegend(capture);
  renderCompiledBanner(capture);
});
store.on("expansion", () => saveExpansion());
store.on("options", (/** @type {StoreEvents["options"]} */ { weightPills, kernels, perDevice }) => {
  /** @type {[string, boolean][]} */
  const buttons = [["btn-weights", weightPills], ["btn-kernels", kernels], ["btn-device", !!perDevice]];
  for (const [id, on] of buttons) {
    const b = $(id);
    b.setAttribute("aria-pressed", String(on));
    b.classList.toggle("on", on);
  }
});

// The renderer draws what the store says: the scene, the selection, the cursor's outline.
/** @param {Renderer} r */
function followStore(r) {
  store.on("scene", (/** @type {StoreEvents["scene"]} */ { scene }) => {
    r.setScene(scene);
    minimapVisibility(r);
  });
  store.on("selection", (/** @type {StoreEvents["selection"]} */ { key, multi }) => {
    r.selected = key;
    r.multi = multi;
    r.requestDraw();
  });
  store.on("outline", (/** @type {StoreEvents["outline"]} */ { keys }) => {
    r.cursor = keys;
    r.requestDraw();
  });
  r.insetRight = store.sidePanel ? SIDE_PANEL_WIDTH : 0;
}

// ------------------------------------------------------------------ boot

async function boot() {
  wireToolbar();
  wireDrop();
  listenEvents();
  // The root's children are needed for any graph: ask for them alongside the summary.
  store.model.load(ROOT).catch(() => {});
  // A setup form's own page (Open as Graph for a symbol without a profile): the form, even
  // when this viewer already holds other graphs (the newest one is another model's).
  if (params.get("setup") !== null && params.get("capture") === null && (await initSetup(params.get("setup")))) {
    showEmpty();
    return;
  }
  /** @type {CaptureSummary} */
  let capture;
  try {
    capture = await api.capture();
  } catch (err) {
    // No capture yet: Open as Graph for a symbol without a saved profile opens the viewer
    // on its setup form. That is a first step, not an error.
    if (err instanceof ApiError && err.status === 404 && params.get("capture") === null && (await initSetup())) {
      showEmpty();
      return;
    }
    showLoadError(err);
    return;
  }
  mark("capture");
  store.adoptCapture(capture);
  if (capture.stale && capture.stale.files && capture.stale.files.length) showStale(capture.stale.files);
  initSetup();
  if (capture.failure) {
    showFailure(capture);
    store.markReady();
    return;
  }
  const canvas = $("graph");
  const minimap = $("minimap");
  const r = new Renderer(canvas, minimap);
  renderer = r;
  followStore(r);
  // Estimated containers (Expand all on a big graph) are laid out once they come into view.
  const s = new Settler(store, r);
  settler = s;
  r.onDraw = () => {
    updateZoomLabel(r);
    s.soon();
  };
  wireCanvas(r, canvas, minimap);
  // Layouts are made for the screen they are shown on: a container taller than it
  // continues in the next column (layout.worker.js). The whole canvas: a side panel
  // opening or closing does not lay anything out again.
  layout.setScreen(r.width, r.height);
  new ResizeObserver(() => {
    r.resize();
    layout.setScreen(r.width, r.height);
  }).observe($("stage"));
  matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => r.setPalette());
  setStatus("Laying out…");
  try {
    // The most informative first view that still fits: the first view closes the last
    // groups it opened while Fit would have to zoom below FIRST_FIT.
    await store.firstView({ saved: loadExpansion(), fitScale: () => r.fitScale(), minFit: FIRST_FIT });
    mark("laid-out");
  } catch (err) {
    showLoadError(err);
    return;
  }
  r.home();
  setStatus("");
  // Diff mode: offered when the server holds a baseline, or asked by ?diff=.
  diff = new DiffPanel(store, $("stage"), { api, renderer: r, jump: (target) => search.jump(target), banners });
  diff.start();
  // Show in Graph opened this page: ?show=FILE:LINE[:CALL] (the editor's line, as captured).
  const show = /^(.+?):(\d+)(?::(\d+))?$/.exec(params.get("show") || "");
  if (show) await lines.show(show[1], Number(show[2]), Number(show[3] || 0));
  store.markReady();
}

// The page before the first capture: what to do next, with the setup form beside it.
function showEmpty() {
  const data = setup.data || {};
  symbol = (data.symbol && data.symbol.qualname) || ((data.recipe && data.recipe.model) || "").split(":").pop() || "this model";
  document.body.classList.add("no-capture"); // no graph: the canvas tools go away
  $("empty").hidden = false;
  $("empty-title").textContent = `Set up ${symbol}`;
  $("empty-open").onclick = () => setup.open();
  const t = $("title");
  clear(t);
  t.append(el("strong", {}, symbol), "  ·  " + ["setup", data.recipe && data.recipe.framework].filter(Boolean).join(" · "));
  t.title = `${symbol}: no capture yet`;
  document.title = `Set up ${symbol} — TensorViz`;
  setStatus("");
  store.markReady();
}

/**
 * @param {string} message
 * @param {boolean} [capturing]
 */
function emptyCapturing(message, capturing = true) {
  if ($("empty").hidden) return;
  $("empty").classList.toggle("capturing", capturing);
  $("empty-title").textContent = `${capturing ? "Capturing" : "Set up"} ${symbol}`;
  $("empty-text").textContent = message;
}

/** @param {unknown} err */
function showLoadError(err) {
  const message = errorText(err);
  banners.set("load", "error", "Error", `Could not load the graph: ${message}`);
  setStatus("");
  store.fail(message);
}

/** @param {Renderer} r */
function minimapVisibility(r) {
  // The overview helps only when the graph does not fit at readable detail.
  $("minimap").hidden = !(r.scene && (r.scene.w * READABLE_SCALE > r.width * 1.1 || r.scene.h * READABLE_SCALE > r.height * 1.1));
  if (!$("minimap").hidden) r.resize();
  overlaysOnCanvas(r);
}

// What floats over the bottom of the canvas (the hint bar, the minimap), for Fit to keep
// the graph out from under it.
/** @param {Renderer} r */
function overlaysOnCanvas(r) {
  const stage = $("stage").getBoundingClientRect();
  const hud = document.querySelector(".hud");
  const hudBox = hud ? hud.getBoundingClientRect() : null;
  r.hintHeight = hudBox && hudBox.height ? stage.bottom - hudBox.top + 4 : 0;
  const m = $("minimap");
  const box = !m.hidden ? m.getBoundingClientRect() : null;
  r.minimapBox = box && box.width ? { w: stage.right - r.insetRight - box.left + 4, h: stage.bottom - box.top + 4 } : null;
}

/** @param {string} text */
function setStatus(text) {
  $("status").textContent = text;
}

/** @param {Renderer} r */
function updateZoomLabel(r) {
  const s = r.cam.s;
  const pct = s >= 0.1 ? Math.round(s * 100) + "%" : (s * 100).toFixed(s >= 0.01 ? 1 : 2) + "%";
  const z = $("zoom");
  if (z.textContent !== pct) z.textContent = pct;
}

// ------------------------------------------------------------------ title & banners

/** @param {CaptureSummary} c */
function renderTitle(c) {
  const t = $("title");
  clear(t);
  t.append(el("strong", {}, c.title || "capture"));
  const counts = c.counts || {};
  const bits = [c.framework, c.backend, counts.nodes !== undefined ? `${Number(counts.nodes).toLocaleString("en-US")} nodes` : null].filter(Boolean);
  // Template nodes of unexecuted control-flow bodies are counted apart from the program.
  if (counts.template_nodes) bits.push(`${Number(counts.template_nodes).toLocaleString("en-US")} in unexecuted bodies`);
  t.append(el("span", { class: "title-bits" }, bits.join(" · ")));
  t.title = `${c.title || ""} (${bits.join(", ")})`;
  document.title = `${c.title || "capture"} — TensorViz`;
}

/** @param {CaptureSummary} c */
function renderCoverage(c) {
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

// The capture summary in the inspector (the toolbar title and the coverage banner open it).
function showAbout() {
  const c = onScreen();
  if (!c) return;
  store.select(null);
  inspector.showCapture(c, describeState(c));
}

/** @param {string[] | null | undefined} files  the source files changed since the capture */
function showStale(files) {
  const list = (files || []).join(", ") || "a source file";
  const actions = [];
  if (setup.profile) {
    actions.push(el("button", { type: "button", onclick: () => setup.capture() }, "Capture again"));
  }
  banners.set("stale", "warn", "Stale", `This graph is stale. Changed since it was captured: ${list}.`, actions);
}

/** @param {CaptureProgress} data */
function showProgress(data) {
  const bar = el("div", { class: "progress-bar" }, el("div"));
  if (typeof data.fraction === "number") bar.firstChild.style.width = Math.round(Math.max(0, Math.min(1, data.fraction)) * 100) + "%";
  else bar.hidden = true;
  const text = el("span", { class: "banner-text" }, data.message || "Capturing…");
  banners.set("progress", "info", "Capturing", text, [bar]);
}

/** @param {CaptureSummary} c  a failed capture */
function showFailure(c) {
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

// ------------------------------------------------------------------ events (SSE)

/**
 * The server's events (`api/events`, viewer/API.md "Events") as the app reads them.
 * `stale`, `fresh`, `show` and `cursor` may name the capture they are about (AboutCapture).
 * @typedef {{message?: string, fraction?: number}} CaptureProgress
 * @typedef {{capture?: number | string | null}} AboutCapture
 * @typedef {AboutCapture & {files?: string[]}} StaleEvent
 * @typedef {AboutCapture & {file: string, line: number, call?: number}} ShowEvent
 * @typedef {AboutCapture & {file?: string, line?: number, keys?: string[]}} CursorEvent
 * @typedef {{id: number, title?: string, replaces?: number}} ReadyEvent
 * @typedef {{id?: number | null, message?: string, stage?: string, profile?: string, frame?: Frame | null}} FailedEvent
 */

function listenEvents() {
  if (typeof EventSource === "undefined") return;
  api.events({
    progress: (/** @type {CaptureProgress} */ d) => {
      showProgress(d);
      emptyCapturing("Capturing… the graph opens here as soon as it is ready.");
    },
    stale: (/** @type {StaleEvent} */ d) => aboutThisCapture(d) && showStale(d.files),
    fresh: (/** @type {AboutCapture} */ d) => aboutThisCapture(d) && banners.drop("stale"),
    // Show in Graph from the editor: this page focuses the line (no new tab was opened).
    show: (/** @type {ShowEvent} */ d) => {
      if (!aboutThisCapture(d) || !renderer) return;
      window.focus();
      lines.show(d.file, d.line, d.call || 0);
    },
    // The editor's cursor moved to a line (tensorviz.followCursor): a light outline.
    cursor: (/** @type {CursorEvent} */ d) => aboutThisCapture(d) && renderer && lines.cursor(d),
    "capture-ready": (/** @type {ReadyEvent} */ d) => {
      banners.drop("progress");
      // A background recapture of the graph on screen (recapture on save): update in place.
      const current = onScreen();
      if (current && d.replaces !== undefined && Number(d.replaces) === Number(current.id)) return liveUpdate(d.id);
      const open = () => openCapture(d.id);
      // Started from this page, or the page has no graph yet: show the new one at once (a
      // setup form's page only follows its own capture, not another model's).
      if (captureStartedHere || (!current && params.get("setup") === null)) return open();
      banners.set("ready", "ok", "Ready", "A new capture is ready.", [el("button", { type: "button", onclick: open }, "Open it")]);
    },
    "capture-failed": (/** @type {FailedEvent} */ d) => {
      // Another profile's capture (e.g. its recapture on save) is not about this graph.
      const current = onScreen();
      const mine = current && current.recipe && current.recipe.name;
      if (d.profile && mine && d.profile !== mine && !captureStartedHere) return;
      banners.drop("progress");
      if (captureStartedHere) setup.setStatus("The capture failed: see the message above.");
      emptyCapturing("The capture failed (see the message above). Check the setup and press Save & capture again.", false);
      const actions = d.id !== undefined && d.id !== null ? [el("button", { type: "button", onclick: () => openCapture(d.id) }, "Show the failure")] : [];
      // The line that raised (the innermost workspace frame): go to it in the editor.
      const frame = d.frame;
      if (frame) actions.unshift(el("button", { type: "button", class: "frame-link", onclick: () => revealFrame(frame, null) },
        frame.label || `${frame.file}:${frame.line}`));
      banners.set("capture-failed", "error", "Failed", `Capture failed${d.stage ? " at " + d.stage : ""}: ${d.message || "unknown error"}`, actions);
    },
  });
}

// The graph on screen replaced by its recapture, without a reload: the camera, the
// expansion (by group path) and the weight-pill choice stay; stale and failure banners go.
/** @param {number} id  the recapture's */
async function liveUpdate(id) {
  const current = onScreen();
  if (!renderer || !current || current.failure) return openCapture(id);
  const paths = store.model.expansionPaths();
  const previous = api.captureId;
  api.captureId = String(id);
  /** @type {CaptureSummary} */
  let capture;
  try {
    capture = await api.capture();
  } catch {
    api.captureId = previous;
    return openCapture(id);
  }
  if (capture.failure) return openCapture(id);
  const q = new URLSearchParams(location.search);
  q.set("capture", String(id));
  history.replaceState(null, "", "?" + q.toString());
  for (const b of ["stale", "capture-failed", "ready", "progress", "load"]) banners.drop(b);
  const model = store.newModel({ weightPills: store.weightPills, kernels: store.kernels });
  await model.load(ROOT);
  await model.restorePaths(paths);
  // A new scene keeps the renderer's camera as it is; the diff panel offers "Show changes"
  // against the graph it replaced.
  await store.replaceCapture(capture, model);
}

// stale/fresh may name a capture; without one they are about the newest.
/** @param {AboutCapture} d */
function aboutThisCapture(d) {
  const current = onScreen();
  if (!current) return false;
  if (d.capture === undefined || d.capture === null) return true;
  return Number(d.capture) === Number(current.id);
}

/** @param {number | null} [id]  none: the newest */
function openCapture(id) {
  const q = new URLSearchParams(location.search);
  q.delete("setup"); // a graph's page now, no longer the form's
  if (id === undefined || id === null) q.delete("capture");
  else q.set("capture", String(id));
  location.search = q.toString();
}

// ------------------------------------------------------------------ setup form

/**
 * The setup form of the graph on screen (or of `profile`); whether the server has one.
 * @param {string | null} [profile]
 * @returns {Promise<boolean>}
 */
async function initSetup(profile) {
  const capture = onScreen();
  // A server that says it has no setup form (api/capture `setup: false`) is not asked for
  // one: a page without a setup logs no failed request.
  if (capture && capture.setup === false) {
    $("btn-setup").hidden = true;
    return false;
  }
  // Setup and "Capture again" act on the graph on screen: ask for its own profile's form.
  const available = await setup.load(profile || (capture && capture.recipe ? capture.recipe.name : undefined));
  $("btn-setup").hidden = !available;
  // Without a graph the form is the page's content: open it even when nothing is missing.
  const now = onScreen(); // the form loaded meanwhile
  if (available && (setup.needsInput || !now)) setup.open();
  if (available && now && banners.has("stale")) showStale(now.stale && now.stale.files);
  return available;
}

// ------------------------------------------------------------------ interactions

function wireToolbar() {
  $("btn-fit").onclick = () => renderer && renderer.fit();
  $("btn-expand-all").onclick = () => expandAll();
  $("btn-collapse-all").onclick = () => collapseAll();
  $("depth").onchange = (e) => {
    const select = /** @type {HTMLSelectElement} */ (e.target);
    const n = Number(select.value);
    select.value = "";
    if (n > 0) expandToDepth(n);
  };
  $("btn-weights").onclick = () => setWeightPills(!store.weightPills);
  $("btn-kernels").onclick = () => setKernels(!store.kernels);
  $("btn-device").onclick = () => setPerDevice(!store.perDevice);
  $("btn-cost").onclick = () => cost.toggle();
  store.on("panels", (/** @type {StoreEvents["panels"]} */ { open }) => {
    const b = $("btn-cost");
    b.setAttribute("aria-pressed", String(open.has("cost")));
    b.classList.toggle("on", open.has("cost"));
  });
  $("btn-readable").onclick = () => readable();
  $("btn-zoom-in").onclick = () => zoomCentre(1.25);
  $("btn-zoom-out").onclick = () => zoomCentre(0.8);
  $("btn-setup").onclick = () => setup.toggle();
  $("title").onclick = () => showAbout();
  $("btn-open").onclick = () => $("file-input").click();
  $("file-input").onchange = (e) => {
    const files = /** @type {HTMLInputElement} */ (e.target).files;
    const f = files && files[0];
    if (f) openFile(f);
  };
  $("btn-png").onclick = () => renderer && exportPng(renderer, fileStem());
  $("btn-svg").onclick = () => renderer && exportSvg(renderer, fileStem());
  document.addEventListener("keydown", onKey);
}

function fileStem() {
  const c = onScreen();
  return (c && c.title ? c.title : "tensorviz").replace(/[^A-Za-z0-9_.-]+/g, "_");
}

function readable() {
  const r = renderer;
  if (!r) return;
  const it = store.selected && r.scene && r.scene.byKey.get(store.selected);
  if (it) r.readable(it.x + it.w / 2, it.y + it.h / 2);
  else r.readable();
}

/** @param {number} f */
function zoomCentre(f) {
  const r = renderer;
  if (r) r.zoomAt(r.width / 2, r.height / 2, f);
}

/** @param {KeyboardEvent} e */
function onKey(e) {
  // A key reaches the document from the element that has the focus (or the body).
  const target = /** @type {HTMLElement | null} */ (e.target);
  const typing = target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.tagName === "SELECT");
  if (e.key === "Escape") {
    if (typing) target.blur();
    search.close();
    if (setup.isOpen) setup.close();
    else if (store.selected || inspector.isOpen) store.select(null);
    return;
  }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  const r = renderer;
  switch (e.key) {
    case "/":
      e.preventDefault();
      $("search").focus();
      /** @type {HTMLInputElement} */ ($("search")).select();
      return;
    case "f":
      if (r) r.fit();
      break;
    case "r":
      readable();
      break;
    case "t": // the cost table
      cost.toggle();
      break;
    case "+":
    case "=":
      zoomCentre(1.25);
      break;
    case "-":
    case "_":
      zoomCentre(0.8);
      break;
    case "ArrowLeft":
      if (r) r.panBy(80, 0);
      break;
    case "ArrowRight":
      if (r) r.panBy(-80, 0);
      break;
    case "ArrowUp":
      if (r) r.panBy(0, 80);
      break;
    case "ArrowDown":
      if (r) r.panBy(0, -80);
      break;
    case "Enter":
      if (store.selected && store.canOpen(store.selected)) toggle(store.selected);
      break;
    case "[":
    case "]": // the shown source line's previous / next call (Show in Graph's banner)
      if (!lines.step(e.key === "]" ? 1 : -1)) return;
      break;
    default:
      return;
  }
  e.preventDefault();
}

/**
 * @param {Renderer} r
 * @param {HTMLElement} canvas
 * @param {HTMLElement} minimap
 */
function wireCanvas(r, canvas, minimap) {
  /** @type {Map<number, [number, number]>} */
  const pointers = new Map();
  /** @type {{x: number, y: number, moved: number} | null} */
  let drag = null;
  /** @type {{d: number} | null} */
  let pinch = null;
  /**
   * @param {MouseEvent} e
   * @returns {[number, number]}
   */
  const local = (e) => {
    const rect = canvas.getBoundingClientRect();
    return [e.clientX - rect.left, e.clientY - rect.top];
  };
  // Whether the inspector was open before a click sequence began: a double-click that
  // expands a group leaves it as it was (its first click selected the group).
  let inspectorBefore = false;
  // A mouse event's detail counts the clicks of a sequence (a pointer event's is 0).
  canvas.addEventListener("mousedown", (e) => {
    if (e.detail <= 1) inspectorBefore = inspector.isOpen;
  });
  canvas.addEventListener("pointerdown", (e) => {
    canvas.focus({ preventScroll: true });
    canvas.setPointerCapture(e.pointerId);
    pointers.set(e.pointerId, local(e));
    if (pointers.size === 1) {
      const [x, y] = local(e);
      drag = { x, y, moved: 0 };
    } else if (pointers.size === 2) {
      const [a, b] = [...pointers.values()];
      pinch = { d: Math.hypot(a[0] - b[0], a[1] - b[1]) };
      drag = null;
    }
  });
  canvas.addEventListener("pointermove", (e) => {
    const [x, y] = local(e);
    if (pointers.has(e.pointerId)) pointers.set(e.pointerId, [x, y]);
    if (pinch && pointers.size === 2) {
      const [a, b] = [...pointers.values()];
      const d = Math.hypot(a[0] - b[0], a[1] - b[1]);
      if (pinch.d > 0) r.zoomAt((a[0] + b[0]) / 2, (a[1] + b[1]) / 2, d / pinch.d);
      pinch.d = d;
      return;
    }
    if (drag) {
      const dx = x - drag.x;
      const dy = y - drag.y;
      drag.moved += Math.abs(dx) + Math.abs(dy);
      drag.x = x;
      drag.y = y;
      if (drag.moved > 3) canvas.classList.add("dragging");
      r.panBy(dx, dy);
      return;
    }
    const [wx, wy] = r.toWorld(x, y);
    const hit = store.model.hitTest(wx, wy);
    canvas.classList.toggle("pointing", !!hit && hit.type !== "in" && hit.type !== "out");
    const cut = cutName(r, wx, wy);
    edgeTip(cut ? { label: cut } : hit ? null : store.model.edgeAt(wx, wy, 5 / r.cam.s), x, y);
  });
  canvas.addEventListener("pointerleave", () => edgeTip(null));
  /** @param {PointerEvent} e */
  const end = (e) => {
    pointers.delete(e.pointerId);
    if (pointers.size < 2) pinch = null;
    if (drag && e.type === "pointerup" && drag.moved <= 3) {
      const [x, y] = local(e);
      const [wx, wy] = r.toWorld(x, y);
      const hit = store.model.hitTest(wx, wy);
      const w = hit ? r.weightAt(hit, wx, wy) : -1;
      // A weight line (w >= 0) is found only on an op card that has weights (card.js weightAt).
      if (hit && w >= 0) store.selectWeight(hit.key, /** @type {number[]} */ (hit.card.weights)[w]);
      else store.select(hit ? hit.key : null);
    }
    drag = null;
    canvas.classList.remove("dragging");
  };
  canvas.addEventListener("pointerup", end);
  canvas.addEventListener("pointercancel", end);
  canvas.addEventListener("dblclick", (e) => {
    const [x, y] = local(e);
    const [wx, wy] = r.toWorld(x, y);
    const hit = store.model.hitTest(wx, wy);
    if (hit && store.canOpen(hit.key)) {
      // The group stays selected (Enter toggles it back); the inspector its first click
      // opened closes again.
      const wasOpen = inspectorBefore;
      toggle(hit.key).then(() => {
        if (!wasOpen) inspector.close();
      });
    }
  });
  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    const [x, y] = local(e);
    // Trackpad pinch arrives as ctrl+wheel with small deltas; a mouse wheel as lines.
    const unit = e.deltaMode === 1 ? 16 : 1;
    const k = e.ctrlKey ? 0.01 : 0.0015;
    r.zoomAt(x, y, Math.exp(-e.deltaY * unit * k));
  }, { passive: false });

  // Minimap: click or drag to move the view.
  let mmDrag = false;
  /** @param {PointerEvent} e */
  const mmMove = (e) => {
    const rect = minimap.getBoundingClientRect();
    const w = r.minimapToWorld(e.clientX - rect.left, e.clientY - rect.top);
    if (!w) return;
    r.cam.tx = r.width / 2 - w[0] * r.cam.s;
    r.cam.ty = r.height / 2 - w[1] * r.cam.s;
    r.requestDraw();
  };
  minimap.addEventListener("pointerdown", (e) => {
    mmDrag = true;
    minimap.setPointerCapture(e.pointerId);
    mmMove(e);
  });
  minimap.addEventListener("pointermove", (e) => mmDrag && mmMove(e));
  minimap.addEventListener("pointerup", () => (mmDrag = false));
}

// Opens or closes a group, chunk, stack or control-flow boundary, keeping it where it was
// on screen (the rest moves around it), and selects it.
/** @param {string} key */
async function toggle(key) {
  const r = renderer;
  if (!r || !store.canOpen(key)) return;
  const before = store.itemOf(key);
  const anchor = before ? r.toScreen(before.x, before.y) : null;
  setStatus(store.isExpanded(key) ? "Collapsing…" : "Expanding…");
  let ok = false;
  try {
    ok = await store.toggle(key);
  } catch (err) {
    banners.set("load", "error", "Error", `Could not expand: ${errorText(err)}`);
  }
  if (!ok) return;
  setStatus("");
  const after = store.itemOf(key) || (key.startsWith("s") ? store.itemOf(key.slice(1)) : null);
  if (anchor && after) {
    r.cam.tx = anchor[0] - after.x * r.cam.s;
    r.cam.ty = anchor[1] - after.y * r.cam.s;
    r.requestDraw();
  }
  store.select(after ? after.key : key);
}

// ------------------------------------------------------------------ expand all, depth, weights

// An action on the whole graph, then Fit on its result (and the estimated containers Fit
// shows laid out for real). Resolves true once that is on screen.
/**
 * @param {string} status  what the status line says meanwhile
 * @param {() => Promise<boolean>} action  a store action that lays out (false: superseded)
 * @param {{fit?: boolean}} [options]  fit: false keeps the view where it is
 * @returns {Promise<boolean>}
 */
async function relayoutWith(status, action, { fit = true } = {}) {
  const r = renderer;
  const s = settler; // made with the renderer (boot)
  if (!r || !s) return false;
  setStatus(status);
  let ok = false;
  try {
    ok = await action();
  } catch (err) {
    banners.set("load", "error", "Error", `Could not lay out the graph: ${errorText(err)}`);
    setStatus("");
    return false;
  }
  if (!ok) return false;
  setStatus("");
  if (store.selected && !store.itemOf(store.selected)) store.select(null);
  if (fit) r.fit();
  await s.now({ refit: fit });
  return true;
}

// Every group opened, every stack unfolded: one api/subtree request, one layout request.
// Resolves when the scene is laid out (window.tensorviz.expandAll()).
/** @param {{wrap?: boolean}} [options] */
function expandAll({ wrap = true } = {}) {
  // Everything open: laid out for the screen (a tall group continues in the next column).
  layout.wrapping = wrap;
  return relayoutWith("Expanding everything…", () => store.expandAll());
}

function collapseAll() {
  layout.wrapping = false; // back to the first view's reading, top to bottom
  return relayoutWith("Collapsing…", () => store.collapseAll());
}

/** @param {number} n */
function expandToDepth(n) {
  layout.wrapping = true;
  return relayoutWith(`Expanding to depth ${n}…`, () => store.setDepth(n));
}

/** @param {boolean} on */
function setWeightPills(on) {
  return relayoutWith(on ? "Drawing parameters as nodes…" : "Folding parameters into their ops…", () => store.setWeightPills(on));
}

/** @param {boolean} on */
function setPerDevice(on) {
  // The same graph with other shapes: the view stays where it is (a re-fit would zoom a
  // large graph out to where no shape reads).
  return relayoutWith(on ? "Showing what one device holds…" : "Showing global shapes…", () => store.setPerDevice(on),
    { fit: false });
}

// The mesh legend (a program split across devices): each mesh's axes, the devices and
// whether they were simulated, and what one device holds; the server words it
// (`mesh_legend`). Its "Per device shapes" toggle shows only with a mesh.
let meshDetails = false; // the mesh legend's details shown (its "details" button)

/** @param {CaptureSummary | null} c */
function renderMeshLegend(c) {
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
  box.append(el("div", { class: "mesh-row mesh-key" }, el("span", { class: "mesh-collective" }, "⇄ collective"),
    " the program writes · ", el("span", { class: "mesh-compiler" }, "⇆ XLA"), " the compiler adds"));
  const more = el("div", { class: "mesh-more", id: "mesh-more" });
  more.hidden = !meshDetails;
  if (legend.devices) more.append(el("div", { class: legend.simulated ? "mesh-row simulated" : "mesh-row" }, String(legend.devices)));
  const memory = memoryLine(legend.memory); // worded as group cards word it
  if (memory) more.append(el("div", { class: "mesh-row" }, memory));
  more.append(el("div", { class: "mesh-row mesh-key" }, "f32[8@data,16]: dimension 0 split over data"));
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
  } else if (compiled) {
    more.append(el("div", { class: "mesh-row simulated" }, `not compiled (${compiled.status})`));
  } else {
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
/** @param {CaptureSummary | null} c */
function renderCompiledBanner(c) {
  const compiled = c && !c.failure ? c.compiled : null;
  if (!compiled) {
    banners.drop("compiled");
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

/** @param {boolean} on */
function setKernels(on) {
  return relayoutWith(on ? "Showing every kernel…" : "Folding kernels into their calls…", () => store.setKernels(on));
}

// The value an edge carries, shown where the pointer is on it (its label may be shortened
// or left out where there was no room).
/**
 * @param {{label?: string} | null} edge  null: none (the tip hides)
 * @param {number} [x]  where the pointer is on the canvas
 * @param {number} [y]
 */
function edgeTip(edge, x = 0, y = 0) {
  const tip = $("edge-tip");
  if (!edge || !edge.label) {
    tip.hidden = true;
    return;
  }
  tip.textContent = edge.label;
  tip.style.left = `${Math.round(x + 12)}px`;
  tip.style.top = `${Math.round(y + 14)}px`;
  tip.hidden = false;
}

// The whole name of a far name drawn cut short (drawlist.js farLabel) under world point
// (wx, wy), shown where the pointer is as an edge's value is; null where there is none.
/**
 * @param {Renderer} r
 * @param {number} wx
 * @param {number} wy
 */
function cutName(r, wx, wy) {
  const f = r.farDrawn.find((d) => d.text !== d.full && d.box && wx >= d.box.x && wx <= d.box.x + d.box.w
    && wy >= d.box.y && wy <= d.box.y + d.box.h);
  return f ? f.full : null;
}

// A person's expansions, per profile, by group path: they survive a recapture.
function expansionKey() {
  const c = onScreen();
  if (!c) return null;
  const name = (c.recipe && (c.recipe.name || c.recipe.model)) || c.title;
  return name ? `tensorviz.expanded.${name}` : null;
}

function loadExpansion() {
  const k = expansionKey();
  if (!k) return null;
  try {
    const raw = localStorage.getItem(k);
    return raw ? JSON.parse(raw) : null;
  } catch {
    return null;
  }
}

function saveExpansion() {
  const k = expansionKey();
  if (!k) return;
  try {
    localStorage.setItem(k, JSON.stringify(store.model.expansionPaths()));
  } catch {
    // storage full or refused: the expansion is simply not remembered
  }
}

// Selects and centres an item already in the scene (or expands the way to a node).
/** @param {string} key */
async function focusItem(key) {
  const r = renderer;
  if (!r) return;
  let it = store.itemOf(key);
  if (!it && key.startsWith("n")) {
    try {
      /** @type {{item_path?: string[], group_path?: {id: number}[]}} */
      const node = await api.node(Number(key.slice(1)));
      await store.reveal(key, { itemPath: node.item_path, groupIds: (node.group_path || []).map((g) => g.id) });
      it = store.itemOf(key);
    } catch (err) {
      banners.set("load", "error", "Error", `Could not show ${key}: ${errorText(err)}`);
      return;
    }
  }
  if (!it) return;
  store.select(key); // opens the inspector first, so that centring accounts for it
  r.centerOn(it, Math.max(r.cam.s, READABLE_SCALE));
  r.flash = key;
  setTimeout(() => {
    if (r.flash === key) {
      r.flash = null;
      r.requestDraw();
    }
  }, 1600);
}

// ------------------------------------------------------------------ reveal (go to source)

/**
 * @param {Frame} frame
 * @param {string | null} target  the inspector's item it is shown for (null: by itself)
 */
async function revealFrame(frame, target) {
  /** @type {{handled?: "editor" | "viewer", source?: import("./panels/inspector.js").Source}} */
  let res;
  try {
    res = await api.reveal(frame);
  } catch (err) {
    inspector.showSource(target, null, `Could not reveal: ${errorText(err)}`);
    return;
  }
  if (res && res.handled === "viewer" && res.source) inspector.showSource(target, res.source, null, frame);
  else inspector.showSource(target, null, `Opened ${frame.library && frame.label ? frame.label : frame.file + ":" + frame.line} in the editor.`);
}

// ------------------------------------------------------------------ open .tvg (drop or file picker)

function wireDrop() {
  const drop = $("drop");
  let depth = 0;
  /**
   * @param {DragEvent} e
   * @returns {e is DragEvent & {dataTransfer: DataTransfer}}  a drag that carries files
   */
  const isFile = (e) => !!e.dataTransfer && [...e.dataTransfer.types].includes("Files");
  window.addEventListener("dragenter", (e) => {
    if (!isFile(e)) return;
    depth++;
    drop.hidden = false;
  });
  window.addEventListener("dragleave", () => {
    depth = Math.max(0, depth - 1);
    if (!depth) drop.hidden = true;
  });
  window.addEventListener("dragover", (e) => {
    if (isFile(e)) e.preventDefault();
  });
  window.addEventListener("drop", (e) => {
    if (!isFile(e)) return;
    e.preventDefault();
    depth = 0;
    drop.hidden = true;
    const f = e.dataTransfer.files[0];
    if (f) openFile(f);
  });
}

/** @param {File} file  a graph file (.tvg) */
async function openFile(file) {
  banners.set("open", "info", "Opening", `Opening ${file.name}…`);
  try {
    const bytes = await file.arrayBuffer();
    /** @type {{id: number}} */
    const res = await api.open(bytes, file.name);
    banners.drop("open");
    openCapture(res.id);
  } catch (err) {
    const msg = err instanceof ApiError && err.status === 404 ? "this viewer server does not accept uploaded files" : errorText(err);
    banners.set("open", "error", "Open", `Could not open ${file.name}: ${msg}`);
  }
}

boot();
