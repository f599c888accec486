// A source line in the graph: "Show in Graph" (the line's items selected, the groups
// holding them opened, all in view, a banner stepping through the line's calls) and the
// editor's cursor line (outlined lightly, nothing opened). `app` is the page's context
// (app.js): its state, api and the helpers these need.

import { el } from "../dom.js";
import { ROOT, isContainerKey } from "../model/viewmodel.js";

// The items of call `call` of source line `file:line` (the capture's numbering) selected
// together, the groups holding them opened (a module the line called stays closed: the
// call, not its insides), all of them in view, and a banner to step through the calls.
export async function showLine(app, file, line, call = 0) {
  const m = app.state.model;
  const r = app.state.renderer;
  if (!m || !r) return false;
  const seq = (app.state.lineSeq = (app.state.lineSeq || 0) + 1);
  let answer = app.state.line && app.state.line.file === file && app.state.line.line === line ? app.state.line.answer : null;
  if (!answer) {
    try {
      answer = await app.api.get("line", { file, line });
    } catch (err) {
      app.setBanner("line", "error", "Line", `Could not show ${file}:${line}: ${err.message || err}`);
      return false;
    }
  }
  if (seq !== app.state.lineSeq) return false;
  call = Math.max(0, Math.min(Number(call) || 0, answer.calls.length - 1));
  const c = answer.calls[call];
  app.setStatus("Opening the line…");
  try {
    for (const key of c.keys) {
      for (const k of (c.paths[key] || []).slice(0, -1)) {
        if (k !== ROOT && (isContainerKey(k) || k.startsWith("n"))) m.expanded.add(k);
      }
    }
    let ok = await m.refresh();
    // A module call folded into a stack of identical ones: open the stack.
    const folded = c.keys.filter((k) => !m.scene.byKey.has(k) && m.stackOf.has(k));
    for (const k of folded) m.unfolded.add(m.stackOf.get(k));
    if (folded.length || !ok) ok = await m.refresh();
    if (!ok || seq !== app.state.lineSeq) return false;
  } catch (err) {
    app.setBanner("line", "error", "Line", `Could not open ${file}:${line}: ${err.message || err}`);
    app.setStatus("");
    return false;
  }
  r.setScene(m.scene);
  app.minimapVisibility();
  app.setStatus("");
  app.saveExpansion();
  const keys = c.keys.filter((k) => m.scene.byKey.has(k));
  app.state.line = { file: answer.file, line: answer.line, call, calls: answer.calls_total, keys, answer, shown: seq };
  app.select(keys[0] || null, true); // the inspector (on the first item) opens before the fit
  r.multi = new Set(keys);
  const b = r.boundsOf(keys);
  if (b) r.fitRect(b);
  lineBanner(app);
  return true;
}

function lineBanner(app) {
  const l = app.state.line;
  if (!l) return;
  const c = l.answer.calls[l.call];
  const name = l.file.split("/").pop();
  const ops = `${Number(c.ops).toLocaleString("en-US")} op${c.ops === 1 ? "" : "s"}`;
  const text = `${name}:${l.line} · ${ops}` + (l.calls > 1 ? ` · call ${l.call + 1} of ${l.calls}` : "") + (c.where ? ` (${c.where})` : "");
  const step = (d) => () => showLine(app, l.file, l.line, l.call + d);
  const actions = [];
  if (l.calls > 1) {
    actions.push(el("button", { type: "button", "data-call": "previous", title: "Previous call ([)", disabled: l.call === 0 ? "" : null, onclick: step(-1) }, "◀ Previous call"));
    actions.push(el("button", { type: "button", "data-call": "next", title: "Next call (])", disabled: l.call >= l.answer.calls.length - 1 ? "" : null, onclick: step(1) }, "Next call ▶"));
  }
  actions.push(el("button", { type: "button", "aria-label": "Close", onclick: () => app.dropBanner("line") }, "×"));
  app.setBanner("line", "info", "Line", text, actions);
}

// The editor's cursor line: its items outlined lightly, nothing selected, nothing opened.
// An item not on screen (inside a closed group, a folded stack or chunk) outlines the
// nearest item on screen that holds it; the view pans only when none is on screen.
export async function cursorLine(app, d) {
  const m = app.state.model;
  const r = app.state.renderer;
  if (!m || !m.scene) return;
  const seq = (app.state.cursorSeq = (app.state.cursorSeq || 0) + 1);
  const keys = d.keys || [];
  const shown = new Set(keys.filter((k) => m.scene.byKey.has(k)));
  if (shown.size < keys.length && d.file) {
    let answer = null;
    try {
      answer = await app.api.get("line", { file: d.file, line: d.line });
    } catch (err) {
      answer = null; // the outline keeps what is on screen
    }
    if (seq !== app.state.cursorSeq) return;
    const c = answer && (answer.calls.find((x) => x.keys[0] === keys[0]) || answer.calls[0]);
    for (const k of keys) {
      if (shown.has(k) || !c) continue;
      const path = c.paths[k] || [];
      for (let i = path.length - 1; i >= 0; i--) {
        const pk = path[i];
        const holder = m.scene.byKey.has(pk) ? pk : m.stackOf.has(pk) && m.scene.byKey.has(m.stackOf.get(pk)) ? m.stackOf.get(pk) : null;
        if (holder) {
          shown.add(holder);
          break;
        }
      }
    }
  }
  r.cursor = shown.size ? shown : null;
  const b = r.boundsOf(shown);
  if (b && !r.onScreen(b)) {
    r.cam.tx = (r.width - r.insetRight) / 2 - (b.x + b.w / 2) * r.cam.s;
    r.cam.ty = r.height / 2 - (b.y + b.h / 2) * r.cam.s;
  }
  r.requestDraw();
  app.state.cursorShown = { file: d.file, line: d.line, keys: [...shown], seq };
}
