// The viewer app: boot and wiring between the API, the store (the viewer's state and its
// named actions), the view model, the renderer and the panels. What the graph means lives
// in viewmodel.js, the state in store.js, how it is drawn in renderer.js; each panel
// (panels/) follows the store. What the page says about the capture (title, coverage,
// failure, mesh legend) is in capture-screens.js, the canvas's pointer input in
// canvas-input.js.

import { Api, ApiError } from "./api.js";
import { LayoutClient } from "./layout/layout-client.js";
import { ROOT } from "./model/viewmodel.js";
import { Store } from "./model/store.js";
import { Renderer } from "./draw/renderer.js";
import { Settler } from "./layout/settle.js";
import { Inspector } from "./panels/inspector.js";
import { SetupForm } from "./panels/setup.js";
import { Banners } from "./panels/banners.js";
import { exportPng, exportSvg } from "./draw/export.js";
import { FIRST_FIT, READABLE_SCALE, setVocabulary } from "./draw/theme.js";
import { describeState } from "./model/weights.js";
import { $, el, clear } from "./dom.js";
import { renderCompiledBanner, renderCoverage, renderMeshLegend, renderTitle, showFailure } from "./capture-screens.js";
import { wireCanvas } from "./canvas-input.js";
import { DiffPanel } from "./panels/diff.js";
import { LinesPanel } from "./panels/lines.js";
import { SearchPanel } from "./panels/search.js";
import { CostPanel } from "./panels/cost.js";
import { installHooks } from "./hooks.js";

/** @import { CaptureSummary, Frame } from "./capture-screens.js" */

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
// The layout client first: it adopts the worker index.html started (layout/early-worker.js).
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
mark("script"); // the app's modules fetched, parsed and run (benchmarks: the page's own start)

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
  renderCoverage(capture, { banners, showAbout });
  renderMeshLegend(capture);
  renderCompiledBanner(capture, { banners });
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

// eslint-disable-next-line complexity -- the page's start-up, its steps in order (capture, setup page, empty page)
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
    showFailure(capture, { banners, revealFrame, setStatus });
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
  wireCanvas(r, canvas, minimap, { store, toggle, inspector });
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
  // Painted: the pages a person opens next are made meanwhile (a 400-block chunk of a
  // stack is ~0.3 s of the server's work), when the page is idle.
  const idle = window.requestIdleCallback || ((/** @type {() => void} */ f) => setTimeout(f, 50));
  idle(() => {
    const m = store.model;
    if (m) m.prefetchNext().then((keys) => mark(keys.length ? "prefetched" : "nothing-to-prefetch"));
  });
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

/** @type {string | null} */
let leavingFor = null; // the query this page is already navigating to

/** @param {number | null} [id]  none: the newest */
function openCapture(id) {
  const q = new URLSearchParams(location.search);
  q.delete("setup"); // a graph's page now, no longer the form's
  if (id === undefined || id === null) q.delete("capture");
  else q.set("capture", String(id));
  const query = q.toString();
  // A second event about the same capture while the page is on its way there (its
  // statistics landing in place: capture-ready again, the same id) must not start the
  // navigation over: that aborts the first load and reloads the page.
  if (query === leavingFor) return;
  leavingFor = query;
  location.search = query;
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
// eslint-disable-next-line complexity -- the keyboard map, one case per key
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

/** @param {boolean} on */
function setKernels(on) {
  return relayoutWith(on ? "Showing every kernel…" : "Folding kernels into their calls…", () => store.setKernels(on));
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
