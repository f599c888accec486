// Expansion: what is open (sets that tell the model of every change), and the actions
// that open and close (toggle, unfold a stack, Expand all, Collapse, Depth…). Functions of
// the graph model (model/viewmodel.js), which its methods of the same names call.

import { MORE_OUTPUTS, ROOT, cardOf, isContainerKey, itemKey, opensWithAll } from "./items.js";

/**
 * @typedef {import("../api.js").Page} Page
 * @typedef {import("../api.js").PageItem} PageItem
 * @typedef {import("../api.js").PageStack} PageStack
 */

/**
 * The graph model (model/viewmodel.js GraphModel) as the functions of expansion.js,
 * first-view.js and paths.js read and change it.
 * @typedef {object} GraphState
 * @property {Set<string>} expanded  the open containers (a TrackedSet)
 * @property {Set<string>} deferred  open, fetched once the view shows them
 * @property {Set<string>} unfolded  the stacks opened into their members
 * @property {Set<string>} allOutputs  the containers whose outputs past the first few are drawn
 * @property {boolean} openAll  Expand all is on
 * @property {string[]} autoOpened  what the first view opened, in order
 * @property {boolean} showWeights  parameters drawn as pills of their own
 * @property {Map<string, PageItem>} itemOf  item key -> the server's item
 * @property {Map<string, Page>} containers  container key -> its page
 * @property {Map<string, string>} paths  container key -> group path ("Wrapped/gpt/h.3")
 * @property {Map<string, string>} stackOf  member key -> stack key, in the current display lists
 * @property {{byKey: Map<string, {parentKey?: string}>} | null} scene  the composed scene
 * @property {(key: string) => boolean} openable
 * @property {() => void} changed  its display lists are out of date
 * @property {(key: string) => Promise<Page>} load
 * @property {(key: string, maxItems: number) => Promise<unknown>} loadSubtree
 * @property {(page: Page) => void} openInside
 * @property {(page: Page) => Map<string, PageStack>} foldedStacks
 * @property {() => Promise<boolean>} refresh  composes the scene again; false when superseded
 */

// Expand all fetches the containers breadth first up to this many items in one request;
// the deeper ones open too but are fetched (and laid out) once the view shows them.
export const EXPAND_FETCH_ITEMS = 3000;

// A set of keys whose changes mark the model changed (its display lists are memoised).
/** @extends {Set<string>} */
export class TrackedSet extends Set {
  /**
   * @param {{changed: () => void} | null} owner
   * @param {Iterable<string>} [items]
   */
  constructor(owner, items) {
    super(items);
    this.owner = owner;
  }

  /** @param {string} k */
  add(k) {
    if (this.owner && !this.has(k)) this.owner.changed();
    return super.add(k);
  }

  /** @param {string} k */
  delete(k) {
    if (this.owner && this.has(k)) this.owner.changed();
    return super.delete(k);
  }

  clear() {
    if (this.owner && this.size) this.owner.changed();
    super.clear();
  }
}

// Opens or closes `key` (a stack unfolds); false when it does not open.
/**
 * @param {GraphState} model
 * @param {string} key
 */
export function toggle(model, key) {
  if (!model.openable(key)) return false;
  if (key.startsWith(MORE_OUTPUTS)) {
    // a container's outputs past the first few: drawn all, or folded into one pill again
    const c = key.slice(MORE_OUTPUTS.length);
    if (model.allOutputs.has(c)) model.allOutputs.delete(c);
    else model.allOutputs.add(c);
    return true;
  }
  if (key.startsWith("s")) {
    unfold(model, key);
    return true;
  }
  if (model.expanded.has(key)) {
    // Collapse the subtree too, so that re-expanding shows one level at a time.
    for (const k of [...model.expanded]) if (k !== ROOT && isInside(model, k, key)) model.expanded.delete(k);
    model.expanded.delete(key);
  } else {
    for (const k of opensThrough(model, key)) {
      model.deferred.delete(k);
      model.expanded.add(k);
    }
  }
  return true;
}

// What opening `key` opens: itself, and for a module drawn as one function call's card,
// the modules it wraps and that call, so that the kernels show at once.
/**
 * @param {GraphState} model
 * @param {string} key
 * @returns {string[]}
 */
export function opensThrough(model, key) {
  const item = model.itemOf.get(key);
  if (!item || cardOf(item) !== "op" || !item.single) return [key];
  return [...(item.wrappers || []).map((w) => w.key), key, item.single.key].filter((k, i, all) => k && all.indexOf(k) === i);
}

// Whether `candidate` is drawn inside `ancestor` in the current scene.
/**
 * @param {GraphState} model
 * @param {string} candidate
 * @param {string} ancestor
 */
export function isInside(model, candidate, ancestor) {
  const scene = model.scene;
  let item = scene && scene.byKey.get(candidate);
  while (item) {
    if (item.parentKey === ancestor) return true;
    item = /** @type {NonNullable<typeof scene>} */ (scene).byKey.get(/** @type {string} */ (item.parentKey));
  }
  return false;
}

// Opens a stack into its members, the frames of its first repetition expanded.
/**
 * @param {GraphState} model
 * @param {string} stackKey
 */
export function unfold(model, stackKey) {
  model.unfolded.add(stackKey);
  /** @type {string[]} */
  const first = [];
  for (const data of model.containers.values()) {
    const st = (data.stacks || []).find((s) => s.key === stackKey);
    if (!st) continue;
    const byKey = new Map(data.items.map((it) => [itemKey(it), it]));
    for (const k of st.members[0] || []) {
      const item = byKey.get(k);
      if (item && opensWithAll(item)) first.push(k);
    }
    break;
  }
  if (!first.length && isContainerKey(stackKey.slice(1))) first.push(stackKey.slice(1));
  for (const k of first) model.expanded.add(k);
}

// Every group and chunk, every stack unfolded: one api/subtree request, one layout pass.
// Every group and chunk opens, every stack unfolds: the containers are fetched breadth
// first in one api/subtree request up to EXPAND_FETCH_ITEMS items; deeper ones open as
// well (`deferred`) and are fetched once the view shows them (settle).
/** @param {GraphState} model */
export async function expandAll(model) {
  model.openAll = true;
  const res = await model.loadSubtree(ROOT, EXPAND_FETCH_ITEMS);
  // The containers fetched before (the first view's) open inside too, top down.
  const visit = (/** @type {string} */ k) => {
    const data = model.containers.get(k);
    if (!data) return;
    model.openInside(data);
    for (const item of data.items) if (item.type !== "node" && model.expanded.has(itemKey(item))) visit(itemKey(item));
  };
  visit(ROOT);
  return res;
}

/** @param {GraphState} model */
export function collapseAll(model) {
  model.openAll = false;
  model.deferred.clear();
  model.expanded = new TrackedSet(model, [ROOT]);
  model.unfolded.clear();
  model.changed();
}

// Expands every group and chunk down to `depth` levels below the root (stacks stay folded
// unless a member is inside the depth and the person opened it).
/**
 * @param {GraphState} model
 * @param {number} depth
 */
export async function expandToDepth(model, depth) {
  collapseAll(model);
  let frontier = [ROOT];
  for (let d = 0; d < depth && frontier.length; d++) {
    const datas = await Promise.all(frontier.map((k) => model.load(k)));
    /** @type {string[]} */
    const next = [];
    for (const data of datas) {
      for (const st of data.stacks || []) model.unfolded.add(st.key);
      for (const item of data.items) {
        if (item.type === "node" || !opensWithAll(item)) continue;
        const k = itemKey(item);
        model.expanded.add(k);
        next.push(k);
      }
    }
    frontier = next;
  }
}
