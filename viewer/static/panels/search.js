// The search box: results as you type (debounced; a newer query wins), arrows and Enter
// to pick, and a jump that opens the path to the result and focuses it. `app` is the
// page's context (app.js): its state, api and the helpers these need.

import { el, clear } from "../dom.js";
import { ROOT } from "../model/viewmodel.js";

const $ = (id) => document.getElementById(id);

export function wireSearch(app) {
  const input = $("search");
  let timer = null;
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => runSearch(app, input.value.trim()), 140);
  });
  input.addEventListener("keydown", (e) => {
    const s = app.state.search;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      if (!s.results.length) return;
      s.active = (s.active + (e.key === "ArrowDown" ? 1 : -1) + s.results.length) % s.results.length;
      paintResults(app);
    } else if (e.key === "Enter") {
      e.preventDefault();
      clearTimeout(timer);
      const pick = async () => {
        if (!s.results.length || s.query !== input.value.trim()) await runSearch(app, input.value.trim());
        const r = s.results[Math.max(0, s.active)];
        if (r) jump(app, r);
      };
      pick();
    }
  });
  input.addEventListener("focus", () => app.state.search.results.length && ($("search-results").hidden = false));
  document.addEventListener("pointerdown", (e) => {
    if (!e.target.closest(".search")) hideResults(app);
  });
}

async function runSearch(app, q) {
  const s = app.state.search;
  const seq = ++s.seq;
  s.query = q;
  if (!q) {
    s.results = [];
    hideResults(app);
    return;
  }
  let res;
  try {
    res = await app.api.search(q, 50);
  } catch (err) {
    res = { results: [], error: err.message };
  }
  if (seq !== s.seq) return; // a newer query is on its way
  s.results = res.results || [];
  s.truncated = !!res.truncated;
  s.active = s.results.length ? 0 : -1;
  paintResults(app, res.error);
}

function paintResults(app, error) {
  const ul = $("search-results");
  const s = app.state.search;
  clear(ul);
  if (!s.results.length) {
    ul.append(el("li", { class: "empty" }, error ? `Search failed: ${error}` : "No matches"));
  }
  s.results.forEach((r, i) => {
    const li = el("li", { role: "option", "aria-selected": String(i === s.active), "data-index": String(i) },
      el("span", { class: "pill rtype" + (r.type === "group" ? " kind" : "") }, r.type),
      el("span", { class: "rlabel" }, r.label || `${r.type} ${r.id}`, " ", el("span", { class: "rkey" }, r.key || "")),
      el("span", { class: "rwhy" }, [r.sublabel, r.why].filter(Boolean).join("  ·  ")));
    li.addEventListener("pointerdown", (e) => {
      e.preventDefault();
      jump(app, r);
    });
    ul.append(li);
  });
  if (s.truncated) ul.append(el("li", { class: "empty" }, "More matches: refine the search"));
  ul.hidden = false;
}

export function hideResults(app) {
  $("search-results").hidden = true;
}

export async function jump(app, result) {
  hideResults(app);
  const m = app.state.model;
  if (!m) return;
  let key = result.key;
  let itemPath = result.item_path;
  if (!key) {
    if (result.type === "node") key = "n" + result.id;
    else if (result.type === "group") key = "g" + result.id;
    else if (result.type === "value" && result.producer !== null && result.producer !== undefined) key = "n" + result.producer;
  }
  if (!key) return;
  app.setStatus("Opening the path…");
  try {
    if (itemPath && itemPath.length) await m.revealPath(itemPath);
    else await m.reveal(key, result.path || []);
  } catch (err) {
    app.setBanner("load", "error", "Error", `Could not open ${key}: ${err.message || err}`);
    return;
  }
  app.state.renderer.setScene(m.scene);
  app.minimapVisibility();
  app.setStatus("");
  if (!m.scene.byKey.get(key) && key.startsWith("in:")) {
    // A parameter drawn inside its ops: go to the first op that uses it, weight selected.
    const holder = m.scene.byKey.get(itemPath && itemPath.length > 1 ? itemPath[itemPath.length - 2] : ROOT);
    const container = holder && holder.expanded ? holder.expanded : m.scene.root;
    const value = Number(key.slice(3));
    const op = container.items.find((it) => it.type === "node" && (it.item.weights || []).some((w) => w.value === value));
    if (op) {
      await app.focusItem(op.key);
      app.selectWeight(op.key, value);
      $("graph").focus({ preventScroll: true });
    }
    return;
  }
  if (!m.scene.byKey.get(key)) return;
  await app.focusItem(key);
  $("graph").focus({ preventScroll: true });
}
