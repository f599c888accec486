// Where the person is in the graph, by path: the expansion as group paths (which survive
// a recapture, ids do not) and opening the way to an item (a search result, a source
// line's items, the editor's Show in Graph). Functions of the graph model
// (model/viewmodel.js), which its methods of the same names call.

import { ROOT, isContainerKey, itemKey } from "./items.js";

/**
 * @typedef {import("./expansion.js").GraphState} GraphState
 * @typedef {import("../api.js").PageItem} PageItem
 * @typedef {{open: string[], stacks: string[]}} SavedPaths  the expansion by group paths
 */

// The expansion as group paths, which survive a recapture (ids do not).
/**
 * @param {GraphState} model
 * @returns {SavedPaths}
 */
export function expansionPaths(model) {
  /** @type {string[]} */
  const open = [];
  for (const k of model.expanded) if (k !== ROOT && model.paths.has(k)) open.push(/** @type {string} */ (model.paths.get(k)));
  /** @type {string[]} */
  const stacks = [];
  for (const k of model.unfolded) if (model.paths.has(k.slice(1))) stacks.push(/** @type {string} */ (model.paths.get(k.slice(1))));
  return { open, stacks };
}

// Re-opens what `expansionPaths()` recorded, level by level; false when nothing matched.
/**
 * @param {GraphState} model
 * @param {Partial<SavedPaths>} saved
 */
export async function restorePaths(model, saved) {
  const open = new Set(saved.open || []);
  const stacks = new Set(saved.stacks || []);
  if (!open.size) return false;
  let frontier = [ROOT];
  let matched = 0;
  while (frontier.length) {
    const datas = await Promise.all(frontier.map((k) => model.load(k)));
    /** @type {string[]} */
    const next = [];
    for (const data of datas) {
      for (const item of data.items) {
        if (item.type === "node") continue;
        const k = itemKey(item);
        const path = /** @type {string} */ (model.paths.get(k));
        if (stacks.has(path)) model.unfolded.add("s" + k);
        if (open.has(path) && (/** @type {number} */ (item.child_count) > 0)) {
          model.expanded.add(k);
          matched++;
          next.push(k);
        }
      }
    }
    frontier = next;
  }
  return matched > 0;
}

// Makes an item visible. `itemPath` is the server's list of item keys from the root to
// the target, chunks included (search results and node details carry it); every key
// before the target is expanded. Without one, the group path is followed and chunks
// are searched (reveal).
/**
 * @param {GraphState} model
 * @param {string[]} itemPath
 */
export function revealPath(model, itemPath) {
return revealPaths(model, [itemPath]);
}

// Makes several items visible at once (a source line's items).
/**
 * @param {GraphState} model
 * @param {string[][]} itemPaths
 */
export async function revealPaths(model, itemPaths) {
  for (const path of itemPaths) {
    // A node key inside a path is a control-flow boundary opened into its bodies.
    for (const k of path.slice(0, -1)) {
      if (k === ROOT || !(isContainerKey(k) || k.startsWith("n"))) continue;
      model.deferred.delete(k); // on the way to a search result: fetched now, not once in view
      model.expanded.add(k);
    }
  }
  return unstack(model, itemPaths.map((p) => p[p.length - 1]));
}

// Refreshes; when targets ended up folded inside stack cards, opens those stacks.
/**
 * @param {GraphState} model
 * @param {string[]} targets
 * @returns {Promise<boolean>}
 */
export async function unstack(model, targets) {
  const ok = await model.refresh();
  if (!ok) return ok;
  const scene = /** @type {NonNullable<GraphState["scene"]>} */ (model.scene); // composed: refresh answered true
  const folded = targets.filter((k) => k && model.stackOf.has(k) && !scene.byKey.has(k));
  if (!folded.length) return ok;
  for (const k of folded) model.unfolded.add(/** @type {string} */ (model.stackOf.get(k)));
  return model.refresh();
}

/**
 * @param {GraphState} model
 * @param {string} target  an item key
 * @param {number[] | null} [pathGroupIds]  the ids of the groups holding it, top down
 */
export async function reveal(model, target, pathGroupIds) {
  let container = ROOT;
  await model.load(ROOT);
  const steps = (pathGroupIds || []).map((g) => "g" + g).filter((k) => k !== ROOT && k !== target);
  steps.push(target);
  for (const step of steps) {
    const holder = await findHolder(model, container, step);
    if (!holder) break;
    for (const k of holder.chain) {
      model.deferred.delete(k);
      model.expanded.add(k);
    }
    if (step === target) break;
    model.deferred.delete(step);
    model.expanded.add(step);
    container = step;
  }
  return unstack(model, [target]);
}

// Which container under `container` directly holds item `key`: itself, or one of its
// chunks (chunks hold items in program order; nested chunks are followed).
/**
 * @param {GraphState} model
 * @param {string} container
 * @param {string} key
 * @returns {Promise<{chain: string[]} | null>}
 */
export async function findHolder(model, container, key) {
  const data = await model.load(container);
  if (data.items.some((it) => itemKey(it) === key)) return { chain: [] };
  if (!data.chunked) return null;
  const chunks = data.items.filter((it) => it.type === "chunk");
  const hinted = chunks.filter((c) => chunkMayHold(c, key));
  for (const c of hinted.length ? hinted : chunks) {
    const ck = itemKey(c);
    const found = await findHolder(model, ck, key);
    if (found) return { chain: [ck, ...found.chain] };
  }
  return null;
}

// A chunk item may carry its node id range ({first,last} or range:[a,b]); when it does,
// search only the chunks whose range can hold the node.
/**
 * @param {PageItem} chunk
 * @param {string} key
 */
function chunkMayHold(chunk, key) {
  if (!key.startsWith("n")) return false;
  const id = Number(key.slice(1));
  const lo = chunk.first ?? (chunk.range ? chunk.range[0] : undefined);
  const hi = chunk.last ?? (chunk.range ? chunk.range[1] : undefined);
  if (lo === undefined || hi === undefined) return false;
  return id >= lo && id <= hi;
}
