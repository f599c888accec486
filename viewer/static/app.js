// The viewer app: state, wiring between the API, the view model, the renderer and the
// panels. What the graph means lives in viewmodel.js; how it is drawn in renderer.js.

import { Api, ApiError } from "./api.js";
import { LayoutClient } from "./layout/layout-client.js";
import { GraphModel, ROOT, isContainerKey } from "./model/viewmodel.js";
import { Renderer } from "./draw/renderer.js";
import { Settler } from "./layout/settle.js";
import { Inspector } from "./panels/inspector.js";
import { SetupForm } from "./panels/setup.js";
import { exportPng, exportSvg } from "./draw/export.js";
import { CARD_STYLE, canvasMeasurer, drawCard, measureCard } from "./draw/card.js";
import { FIRST_FIT, READABLE_SCALE, setVocabulary } from "./draw/theme.js";
import { describeState } from "./model/weights.js";
import { el, clear, jsonView } from "./dom.js";
import { initDiff } from "./panels/diff.js";
import { cursorLine, showLine } from "./panels/lines.js";
import { hideResults, jump, wireSearch } from "./panels/search.js";

const $ = (id) => document.getElementById(id);

const params = new URLSearchParams(location.search);
const api = new Api(params.get("capture"));

const state = {
  capture: null,
  model: null,
  renderer: null,
  inspector: null,
  setup: null,
  banners: new Map(),
  selected: null,
  search: { results: [], active: -1, seq: 0 },
  captureStartedHere: false,
  firstPaintMs: null,
  ready: false,
  error: null,
};

// What the page's parts (lines.js, search.js) may use: the state, the API and helpers.
const app = {
  state, api, setStatus, setBanner, dropBanner, select, selectWeight, focusItem, saveExpansion, minimapVisibility,
};

// Test and benchmark hooks (read-only views of the state; no behaviour hides here).
window.tensorviz = {
  get ready() {
    return state.ready;
  },
  get error() {
    return state.error;
  },
  get firstPaintMs() {
    return state.renderer ? state.renderer.firstPaintAt : null;
  },
  get layoutMs() {
    return state.model ? state.model.lastLayoutMs : null;
  },
  get layoutJobs() {
    return state.layout ? state.layout.jobCount : 0;
  },
  get layoutSuperseded() {
    return state.layout ? state.layout.superseded : 0;
  },
  // Where the last relayout's time went (viewmodel.js timings: fetch, jobs, layout, compose…).
  get timings() {
    return state.model ? { ...state.model.timings, log: state.model.timingLog.slice(), jobs: state.layout.recent.slice(-20) } : null;
  },
  get layoutTotalMs() {
    return state.layout ? state.layout.totalMs : null;
  },
  get camera() {
    return state.renderer ? { ...state.renderer.cam } : null;
  },
  get selected() {
    return state.selected;
  },
  get expanded() {
    return state.model ? [...state.model.expanded] : [];
  },
  // How many times the graph on screen was replaced in place by its recapture.
  get liveUpdates() {
    return state.liveUpdates || 0;
  },
  get captureId() {
    return state.capture ? state.capture.id : null;
  },
  get sceneVersion() {
    return state.model ? state.model.version : 0;
  },
  sceneStats() {
    const r = state.renderer;
    return r && r.scene ? { items: r.scene.count, w: r.scene.w, h: r.scene.h, drawn: r.stats, drawMs: r.drawMs.slice(-120) } : null;
  },
  // The on-screen rectangle (CSS px, relative to the canvas) of an item, if laid out.
  itemRect(key) {
    const r = state.renderer;
    const it = r && r.scene && r.scene.byKey.get(key);
    if (!it) return null;
    const [x, y] = r.toScreen(it.x, it.y);
    return { x, y, w: it.w * r.cam.s, h: it.h * r.cam.s };
  },
  keys() {
    const r = state.renderer;
    return r && r.scene ? [...r.scene.byKey.keys()] : [];
  },
  // Centres an item that is laid out, without selecting it.
  center(key) {
    const r = state.renderer;
    const it = r && r.scene && r.scene.byKey.get(key);
    if (it) r.centerOn(it);
    return !!it;
  },
  // What an item is, by meaning, for tests that check layout: kind ("node" | "group" |
  // "chunk" | "stack" | "in" | "out"), name (op, group name, value name), path (the group
  // path, "Wrapped/gpt/transformer/h.3"), role (a boundary value's role; a group's class).
  itemInfo(key) {
    const m = state.model;
    const it = m && m.scene && m.scene.byKey.get(key);
    if (!it) return null;
    const item = it.item || {};
    const name = it.type === "in" || it.type === "out" ? item.name ?? null : item.label ?? null;
    const path = m.paths.get(key) ?? (m.paths.get(it.parentKey) ?? null);
    const role = it.type === "in" || it.type === "out" ? item.role ?? null : item.class ?? null;
    return {
      kind: it.type, name, path, role, weight: !!item.weight,
      members: item.members ? [...item.members] : null,
      weights: (item.weights || []).map((w) => w.name),
      lines: [...it.card.lines], weightStart: it.card.weightStart ?? null,
    };
  },
  // A laid-out card's geometry (draw/card.js): the box the layout worker gave it, the size
  // the page measures for the same content (a frame: for its inside), what it draws at
  // readable detail (its texts, with their measured widths, and toggles, in world units)
  // and the texts its content says in full.
  card(key) {
    const r = state.renderer;
    const it = r && r.scene && r.scene.byKey.get(key);
    if (!it) return null;
    const m = canvasMeasurer(r.ctx);
    const measured = measureCard(it.expanded ? { inner: { w: it.expanded.w, h: it.expanded.h } } : it.card, m);
    const dl = { card: [], header: null, far: null };
    drawCard(dl, it, r.ctx, r.palette, 2);
    const texts = [];
    const toggles = [];
    for (const q of [...dl.card, ...(dl.header || [])]) {
      if (q.t === "text") {
        r.ctx.font = q.font;
        texts.push({ text: q.text, x: q.x, y: q.y, w: r.ctx.measureText(q.text).width });
      } else if (q.t === "toggle") toggles.push({ cx: q.cx, cy: q.cy, r: q.r });
    }
    const c = it.card;
    return {
      kind: it.type, open: !!it.expanded, box: { x: it.x, y: it.y, w: it.w, h: it.h }, measured, texts, toggles,
      says: [c.title, c.tag, ...c.lines, ...(c.parts || []).map((p) => p.text)].filter(Boolean),
      padX: CARD_STYLE.padX, maxWidth: CARD_STYLE.maxCardWidth, header: CARD_STYLE.groupHeader,
    };
  },
  // Show in Graph (a source line's items selected, in view) and the editor's cursor line.
  get lineShown() {
    const l = state.line;
    return l ? { file: l.file, line: l.line, call: l.call, calls: l.calls, keys: [...l.keys], shown: l.shown } : null;
  },
  get multiSelected() {
    return state.renderer && state.renderer.multi ? [...state.renderer.multi] : [];
  },
  get cursorShown() {
    return state.cursorShown ? { ...state.cursorShown, keys: [...state.cursorShown.keys] } : null;
  },
  showLine: (file, line, call) => showLine(app, file, line, call),
  expandAll: () => expandAll(),
  // Containers whose layout is still an estimate (out of view after Expand all), and a
  // promise that resolves once the view shows none.
  estimatedKeys: () => (state.model ? state.model.estimatedKeys() : []),
  settle: () => (state.settler ? state.settler.now() : Promise.resolve()),
  collapseAll: () => collapseAll(),
  expandToDepth: (n) => expandToDepth(n),
  setWeightPills: (on) => setWeightPills(on),
  get weightPills() {
    return state.model ? state.model.showWeights : false;
  },
  fit: () => state.renderer && state.renderer.fit(),
  readable: () => state.renderer && state.renderer.readable(),
  panBy: (dx, dy) => state.renderer && state.renderer.panBy(dx, dy),
  zoomAt: (x, y, f) => state.renderer && state.renderer.zoomAt(x, y, f, true),
  toggle: (key) => toggle(key),
  jump: (result) => jump(app, result),
  // What a boundary pill ("in:V" / "out:V") draws: its look ("input" | "quiet" | "plain"),
  // the value's role and name, and its text parts as fitted to the laid-out width.
  pill(key) {
    const r = state.renderer;
    const it = r && r.scene && r.scene.byKey.get(key);
    if (!it || (it.type !== "in" && it.type !== "out")) return null;
    const fit = r.pillFit(it);
    return { look: it.card.look, role: it.card.role, name: it.item.name ?? null, texts: [...fit.texts], w: it.w, h: it.h };
  },
};

// ------------------------------------------------------------------ boot

const marks = {};
function mark(name) {
  marks[name] = performance.now();
}
window.tensorviz.marks = marks;

async function boot() {
  state.inspector = new Inspector($("inspector"), {
    api,
    onJump: (key) => focusItem(key),
    onReveal: (frame, target) => revealFrame(frame, target),
  });
  wireToolbar();
  wireDrop();
  listenEvents();
  // Start the layout worker first: ELK parses while the capture summary is fetched.
  state.layout = new LayoutClient("static/layout/layout.worker.js");
  state.model = new GraphModel(api, state.layout);
  // The root's children are needed for any graph: ask for them alongside the summary.
  state.model.load(ROOT).catch(() => {});
  // A setup form's own page (Open as Graph for a symbol without a profile): the form, even
  // when this viewer already holds other graphs (the newest one is another model's).
  if (params.get("setup") !== null && params.get("capture") === null && (await initSetup(params.get("setup")))) {
    showEmpty();
    return;
  }
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
  setVocabulary(capture.vocabulary);
  state.capture = capture;
  state.inspector.capture = capture;
  renderTitle(capture);
  renderCoverage(capture);
  if (capture.stale && capture.stale.files && capture.stale.files.length) showStale(capture.stale.files);
  initSetup();
  if (capture.failure) {
    showFailure(capture);
    state.ready = true;
    return;
  }
  const canvas = $("graph");
  const minimap = $("minimap");
  state.renderer = new Renderer(canvas, minimap);
  // Estimated containers (Expand all on a big graph) are laid out once they come into view.
  state.settler = new Settler(() => state.model, state.renderer, () => minimapVisibility());
  state.renderer.onDraw = () => {
    updateZoomLabel();
    state.settler.soon();
  };
  wireCanvas(canvas, minimap);
  new ResizeObserver(() => state.renderer.resize()).observe($("stage"));
  window.addEventListener("tv-panels", (e) => (state.renderer.insetRight = e.detail.inset));
  matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => state.renderer.setPalette());
  setStatus("Laying out…");
  try {
    const saved = loadExpansion();
    const restored = saved && (await state.model.restorePaths(saved));
    if (!restored) await state.model.autoExpand();
    mark("expanded");
    await relayout();
    // The most informative first view that still fits: close the last groups the first
    // view opened while Fit would have to zoom below FIRST_FIT.
    while (!restored && state.renderer.fitScale() < FIRST_FIT && state.model.closeLastOpened()) await relayout();
    mark("laid-out");
  } catch (err) {
    showLoadError(err);
    return;
  }
  state.renderer.home();
  setStatus("");
  // Diff mode (diff.js): offered when the server holds a baseline, or asked by ?diff=.
  initDiff({ api, capture, renderer: state.renderer, model: () => state.model, jump: (r) => jump(app, r), setBanner, dropBanner });
  // Show in Graph opened this page: ?show=FILE:LINE[:CALL] (the editor's line, as captured).
  const show = /^(.+?):(\d+)(?::(\d+))?$/.exec(params.get("show") || "");
  if (show) await showLine(app, show[1], Number(show[2]), Number(show[3] || 0));
  state.ready = true;
}

// The page before the first capture: what to do next, with the setup form beside it.
function showEmpty() {
  const setup = state.setup.data || {};
  const symbol = (setup.symbol && setup.symbol.qualname) || ((setup.recipe && setup.recipe.model) || "").split(":").pop() || "this model";
  document.body.classList.add("no-capture"); // no graph: the canvas tools go away
  $("empty").hidden = false;
  state.symbol = symbol;
  $("empty-title").textContent = `Set up ${symbol}`;
  $("empty-open").onclick = () => state.setup.open();
  const t = $("title");
  clear(t);
  t.append(el("strong", {}, symbol), "  ·  " + ["setup", setup.recipe && setup.recipe.framework].filter(Boolean).join(" · "));
  t.title = `${symbol}: no capture yet`;
  document.title = `Set up ${symbol} — TensorViz`;
  setStatus("");
  state.ready = true;
}

function emptyCapturing(message, capturing = true) {
  if ($("empty").hidden) return;
  $("empty").classList.toggle("capturing", capturing);
  $("empty-title").textContent = `${capturing ? "Capturing" : "Set up"} ${state.symbol}`;
  $("empty-text").textContent = message;
}

function showLoadError(err) {
  state.error = String(err && err.message || err);
  setBanner("load", "error", "Error", `Could not load the graph: ${state.error}`);
  setStatus("");
  state.ready = true;
}

async function relayout() {
  const ok = await state.model.refresh();
  if (!ok) return false;
  state.renderer.setScene(state.model.scene);
  minimapVisibility();
  return true;
}

function minimapVisibility() {
  const r = state.renderer;
  // The overview helps only when the graph does not fit at readable detail.
  $("minimap").hidden = !(r.scene && (r.scene.w * READABLE_SCALE > r.width * 1.1 || r.scene.h * READABLE_SCALE > r.height * 1.1));
  if (!$("minimap").hidden) r.resize();
}

function setStatus(text) {
  $("status").textContent = text;
}

function updateZoomLabel() {
  const s = state.renderer.cam.s;
  const pct = s >= 0.1 ? Math.round(s * 100) + "%" : (s * 100).toFixed(s >= 0.01 ? 1 : 2) + "%";
  const z = $("zoom");
  if (z.textContent !== pct) z.textContent = pct;
}

// ------------------------------------------------------------------ title & banners

function renderTitle(c) {
  const t = $("title");
  clear(t);
  t.append(el("strong", {}, c.title || "capture"));
  const counts = c.counts || {};
  const bits = [c.framework, c.backend, counts.nodes !== undefined ? `${Number(counts.nodes).toLocaleString("en-US")} nodes` : null].filter(Boolean);
  // Template nodes of unexecuted control-flow bodies are counted apart from the program.
  if (counts.template_nodes) bits.push(`${Number(counts.template_nodes).toLocaleString("en-US")} in unexecuted bodies`);
  t.append("  ·  " + bits.join(" · "));
  t.title = `${c.title || ""} (${bits.join(", ")})`;
  document.title = `${c.title || "capture"} — TensorViz`;
}

function setBanner(id, level, kind, text, actions = []) {
  let b = state.banners.get(id);
  if (!b) {
    b = el("div", { class: "banner", "data-banner": id, role: level === "error" ? "alert" : "status" });
    state.banners.set(id, b);
    $("banners").append(b);
  }
  b.className = `banner ${level}`;
  clear(b);
  b.append(el("span", { class: "banner-kind" }, kind));
  b.append(typeof text === "string" ? el("span", { class: "banner-text" }, text) : text);
  for (const a of actions) b.append(a);
  return b;
}

function dropBanner(id) {
  const b = state.banners.get(id);
  if (b) b.remove();
  state.banners.delete(id);
}

function renderCoverage(c) {
  const cov = c.coverage || {};
  if (c.failure) return;
  const parts = [];
  if (cov.scope === "traced_program") {
    parts.push("Traced program: shapes and dtypes are inferred from the trace for the saved inputs, not measured from an eager run.");
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
  const level = partial || cov.effects === "incomplete" ? "warn" : "info";
  const kind = partial ? "Partial" : cov.scope === "traced_program" ? "Traced program" : "Eager";
  const text = el("span", { class: "banner-text" }, parts.join(" "));
  // Where the parameters came from: fresh initialization is not trained weights.
  const weights = describeState(c);
  if (weights) {
    text.append(" ", el("span", { class: `banner-state ${weights.origin}`, "data-state": weights.label, title: weights.note || "" }, weights.headline));
  }
  const about = el("button", { type: "button", title: "What this capture is: framework, recipe, where its parameters came from", onclick: () => showAbout() }, "About this capture");
  const b = setBanner("coverage", level, kind, text, [about]);
  b.dataset.scope = cov.scope || "";
  b.dataset.status = cov.status || "";
}

// The capture summary in the inspector (the toolbar title and the coverage banner open it).
function showAbout() {
  if (!state.capture) return;
  if (state.selected) {
    state.selected = null;
    if (state.renderer) {
      state.renderer.selected = null;
      state.renderer.requestDraw();
    }
  }
  state.inspector.showCapture(state.capture, describeState(state.capture));
}

function showStale(files) {
  const list = (files || []).join(", ") || "a source file";
  const actions = [];
  if (state.setup && state.setup.profile) {
    actions.push(el("button", { type: "button", onclick: () => state.setup.capture() }, "Capture again"));
  }
  setBanner("stale", "warn", "Stale", `This graph is stale. Changed since it was captured: ${list}.`, actions);
}

function showProgress(data) {
  const bar = el("div", { class: "progress-bar" }, el("div"));
  if (typeof data.fraction === "number") bar.firstChild.style.width = Math.round(Math.max(0, Math.min(1, data.fraction)) * 100) + "%";
  else bar.hidden = true;
  const text = el("span", { class: "banner-text" }, data.message || "Capturing…");
  setBanner("progress", "info", "Capturing", text, [bar]);
}

function showFailure(c) {
  const f = c.failure;
  $("failure").hidden = false;
  $("stage").classList.add("failed");
  document.body.classList.add("capture-failed"); // no graph: the canvas tools go away
  $("failure-title").textContent = f.type || "Capture failed";
  $("failure-message").textContent = f.message || "";
  const facts = $("failure-facts");
  clear(facts);
  const rows = [["stage", f.stage], ["framework", c.framework], ["backend", c.backend], ["profile", c.recipe && c.recipe.model]];
  for (const [k, v] of rows) if (v) facts.append(el("dt", {}, k), el("dd", {}, String(v)));
  const frames = $("failure-frames");
  clear(frames);
  // Deep recursion: after a frame, how many more times the frames before it repeat (server's words).
  const repeats = new Map((f.repeated_frames || []).map((r) => [r.after, r.text]));
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
  setBanner("failure", "error", "Failed", `Capture failed at ${f.stage || "trace"}: ${f.message || f.type}`);
  setStatus("");
}

// ------------------------------------------------------------------ events (SSE)

function listenEvents() {
  if (typeof EventSource === "undefined") return;
  api.events({
    progress: (d) => {
      showProgress(d);
      emptyCapturing("Capturing… the graph opens here as soon as it is ready.");
    },
    stale: (d) => aboutThisCapture(d) && showStale(d.files),
    fresh: (d) => aboutThisCapture(d) && dropBanner("stale"),
    // Show in Graph from the editor: this page focuses the line (no new tab was opened).
    show: (d) => {
      if (!aboutThisCapture(d) || !state.renderer) return;
      window.focus();
      showLine(app, d.file, d.line, d.call || 0);
    },
    // The editor's cursor moved to a line (tensorviz.followCursor): a light outline.
    cursor: (d) => aboutThisCapture(d) && state.renderer && cursorLine(app, d),
    "capture-ready": (d) => {
      dropBanner("progress");
      // A background recapture of the graph on screen (recapture on save): update in place.
      if (state.capture && d.replaces !== undefined && Number(d.replaces) === Number(state.capture.id)) return liveUpdate(d.id);
      const open = () => openCapture(d.id);
      // Started from this page, or the page has no graph yet: show the new one at once (a
      // setup form's page only follows its own capture, not another model's).
      if (state.captureStartedHere || (!state.capture && params.get("setup") === null)) return open();
      setBanner("ready", "ok", "Ready", "A new capture is ready.", [el("button", { type: "button", onclick: open }, "Open it")]);
    },
    "capture-failed": (d) => {
      // Another profile's capture (e.g. its recapture on save) is not about this graph.
      const mine = state.capture && state.capture.recipe && state.capture.recipe.name;
      if (d.profile && mine && d.profile !== mine && !state.captureStartedHere) return;
      dropBanner("progress");
      if (state.setup && state.captureStartedHere) state.setup.setStatus("The capture failed: see the message above.");
      emptyCapturing("The capture failed (see the message above). Check the setup and press Save & capture again.", false);
      const actions = d.id !== undefined && d.id !== null ? [el("button", { type: "button", onclick: () => openCapture(d.id) }, "Show the failure")] : [];
      setBanner("capture-failed", "error", "Failed", `Capture failed${d.stage ? " at " + d.stage : ""}: ${d.message || "unknown error"}`, actions);
    },
  });
}

// The graph on screen replaced by its recapture, without a reload: the camera, the
// expansion (by group path) and the weight-pill choice stay; stale and failure banners go.
async function liveUpdate(id) {
  if (!state.renderer || !state.model || (state.capture && state.capture.failure)) return openCapture(id);
  const paths = state.model.expansionPaths();
  const weights = state.model.showWeights;
  const previous = api.captureId;
  api.captureId = String(id);
  let capture;
  try {
    capture = await api.capture();
  } catch (err) {
    api.captureId = previous;
    return openCapture(id);
  }
  if (capture.failure) return openCapture(id);
  const q = new URLSearchParams(location.search);
  q.set("capture", id);
  history.replaceState(null, "", "?" + q.toString());
  setVocabulary(capture.vocabulary);
  state.capture = capture;
  state.inspector.capture = capture;
  renderTitle(capture);
  renderCoverage(capture);
  for (const b of ["stale", "capture-failed", "ready", "progress", "load"]) dropBanner(b);
  const model = new GraphModel(api, state.layout);
  model.showWeights = weights;
  await model.load(ROOT);
  await model.restorePaths(paths);
  state.model = model;
  state.selected = null;
  state.renderer.selected = null;
  state.renderer.hover = null;
  state.renderer.multi = state.renderer.cursor = state.line = null; // another capture's items
  dropBanner("line");
  await relayout(); // a new scene keeps the renderer's camera as it is
  // The new capture's diff offer: "Show changes" against the graph it replaced.
  initDiff({ api, capture, renderer: state.renderer, model: () => state.model, jump: (r) => jump(app, r), setBanner, dropBanner });
  state.liveUpdates = (state.liveUpdates || 0) + 1;
}

// stale/fresh may name a capture; without one they are about the newest.
function aboutThisCapture(d) {
  if (!state.capture) return false;
  if (d.capture === undefined || d.capture === null) return true;
  return Number(d.capture) === Number(state.capture.id);
}

function openCapture(id) {
  const q = new URLSearchParams(location.search);
  q.delete("setup"); // a graph's page now, no longer the form's
  if (id === undefined || id === null) q.delete("capture");
  else q.set("capture", id);
  location.search = q.toString();
}

// ------------------------------------------------------------------ setup form

async function initSetup(profile) {
  state.setup = new SetupForm($("setup"), {
    api,
    onCaptureStarted: () => {
      state.captureStartedHere = true;
      // The embedder's own progress may already be here (it is more telling): keep it.
      if (!state.banners.has("progress")) showProgress({ message: "Capture started…" });
      emptyCapturing("Capturing… the graph opens here as soon as it is ready.");
    },
  });
  // Setup and "Capture again" act on the graph on screen: ask for its own profile's form.
  const available = await state.setup.load(profile || (state.capture && state.capture.recipe ? state.capture.recipe.name : undefined));
  $("btn-setup").hidden = !available;
  // Without a graph the form is the page's content: open it even when nothing is missing.
  if (available && (state.setup.needsInput || !state.capture)) state.setup.open();
  if (available && state.capture && state.banners.has("stale")) showStale(state.capture.stale && state.capture.stale.files);
  return available;
}

// ------------------------------------------------------------------ interactions

function wireToolbar() {
  $("btn-fit").onclick = () => state.renderer && state.renderer.fit();
  $("btn-expand-all").onclick = () => expandAll();
  $("btn-collapse-all").onclick = () => collapseAll();
  $("depth").onchange = (e) => {
    const n = Number(e.target.value);
    e.target.value = "";
    if (n > 0) expandToDepth(n);
  };
  $("btn-weights").onclick = () => setWeightPills(!(state.model && state.model.showWeights));
  $("btn-readable").onclick = () => readable();
  $("btn-zoom-in").onclick = () => zoomCentre(1.25);
  $("btn-zoom-out").onclick = () => zoomCentre(0.8);
  $("btn-setup").onclick = () => state.setup.toggle();
  $("title").onclick = () => showAbout();
  $("btn-open").onclick = () => $("file-input").click();
  $("file-input").onchange = (e) => {
    const f = e.target.files && e.target.files[0];
    if (f) openFile(f);
  };
  $("btn-png").onclick = () => state.renderer && exportPng(state.renderer, fileStem());
  $("btn-svg").onclick = () => state.renderer && exportSvg(state.renderer, fileStem());
  wireSearch(app);
  document.addEventListener("keydown", onKey);
}

function fileStem() {
  return (state.capture && state.capture.title ? state.capture.title : "tensorviz").replace(/[^A-Za-z0-9_.-]+/g, "_");
}

function readable() {
  const r = state.renderer;
  if (!r) return;
  const it = state.selected && r.scene && r.scene.byKey.get(state.selected);
  if (it) r.readable(it.x + it.w / 2, it.y + it.h / 2);
  else r.readable();
}

function zoomCentre(f) {
  const r = state.renderer;
  if (r) r.zoomAt(r.width / 2, r.height / 2, f);
}

function onKey(e) {
  const target = e.target;
  const typing = target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.tagName === "SELECT");
  if (e.key === "Escape") {
    if (typing) target.blur();
    hideResults(app);
    if (!$("setup").hidden) state.setup.close();
    else if (state.selected || !$("inspector").hidden) select(null);
    return;
  }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  const r = state.renderer;
  switch (e.key) {
    case "/":
      e.preventDefault();
      $("search").focus();
      $("search").select();
      return;
    case "f":
      if (r) r.fit();
      break;
    case "r":
      readable();
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
      if (state.selected && canOpen(state.selected)) toggle(state.selected);
      break;
    case "[":
    case "]": // the shown source line's previous / next call (Show in Graph's banner)
      if (!state.line || !state.banners.has("line")) return;
      showLine(app, state.line.file, state.line.line, state.line.call + (e.key === "]" ? 1 : -1));
      break;
    default:
      return;
  }
  e.preventDefault();
}

function wireCanvas(canvas, minimap) {
  const r = state.renderer;
  const pointers = new Map();
  let drag = null;
  let pinch = null;
  const local = (e) => {
    const rect = canvas.getBoundingClientRect();
    return [e.clientX - rect.left, e.clientY - rect.top];
  };
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
    const hit = state.model.hitTest(wx, wy);
    canvas.classList.toggle("pointing", !!hit && hit.type !== "in" && hit.type !== "out");
  });
  const end = (e) => {
    pointers.delete(e.pointerId);
    if (pointers.size < 2) pinch = null;
    if (drag && e.type === "pointerup" && drag.moved <= 3) {
      const [x, y] = local(e);
      const [wx, wy] = r.toWorld(x, y);
      const hit = state.model.hitTest(wx, wy);
      const w = hit ? r.weightAt(hit, wx, wy) : -1;
      if (w >= 0) selectWeight(hit.key, hit.item.weights[w].value);
      else select(hit ? hit.key : null);
    }
    drag = null;
    canvas.classList.remove("dragging");
  };
  canvas.addEventListener("pointerup", end);
  canvas.addEventListener("pointercancel", end);
  canvas.addEventListener("dblclick", (e) => {
    const [x, y] = local(e);
    const [wx, wy] = r.toWorld(x, y);
    const hit = state.model.hitTest(wx, wy);
    if (hit && canOpen(hit.key)) toggle(hit.key);
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

// Groups, chunks, stacks, and control-flow boundary nodes with bodies open.
function canOpen(key) {
  return isContainerKey(key) || !!(state.model && state.model.bodyHolders.has(key));
}

async function toggle(key) {
  const m = state.model;
  const r = state.renderer;
  if (!m || !canOpen(key) || key === ROOT) return;
  const before = m.scene && m.scene.byKey.get(key);
  const anchor = before ? r.toScreen(before.x, before.y) : null;
  m.toggle(key);
  setStatus(m.expanded.has(key) ? "Expanding…" : "Collapsing…");
  let ok = false;
  try {
    ok = await relayout();
  } catch (err) {
    setBanner("load", "error", "Error", `Could not expand: ${err.message || err}`);
  }
  if (!ok) return;
  setStatus("");
  const after = m.scene.byKey.get(key) || (key.startsWith("s") ? m.scene.byKey.get(key.slice(1)) : null);
  saveExpansion();
  if (anchor && after) {
    // Keep the toggled group where it was on screen; the rest moves around it.
    r.cam.tx = anchor[0] - after.x * r.cam.s;
    r.cam.ty = anchor[1] - after.y * r.cam.s;
    r.requestDraw();
  }
  select(after ? after.key : key);
}

// ------------------------------------------------------------------ expand all, depth, weights

async function relayoutWith(status, change) {
  const m = state.model;
  const r = state.renderer;
  if (!m || !r) return false;
  setStatus(status);
  const t0 = performance.now();
  let ok = false;
  try {
    await change(m);
    ok = await relayout();
  } catch (err) {
    setBanner("load", "error", "Error", `Could not lay out the graph: ${err.message || err}`);
    setStatus("");
    return false;
  }
  if (!ok) return false;
  state.lastActionMs = performance.now() - t0;
  setStatus("");
  saveExpansion();
  if (state.selected && !m.scene.byKey.get(state.selected)) select(null);
  r.fit();
  await state.settler.now({ refit: true });
  return true;
}

// Every group opened, every stack unfolded: one api/subtree request, one layout request.
// Resolves when the scene is laid out (window.tensorviz.expandAll()).
function expandAll() {
  return relayoutWith("Expanding everything…", (m) => m.expandAll());
}

function collapseAll() {
  return relayoutWith("Collapsing…", (m) => m.collapseAll());
}

function expandToDepth(n) {
  return relayoutWith(`Expanding to depth ${n}…`, (m) => m.expandToDepth(n));
}

async function setWeightPills(on) {
  const m = state.model;
  if (!m) return false;
  m.showWeights = !!on;
  const b = $("btn-weights");
  b.setAttribute("aria-pressed", String(m.showWeights));
  b.classList.toggle("on", m.showWeights);
  return relayoutWith(on ? "Drawing parameters as nodes…" : "Folding parameters into their ops…", () => {});
}

// A person's expansions, per profile, by group path: they survive a recapture.
function expansionKey() {
  const c = state.capture;
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
  } catch (err) {
    return null;
  }
}

function saveExpansion() {
  const k = expansionKey();
  if (!k || !state.model) return;
  try {
    localStorage.setItem(k, JSON.stringify(state.model.expansionPaths()));
  } catch (err) {
    // storage full or refused: the expansion is simply not remembered
  }
}

// A weight line clicked inside an op's card: the op stays selected, the value is shown.
function selectWeight(nodeKey, value) {
  state.selected = nodeKey;
  const r = state.renderer;
  if (r) {
    r.selected = nodeKey;
    r.requestDraw();
  }
  state.selectedValue = value;
  state.inspector.show(`w:${value}`, null);
}

function select(key, keepLine = false) {
  state.selected = key;
  const r = state.renderer;
  if (r) {
    r.selected = key;
    if (!keepLine) r.multi = null; // a click elsewhere ends the line's selection
    r.requestDraw();
  }
  if (!key) {
    state.inspector.hide();
    return;
  }
  const it = r && r.scene && r.scene.byKey.get(key);
  state.inspector.show(key, it ? it.item : null);
}

// Selects and centres an item already in the scene (or expands the way to a node).
async function focusItem(key) {
  const r = state.renderer;
  let it = r.scene && r.scene.byKey.get(key);
  if (!it && key.startsWith("n")) {
    try {
      const node = await api.node(Number(key.slice(1)));
      if (node.item_path && node.item_path.length) await state.model.revealPath(node.item_path);
      else await state.model.reveal(key, (node.group_path || []).map((g) => g.id));
      r.setScene(state.model.scene);
      it = r.scene.byKey.get(key);
    } catch (err) {
      setBanner("load", "error", "Error", `Could not show ${key}: ${err.message || err}`);
      return;
    }
  }
  if (!it) return;
  select(key); // opens the inspector first, so that centring accounts for it
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

async function revealFrame(frame, target) {
  let res;
  try {
    res = await api.reveal(frame);
  } catch (err) {
    state.inspector.showSource(target, null, `Could not reveal: ${err.message || err}`);
    return;
  }
  if (res && res.handled === "viewer" && res.source) state.inspector.showSource(target, res.source, null, frame);
  else state.inspector.showSource(target, null, `Opened ${frame.library && frame.label ? frame.label : frame.file + ":" + frame.line} in the editor.`);
}

// ------------------------------------------------------------------ open .tvg (drop or file picker)

function wireDrop() {
  const drop = $("drop");
  let depth = 0;
  const isFile = (e) => e.dataTransfer && [...e.dataTransfer.types].includes("Files");
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

async function openFile(file) {
  setBanner("open", "info", "Opening", `Opening ${file.name}…`);
  try {
    const bytes = await file.arrayBuffer();
    const res = await api.open(bytes, file.name);
    dropBanner("open");
    openCapture(res.id);
  } catch (err) {
    const msg = err instanceof ApiError && err.status === 404 ? "this viewer server does not accept uploaded files" : err.message || String(err);
    setBanner("open", "error", "Open", `Could not open ${file.name}: ${msg}`);
  }
}

boot();
