// What the graph means on screen, independent of how it is drawn.
//
// The capture is never held whole: the model loads the children of each *expanded*
// container (the root, a group, or a chunk of a large group) from `api/children`, asks the
// layout worker for one layout per container, and composes those layouts into a scene of
// absolutely positioned items and routed edges that the renderer draws.
//
// Keys: items and containers share the server's item keys ("n12", "g3", "c3:2"); the
// root container is "g-1". A container's layout signature is its key plus the signatures
// of the expanded containers inside it, so a layout is reused until something inside it
// changes: expanding one group lays out that group and its ancestors only.

import { CARD_STYLE, boundaryContent, formatValue } from "./theme.js";

export const ROOT = "g-1";

export function itemKey(item) {
  if (item.type === "node") return "n" + item.id;
  if (item.type === "group") return "g" + item.id;
  return "c" + item.id;
}

export function isContainerKey(key) {
  return key.startsWith("g") || key.startsWith("c");
}

function containerParams(key) {
  if (key.startsWith("c")) {
    const [group, chunk] = key.slice(1).split(":");
    return [Number(group), Number(chunk)];
  }
  return [Number(key.slice(1)), undefined];
}

export class GraphModel {
  constructor(api, layout) {
    this.api = api;
    this.layout = layout;
    this.containers = new Map(); // key -> children response (items, edges, inputs, outputs, chunked)
    this.loading = new Map(); // key -> promise
    this.expanded = new Set([ROOT]);
    this.scene = null;
    this.version = 0; // bumped on every new scene
    this.lastLayoutMs = 0;
  }

  async load(key) {
    if (this.containers.has(key)) return this.containers.get(key);
    if (!this.loading.has(key)) {
      const [group, chunk] = containerParams(key);
      const p = this.api.children(group, chunk).then((data) => {
        this.containers.set(key, data);
        this.loading.delete(key);
        return data;
      }, (err) => {
        this.loading.delete(key);
        throw err;
      });
      this.loading.set(key, p);
    }
    return this.loading.get(key);
  }

  // Loads every expanded container reachable from the root (in parallel per level).
  async loadExpanded() {
    let frontier = [ROOT];
    while (frontier.length) {
      const datas = await Promise.all(frontier.map((k) => this.load(k)));
      const next = [];
      datas.forEach((data) => {
        for (const item of data.items) {
          const k = itemKey(item);
          if (item.type !== "node" && this.expanded.has(k)) next.push(k);
        }
      });
      frontier = next;
    }
  }

  expandedChildren(key) {
    const data = this.containers.get(key);
    if (!data) return [];
    const out = [];
    for (const item of data.items) {
      if (item.type === "node") continue;
      const k = itemKey(item);
      if (this.expanded.has(k) && this.containers.has(k)) out.push(k);
    }
    return out;
  }

  signature(key, memo = new Map()) {
    if (memo.has(key)) return memo.get(key);
    const kids = this.expandedChildren(key);
    const sig = kids.length ? `${key}{${kids.map((k) => this.signature(k, memo)).join(",")}}` : key;
    memo.set(key, sig);
    return sig;
  }

  // Layout jobs for every container whose layout (for its current signature) is missing,
  // children before parents.
  jobs() {
    const memo = new Map();
    const jobs = [];
    const visit = (key) => {
      for (const k of this.expandedChildren(key)) visit(k);
      const sig = this.signature(key, memo);
      if (!this.layout.has(sig)) jobs.push(this.job(key, sig, memo));
    };
    visit(ROOT);
    return jobs;
  }

  job(key, sig, memo) {
    const data = this.containers.get(key);
    const items = [];
    for (const b of data.inputs || []) items.push(boundaryJob("in", b));
    for (const item of data.items) {
      const k = itemKey(item);
      const entry = { key: k, kind: item.type, title: item.label || k, lines: cardLines(item), tag: cardTag(item) };
      if (item.type !== "node" && this.expanded.has(k) && this.containers.has(k)) entry.expandedSig = this.signature(k, memo);
      items.push(entry);
    }
    for (const b of data.outputs || []) items.push(boundaryJob("out", b));
    const edges = (data.edges || []).map((e) => ({ source: e.source, target: e.target, label: e.label || "", value: e.value }));
    return { sig, key, items, edges };
  }

  // Loads, lays out and composes. Resolves true when a new scene is ready, false when a
  // newer request superseded this one.
  async refresh() {
    await this.loadExpanded();
    const jobs = this.jobs();
    const t0 = performance.now();
    const res = await this.layout.request(jobs);
    if (res === null) return false;
    if (res && res.error) throw new Error(res.error);
    if (jobs.length) this.lastLayoutMs = performance.now() - t0;
    // Another refresh may have changed the expansion meanwhile; compose only if complete.
    if (this.jobs().length) return false;
    this.scene = this.compose();
    this.version += 1;
    return true;
  }

  toggle(key) {
    if (!isContainerKey(key) || key === ROOT) return false;
    if (this.expanded.has(key)) {
      // Collapse the subtree too, so that re-expanding shows one level at a time.
      for (const k of [...this.expanded]) if (k !== ROOT && this.isInside(k, key)) this.expanded.delete(k);
      this.expanded.delete(key);
    } else {
      this.expanded.add(key);
    }
    return true;
  }

  isInside(candidate, ancestor) {
    let item = this.scene && this.scene.byKey.get(candidate);
    while (item) {
      if (item.parentKey === ancestor) return true;
      item = this.scene.byKey.get(item.parentKey);
    }
    return false;
  }

  // Expand the initial levels: follow single-child chains, and open the next level while
  // the number of visible items stays small (a first paint must stay cheap at any size).
  async autoExpand(budget = 60) {
    let frontier = [ROOT];
    let visible = 0;
    for (let depth = 0; depth < 6 && frontier.length; depth++) {
      const datas = await Promise.all(frontier.map((k) => this.load(k)));
      visible = datas.reduce((n, d) => n + d.items.length, 0);
      const next = [];
      for (const data of datas) for (const item of data.items) if (item.type !== "node") next.push(itemKey(item));
      if (!next.length) break;
      const counts = datas.flatMap((d) => d.items.filter((it) => it.type !== "node").map((it) => Number(it.child_count) || 0));
      const added = counts.reduce((a, b) => a + b, 0);
      const single = next.length === 1 && visible <= 3;
      if (!single && visible - next.length + added > budget) break;
      for (const k of next) this.expanded.add(k);
      frontier = next;
    }
  }

  // Layouts → absolute scene.
  compose() {
    const byKey = new Map();
    const memo = new Map();
    const build = (key, ox, oy, parentKey) => {
      const sig = this.signature(key, memo);
      const layout = this.layout.get(sig);
      const data = this.containers.get(key);
      const container = { key, sig, x: ox, y: oy, w: layout.w, h: layout.h, items: [], edges: layout.edges, data };
      const byItem = new Map(data.items.map((it) => [itemKey(it), it]));
      for (const [k, box] of Object.entries(layout.items)) {
        const item = byItem.get(k);
        const sceneItem = {
          key: k,
          type: item ? item.type : k.startsWith("in:") ? "in" : "out",
          item: item || boundaryItem(data, k),
          x: ox + box.x,
          y: oy + box.y,
          w: box.w,
          h: box.h,
          parentKey: key,
          expanded: null,
          lines: item ? cardLines(item) : [],
        };
        if (item && item.type !== "node" && this.expanded.has(k) && this.containers.has(k)) {
          sceneItem.expanded = build(k, sceneItem.x + CARD_STYLE.groupPadX, sceneItem.y + CARD_STYLE.groupHeader, k);
        }
        container.items.push(sceneItem);
        byKey.set(k, sceneItem);
      }
      return container;
    };
    const root = build(ROOT, 0, 0, null);
    return { root, byKey, w: root.w, h: root.h, count: byKey.size };
  }

  // Makes an item visible. `itemPath` is the server's list of item keys from the root to
  // the target, chunks included (search results and node details carry it); every key
  // before the target is expanded. Without one, the group path is followed and chunks
  // are searched.
  async revealPath(itemPath) {
    const keys = itemPath.slice(0, -1).filter((k) => isContainerKey(k) && k !== ROOT);
    for (const k of keys) this.expanded.add(k);
    return this.refresh();
  }

  async reveal(target, pathGroupIds) {
    let container = ROOT;
    await this.load(ROOT);
    const steps = (pathGroupIds || []).map((g) => "g" + g).filter((k) => k !== ROOT && k !== target);
    steps.push(target);
    for (const step of steps) {
      const holder = await this.findHolder(container, step);
      if (!holder) break;
      for (const k of holder.chain) this.expanded.add(k);
      if (step === target) break;
      this.expanded.add(step);
      container = step;
    }
    return this.refresh();
  }

  // Which container under `container` directly holds item `key`: itself, or one of its
  // chunks (chunks hold items in program order; nested chunks are followed).
  async findHolder(container, key) {
    const data = await this.load(container);
    if (data.items.some((it) => itemKey(it) === key)) return { chain: [] };
    if (!data.chunked) return null;
    const chunks = data.items.filter((it) => it.type === "chunk");
    const hinted = chunks.filter((c) => chunkMayHold(c, key));
    for (const c of hinted.length ? hinted : chunks) {
      const ck = itemKey(c);
      const found = await this.findHolder(ck, key);
      if (found) return { chain: [ck, ...found.chain] };
    }
    return null;
  }

  hitTest(x, y) {
    if (!this.scene) return null;
    let hit = null;
    const visit = (container) => {
      for (const it of container.items) {
        if (x < it.x || y < it.y || x > it.x + it.w || y > it.y + it.h) continue;
        hit = it;
        if (it.expanded && y > it.y + CARD_STYLE.groupHeader) visit(it.expanded);
        return;
      }
    };
    visit(this.scene.root);
    return hit;
  }

  // Absolute points of every drawn edge touching `key`, for highlighting.
  edgesOf(key) {
    const out = [];
    const visit = (c) => {
      for (const e of c.edges) if (e.source === key || e.target === key) out.push({ c, e });
      for (const it of c.items) if (it.expanded) visit(it.expanded);
    };
    if (this.scene) visit(this.scene.root);
    return out;
  }
}

export function cardLines(item) {
  if (item.type === "node") {
    const outs = (item.outputs || []).map(formatValue);
    const lines = outs.slice(0, 3);
    const total = item.outputs_total ?? outs.length;
    if (total > 3) lines.push(`+${total - 3} more outputs`);
    if (item.sublabel) lines.push(String(item.sublabel));
    return lines;
  }
  const lines = [];
  const count = (n, word) => `${Number(n).toLocaleString("en-US")} ${word}${Number(n) === 1 ? "" : "s"}`;
  if (item.type === "chunk") {
    if (item.sublabel) lines.push(String(item.sublabel));
  } else if (item.honest) {
    lines.push(String(item.honest));
  } else if (item.sublabel) {
    lines.push(String(item.sublabel));
  }
  const bits = [];
  if (item.node_count !== undefined && item.node_count !== null) bits.push(count(item.node_count, "op"));
  else if (item.child_count !== undefined && item.child_count !== null) bits.push(count(item.child_count, "item"));
  if (item.opaque_count) bits.push(`${Number(item.opaque_count).toLocaleString("en-US")} opaque`);
  if (bits.length) lines.push(bits.join(" · "));
  return lines;
}

// A boundary pill for the layout worker: the exact text parts it will measure.
function boundaryJob(side, b) {
  const c = boundaryContent(side, b);
  return {
    key: `${side}:${b.value}`,
    kind: side,
    title: c.parts.map((p) => p.text).join("  "),
    parts: c.parts.map((p) => ({ text: p.text, font: p.font })),
    quiet: c.look === "quiet",
    lines: [],
  };
}

function cardTag(item) {
  if (item.type === "node") return item.opaque ? "opaque" : null;
  if (item.type === "chunk") return "chunk";
  return item.kind || "group";
}

function boundaryItem(data, key) {
  const [side, v] = key.split(":");
  const list = side === "in" ? data.inputs : data.outputs;
  const b = (list || []).find((x) => String(x.value) === v);
  return b ? { ...b, type: side } : { type: side, value: Number(v) };
}

// A chunk item may carry its node id range ({first,last} or range:[a,b]); when it does,
// search only the chunks whose range can hold the node.
function chunkMayHold(chunk, key) {
  if (!key.startsWith("n")) return false;
  const id = Number(key.slice(1));
  const lo = chunk.first ?? (chunk.range ? chunk.range[0] : undefined);
  const hi = chunk.last ?? (chunk.range ? chunk.range[1] : undefined);
  if (lo === undefined || hi === undefined) return false;
  return id >= lo && id <= hi;
}
