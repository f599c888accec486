// What the graph means on screen, independent of how it is drawn.
//
// The capture is never held whole: the model loads the children of each *expanded*
// container (the root, a group, or a chunk of a large group) from `api/children`, asks the
// layout worker for one layout per container, and composes those layouts into a scene of
// absolutely positioned items and routed edges that the renderer draws.
//
// Keys: items and containers share the server's item keys ("n12", "g3", "c3:2"); the
// root container is "g-1"; a stack (a run of repeating items, the server's `stacks`) is
// "s" + its first member's key ("sg5"). Each container is turned into a display list
// (what is drawn in it, in program order: parameters folded into their ops, each item
// drawn as the server's `card` says: an op, a function call drawn as one op card, a group
// drawn as its single op with the module named on it, a frame; idle groups not at all;
// every repeat folded into one stack card) whose layout signature is its *content*: the
// items' kinds, texts and the signatures of the expanded containers inside them, and the
// edges by position. So a layout is reused until something inside it changes (expanding
// one group lays out that group and its ancestors only), and structurally identical
// groups (GPT-2's twelve blocks) share one layout.
//
// Pages present layers, not kernels (API.md "Layers, not kernels"); with `kernels` on,
// every container is fetched again with `kernels=1` and shows every kernel.

import { FRAME, idleWords, labelRect, pillContent, twinWords } from "../draw/card.js";
import { edgeText, formatValue, perDeviceShapes } from "../draw/theme.js";
import { costLine, formatBytes, formatCount, formatFlops, grouped } from "../format.js";
import { boxFor, hash, layoutKey } from "../layout/layout-client.js";
import { MIN_EDGE_SCALE } from "../draw/drawlist.js";
import { LayoutEstimates } from "./estimates.js";
import { edgeAt, edgesOf, itemAt } from "./hits.js";
import { expansionPaths, restorePaths, reveal, revealPaths } from "./paths.js";
import {
  EXPAND_FETCH_ITEMS, TrackedSet, collapseAll, expandAll, expandToDepth, toggle, unfold,
} from "./expansion.js";
import { autoExpand, closeLastOpened } from "./first-view.js";
import { ROOT, cardOf, isContainerKey, itemKey, opens, opensWithAll } from "./items.js";

export { EXPAND_FETCH_ITEMS, ROOT, cardOf, isContainerKey, itemKey, opens };

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

// When a relayout would hand the layout workers more items than this (Expand all on a
// big graph), only the containers in view are laid out for real; the others get an
// estimated layout (estimateLayout) until the view shows them (settle).
export const ESTIMATE_ITEMS = 3000;
// An expanded container smaller than this on screen is drawn as its frame only
// (drawlist.js): its inside needs no real layout yet. Nor does any container's while the
// zoom is below MIN_EDGE_SCALE (only Fit goes there on a big graph): no edge and no text
// is drawn then, cards are boxes or specks.
export const SETTLE_PX = 24;
const TOO_MANY = { tooMany: true }; // thrown by plan() past its limit

// What a map holds for a key the caller knows it holds (a fetched container's page, a
// planned container's entry).
/**
 * @template K, V
 * @param {Map<K, V>} map
 * @param {K} key
 * @returns {V}
 */
function got(map, key) {
  const value = map.get(key);
  if (value === undefined) throw new Error(`nothing for ${String(key)}`);
  return value;
}

// A plan made without a limit (plan gives up, null, only past its limit).
/**
 * @param {Plan | null} p
 * @returns {Plan}
 */
function unlimited(p) {
  if (!p) throw new Error("a plan without a limit gave up");
  return p;
}

// A planned container's layout (every entry has one but those waiting for their job).
/**
 * @param {PlanEntry} e
 * @returns {Layout}
 */
function laidOut(e) {
  if (!e.layout) throw new Error(`container ${e.key} is not laid out`);
  return e.layout;
}

// The group and chunk a container key names ("g3": [3, undefined], "c3:2": [3, 2]).
/**
 * @param {string} key
 * @returns {[number, number | undefined]}
 */
function containerParams(key) {
  if (key.startsWith("c")) {
    const [group, chunk] = key.slice(1).split(":");
    return [Number(group), Number(chunk)];
  }
  return [Number(key.slice(1)), undefined];
}

export class GraphModel {
  /**
   * @param {Api} api
   * @param {LayoutClient} layout
   */
  constructor(api, layout) {
    this.api = api;
    this.layout = layout;
    /** @type {Map<string, ViewPage>} */
    this.containers = new Map(); // key -> children response (items, edges, inputs, outputs, chunked)
    /** @type {Map<string, Promise<ViewPage>>} */
    this.loading = new Map(); // key -> promise
    this.changes = 0; // bumped on every change of what is drawn (display lists are memoised until then)
    this.expanded = new TrackedSet(this, [ROOT]);
    this.unfolded = new TrackedSet(this); // stack keys ("sg5") the person opened into their members
    this._showWeights = false; // parameters as separate pills (toolbar toggle) instead of card lines
    this._kernels = false; // every kernel everywhere (toolbar toggle): pages asked with kernels=1
    this.generation = 0; // bumped when the pages are asked for again (kernels on/off): older answers are dropped
    /** @type {Map<string, {sig: string, w: number, h: number}>} */
    this.held = new Map(); // container key -> {sig, w, h}: the estimated box a real parent layout reserved for it
    // How real layouts compared with their column estimates so far (log ratios: sums and
    // sums of squares), for leaf containers and for containers of containers.
    /** @type {Set<string> | null} */
    this.lastWant = null; // the containers the last settled view laid out for real (null: all)
    this.openAll = false; // Expand all is on: a container fetched from now on opens its groups and chunks too
    /** @type {Set<string>} */
    this.deferred = new Set(); // expanded containers not fetched yet (Expand all fetches them once in view)
    /** @type {Map<string, ViewItem>} */
    this.itemOf = new Map(); // container key -> its item (in its parent's answer)
    this.sizing = new LayoutEstimates(this.itemOf, layout); // estimated layouts, learning from the real ones (model/estimates.js)
    /** @type {Map<string, Built>} */
    this.built = new Map(); // container key -> {stamp, x, y, container, estimated}: scene parts reused by compose
    /** @type {WeakMap<Layout, number>} */
    this.layoutIds = new WeakMap(); // layout object -> a number (compose's stamps)
    /** @type {number | undefined} */
    this.nextLayoutId = undefined; // the next of those numbers
    /** @type {Map<string, {sig: string, layout: Layout, boxes: (Size | null)[]}>} */
    this.lastReal = new Map(); // container key -> {sig, layout, boxes}: its last real layout, which settling may grow
    this.refreshing = 0;
    /** @type {Map<string, string>} */
    this.paths = new Map([[ROOT, ""]]); // container key -> group path ("Wrapped/gpt/h.3"), for memory
    /** @type {Map<string, string>} */
    this.modulePaths = new Map(); // container key -> the module's attribute path ("gpt.h.3"), chunks inherit
    /** @type {Map<string, string>} */
    this.stackOf = new Map(); // member key -> stack key, for the current display lists
    /** @type {Set<string>} */
    this.bodyHolders = new Set(); // node keys with control-flow bodies (openable nodes)
    /** @type {string[]} */
    this.autoOpened = [];
    /** @type {Scene | null} */
    this.scene = null;
    this.version = 0; // bumped on every new scene
    this.lastLayoutMs = 0;
    /** @type {Timings} */
    this.timings = {}; // ms per phase of the last refresh (and Expand all's fetch), for benchmarks
    /** @type {Timings[]} */
    this.timingLog = []; // the same for the last refreshes
    /** @type {number | undefined} */
    this._fetchMs = undefined; // how long Expand all's request took, for the next refresh's timings
    /** @type {{at: number, map: Map<string, Display>} | undefined} */
    this._memo = undefined; // the display lists, as of `changes` (memoNow)
    /** @type {string | undefined} */
    this.lastGiveUp = undefined; // why the last refresh composed no scene (gaveUp)
  }

  get showWeights() {
    return this._showWeights;
  }

  /** @param {boolean} on */
  set showWeights(on) {
    if (on !== this._showWeights) this.changed();
    this._showWeights = on;
  }

  get kernels() {
    return this._kernels;
  }

  // Every kernel everywhere, or layers and function calls: the pages differ, so every
  // container is fetched again (what is open stays open: the item keys are the same).
  /** @param {boolean} on */
  set kernels(on) {
    if (on === this._kernels) return;
    this._kernels = on;
    this.generation += 1;
    this.containers.clear();
    this.loading.clear();
    this.itemOf.clear();
    this.deferred.clear();
    this.sizing.estimates.clear();
    this.held.clear();
    this.lastReal.clear();
    this.built = new Map();
    // After Expand all, what is open follows the new pages (refresh fetches them as Expand
    // all did): function calls are groups that open only with every kernel shown, and the
    // modules drawn as one call are frames only then.
    if (this.openAll) this.expanded = new TrackedSet(this, [ROOT]);
    this.changed();
  }

  changed() {
    this.changes += 1;
  }

  // The display lists of the current state, memoised until something changes.
  /** @returns {Map<string, Display>} */
  memoNow() {
    if (!this._memo || this._memo.at !== this.changes) {
      this.stackOf.clear();
      this._memo = { at: this.changes, map: new Map() };
    }
    return this._memo.map;
  }

  /**
   * @param {string} key
   * @returns {Promise<ViewPage>}
   */
  async load(key) {
    const had = this.containers.get(key);
    if (had) return had;
    let p = this.loading.get(key);
    if (!p) {
      const [group, chunk] = containerParams(key);
      const generation = this.generation;
      const ask = key.startsWith("n") ? this.api.bodies(Number(key.slice(1))) : this.api.children(group, chunk, this._kernels, this._showWeights);
      p = ask.then((/** @type {ViewPage} */ data) => {
        if (generation !== this.generation) return this.load(key); // kernels changed meanwhile
        this.adopt(key, data);
        this.loading.delete(key);
        return data;
      }, (/** @type {unknown} */ err) => {
        if (generation === this.generation) this.loading.delete(key);
        throw err;
      });
      this.loading.set(key, p);
    }
    return p;
  }

  /**
   * @param {string} key
   * @param {ViewPage} data
   */
  adopt(key, data) {
    this.containers.set(key, data);
    this.deferred.delete(key);
    this.changed();
    const base = this.paths.get(key) ?? "";
    for (const item of data.items) {
      if (item.type === "node") {
        if (opens(item)) this.bodyHolders.add(itemKey(item));
        continue;
      }
      this.itemOf.set(itemKey(item), item);
      const within = item.type === "chunk" ? this.modulePaths.get(key) : item.path;
      if (within) this.modulePaths.set(itemKey(item), within);
      const name = item.type === "chunk" ? `#${String(item.id).split(":")[1]}` : String(item.label ?? item.id);
      this.paths.set(itemKey(item), base ? `${base}/${name}` : name);
    }
    if (this.openAll && (key === ROOT || this.expanded.has(key))) this.openInside(data);
  }

  // Expand all, inside one fetched container: its modules, scopes and chunks open (the
  // ones not fetched yet are deferred; function calls only with kernels on, when they are
  // groups), its stacks unfold.
  /** @param {Page} data */
  openInside(data) {
    for (const item of data.items) {
      if (item.type === "node" || !opensWithAll(item)) continue;
      const ik = itemKey(item);
      this.expanded.add(ik);
      if (!this.containers.has(ik)) this.deferred.add(ik);
    }
    for (const st of data.stacks || []) this.unfolded.add(st.key);
  }

  // Fetches deferred containers (Expand all, once in view): a group with what is below it
  // up to EXPAND_FETCH_ITEMS items in one request, a chunk on its own.
  /** @param {string[]} keys */
  async loadDeferred(keys) {
    await Promise.all(keys.map((k) => (k.startsWith("g") ? this.loadSubtree(k, EXPAND_FETCH_ITEMS) : this.load(k))));
  }

  // Loads every container under `key` in one request (api/subtree), so that Expand all
  // costs one round trip, not one per group.
  /**
   * @param {string} [key]
   * @param {number | null} [maxItems]
   * @returns {Promise<{views?: Record<string, ViewPage>}>}  api/subtree's answer
   */
  async loadSubtree(key = ROOT, maxItems = null) {
    const [group] = containerParams(key);
    const t0 = performance.now();
    const generation = this.generation;
    const res = await this.api.subtree(group, { maxItems, kernels: this._kernels, weights: this._showWeights });
    if (generation !== this.generation) return res; // kernels changed meanwhile: these pages are not drawn
    this._fetchMs = performance.now() - t0;
    /** @type {Record<string, ViewPage>} */
    const views = res.views || {};
    // Parents before children, so that each container's path is known when it arrives.
    /** @type {string[]} */
    const order = [];
    /** @type {Set<string>} */
    const seen = new Set();
    const visit = (/** @type {string} */ k) => {
      if (seen.has(k) || !views[k]) return;
      seen.add(k);
      order.push(k);
      for (const item of views[k].items) if (item.type !== "node") visit(itemKey(item));
    };
    visit(key);
    for (const k of order) if (!this.containers.has(k)) this.adopt(k, views[k]);
    return res;
  }

  // With weights drawn as pills: the containers fetched without them (`weights_hidden`,
  // not `weights_asked`) get the pills at their op cards and those edges (the rest of
  // the page is the same either way).
  async loadWeights() {
    if (!this._showWeights) return;
    const generation = this.generation;
    const keys = [...this.containers].filter(([, data]) => data.weights_hidden && !data.weights_asked).map(([k]) => k);
    await Promise.all(keys.map(async (key) => {
      const [group, chunk] = containerParams(key);
      const full = await this.api.children(group, chunk, this._kernels, true);
      const data = this.containers.get(key);
      if (generation !== this.generation || !data || data.weights_asked) return;
      data.inputs = full.inputs;
      data.edges = full.edges;
      data.weights_hidden = full.weights_hidden;
      data.weights_asked = true;
      this.changed();
    }));
  }

  // Loads every expanded container reachable from the root (in parallel per level).
  async loadExpanded() {
    let frontier = [ROOT];
    while (frontier.length) {
      const datas = await Promise.all(frontier.map((k) => this.load(k)));
      /** @type {string[]} */
      const next = [];
      datas.forEach((data) => {
        for (const item of data.items) {
          const k = itemKey(item);
          if (opens(item) && this.expanded.has(k) && !this.deferred.has(k)) next.push(k);
        }
      });
      frontier = next;
    }
  }

  // What is drawn in a container, in order, with its edges by position and its content
  // signature. Memoised per refresh (`memo`); see the header for the rules.
  /**
   * @param {string} key  a fetched container
   * @param {Map<string, Display>} memo
   * @returns {Display}
   */
  display(key, memo) {
    const known = memo.get(key);
    if (known) return known;
    const data = got(this.containers, key);
    /** @type {Entry[]} */
    const items = [];
    /** @type {string[]} */
    const keys = [];
    /** @type {{i: number, key: string}[]} */
    const inner = []; // {i, key}: the expanded containers drawn inside, by position
    /** @type {Map<string, number>} */
    const index = new Map();
    const add = (/** @type {string} */ k, /** @type {Entry} */ entry) => {
      index.set(k, items.length);
      keys.push(k);
      items.push(entry);
    };
    const weightPills = this.showWeights;
    for (const b of data.inputs || []) {
      if (b.weight && !weightPills) continue;
      add(`in:${b.value}`, boundaryJob("in", b));
    }
    const within = this.modulePaths.get(key);
    const folded = this.foldedStacks(data);
    const list = data.items;
    /** @type {Set<string>} */
    const absorbed = new Set(); // members of a folded stack or plumbing card drawn already
    for (let i = 0; i < list.length; i++) {
      const item = list[i];
      const k = itemKey(item);
      const stack = folded.get(k);
      if (stack) {
        const members = stack.members.flat();
        for (const m of members) {
          this.stackOf.set(m, stack.key);
          index.set(m, items.length);
          absorbed.add(m);
        }
        const byKey = new Map(list.map((it) => [itemKey(it), it]));
        const reps = stack.members.map((rep) => rep.map((m) => byKey.get(m)).filter((it) => it !== undefined));
        add(stack.key, stack.fold ? foldEntry(stack, reps[0]) : stackEntry(stack, reps));
        continue;
      }
      // a plumbing card's members need not be adjacent: each is drawn by the card
      if (absorbed.has(k)) continue;
      const open = opens(item) && this.expanded.has(k);
      const entry = open && item.type !== "node" ? frameEntry(item) : this.cardEntry(item, within, weightPills);
      if (open && this.containers.has(k)) {
        entry.expandedSig = this.display(k, memo).sig;
        inner.push({ i: items.length, key: k });
      } else if (open && this.deferred.has(k)) {
        entry.expandedSig = pendingSig(item, k);
        inner.push({ i: items.length, key: k });
      }
      add(k, entry);
    }
    for (const b of data.outputs || []) add(`out:${b.value}`, boundaryJob("out", b));
    /** @type {DisplayEdge[]} */
    const edges = [];
    /** @type {Set<string>} */
    const seen = new Set();
    for (const e of data.edges || []) {
      if (e.weight && !weightPills) continue;
      const si = index.get(e.source);
      const ti = index.get(e.target);
      if (si === undefined || ti === undefined || si === ti) continue;
      // Into or out of a stack, one edge per (source, target, label) is enough.
      const stacked = keys[si].startsWith("s") || keys[ti].startsWith("s");
      const dedupe = stacked ? `${si}>${ti}|${edgeText(e)}` : null;
      if (dedupe) {
        if (seen.has(dedupe)) continue;
        seen.add(dedupe);
      }
      edges.push({ s: si, t: ti, label: edgeText(e), value: e.value, source: keys[si], target: keys[ti] });
    }
    // Members of one unfolded stack stand in one column (layout.worker.js aligns them).
    const columns = this.columnsOf(data, index);
    const text = JSON.stringify([
      items.map((it) => [it.kind, it.title, it.caption || "", it.lines, it.weightStart ?? -1, it.tag, it.parts ? it.parts.map((p) => p.text + p.font) : null, it.quiet || false, it.toggle ? 1 : 0, it.expandedSig ? 1 : 0]),
      edges.map((e) => [e.s, e.t, e.label]),
      columns,
      data.side_by_side ? "row" : "",
    ]);
    // Groups, chunks and stacks drawn closed: a layout with none (and real inside) shows
    // how big the container's ops are when all of it is open.
    const collapsed = items.filter((it) => (it.kind === "group" || it.kind === "chunk" || it.kind === "stack" || (it.kind === "function" && this._kernels)) && !it.expandedSig).length;
    /** @type {Display} */
    const d = { key, keys, items, edges, inner, collapsed, columns, sig: hash(text), row: !!data.side_by_side };
    memo.set(key, d);
    return d;
  }

  // The card of an item drawn closed (draw/card.js content), as the server's `card` says:
  // an op; a function call as one op card that opens to its kernels; a group that ran
  // one op as that op with the module named on it; a group or chunk.
  /**
   * @param {ViewItem} item
   * @param {string | undefined} within  the module path of the container it is drawn in
   * @param {boolean} weightPills  parameters drawn as pills, not as lines on op cards
   * @returns {Entry}
   */
  cardEntry(item, within, weightPills) {
    const card = cardOf(item);
    const single = singleOf(item);
    if (card === "op" && item.type === "group" && single) {
      const entry = opEntry(single, within, weightPills);
      entry.caption = captionOf(item, within);
      // A module around one function call opens through to the call's kernels.
      entry.toggle = cardOf(single) === "function";
      return entry;
    }
    if (card === "op" || card === "function") return opEntry(item, within, weightPills);
    /** @type {Entry} */
    const entry = { kind: item.type, title: item.label || itemKey(item), lines: linesOf(item), tag: cardTag(item) };
    const inside = /** @type {{count?: number} | undefined} */ (item.compiled);
    if (inside && inside.count) entry.compiler = `⇆ XLA ×${inside.count}`; // the compiler's collectives inside
    return entry;
  }

  // The stacks of a container's answer folded now, by their first member's key: the
  // server's runs (`stacks`), unless the person unfolded one, or an item of it is open
  // (revealed inside). A control-flow boundary's bodies stay side by side.
  /**
   * @param {ViewPage} data
   * @returns {Map<string, ViewStack>}
   */
  foldedStacks(data) {
    /** @type {Map<string, ViewStack>} */
    const out = new Map();
    if (data.side_by_side) return out;
    for (const st of data.stacks || []) {
      if (this.unfolded.has(st.key) || !st.members || !st.members.length) continue;
      const members = st.members.flat();
      if (members.some((m) => this.expanded.has(m))) continue;
      out.set(members[0], st);
    }
    return out;
  }

  // The unfolded stacks of a container as columns of item positions: each repetition's
  // frames, so that the layout keeps the blocks of a stack in one column.
  /**
   * @param {ViewPage} data
   * @param {Map<string, number>} index  item key -> position in the display list
   * @returns {number[][]}
   */
  columnsOf(data, index) {
    /** @type {number[][]} */
    const out = [];
    if (data.side_by_side) return out;
    for (const st of data.stacks || []) {
      if (st.fold) continue; // what it folds is not repetitions: no column
      if (!this.unfolded.has(st.key) && !st.members.flat().some((m) => this.expanded.has(m))) continue;
      /** @type {number[]} */
      const col = [];
      for (const rep of st.members) {
        for (const m of rep) {
          const i = index.get(m);
          if (i !== undefined && !col.includes(i)) col.push(i);
        }
      }
      if (col.length > 1) out.push(col);
    }
    return out;
  }

  // Whether an item can be opened or closed: a container (a stack unfolds), a boundary
  // node with bodies; not a group drawn as a plain op (its one op is all there is). A
  // group drawn as a function call's card opens through to its kernels.
  /**
   * @param {string | null | undefined} key
   * @returns {boolean}
   */
  openable(key) {
    if (!key || key === ROOT) return false;
    if (key.startsWith("s")) return true;
    if (key.startsWith("n")) return this.bodyHolders.has(key);
    if (!isContainerKey(key)) return false;
    const item = this.itemOf.get(key);
    if (!item) return true;
    const card = cardOf(item);
    if (card === "op" && item.type === "group") {
      const single = singleOf(item);
      return !!single && cardOf(single) === "function";
    }
    return true;
  }

  /**
   * @param {string} key
   * @param {Map<string, Display>} [memo]
   * @returns {string}
   */
  signature(key, memo = this.memoNow()) {
    return this.display(key, memo).sig;
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
   * @param {Set<string> | null} want
   * @param {number} [limit]  items of layout work, at most (past it: null)
   * @param {Map<string, Layout> | null} [frozen]  the containers estimated when the refresh began
   * @returns {Plan | null}
   */
  plan(want, limit = Infinity, frozen = null) {
    const memo = this.memoNow();
    /** @type {Map<string, PlanEntry>} */
    const info = new Map();
    /** @type {RequestJob[]} */
    const jobs = [];
    /** @type {Map<string, RequestJob>} */
    const byJid = new Map();
    let items = 0;
    /** @type {(key: string) => PlanEntry} */
    const visit = (key) => {
      if (!this.containers.has(key)) {
        // Deferred (Expand all, not fetched yet): a box estimated from its item's facts.
        /** @type {Display} */
        const d = { key, sig: pendingSig(this.itemOf.get(key) || {}, key), items: [], keys: [], edges: [], inner: [], pending: true };
        /** @type {PlanEntry} */
        const entry = { key, d, boxes: [], est: true, layout: this.sizing.estimateFor(key, d, []) };
        info.set(key, entry);
        return entry;
      }
      const d = this.display(key, memo);
      /** @type {(Size | null)[]} */
      const boxes = new Array(d.items.length).fill(null);
      /** @type {{i: number, jid: string, hold: Size | null}[]} */
      const refs = [];
      for (const { i, key: ck } of d.inner) {
        const ci = visit(ck);
        if (ci.job) refs.push({ i, jid: ci.job.jid, hold: this.heldFor(ck, ci) });
        else boxes[i] = this.boxOf(ck, ci);
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
      const prev = want ? this.lastReal.get(key) : null;
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
        let real = this.layout.get(lk);
        if (!real && prev && prev.sig === d.sig) {
          // Only boxes inside it grew: make room for them in its real layout (what is right
          // of a grown box moves right, what is below it moves down) instead of laying it
          // out again, so nothing around them jumps.
          real = grownLayout(prev.layout, prev.boxes, boxes);
          if (real) this.layout.put(lk, real);
        }
        if (real) {
          entry.layout = real;
          entry.open = !d.collapsed && d.inner.every(({ key: ck }) => got(info, ck).open);
          this.sizing.learn(lk, d, boxes, real, key, entry.open);
          this.lastReal.set(key, { sig: d.sig, layout: real, boxes });
          return entry;
        }
        if (this.layout.failed.has(lk)) {
          entry.layout = this.sizing.estimateFor(key, d, boxes);
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
            ci.layout = this.sizing.estimateFor(ck, ci.d, ci.boxes, true);
            boxes[i] = { w: ci.layout.w, h: ci.layout.h };
            this.held.delete(ck);
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
          if (boxes[i] && ci.est && !this.heldFor(ck, ci)) this.held.set(ck, { sig: ci.d.sig, w: boxes[i].w, h: boxes[i].h });
        }
        entry.job = job;
        return entry;
      }
      entry.layout = this.sizing.estimateFor(key, d, boxes);
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

  /**
   * @param {string} key
   * @param {PlanEntry} ci
   * @returns {{sig: string, w: number, h: number} | null}
   */
  heldFor(key, ci) {
    const h = this.held.get(key);
    return h && h.sig === ci.d.sig ? h : null;
  }

  // The box a container takes in its parent's layout: its own size, or the box held for it.
  /**
   * @param {string} key
   * @param {PlanEntry} ci
   * @returns {Size}
   */
  boxOf(key, ci) {
    const h = this.heldFor(key, ci);
    const layout = laidOut(ci);
    if (ci.est) return h ? { w: h.w, h: h.h } : { w: layout.w, h: layout.h };
    return boxFor(layout, h);
  }

  // Loads, lays out and composes. Resolves true when a new scene is ready, false when a
  // newer request superseded this one. `want`: the containers to lay out for real (the
  // others keep a real layout when one is known, else get an estimated one); by default
  // every one, unless that is more than ESTIMATE_ITEMS items of new layout work: then the
  // containers the last settled view showed.
  /**
   * @param {{want?: Set<string> | null}} [options]
   * @returns {Promise<boolean>}
   */
  async refresh({ want = null } = {}) {
    this.refreshing += 1;
    try {
      return await this._refresh(want);
    } finally {
      this.refreshing -= 1;
    }
  }

  // Why the last refresh composed no scene (for tests and benchmarks).
  /**
   * @param {string} why
   * @returns {false}
   */
  gaveUp(why) {
    this.lastGiveUp = why;
    return false;
  }

  /**
   * @param {Set<string> | null} want
   * @returns {Promise<boolean>}
   */
  async _refresh(want) {
    /** @type {Timings} */
    const t = { fetch: this._fetchMs };
    this._fetchMs = undefined;
    let t0 = performance.now();
    // After Expand all, pages asked for again (the Kernels toggle dropped them all) come
    // back as Expand all fetched them, in one request: else every container below the
    // root would wait, deferred, for the camera to move.
    if (this.openAll && !this.containers.has(ROOT)) await this.loadSubtree(ROOT, EXPAND_FETCH_ITEMS);
    await this.loadExpanded();
    await this.loadWeights();
    t.load = performance.now() - t0;
    t0 = performance.now();
    let p = this.plan(want, want ? Infinity : ESTIMATE_ITEMS);
    if (!p) {
      want = new Set([ROOT]);
      if (this.lastWant) for (const k of this.lastWant) if (this.expanded.has(k)) want.add(k);
      p = unlimited(this.plan(want));
    }
    t.jobs = performance.now() - t0;
    t.jobCount = p.jobs.length;
    /** @type {Map<string, Layout>} */
    const frozen = new Map();
    if (want) for (const [k, e] of p.info) if (e.est && !want.has(k)) frozen.set(k, laidOut(e));
    t.layout = 0;
    t.recheck = 0;
    // Rounds, each one waiting for the layouts the last one made possible: a real parent
    // that waited for containers laid out inside it grows (or is laid out again) in the
    // next one, and so on up; a level at most per round.
    for (let round = 0; p.jobs.length; round++) {
      if (round >= 8) return this.gaveUp("incomplete");
      t0 = performance.now();
      const changes = this.changes;
      const res = await this.layout.request(p.jobs);
      if (res === null) return this.gaveUp("superseded");
      if (res && "error" in res) throw new Error(res.error);
      this.lastLayoutMs = performance.now() - t0;
      t.layout += performance.now() - t0;
      // Another refresh may have changed the expansion meanwhile; compose only if complete.
      if (this.changes !== changes) return this.gaveUp("changed");
      t0 = performance.now();
      p = unlimited(this.plan(want, Infinity, frozen));
      t.recheck += performance.now() - t0;
    }
    const done = p;
    t0 = performance.now();
    this.scene = this.compose(done.info);
    t.compose = performance.now() - t0;
    t.estimated = this.scene.estimated;
    t.at = performance.now();
    this.timingLog.push(t);
    if (this.timingLog.length > 50) this.timingLog.shift();
    this.lastWant = want;
    this.timings = t;
    this.version += 1;
    return true;
  }

  // Opens or closes `key` (model/expansion.js); false when it does not open.
  /** @param {string} key */
  toggle(key) {
    return toggle(this, key);
  }

  // The first view (model/first-view.js): opens the trunk, then within `budget` drawn items.
  /**
   * @param {number} [budget]
   * @param {{item_path?: string[]}[] | null} [trunk]  `api/capture`'s trunk
   */
  autoExpand(budget = 48, trunk = null) {
    return autoExpand(this, budget, trunk);
  }

  // The first view closes again the group it opened last (to fit); false when it opened none.
  closeLastOpened() {
    return closeLastOpened(this);
  }

  // Layouts → absolute scene. A container inside a held box larger than its real
  // layout sits centred in it. `scene.estimated` counts the estimated containers.
  /**
   * @param {Map<string, PlanEntry>} info
   * @returns {Scene}
   */
  compose(info) {
    /** @type {Map<string, SceneItem>} */
    const byKey = new Map();
    let estimated = 0;
    // A container's stamp: its layout and the stamps of the containers inside it. A part of
    // the last scene with the same stamp at the same place is reused as it is (with the
    // draw caches on its items), so settling a few containers rebuilds only their way up.
    /** @type {Map<string, string>} */
    const stamps = new Map();
    let nextId = this.nextLayoutId || 1;
    /** @type {(key: string) => string} */
    const stamp = (key) => {
      const e = got(info, key);
      const layout = laidOut(e);
      let id = this.layoutIds.get(layout);
      if (!id) this.layoutIds.set(layout, (id = nextId++));
      let text = String(id);
      for (const { key: ck } of e.d.inner) if (info.has(ck)) text += "," + stamp(ck);
      const st = text.length > 24 ? hash(text) : text;
      stamps.set(key, st);
      return st;
    };
    stamp(ROOT);
    this.nextLayoutId = nextId;
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
      const prev = this.built.get(key);
      if (prev && prev.stamp === stamps.get(key) && prev.x === ox && prev.y === oy) {
        adopt(prev.container);
        estimated += prev.estimated;
        built.set(key, prev);
        /** @type {(c: SceneContainer) => void} */
        const keep = (c) => {
          for (const it of c.items) if (it.expanded) {
            const part = this.built.get(it.key); // built with the part it is in
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
      const data = this.containers.get(key);
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
    this.built = built;
    return { root, byKey, w: root.w, h: root.h, count: byKey.size, estimated };
  }

  // Lays out for real the estimated containers that `view` ({x0, y0, x1, y1} world, s
  // zoom) shows large enough for their insides to be drawn, with the containers around
  // them, and composes again; the rest stays as it is. Resolves true with a new scene,
  // false when nothing in view was estimated (or a newer request won).
  /**
   * @param {{x0: number, y0: number, x1: number, y1: number, s: number}} view
   * @returns {Promise<boolean>}
   */
  async settle(view) {
    const scene = this.scene;
    if (!scene || !scene.estimated || this.refreshing) return false;
    const mx = view.x1 - view.x0; // a screen around the view is laid out ahead
    const my = view.y1 - view.y0;
    const x0 = view.x0 - mx;
    const x1 = view.x1 + mx;
    const y0 = view.y0 - my;
    const y1 = view.y1 + my;
    const want = new Set([ROOT]);
    /** @type {string[]} */
    const fetch = [];
    let any = scene.root.estimated;
    /** @type {(c: SceneContainer) => void} */
    const visit = (c) => {
      if (view.s < MIN_EDGE_SCALE) return;
      for (const it of c.items) {
        if (!it.expanded || it.x > x1 || it.y > y1 || it.x + it.w < x0 || it.y + it.h < y0) continue;
        if (Math.max(it.w, it.h) * view.s < SETTLE_PX) continue;
        want.add(it.key);
        if (it.expanded.estimated) any = true;
        if (this.deferred.has(it.key)) fetch.push(it.key);
        visit(it.expanded);
      }
    };
    visit(scene.root);
    if (!any) return false;
    if (fetch.length) {
      this.refreshing += 1; // a user's relayout meanwhile wins; this one then gives up
      try {
        await this.loadDeferred(fetch);
      } finally {
        this.refreshing -= 1;
      }
      if (this.scene !== scene) return false;
    }
    return this.refresh({ want });
  }

  // Keys of the containers whose layout is estimated in the current scene.
  /** @returns {string[]} */
  estimatedKeys() {
    /** @type {string[]} */
    const out = [];
    /** @type {(c: SceneContainer) => void} */
    const visit = (c) => {
      if (c.estimated) out.push(c.key);
      for (const it of c.items) if (it.expanded) visit(it.expanded);
    };
    if (this.scene) visit(this.scene.root);
    return out;
  }

  // ------------------------------------------------------------------ expansion actions
  // (model/expansion.js)

  /** @param {string} stackKey */
  unfold(stackKey) {
    return unfold(this, stackKey);
  }

  expandAll() {
    return expandAll(this);
  }

  collapseAll() {
    return collapseAll(this);
  }

  /** @param {number} depth */
  expandToDepth(depth) {
    return expandToDepth(this, depth);
  }

  // The expansion as group paths, which survive a recapture (ids do not); see model/paths.js.
  expansionPaths() {
    return expansionPaths(this);
  }

  // Re-opens what `expansionPaths()` recorded, level by level; false when nothing matched.
  /** @param {Partial<SavedPaths>} saved */
  restorePaths(saved) {
    return restorePaths(this, saved);
  }

  // Makes an item visible (its server item path: every key before the target expanded).
  /** @param {string[]} itemPath */
  revealPath(itemPath) {
    return revealPaths(this, [itemPath]);
  }

  // Makes several items visible at once (a source line's items).
  /** @param {string[][]} itemPaths */
  revealPaths(itemPaths) {
    return revealPaths(this, itemPaths);
  }

  // Makes `target` visible through its group path, searching chunks.
  /**
   * @param {string} target  an item key
   * @param {number[] | null} [pathGroupIds]  the ids of the groups holding it, top down
   */
  reveal(target, pathGroupIds) {
    return reveal(this, target, pathGroupIds);
  }

  /**
   * @param {number} x
   * @param {number} y
   */
  hitTest(x, y) {
    return this.scene ? itemAt(this.scene, x, y) : null;
  }

  // The edge under a world point (within `tol` world units of it), innermost container
  // first, or null: {source, target, label, value}.
  /**
   * @param {number} x
   * @param {number} y
   * @param {number} tol
   */
  edgeAt(x, y, tol) {
    return this.scene ? edgeAt(this.scene, x, y, tol) : null;
  }

  // Absolute points of every drawn edge touching `key`, for highlighting.
  /** @param {string} key */
  edgesOf(key) {
    return this.scene ? edgesOf(this.scene, key) : [];
  }
}

// A real layout with room for the grown boxes of the containers inside it: for each box
// that grew by (dw, dh), everything whose left edge is right of its old right edge moves
// right by dw and everything below its old bottom moves down by dh (boxes, edge points,
// label points). Such a shift keeps boxes apart and edges orthogonal, but it widens the
// container by what runs beside a grown box (residual edges): past a third wider than its
// last layout from ELK, it is laid out again. Null then, when a box shrank (that needs a
// new layout too) or when nothing changed.
/**
 * @param {Layout & {estimated?: boolean, baseW?: number}} layout  its last real layout
 * @param {(Size | null)[]} oldBoxes  the boxes of the containers inside it then, by position
 * @param {(Size | null)[]} newBoxes  and now
 * @returns {(Layout & {grown: true, baseW: number}) | null}
 */
function grownLayout(layout, oldBoxes, newBoxes) {
  if (!layout || layout.fallback || layout.estimated || oldBoxes.length !== newBoxes.length) return null;
  /** @type {[number, number, number][]} */
  const grow = [];
  for (let i = 0; i < newBoxes.length; i++) {
    const a = oldBoxes[i];
    const b = newBoxes[i];
    if (!a && !b) continue;
    if (!a || !b) return null;
    if (b.w < a.w || b.h < a.h) return null;
    if (b.w > a.w || b.h > a.h) grow.push([i, FRAME.measure(b).w - FRAME.measure(a).w, b.h - a.h]);
  }
  if (!grow.length) return null;
  const boxes = layout.boxes.map((b) => ({ ...b }));
  const edges = layout.edges.map((e) => ({
    ...e,
    points: e.points.map((p) => [p[0], p[1]]),
    labelAt: e.labelAt ? [e.labelAt[0], e.labelAt[1]] : e.labelAt,
    label: e.label ? { ...e.label } : e.label,
  }));
  for (const [i, dw, dh] of grow) {
    const g = boxes[i];
    const xr = g.x + g.w;
    const yb = g.y + g.h;
    for (const b of boxes) {
      if (b === g) continue;
      if (b.x >= xr) b.x += dw;
      if (b.y >= yb) b.y += dh;
    }
    const move = (/** @type {number[]} */ p) => {
      if (p[0] >= xr) p[0] += dw;
      if (p[1] >= yb) p[1] += dh;
    };
    for (const e of edges) {
      e.points.forEach(move);
      if (e.labelAt) move(e.labelAt);
      if (e.label) {
        const at = [e.label.x, e.label.y];
        move(at);
        [e.label.x, e.label.y] = at;
      }
    }
    g.w += dw;
    g.h += dh;
  }
  // The size as the worker reads it from ELK's answer (readLayout): the far corner, padded.
  let w = 0;
  let h = 0;
  for (const b of boxes) {
    w = Math.max(w, b.x + b.w);
    h = Math.max(h, b.y + b.h);
  }
  for (const e of edges) for (const [px, py] of e.points) {
    w = Math.max(w, px);
    h = Math.max(h, py);
  }
  const base = layout.baseW || layout.w;
  if (w + 10 > Math.max(1.35 * base, base + 300)) return null;
  // A label a grown box now covers is dropped (its shape still shows on hover).
  for (const e of edges) {
    const label = e.label;
    if (label && boxes.some((b) => overlaps(labelRect(label), b))) e.label = undefined;
  }
  return { w: Math.ceil(w + 10), h: Math.ceil(h + 10), boxes, edges, grown: true, baseW: base };
}

// A stack's summary (stackItem) or a pill's value (boundaryItem) stands in the scene where
// the server's item does: draw/card.js types a scene item's `item` as a page item, and its
// readers look at the scene item's `type` ("stack", "in", "out") before the item's fields.
/**
 * @param {StackSummary | BoundaryValue} x
 * @returns {ViewItem}
 */
function standIn(x) {
  return /** @type {ViewItem} */ (/** @type {unknown} */ (x));
}

// A group drawn as its single op: that op's own item (viewer/API.md "One-op groups": a node
// item or a function card item, which api.js's PageItem types as its key only).
/**
 * @param {ViewItem} item
 * @returns {ViewItem | undefined}
 */
function singleOf(item) {
  return /** @type {ViewItem | undefined} */ (item.single);
}

const overlaps = (/** @type {Box} */ a, /** @type {Box} */ b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

// The content signature of a container not fetched yet (its layout is an estimate):
// groups with the same structure share it.
/**
 * @param {Partial<ViewItem>} item
 * @param {string} key
 */
function pendingSig(item, key) {
  return `p:${item.structure || key}:${item.node_count ?? ""}`;
}

// An item's card lines, computed once per item object (the server's answers are kept).
/**
 * @param {ViewItem} item
 * @returns {string[]}
 */
function linesOf(item) {
  // Kept per item, for the shapes shown (global or per device: the toolbar's toggle).
  const mode = perDeviceShapes();
  let kept = item._lines;
  if (!kept || kept.mode !== mode) {
    kept = { mode, lines: cardLines(item) };
    Object.defineProperty(item, "_lines", { value: kept, enumerable: false, configurable: true, writable: true });
  }
  return kept.lines;
}

const WEIGHT_LINES = 4; // weights listed on an op's card before "+N more"

/**
 * @param {ViewItem} item
 * @returns {string[]}
 */
export function cardLines(item) {
  if (item.type === "node") {
    const outs = (item.outputs || []).map(formatValue);
    const lines = outs.slice(0, 3);
    const total = item.outputs_total ?? outs.length;
    if (total > 3) lines.push(`+${total - 3} more outputs`);
    if (item.sublabel) lines.push(String(item.sublabel));
    const bodies = /** @type {BodySummary[]} */ (item.bodies || []);
    const nb = bodies.length;
    if (nb === 1 && bodies[0].role === "shard_map body") lines.push(`per-device body ×${grouped(bodies[0].devices || 0)} · opens`);
    else if (nb) lines.push(`${nb} ${nb === 1 ? "body" : "bodies"} · not executed`);
    return lines;
  }
  /** @type {string[]} */
  const lines = [];
  const count = (/** @type {number} */ n, /** @type {string} */ word) => `${grouped(n)} ${word}${Number(n) === 1 ? "" : "s"}`;
  if (item.type === "chunk") {
    if (item.sublabel) lines.push(String(item.sublabel));
  } else if (item.type === "group") {
    // An unexecuted body says so first: a template, how often it would run, which case.
    const body = item.body;
    if (body) {
      lines.push(String(body.template));
      if (typeof body.iterations === "number") lines.push(`${body.iterations.toLocaleString("en-US")} iterations (static)`);
      else if (body.iterations === null) lines.push("trip count decided at run time");
      if (body.selected) lines.push(String(body.selected));
      if (body.closed) lines.push(String(body.closed));
    }
    // What is inside: class (or scope kind), parameters, then what goes in and out.
    const head = [item.class || (body ? "" : item.honest || item.sublabel || item.kind)];
    const params = item.params;
    const pc = params && params.count;
    if (params && pc) head.push(`${formatCount(pc)} params`, formatBytes(params.bytes));
    if (head.some(Boolean)) lines.push(head.filter(Boolean).join(" · "));
    if (typeof item.role === "string") lines.push(item.role); // router / experts, the server's words (experts.py)
    // What the layer costs, beside its parameters (FLOPs: a multiply-add counts 2).
    if (item.cost) lines.push(costLine(item.cost));
    const io = shapesLine(item);
    if (io) lines.push(io);
    const mem = memoryLine(item.per_device_memory);
    if (mem) lines.push(mem);
    const inside = /** @type {{count?: number, kinds?: string} | undefined} */ (item.compiled);
    if (inside && inside.count) lines.push(`⇆ XLA: ${inside.kinds || `${inside.count} collectives`}`);
  } else if (item.honest) {
    lines.push(String(item.honest));
  } else if (item.sublabel) {
    lines.push(String(item.sublabel));
  }
  const bits = [];
  if (item.node_count !== undefined && item.node_count !== null) bits.push(count(item.node_count, "op"));
  else if (item.child_count !== undefined && item.child_count !== null) bits.push(count(item.child_count, "item"));
  if (item.opaque_count) bits.push(`${grouped(item.opaque_count)} opaque`);
  // Identical blocks, adjacent or not (the server's twins), are marked as Model Explorer does.
  if (item.twin && item.twin.count > 1) bits.push(twinWords(item.twin));
  else if (item.identical && item.identical.count > 1) bits.push(`×${item.identical.count} identical`);
  if (bits.length) lines.push(bits.join(" · "));
  const idle = idleWords(item);
  if (idle) lines.push(idle);
  if (typeof item.routed === "string") lines.push(item.routed); // the server's words (views.py)
  return lines;
}

// The lines an op's card lists for the weights it consumes (Netron's habit), after its
// own lines: `name  f32[768,2304]`, `shared` when several ops use it, "+N more" past a few.
/**
 * @param {ViewItem} item
 * @param {string | undefined} within  the module path of the container it is drawn in
 * @returns {string[]}
 */
export function weightLines(item, within) {
  const ws = item.weights || [];
  if (!ws.length) return [];
  // Inside module `gpt.h.0.attn`, `gpt.h.0.attn.c_attn.weight` reads `c_attn.weight`: the
  // card sits in that module's box already (the inspector gives the full name).
  const short = (/** @type {string} */ name) => (within && name.startsWith(within + ".") ? name.slice(within.length + 1) : name);
  const lines = ws.slice(0, WEIGHT_LINES).map((w) => `${short(w.name || "weight")}  ${formatValue(w)}${w.shared ? "  shared" : ""}`);
  const total = item.weights_total ?? ws.length;
  if (total > WEIGHT_LINES) lines.push(`+${total - WEIGHT_LINES} more`);
  return lines;
}

// What one device holds for a group of a program split across devices (the server sends
// `per_device_memory` only then): `per device: 1 KiB params · 128 B in · 896 B act`.
/**
 * @param {DeviceMemory | null | undefined} m
 * @returns {string}
 */
export function memoryLine(m) {
  if (!m || typeof m !== "object") return "";
  const bits = [];
  if (m.param_bytes) bits.push(`${formatBytes(m.param_bytes)} params`);
  if (m.gradient_bytes) bits.push(`${formatBytes(m.gradient_bytes)} grads`);
  if (m.input_bytes) bits.push(`${formatBytes(m.input_bytes)} in`);
  if (m.activation_bytes) bits.push(`${formatBytes(m.activation_bytes)} act`);
  return bits.length ? `per device: ${bits.join(" · ")}` : "";
}

/**
 * One collective of the compiled program on its op's card (`compiled`, viewer/API.md).
 * @typedef {{kind?: string, axes?: string[], devices?: number, bytes_sent_per_device?: number | null, added?: boolean, combined?: number}} CompiledBrief
 */

// A compiled collective's line: `XLA all-reduce data ×4 · sends 2 KiB each` (`+1 more`).
/**
 * @param {CompiledBrief} c @param {number} total
 * @returns {string}
 */
export function compiledLine(c, total) {
  const axes = (c.axes || []).join("×") || "group";
  const sent = typeof c.bytes_sent_per_device === "number" ? ` · sends ${formatBytes(c.bytes_sent_per_device)} each` : "";
  const more = total > 1 ? ` (+${total - 1})` : "";
  return `XLA ${c.kind || "collective"} ${axes} ×${c.devices || 1}${sent}${more}`;
}

// A collective's line on its card: the mesh axes, how many devices take part and what
// each sends (`data ×4 · sends 192 B each`).
/**
 * @param {Collective | null | undefined} c
 * @returns {string}
 */
export function collectiveLine(c) {
  if (!c || typeof c !== "object") return "";
  const axes = (c.axes || []).join("×") || "group";
  const n = c.devices ? ` ×${c.devices}` : "";
  const sent = typeof c.bytes_sent_per_device === "number" ? ` · sends ${formatBytes(c.bytes_sent_per_device)} each` : "";
  return `${axes}${n}${sent}`;
}

/**
 * @param {ViewItem} item
 * @returns {string}
 */
function shapesLine(item) {
  const fmt = (/** @type {ItemValue[] | undefined} */ list, /** @type {number | undefined} */ total) => {
    if (!list || !list.length) return "";
    const shown = list.slice(0, 2).map(formatValue).join(", ");
    return (total ?? list.length) > 2 ? `${shown} +${(total ?? list.length) - 2}` : shown;
  };
  const a = fmt(item.inputs, item.inputs_total);
  const b = fmt(item.outputs, item.outputs_total);
  if (!a && !b) return "";
  return `${a || "·"} → ${b || "·"}`;
}

// An op card's content: a node (titled by the `torch.nn.functional` call it ran, when the
// capture names one: `embedding`, `layer_norm`, not `aten::native_layer_norm`), or a
// function call's card (`linear`, with its kernels behind the toggle); the parameters it
// reads as lines inside it (`weights`: their value ids, for clicks on those lines).
/**
 * @param {ViewItem} item
 * @param {string | undefined} within
 * @param {boolean} weightPills
 * @returns {Entry}
 */
function opEntry(item, within, weightPills) {
  const fn = cardOf(item) === "function";
  const title = fn ? String(item.title || item.label) : opTitle(item);
  /** @type {Entry} */
  const entry = {
    kind: fn ? "function" : "node",
    title,
    op: fn ? title : String(item.label || ""),
    opaque: !!item.opaque,
    lines: fn ? functionLines(item) : linesOf(item),
    tag: fn ? null : cardTag(item),
  };
  if (!fn && item.collective) {
    // A collective stands out: its own colour, its mesh axes on the tag, what it moves.
    entry.collective = true;
    entry.tag = `⇄ ${(item.collective.axes || []).join("×") || "collective"}`;
    entry.lines = [collectiveLine(item.collective), ...entry.lines];
  }
  const compiled = /** @type {CompiledBrief[] | undefined} */ (item.compiled);
  if (!fn && compiled && compiled.length) {
    // What the compiler runs for this equation: a badge, and its first collective in words.
    const total = Number(item.compiled_total || compiled.length);
    entry.compiler = `⇆ XLA${total > 1 ? ` ×${total}` : ""}`;
    entry.lines = [compiledLine(compiled[0], total), ...entry.lines];
  }
  if (fn || opens(item)) entry.toggle = true; // a call opens to its kernels; a boundary to its bodies
  if (!weightPills && item.weights && item.weights.length) {
    entry.weightStart = entry.lines.length;
    entry.lines = entry.lines.concat(weightLines(item, within));
    entry.weights = item.weights.slice(0, WEIGHT_LINES).map((w) => w.value);
  }
  return entry;
}

const FUNCTIONAL = "torch.nn.functional.";

/**
 * An op's title: a `torch.nn.functional` call by its short name, else its label.
 * @param {{function?: unknown, label?: unknown}} item
 * @returns {string}
 */
export function opTitle(item) {
  const fn = typeof item.function === "string" ? item.function : "";
  return fn.startsWith(FUNCTIONAL) ? fn.slice(FUNCTIONAL.length) : String(item.label ?? "");
}

// A function call's lines: what it made, where it was called and how many kernels it ran.
/**
 * @param {ViewItem} item
 * @returns {string[]}
 */
function functionLines(item) {
  const outs = (item.outputs || []).map(formatValue);
  const lines = outs.slice(0, 3);
  const total = item.outputs_total ?? outs.length;
  if (total > 3) lines.push(`+${total - 3} more outputs`);
  const n = item.kernels ? Number(item.kernels.count) : Number(item.node_count) || 0;
  lines.push([item.where, n ? `${grouped(n)} kernel${n === 1 ? "" : "s"}` : ""].filter(Boolean).join(" · "));
  return lines;
}

// The module a group drawn as its single op stands for, named on that op's card: the
// innermost wrapper's path below the container's module, and its class (`q_proj · Linear`).
/**
 * @param {ViewItem} item
 * @param {string | undefined} within
 * @returns {string}
 */
export function captionOf(item, within) {
  // `wrappers`: [{id, key, kind, name, title, class?, path?}] (API.md "One-op groups")
  /** @type {Wrapper[]} */
  const ws = item.wrappers && item.wrappers.length ? item.wrappers : [item];
  const w = ws[ws.length - 1];
  const path = String(w.path || w.name || item.label || "");
  const short = within && path.startsWith(within + ".") ? path.slice(within.length + 1) : path;
  return w.class ? `${short} · ${w.class}` : short;
}

// What an expanded container's frame says (its header is drawn from its item: card.js).
/**
 * @param {ViewItem} item
 * @returns {Entry}
 */
function frameEntry(item) {
  return { kind: item.type, title: String(item.title || item.label || itemKey(item)), lines: [], tag: cardTag(item) };
}

// A stack card: the run's label, what one repetition holds (`LlamaDecoderLayer`, or
// `(Attention, FeedForward) +2 ops`, Gemma's `Local ×5, Global`), its parameters in all
// and its ops, `×n` on its tag. `members`: every member's key, in order.
/**
 * @param {ViewStack} stack
 * @param {ViewItem[][]} reps  the items of each repetition
 * @returns {Entry}
 */
function stackEntry(stack, reps) {
  const first = reps[0] || [];
  const frames = first.filter((it) => cardOf(it) === "group");
  const head = frames.length === 1 && first.length === 1 ? first[0] : null;
  /** @type {string[]} */
  const lines = [];
  if (head) {
    // One block per repetition: the block's own card lines, without its op count.
    lines.push(...cardLines(head).filter((l) => !/^[\d,]+ (op|item)s?( ·|$)/.test(l) && !l.startsWith("idle:")));
  } else {
    lines.push(repetitionWords(stack, first));
  }
  let params = 0;
  let bytes = 0;
  for (const rep of reps) for (const it of rep) {
    const single = singleOf(it);
    const pr = it.params || (single && single.params);
    if (pr) {
      params += Number(pr.count) || 0;
      bytes += Number(pr.bytes) || 0;
    }
  }
  if (!head && params) lines.push(`${formatCount(params)} params · ${formatBytes(bytes)} in all`);
  const per = first.reduce((n, it) => n + (Number(it.node_count) || (it.type === "node" ? 1 : 0)), 0);
  const total = reps.reduce((n, rep) => n + rep.reduce((m, it) => m + (Number(it.node_count) || (it.type === "node" ? 1 : 0)), 0), 0);
  lines.push(`${reps.length} × ${grouped(per)} ops = ${grouped(total)} ops`);
  if (typeof stack.routing === "string") lines.push(stack.routing); // layers alike but for what routing chose
  // Its cost: one block's and the run's sum (server's `cost`, per_block its first repetition).
  const cost = stack.cost || null;
  if (cost) {
    /** @type {{flops?: number | null}} */
    const one = cost.per_block || {};
    const est = cost.estimate ? "~" : "";
    lines.push(`${reps.length} × ${est}${formatFlops(one.flops || 0)} = ${est}${formatFlops(cost.flops || 0)}`);
    lines.push(`${formatBytes(cost.bytes || 0)} moved` + (cost.uncounted ? ` · +${grouped(cost.uncounted)} uncounted` : ""));
  }
  const title = stack.label || `${first[0] ? first[0].label : ""} …`;
  return { kind: "stack", title: String(title), lines, tag: `×${stack.count || reps.length}`, members: stack.members.flat(), period: stack.period || 1, cost };
}

// A fold of items that are not repetitions, as one card named after what it holds; it
// opens like a stack. "plumbing" (viewer/projection/plumbing.py): what a container
// computes once and hands to every layer (masks, position ids, rotary tables); "lane"
// (experts.py): one expert's iteration of an experts loop (gate, up, down).
/**
 * @param {ViewStack} fold
 * @param {ViewItem[]} members
 * @returns {Entry}
 */
function foldEntry(fold, members) {
  const names = fold.names || [];
  /** @type {string[]} */
  const lines = [];
  if (names.length) lines.push(names.slice(0, 4).join(" · ") + (names.length > 4 ? ` +${names.length - 4}` : ""));
  const ops = members.reduce((n, it) => n + (Number(it.node_count) || (it.type === "node" ? 1 : 0)), 0);
  const count = `${grouped(ops)} op${ops === 1 ? "" : "s"}`;
  lines.push(fold.fold === "plumbing" ? `${count} · feeds every layer (×${fold.layers || "n"})` : count);
  const tag = fold.fold === "plumbing" ? "inputs" : "expert";
  return { kind: "group", title: String(fold.label || ""), lines, tag, members: fold.members.flat(), period: members.length, fold: fold.fold };
}

// What one repetition of a period-k stack holds, in words: its frames by class (runs
// inside it folded: `Local ×5, Global`) and how many ops sit between them.
/**
 * @param {ViewStack} stack
 * @param {ViewItem[]} first  the items of its first repetition
 * @returns {string}
 */
function repetitionWords(stack, first) {
  const name = (/** @type {ViewItem} */ it) => String(it.class || it.label || "");
  /** @type {string[]} */
  const words = [];
  let ops = 0;
  const inner = new Map((stack.inner || []).map((r) => [r.start, r]));
  for (let j = 0; j < first.length;) {
    const run = inner.get(j);
    if (run) {
      const part = first.slice(j, j + run.period).filter((it) => cardOf(it) === "group").map(name);
      if (part.length) words.push(`${part.length > 1 ? `(${part.join(", ")})` : part[0]} ×${run.count}`);
      j += run.period * run.count;
      continue;
    }
    if (cardOf(first[j]) === "group") words.push(name(first[j]));
    else ops++;
    j++;
  }
  const text = words.join(", ");
  return ops ? `${text} +${ops} op${ops === 1 ? "" : "s"}` : text;
}

// The parameters of every member of a stack (its card says them in all).
/**
 * @param {ViewItem[]} members
 * @returns {{count: number, bytes: number}}
 */
function stackParams(members) {
  let count = 0;
  let bytes = 0;
  for (const it of members) {
    const single = singleOf(it);
    const pr = it.params || (single && single.params);
    if (pr) {
      count += Number(pr.count) || 0;
      bytes += Number(pr.bytes) || 0;
    }
  }
  return { count, bytes };
}

/**
 * @param {Entry} entry  the stack's card
 * @param {Map<string, ViewItem>} byItem  the container's items by key
 * @returns {StackSummary}
 */
function stackItem(entry, byItem) {
  const keys = entry.members || []; // a stack's card lists them
  const members = keys.map((k) => byItem.get(k)).filter((it) => it !== undefined);
  /** @type {Partial<ViewItem>} */
  const first = members.find((m) => m.type === "group") || members[0] || {};
  return { ...first, type: "stack", label: entry.title, kind: first.kind || "group", members: keys, stack_count: members.length, period: entry.period, fold: entry.fold || null, cost: entry.cost ? { ...entry.cost } : undefined, stack_params: stackParams(members) };
}

// A boundary pill: the exact text parts the layout worker measures and the renderer draws.
/**
 * @param {"in" | "out"} side
 * @param {PageValue} b
 * @returns {Entry}
 */
function boundaryJob(side, b) {
  return { key: `${side}:${b.value}`, ...pillContent(side, b) };
}

/**
 * @param {ViewItem} item
 * @returns {string | null}
 */
function cardTag(item) {
  if (item.type === "node") return item.opaque ? "opaque" : null;
  if (item.type === "chunk") return "chunk";
  return item.kind || "group";
}

/**
 * @param {ViewPage} data
 * @param {string} key  "in:V" | "out:V"
 * @returns {BoundaryValue}
 */
function boundaryItem(data, key) {
  const [side, v] = key.split(":");
  const list = side === "in" ? data.inputs : data.outputs;
  const b = (list || []).find((x) => String(x.value) === v);
  return b ? { ...b, type: side } : { type: side, value: Number(v) };
}

