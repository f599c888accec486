// The plan of layouts and the scene composed from them, for GraphModel (model/viewmodel.js):
// planLayouts decides, bottom-up over the expanded containers, which layout each one gets
// (cached, grown, estimated or a job for the layout worker); composeScene places the
// layouts absolutely. Moved out of GraphModel (plan, compose), `this` read as `model`.

import { FRAME } from "../draw/card.js";
import { hash, layoutKey } from "../layout/layout-client.js";
import { ROOT, itemKey, opens } from "./items.js";
import { grownLayout } from "./grown-layout.js";
import { standIn, pendingSig, stackItem, boundaryItem } from "./card-words.js";

/**
 * @typedef {import("./viewmodel.js").GraphModel} GraphModel
 */

/**
 * @typedef {import("../api.js").Api} Api
 * @typedef {import("../api.js").Page} Page
 * @typedef {import("../api.js").PageItem} PageItem
 * @typedef {import("../api.js").PageStack} PageStack
 * @typedef {import("../api.js").PageValue} PageValue
 * @typedef {import("../layout/layout-client.js").LayoutClient} LayoutClient
 * @typedef {import("../layout/layout-client.js").RequestJob} RequestJob
 * @typedef {import("../layout/layout-client.js").RequestItem} RequestItem
 * @typedef {import("../layout/protocol.js").Layout} Layout
 * @typedef {import("../layout/protocol.js").LabelSpot} LabelSpot
 * @typedef {import("../layout/protocol.js").Size} Size
 * @typedef {import("../layout/protocol.js").Box} Box
 * @typedef {import("../draw/card.js").CardContent} CardContent
 * @typedef {import("../draw/card.js").SceneItem} CardSceneItem
 * @typedef {import("./paths.js").SavedPaths} SavedPaths
 */

/**
 * @typedef {import("./view-types.js").ItemValue} ItemValue
 * @typedef {import("./view-types.js").ItemCost} ItemCost
 * @typedef {import("./view-types.js").BodySummary} BodySummary
 * @typedef {import("./view-types.js").DeviceMemory} DeviceMemory
 * @typedef {import("./view-types.js").Collective} Collective
 * @typedef {import("./view-types.js").Wrapper} Wrapper
 * @typedef {import("./view-types.js").ItemFacts} ItemFacts
 * @typedef {import("./view-types.js").ViewItem} ViewItem
 * @typedef {import("./view-types.js").StackFacts} StackFacts
 * @typedef {import("./view-types.js").ViewStack} ViewStack
 * @typedef {import("./view-types.js").PageEdge} PageEdge
 * @typedef {import("./view-types.js").ViewPage} ViewPage
 * @typedef {import("./view-types.js").Entry} Entry
 * @typedef {import("./view-types.js").DisplayEdge} DisplayEdge
 * @typedef {import("./view-types.js").Display} Display
 * @typedef {import("./view-types.js").PlanEntry} PlanEntry
 * @typedef {import("./view-types.js").Plan} Plan
 * @typedef {import("./view-types.js").Built} Built
 * @typedef {import("./view-types.js").SceneItem} SceneItem
 * @typedef {import("./view-types.js").StackSummary} StackSummary
 * @typedef {import("./view-types.js").BoundaryValue} BoundaryValue
 * @typedef {import("./view-types.js").SceneEdge} SceneEdge
 * @typedef {import("./view-types.js").SceneContainer} SceneContainer
 * @typedef {import("./view-types.js").Scene} Scene
 * @typedef {import("./view-types.js").Timings} Timings
 */

export const TOO_MANY = { tooMany: true }; // thrown by plan() past its limit

// What a map holds for a key the caller knows it holds (a fetched container's page, a
// planned container's entry).
/**
 * @template K, V
 * @param {Map<K, V>} map
 * @param {K} key
 * @returns {V}
 */
export function got(map, key) {
  const value = map.get(key);
  if (value === undefined) throw new Error(`nothing for ${String(key)}`);
  return value;
}

// A planned container's layout (every entry has one but those waiting for their job).
/**
 * @param {PlanEntry} e
 * @returns {Layout}
 */
export function laidOut(e) {
  if (!e.layout) throw new Error(`container ${e.key} is not laid out`);
  return e.layout;
}

// Bottom-up over the expanded containers: each one's layout and size, and the layout
// jobs still missing for the containers in `want` (null: every one). A layout is cached
// under its content signature plus the sizes of the expanded containers inside it
// (layoutKey), so structurally identical groups share one. A container outside `want`
// whose real layout is not known gets an estimated one (estimateLayout). A real layout
// that reserved an estimated box for a container inside it holds that box (`held`)
// while the container's real layout fits in it, so laying that one out later moves
// nothing around it.
/**
 * @param {GraphModel} model
 * @param {Set<string> | null} want
 * @param {number} [limit]  items of layout work, at most (past it: null)
 * @param {Map<string, Layout> | null} [frozen]  the containers estimated when the refresh began
 * @returns {Plan | null}
 */
export function planLayouts(model, want, limit = Infinity, frozen = null) {
  const memo = model.memoNow();
  /** @type {Map<string, PlanEntry>} */
  const info = new Map();
  /** @type {RequestJob[]} */
  const jobs = [];
  /** @type {Map<string, RequestJob>} */
  const byJid = new Map();
  let items = 0;
  /** @type {(key: string) => PlanEntry} */
  // eslint-disable-next-line complexity -- plans one container: cached, grown, estimated or laid out, under the item limit
  const visit = (key) => {
    if (!model.containers.has(key)) {
      // Deferred (Expand all, not fetched yet): a box estimated from its item's facts.
      /** @type {Display} */
      const d = { key, sig: pendingSig(model.itemOf.get(key) || {}, key), items: [], keys: [], edges: [], inner: [], pending: true };
      /** @type {PlanEntry} */
      const entry = { key, d, boxes: [], est: true, layout: model.sizing.estimateFor(key, d, []) };
      info.set(key, entry);
      return entry;
    }
    const d = model.display(key, memo);
    /** @type {(Size | null)[]} */
    const boxes = new Array(d.items.length).fill(null);
    /** @type {{i: number, jid: string, hold: Size | null}[]} */
    const refs = [];
    for (const { i, key: ck } of d.inner) {
      const ci = visit(ck);
      if (ci.job) refs.push({ i, jid: ci.job.jid, hold: model.heldFor(ck, ci) });
      else boxes[i] = model.boxOf(ck, ci);
    }
    /** @type {PlanEntry} */
    const entry = { key, d, boxes };
    info.set(key, entry);
    if (frozen && frozen.has(key)) {
      // Estimated when this refresh began and still not asked for: it stays so until the
      // next one, even where a structurally identical container was laid out meanwhile
      // (its new size would only make the containers around it be laid out again now).
      entry.layout = frozen.get(key);
      entry.est = true;
      return entry;
    }
    const prev = want ? model.lastReal.get(key) : null;
    if (refs.length && prev && prev.sig === d.sig) {
      // Settling: this container was laid out for real already and only containers
      // inside it are laid out now. It waits for them (the next round grows it).
      entry.layout = prev.layout;
      entry.waits = true;
      return entry;
    }
    if (!refs.length) {
      const lk = layoutKey(d.sig, boxes);
      /** @type {Layout | null | undefined} */
      let real = model.layout.get(lk);
      if (!real && prev && prev.sig === d.sig) {
        // Only boxes inside it grew: make room for them in its real layout (what is right
        // of a grown box moves right, what is below it moves down) instead of laying it
        // out again, so nothing around them jumps.
        real = grownLayout(prev.layout, prev.boxes, boxes);
        if (real) model.layout.put(lk, real);
      }
      if (real) {
        entry.layout = real;
        entry.open = !d.collapsed && d.inner.every(({ key: ck }) => got(info, ck).open);
        model.sizing.learn(lk, d, boxes, real, key, entry.open);
        model.lastReal.set(key, { sig: d.sig, layout: real, boxes });
        return entry;
      }
      if (model.layout.failed.has(lk)) {
        entry.layout = model.sizing.estimateFor(key, d, boxes);
        return entry;
      }
    }
    if (refs.length || !want || want.has(key)) {
      // Laid out again for certain (its layout key is new, not only waiting for a
      // container inside): the estimated containers inside take their current estimate
      // (which learned from the real layouts so far), not an older held box.
      if (!refs.length) for (const { i, key: ck } of d.inner) {
        const ci = got(info, ck);
        if (boxes[i] && ci.est) {
          ci.layout = model.sizing.estimateFor(ck, ci.d, ci.boxes, true);
          boxes[i] = { w: ci.layout.w, h: ci.layout.h };
          model.held.delete(ck);
        }
      }
      const refAt = new Map(refs.map((r) => [r.i, r.jid]));
      const jid = d.sig + "|" + d.inner.map(({ i }) => (boxes[i] ? `${boxes[i].w}x${boxes[i].h}` : "@" + refAt.get(i))).join(",");
      let job = byJid.get(jid);
      if (!job) {
        /** @type {(Entry & {child?: string, hold?: Size | null})[]} */
        const list = d.items.slice();
        for (const { i } of d.inner) if (boxes[i]) list[i] = { ...d.items[i], inner: boxes[i] };
        for (const r of refs) list[r.i] = { ...d.items[r.i], child: r.jid, hold: r.hold };
        // The cards as the layout worker measures them (kind "function" too: an op card).
        job = { jid, sig: d.sig, items: /** @type {RequestItem[]} */ (list), edges: d.edges.map((e) => ({ s: e.s, t: e.t, label: e.label })), row: d.row, columns: d.columns };
        byJid.set(jid, job);
        jobs.push(job);
      }
      // Counted per container, shared jobs too: what a full layout of this state costs
      // the first time (identical blocks are cheap to lay out, not to compose and draw).
      items += d.items.length;
      if (items > limit) throw TOO_MANY;
      // The estimated boxes this real layout reserves are held for their containers.
      for (const { i, key: ck } of d.inner) {
        const ci = got(info, ck);
        if (boxes[i] && ci.est && !model.heldFor(ck, ci)) model.held.set(ck, { sig: ci.d.sig, w: boxes[i].w, h: boxes[i].h });
      }
      entry.job = job;
      return entry;
    }
    entry.layout = model.sizing.estimateFor(key, d, boxes);
    entry.est = true;
    return entry;
  };
  try {
    visit(ROOT);
  } catch (err) {
    if (err === TOO_MANY) return null;
    throw err;
  }
  return { info, jobs, items };
}

// Layouts → absolute scene. A container inside a held box larger than its real
// layout sits centred in it. `scene.estimated` counts the estimated containers.
/**
 * @param {GraphModel} model
 * @param {Map<string, PlanEntry>} info
 * @returns {Scene}
 */
export function composeScene(model, info) {
  /** @type {Map<string, SceneItem>} */
  const byKey = new Map();
  let estimated = 0;
  // A container's stamp: its layout and the stamps of the containers inside it. A part of
  // the last scene with the same stamp at the same place is reused as it is (with the
  // draw caches on its items), so settling a few containers rebuilds only their way up.
  /** @type {Map<string, string>} */
  const stamps = new Map();
  let nextId = model.nextLayoutId || 1;
  /** @type {(key: string) => string} */
  const stamp = (key) => {
    const e = got(info, key);
    const layout = laidOut(e);
    let id = model.layoutIds.get(layout);
    if (!id) model.layoutIds.set(layout, (id = nextId++));
    let text = String(id);
    for (const { key: ck } of e.d.inner) if (info.has(ck)) text += "," + stamp(ck);
    const st = text.length > 24 ? hash(text) : text;
    stamps.set(key, st);
    return st;
  };
  stamp(ROOT);
  model.nextLayoutId = nextId;
  /** @type {(c: SceneContainer) => void} */
  const adopt = (c) => {
    for (const it of c.items) {
      byKey.set(it.key, it);
      if (it.expanded) adopt(it.expanded);
    }
  };
  /** @type {Map<string, Built>} */
  const built = new Map();
  /** @type {(key: string, ox: number, oy: number) => SceneContainer} */
  const build = (key, ox, oy) => {
    const prev = model.built.get(key);
    if (prev && prev.stamp === stamps.get(key) && prev.x === ox && prev.y === oy) {
      adopt(prev.container);
      estimated += prev.estimated;
      built.set(key, prev);
      /** @type {(c: SceneContainer) => void} */
      const keep = (c) => {
        for (const it of c.items) if (it.expanded) {
          const part = model.built.get(it.key); // built with the part it is in
          if (part) built.set(it.key, part);
          keep(it.expanded);
        }
      };
      keep(prev.container);
      return prev.container;
    }
    const before = estimated;
    const container = buildNew(key, ox, oy);
    built.set(key, { stamp: got(stamps, key), x: ox, y: oy, container, estimated: estimated - before });
    return container;
  };
  /** @type {(key: string, ox: number, oy: number) => SceneContainer} */
  const buildNew = (key, ox, oy) => {
    const e = got(info, key);
    const d = e.d;
    const layout = laidOut(e);
    if (e.est) estimated++;
    const data = model.containers.get(key);
    if (!data) return { key, sig: d.sig, x: ox, y: oy, w: layout.w, h: layout.h, items: [], edges: [], data: null, estimated: true };
    const byItem = new Map(data.items.map((it) => [itemKey(it), it]));
    const edges = layout.edges.map((le) => {
      const de = d.edges[le.e];
      return { source: de.source, target: de.target, label: de.label, value: de.value, points: le.points, labelAt: le.labelAt, labelBox: le.label || null };
    });
    /** @type {SceneContainer} */
    const container = { key, sig: d.sig, x: ox, y: oy, w: layout.w, h: layout.h, items: [], edges, data, estimated: !!e.est };
    d.keys.forEach((k, i) => {
      const box = layout.boxes[i];
      const item = byItem.get(k);
      const entry = d.items[i];
      /** @type {SceneItem} */
      const sceneItem = {
        key: k,
        type: k.startsWith("s") ? "stack" : item ? item.type : k.startsWith("in:") ? "in" : "out",
        item: k.startsWith("s") ? standIn(stackItem(entry, byItem)) : item || standIn(boundaryItem(data, k)),
        x: ox + box.x,
        y: oy + box.y,
        w: box.w,
        h: box.h,
        parentKey: key,
        expanded: null,
        card: entry, // what the card says: the content the layout worker measured (card.js)
      };
      if (item && opens(item) && entry.expandedSig && info.has(k)) {
        const inner = laidOut(got(info, k));
        const dx = Math.max(0, (box.w - 2 * FRAME.inset.x - inner.w) / 2);
        const held = e.boxes[i] && (e.boxes[i].w > inner.w || e.boxes[i].h > inner.h);
        sceneItem.expanded = build(k, sceneItem.x + FRAME.inset.x + (held ? dx : 0), sceneItem.y + FRAME.inset.y);
      }
      container.items.push(sceneItem);
      byKey.set(k, sceneItem);
    });
    return container;
  };
  const root = build(ROOT, 0, 0);
  model.built = built;
  return { root, byKey, w: root.w, h: root.h, count: byKey.size, estimated };
}
