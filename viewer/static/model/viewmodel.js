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

import { edgeText } from "../draw/theme.js";
import { boxFor, hash } from "../layout/layout-client.js";
import { MIN_EDGE_SCALE } from "../draw/drawlist.js";
import { LayoutEstimates } from "./estimates.js";
import { edgeAt, edgesOf, itemAt } from "./hits.js";
import { expansionPaths, restorePaths, reveal, revealPaths } from "./paths.js";
import {
  EXPAND_FETCH_ITEMS, TrackedSet, collapseAll, expandAll, expandToDepth, toggle, unfold,
} from "./expansion.js";
import { autoExpand, closeLastOpened, nextPages } from "./first-view.js";
import { MORE_OUTPUTS, OUT_PILLS, ROOT, cardOf, isContainerKey, itemKey, loopReads, opens, opensWithAll, outputPills } from "./items.js";
import { composeScene, got, laidOut, planLayouts } from "./scene.js";
import { singleOf, pendingSig, linesOf, opEntry, captionOf, frameEntry, stackEntry, foldEntry, boundaryJob, moreOutputsJob, cardTag } from "./card-words.js";

export { EXPAND_FETCH_ITEMS, ROOT, cardOf, isContainerKey, itemKey, opens };
// The card wording moved to card-words.js; the panels and the page import it from here.
export { captionOf, cardLines, collectiveLine, memoryLine, opTitle, weightLines } from "./card-words.js";

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

// A plan made without a limit (plan gives up, null, only past its limit).
/**
 * @param {Plan | null} p
 * @returns {Plan}
 */
function unlimited(p) {
  if (!p) throw new Error("a plan without a limit gave up");
  return p;
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
    this.allOutputs = new TrackedSet(this); // containers whose outputs past OUT_PILLS the person opened
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
  // eslint-disable-next-line complexity -- a container's display list, one case per kind of item drawn
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
    const { shown, more } = outputPills(data.outputs, this.allOutputs.has(key));
    for (const b of shown) add(`out:${b.value}`, boundaryJob("out", b));
    const total = (data.outputs || []).length;
    if (total > OUT_PILLS) {
      // the rest as one pill: what went to them goes to it (edges deduplicated below)
      add(MORE_OUTPUTS + key, moreOutputsJob(MORE_OUTPUTS + key, more.length, total));
      for (const b of more) index.set(`out:${b.value}`, items.length - 1);
    }
    /** @type {DisplayEdge[]} */
    const edges = [];
    /** @type {Set<string>} */
    const seen = new Set();
    const stepReads = loopReads(data, folded);
    for (const e of data.edges || []) {
      if (e.weight && !weightPills) continue;
      // an unfolded loop: what every step reads enters the first step only (the rest are its repeats)
      if (stepReads.has(`${e.target}|${e.value}`)) continue;
      const si = index.get(e.source);
      const ti = index.get(e.target);
      if (si === undefined || ti === undefined || si === ti) continue;
      // Into or out of a stack (or the pill of many outputs), one edge per (source, target, label) is enough.
      const stacked = keys[si].startsWith("s") || keys[ti].startsWith("s") || keys[ti].startsWith(MORE_OUTPUTS);
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
    if (key.startsWith("s") || key.startsWith(MORE_OUTPUTS)) return true;
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

  // The layout plan (model/scene.js planLayouts).
  /**
   * @param {Set<string> | null} want
   * @param {number} [limit]  items of layout work, at most (past it: null)
   * @param {Map<string, Layout> | null} [frozen]  the containers estimated when the refresh began
   * @returns {Plan | null}
   */
  plan(want, limit = Infinity, frozen = null) {
    return planLayouts(this, want, limit, frozen);
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
  // eslint-disable-next-line complexity -- one relayout's steps in order (fetch, plan, lay out, compose), each able to give up
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

  // After the first paint: the pages a person opens next (first-view.js nextPages), asked
  // one after another so that the server has them made when they are opened; the answers
  // are dropped (opening loads as always; a failed prefetch costs nothing). Returns the keys.
  /** @param {number} [max] */
  async prefetchNext(max = 2) {
    const keys = nextPages(this, max);
    for (const k of keys) {
      if (this.containers.has(k) || this.loading.has(k)) continue;
      const [group, chunk] = containerParams(k);
      await this.api.children(group, chunk, this._kernels, this._showWeights).catch(() => null);
    }
    return keys;
  }

  // Layouts → absolute scene (model/scene.js composeScene).
  /**
   * @param {Map<string, PlanEntry>} info
   * @returns {Scene}
   */
  compose(info) {
    return composeScene(this, info);
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
