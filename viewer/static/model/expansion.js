// Expansion: what is open (sets that tell the model of every change), and the actions
// that open and close (toggle, unfold a stack, Expand all, Collapse, Depth…). Functions of
// the graph model (model/viewmodel.js), which its methods of the same names call.

import { ROOT, cardOf, isContainerKey, itemKey, opensWithAll } from "./items.js";

// Expand all fetches the containers breadth first up to this many items in one request;
// the deeper ones open too but are fetched (and laid out) once the view shows them.
export const EXPAND_FETCH_ITEMS = 3000;

// A set of keys whose changes mark the model changed (its display lists are memoised).
export class TrackedSet extends Set {
  constructor(owner, items) {
    super(items);
    this.owner = owner;
  }

  add(k) {
    if (this.owner && !this.has(k)) this.owner.changed();
    return super.add(k);
  }

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
export function toggle(model, key) {
  if (!model.openable(key)) return false;
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
export function opensThrough(model, key) {
  const item = model.itemOf.get(key);
  if (!item || cardOf(item) !== "op" || !item.single) return [key];
  return [...(item.wrappers || []).map((w) => w.key), key, item.single.key].filter((k, i, all) => k && all.indexOf(k) === i);
}

// Whether `candidate` is drawn inside `ancestor` in the current scene.
export function isInside(model, candidate, ancestor) {
  let item = model.scene && model.scene.byKey.get(candidate);
  while (item) {
    if (item.parentKey === ancestor) return true;
    item = model.scene.byKey.get(item.parentKey);
  }
  return false;
}

// Opens a stack into its members, the frames of its first repetition expanded.
export function unfold(model, stackKey) {
  model.unfolded.add(stackKey);
  const first = [];
  for (const data of model.containers.values()) {
    const st = (data.stacks || []).find((s) => s.key === stackKey);
    if (!st) continue;
    const byKey = new Map(data.items.map((it) => [itemKey(it), it]));
    for (const k of st.members[0] || []) if (byKey.has(k) && opensWithAll(byKey.get(k))) first.push(k);
    break;
  }
  if (!first.length && isContainerKey(stackKey.slice(1))) first.push(stackKey.slice(1));
  for (const k of first) model.expanded.add(k);
}

// Every group and chunk, every stack unfolded: one api/subtree request, one layout pass.
// Every group and chunk opens, every stack unfolds: the containers are fetched breadth
// first in one api/subtree request up to EXPAND_FETCH_ITEMS items; deeper ones open as
// well (`deferred`) and are fetched once the view shows them (settle).
export async function expandAll(model) {
  model.openAll = true;
  const res = await model.loadSubtree(ROOT, EXPAND_FETCH_ITEMS);
  // The containers fetched before (the first view's) open inside too, top down.
  const visit = (k) => {
    const data = model.containers.get(k);
    if (!data) return;
    model.openInside(data);
    for (const item of data.items) if (item.type !== "node" && model.expanded.has(itemKey(item))) visit(itemKey(item));
  };
  visit(ROOT);
  return res;
}

export function collapseAll(model) {
  model.openAll = false;
  model.deferred.clear();
  model.expanded = new TrackedSet(model, [ROOT]);
  model.unfolded.clear();
  model.changed();
}

// Expands every group and chunk down to `depth` levels below the root (stacks stay folded
// unless a member is inside the depth and the person opened it).
export async function expandToDepth(model, depth) {
  collapseAll(model);
  let frontier = [ROOT];
  for (let d = 0; d < depth && frontier.length; d++) {
    const datas = await Promise.all(frontier.map((k) => model.load(k)));
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
