// Diff mode: what changed between the capture on screen and another one (api/diff,
// viewer/server/diffview.py). Changes are highlighted on the graph (added, changed, "something
// was removed here", and "a change is inside" on the groups on the way down) and listed
// in a panel to step through; each entry opens its group and centres the change.
//
// app.js calls initDiff() once the graph is on screen; the renderer calls the overlay
// this module installs after it has drawn the items (renderer.overlay).

import { el } from "../dom.js";

const STATUS_WORD = { added: "added", removed: "removed", changed: "changed" };
const MARK = { added: "+", changed: "~", removed: "−", "removed-inside": "−", contains: "" };

const diff = {
  deps: null, // {api, capture, model(), renderer, jump, setBanner, dropBanner}
  data: null, // the api/diff answer
  against: null,
  index: -1,
  panel: null,
  loading: false,
  error: null,
  listening: false,
};

// Test hooks (read-only views; no behaviour hides here).
function exposeHooks() {
  if (!window.tensorviz) return;
  window.tensorviz.diff = {
    get active() {
      return !!diff.data;
    },
    get offered() {
      return !!(diff.deps && diff.deps.capture.diff);
    },
    get error() {
      return diff.error;
    },
    get changes() {
      return diff.data ? diff.data.changes.map((c) => ({ ...c })) : [];
    },
    get counts() {
      return diff.data ? { ...diff.data.counts } : null;
    },
    get index() {
      return diff.index;
    },
    // Marks of the items now on screen: {key: status}.
    drawn() {
      const out = {};
      const r = diff.deps && diff.deps.renderer;
      if (!r || !r.scene || !diff.data) return out;
      for (const key of r.scene.byKey.keys()) {
        const m = markOf(key);
        if (m) out[key] = m;
      }
      return out;
    },
    show: (against) => show(against),
    step: (d) => step(d),
    go: (i) => go(i),
    hide: () => hide(),
  };
}

// Call again when the page shows another capture in place (a recapture): the previous
// capture's diff is dropped and the new capture's offer, if any, is shown.
export function initDiff(deps) {
  if (diff.panel) diff.panel.remove();
  diff.panel = null;
  diff.data = null;
  diff.index = -1;
  diff.error = null;
  if (diff.deps) diff.deps.dropBanner("diff");
  diff.deps = deps;
  exposeHooks();
  deps.renderer.overlay = (ctx, r) => drawOverlay(ctx, r);
  if (!diff.listening) document.addEventListener("keydown", onKey);
  diff.listening = true;
  const wanted = new URLSearchParams(location.search).get("diff");
  if (wanted) {
    show(wanted);
    return;
  }
  const offer = deps.capture.diff;
  if (offer) {
    deps.setBanner("diff", "info", "Changes", `Compare with the ${offer.label}?`, [
      el("button", { type: "button", onclick: () => show(offer.against) }, "Show changes"),
    ]);
  }
}

function onKey(e) {
  const t = e.target;
  if (!diff.data || (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT"))) return;
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === "n" || e.key === "]") step(1);
  else if (e.key === "p" || e.key === "[") step(-1);
  else return;
  e.preventDefault();
}

async function show(against = "previous") {
  const { api, setBanner, dropBanner } = diff.deps;
  diff.loading = true;
  diff.error = null;
  setBanner("diff", "info", "Changes", "Comparing the captures…");
  try {
    diff.data = await api.get("diff", { against });
    diff.against = against;
  } catch (err) {
    diff.error = err.message || String(err);
    diff.data = null;
    setBanner("diff", "error", "Changes", `No diff: ${diff.error}`);
    return;
  } finally {
    diff.loading = false;
  }
  dropBanner("diff");
  diff.index = -1;
  renderPanel();
  diff.deps.renderer.requestDraw();
}

function hide() {
  diff.data = null;
  diff.index = -1;
  if (diff.panel) diff.panel.remove();
  diff.panel = null;
  diff.deps.renderer.requestDraw();
  const offer = diff.deps.capture.diff;
  if (offer) {
    diff.deps.setBanner("diff", "info", "Changes", `Compare with the ${offer.label}?`, [
      el("button", { type: "button", onclick: () => show(offer.against) }, "Show changes"),
    ]);
  }
}

function step(d) {
  const n = diff.data ? diff.data.changes.length : 0;
  if (!n) return;
  go((diff.index + d + n) % n);
}

async function go(i) {
  const c = diff.data && diff.data.changes[i];
  if (!c) return;
  diff.index = i;
  paintActive();
  if (c.key === "g-1") {
    diff.deps.renderer.fit();
    return;
  }
  const { jump, model, renderer } = diff.deps;
  await jump({ key: c.key, item_path: c.item_path, type: c.type });
  // Opening a stack can leave the target folded in a smaller stack of its later
  // siblings (h.1 … h.2 after h.0 opens): open those too, a few levels at most.
  for (let k = 0; k < 4 && renderer.scene && !renderer.scene.byKey.get(c.key); k++) {
    const m = model();
    const sk = m.stackOf.get(c.key);
    if (!sk) break;
    m.unfolded.add(sk);
    await jump({ key: c.key, item_path: c.item_path, type: c.type });
  }
  // Something removed is shown on the group that lost it: fit that whole group, so that
  // its "removed here" outline is on screen even when the group is larger than the view.
  const it = renderer.scene && renderer.scene.byKey.get(c.key);
  if (c.status === "removed" && it && it.expanded) {
    const pad = 40;
    const fit = Math.min((renderer.width - renderer.insetRight - 360) / (it.w + pad), renderer.height / (it.h + pad));
    if (fit < renderer.cam.s) renderer.centerOn(it, Math.max(fit, 0.02));
  }
}

// ------------------------------------------------------------------ panel

function renderPanel() {
  const d = diff.data;
  if (diff.panel) diff.panel.remove();
  const counts = d.counts || {};
  const total = d.changes_total ?? d.changes.length;
  const line = (what) =>
    ["added", "removed", "changed"]
      .map((s) => [s, counts[`${what}_${s}`] || 0])
      .filter(([, n]) => n)
      .map(([s, n]) => `${n} ${s}`)
      .join(", ") || "none";
  const list = el("ol", { class: "diff-list", role: "listbox", "aria-label": "Changes" });
  d.changes.forEach((c, i) => {
    const li = el(
      "li",
      { class: `diff-item ${c.status}`, role: "option", "data-index": String(i), "aria-selected": "false",
        title: [c.path, c.detail].filter(Boolean).join("\n") },
      el("span", { class: `diff-badge ${c.status}` }, MARK[c.status] || "~"),
      el("span", { class: "diff-title" }, c.title),
      el("span", { class: "diff-detail" }, [c.type === "node" && c.path ? c.path : null, c.detail].filter(Boolean).join(" · ")),
    );
    li.addEventListener("click", () => go(i));
    list.append(li);
  });
  if (!d.changes.length) list.append(el("li", { class: "diff-empty" }, "No differences: the same groups, ops, shapes, dtypes, params and parameter tensors."));
  const side = d.a || {};
  diff.panel = el(
    "section",
    { id: "diff-panel", class: "diff-panel", "aria-label": "Changes" },
    el(
      "div",
      { class: "diff-head" },
      el("div", {}, el("div", { class: "kicker" }, "Changes"), el("div", { class: "diff-against", title: side.label || "" }, `against ${side.label || "the other capture"}`)),
      el("button", { type: "button", class: "icon", title: "Previous change (p)", "aria-label": "Previous change", onclick: () => step(-1) }, "↑"),
      el("button", { type: "button", class: "icon", title: "Next change (n)", "aria-label": "Next change", onclick: () => step(1) }, "↓"),
      el("button", { type: "button", class: "icon", title: "Leave diff mode", "aria-label": "Close changes", onclick: () => hide() }, "×"),
    ),
    el(
      "div",
      { class: "diff-counts" },
      el("span", {}, `groups: ${line("groups")}`),
      el("span", {}, `nodes: ${line("nodes")}`),
      counts.parameters_changed || counts.parameters_added || counts.parameters_removed ? el("span", {}, `parameters: ${line("parameters")}`) : null,
      total > d.changes.length ? el("span", {}, `showing ${d.changes.length} of ${total}`) : null,
    ),
    list,
    el("div", { class: "diff-current", id: "diff-current", hidden: true }),
    el("div", { class: "diff-legend" },
      el("span", { class: "diff-badge added" }, "+"), " added ",
      el("span", { class: "diff-badge changed" }, "~"), " changed ",
      el("span", { class: "diff-badge removed" }, "−"), " removed here ",
      el("span", { class: "diff-badge contains" }, "…"), " a change inside"),
  );
  document.getElementById("stage").append(diff.panel);
}

function paintActive() {
  if (!diff.panel) return;
  for (const li of diff.panel.querySelectorAll(".diff-item")) {
    const on = Number(li.dataset.index) === diff.index;
    li.setAttribute("aria-selected", String(on));
    if (on) li.scrollIntoView({ block: "nearest" });
  }
  // The whole of the active change, one fact a line (the list row is cut to one line).
  const box = diff.panel.querySelector("#diff-current");
  const c = diff.data.changes[diff.index];
  box.replaceChildren();
  box.hidden = !c;
  if (!c) return;
  box.append(el("div", { class: "diff-current-title" }, `${diff.index + 1} of ${diff.data.changes.length}: ${c.title}`));
  if (c.path && c.type === "node") box.append(el("div", { class: "diff-current-path" }, c.path));
  for (const part of String(c.detail || "").split("; ")) box.append(el("div", {}, part));
}

// ------------------------------------------------------------------ drawing

// The mark of a scene item: its own, or for a stack card the strongest of its members'.
function markOf(key) {
  const marks = diff.data.marks;
  if (marks[key]) return marks[key];
  if (key.startsWith("s")) {
    const m = diff.deps.model();
    // The card stands for its members: their own mark when all share it (every block
    // changed), else "a change is inside" (one of three blocks added).
    const seen = new Set();
    let members = 0;
    for (const [member, sk] of m.stackOf) {
      if (sk !== key) continue;
      members++;
      seen.add(marks[member] || "");
    }
    if (!members || (seen.size === 1 && seen.has(""))) return null;
    const [only] = seen;
    return seen.size === 1 && (only === "added" || only === "changed") ? only : "contains";
  }
  return null;
}

function colours() {
  const css = getComputedStyle(document.documentElement);
  const v = (name) => css.getPropertyValue(name).trim();
  return {
    added: v("--diff-added"),
    changed: v("--diff-changed"),
    removed: v("--diff-removed"),
    "removed-inside": v("--diff-removed"),
    contains: v("--diff-contains"),
  };
}

let palette = null;

function drawOverlay(ctx, r) {
  if (!diff.data || !r.scene) return;
  if (!palette) {
    palette = colours();
    matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => (palette = colours()));
  }
  const s = r.cam.s;
  for (const [key, it] of r.scene.byKey) {
    const mark = markOf(key);
    if (!mark || !r.visible(it.x - 8, it.y - 8, it.w + 16, it.h + 16)) continue;
    const color = palette[mark];
    const own = mark !== "contains";
    ctx.save();
    ctx.lineWidth = Math.max(own ? 3 : 1.5, (own ? 3 : 1.5) / s);
    ctx.strokeStyle = color;
    ctx.setLineDash(mark === "contains" || mark === "removed-inside" ? [6 / Math.max(s, 0.2), 4 / Math.max(s, 0.2)] : []);
    r.roundRect(it.x - 5, it.y - 5, it.w + 10, it.h + 10, 10);
    ctx.stroke();
    const sign = MARK[mark];
    if (sign && it.w * s > 12) {
      // A badge on the top-left corner, readable at any zoom.
      const rad = Math.max(8, 8 / s);
      ctx.setLineDash([]);
      ctx.fillStyle = color;
      ctx.beginPath();
      ctx.arc(it.x - 5, it.y - 5, rad, 0, Math.PI * 2);
      ctx.fill();
      ctx.fillStyle = "#fff";
      ctx.font = `700 ${rad * 1.6}px system-ui, sans-serif`;
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      ctx.fillText(sign, it.x - 5, it.y - 5 + rad * 0.05);
    }
    ctx.restore();
  }
}
