// The items of the server's pages (viewer/API.md "children"): their keys, and what opens.
// Read by the graph model (model/viewmodel.js) and its helpers.

/** @typedef {import("../api.js").PageItem} PageItem */

export const ROOT = "g-1";
// At most this many output pills a container draws: past it, the first OUT_PILLS - 1 and
// one pill standing for the rest ("+12 outputs", key MORE_OUTPUTS + the container's key)
// that opens into them, so that a model returning a dict of auxiliary outputs keeps its
// frame, and the model's header, within the first view.
export const OUT_PILLS = 4;
export const MORE_OUTPUTS = "out:more:";

/**
 * The outputs a container draws one pill each, and those its "+N outputs" pill stands for.
 * @template T
 * @param {T[] | undefined} outputs
 * @param {boolean} all  the person opened them all
 * @returns {{shown: T[], more: T[]}}
 */
export function outputPills(outputs, all) {
  const outs = outputs || [];
  if (all || outs.length <= OUT_PILLS) return { shown: outs, more: [] };
  return { shown: outs.slice(0, OUT_PILLS - 1), more: outs.slice(OUT_PILLS - 1) };
}

/**
 * @param {PageItem} item
 * @returns {string}
 */
export function itemKey(item) {
  if (item.type === "node") return "n" + item.id;
  if (item.type === "group") return "g" + item.id;
  return "c" + item.id;
}

/** @param {string} key */
export function isContainerKey(key) {
  return key.startsWith("g") || key.startsWith("c") || key.startsWith("s");
}

// Whether an item opens into a container: a group or chunk, or a control-flow boundary
// node with unexecuted bodies (its container, under the node's own key "n12", shows the
// body templates side by side; it is opened only on request, never by the first view).
/** @param {PageItem} item */
export function opens(item) {
  return item.type !== "node" || !!(item.bodies && item.bodies.length);
}

// How an item is drawn: the server's `card` ("op", "function", "group", "chunk"; a group
// that ran no op is no item, its parent's card lists it);
// pages from before `card` existed fall back on the item's type.
/**
 * @param {PageItem} item
 * @returns {string}
 */
export function cardOf(item) {
  return item.card || (item.type === "node" ? "op" : item.type);
}

// Whether Expand all, Depth… and the first view may open an item: modules, scopes and
// chunks; not a function call (an op card; opened by a double-click, or everywhere with
// kernels on, when it is a group), not a group drawn as its single op.
/** @param {PageItem} item */
export function opensWithAll(item) {
  const card = cardOf(item);
  return (card === "group" || card === "chunk") && Number(item.child_count) > 0;
}

// The edges an unfolded loop's steps after the first leave out (`target|value`): the values
// from outside the loop every step reads (its `loop.sliced` and `loop.read`), drawn into the
// first step only, so that the carried value's chain from step to step stays readable.
/**
 * @param {{stacks?: {members: string[][], loop?: {sliced?: {id: number}[], read?: {id: number}[]}}[]}} data  a page
 * @param {Map<string, unknown>} folded  the stacks drawn folded, by first member
 * @returns {Set<string>}
 */
export function loopReads(data, folded) {
  /** @type {Set<string>} */
  const out = new Set();
  for (const st of data.stacks || []) {
    if (!st.loop || !st.members.length || folded.has(st.members[0][0])) continue;
    const shared = [...(st.loop.sliced || []), ...(st.loop.read || [])].map((v) => v.id);
    for (const rep of st.members.slice(1)) for (const m of rep) for (const v of shared) out.add(`${m}|${v}`);
  }
  return out;
}
