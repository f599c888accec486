// The first view of a capture: what opens before the person does anything (the trunk
// down to its innermost group, then breadth first within a budget of drawn items), and
// closing again what it opened to fit. Functions of the graph model (model/viewmodel.js),
// which its methods autoExpand and closeLastOpened call.

import { ROOT, itemKey, opensWithAll, outputPills } from "./items.js";

/**
 * @typedef {import("./expansion.js").GraphState} GraphState
 * @typedef {import("../api.js").Page} Page
 * @typedef {import("../api.js").PageItem} PageItem
 * @typedef {{key: string, item: PageItem, first: boolean, only?: boolean}} Candidate
 */

// The first view. With a trunk (the server's `trunk`: the groups holding most of the
// program, top down, each inside the previous), it opens the way down to the innermost
// one and nothing else: the decoder stack is open, small heads and stems stay
// collapsed. Without one, breadth first, open a group only while the number of drawn
// items stays within `budget` (a readable first screen, and a first paint that stays
// cheap at any size). A flat program split into chunks opens its first chunk whatever
// its size, so that it opens on its first ops, not on three chunk cards; chunks of
// calls, or of alike blocks (folded into one stack by the server), stay closed.
/**
 * @param {GraphState} model
 * @param {number} [budget]  items drawn, at most, below the trunk
 * @param {{item_path?: string[]}[] | null} [trunk]  `api/capture`'s trunk
 */
// eslint-disable-next-line complexity -- the first view's expansion loop under one budget
export async function autoExpand(model, budget = 48, trunk = null) {
  model.autoOpened = []; // in the order opened: what the first view may close again to fit
  const root = await model.load(ROOT);
  let start = root;
  let visible = drawnCount(model, root);
  if (trunk && trunk.length) {
    for (const k of trunk[trunk.length - 1].item_path || []) {
      if (k === ROOT) continue;
      model.expanded.add(k);
      start = await model.load(k);
      visible += drawnCount(model, start) - 1;
    }
  }
  // Below the trunk (or from the top without one), within the budget; what lies beside
  // the trunk (a head, `lm_head`) stays closed. Where the trunk ends on a stack of
  // blocks (a decoder), what sits beside the stack (Llama's rotary embedding, a stem)
  // stays closed too: the blocks are the view, only a lone wrapper or a first chunk opens.
  const onBlocks = Boolean(trunk && trunk.length) && model.foldedStacks(start).size > 0;
  const queue = candidates(model, start);
  let opened = 0;
  let chunkOpened = false;
  while (queue.length && opened < 64) {
    const { key, item, first, only } = /** @type {Candidate} */ (queue.shift());
    const estimate = Number(item.child_count) || 0;
    // A lone wrapper (a module around the model, a jit around everything) always opens,
    // and so does the first chunk of the first chunked container when it is a flat run
    // of ops; one holding calls (`generate`'s bookkeeping around the model's) stays a card.
    const force = only || (item.type === "chunk" && first && !chunkOpened && !Number(item.groups));
    if (!force && (onBlocks || visible + estimate > budget)) continue;
    const data = await model.load(key);
    model.expanded.add(key);
    if (!force) model.autoOpened.push(key);
    visible += drawnCount(model, data);
    opened++;
    if (item.type === "chunk") chunkOpened = true;
    queue.push(...candidates(model, data));
  }
}

// The first view closes again the group it opened last (to fit); false when it opened none.
/** @param {GraphState} model */
export function closeLastOpened(model) {
  if (!model.autoOpened.length) return false;
  model.expanded.delete(/** @type {string} */ (model.autoOpened.pop()));
  return true;
}

// Items a container draws, with stacks folded and parameters inside their ops.
/**
 * @param {GraphState} model
 * @param {Page} data
 */
export function drawnCount(model, data) {
  const pills = outputPills(data.outputs, false); // the first few, and one pill for the rest
  let n = pills.shown.length + (pills.more.length ? 1 : 0);
  for (const b of data.inputs || []) if (!b.weight || model.showWeights) n++;
  const folded = model.foldedStacks(data);
  /** @type {Set<string>} */
  const inStacks = new Set();
  for (const st of folded.values()) for (const m of st.members.flat()) inStacks.add(m);
  n += folded.size;
  for (const item of data.items) if (!inStacks.has(itemKey(item))) n++;
  return n;
}

// The modules, scopes and chunks of a container that may be opened, in order (not folded
// ones, not function calls or groups drawn as one op: they are ops).
/**
 * @param {GraphState} model
 * @param {Page} data
 */
export function candidates(model, data) {
  /** @type {Candidate[]} */
  const out = [];
  let first = true;
  /** @type {Set<string>} */
  const inStacks = new Set();
  for (const st of model.foldedStacks(data).values()) for (const m of st.members.flat()) inStacks.add(m);
  for (const item of data.items) {
    if (item.type === "node" || inStacks.has(itemKey(item)) || !opensWithAll(item)) continue;
    out.push({ key: itemKey(item), item, first: item.type === "chunk" && first });
    if (item.type === "chunk") first = false;
  }
  if (out.length === 1 && drawnCount(model, data) <= 3 && out[0].item.type === "group") out[0].only = true;
  return out;
}

// The pages a person opens next from the first view, to ask for after the first paint
// (GraphModel.prefetchNext): the first member of each folded stack and the first closed
// chunk of each open container, not loaded yet, at most `max`, outermost first.
/**
 * @param {GraphState} model
 * @param {number} [max]
 * @returns {string[]}
 */
export function nextPages(model, max = 2) {
  /** @type {string[]} */
  const out = [];
  const want = (/** @type {string} */ k) => {
    if (out.length < max && !model.containers.has(k) && !out.includes(k)) out.push(k);
  };
  for (const key of [ROOT, ...model.expanded]) {
    const data = model.containers.get(key);
    if (!data) continue;
    for (const st of model.foldedStacks(data).values()) {
      const first = st.members.flat()[0];
      if (first && (first.startsWith("c") || first.startsWith("g"))) want(first);
    }
    const chunk = data.items.find((it) => it.type === "chunk" && !model.expanded.has(itemKey(it)));
    if (chunk) want(itemKey(chunk));
  }
  return out;
}
