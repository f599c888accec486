// What a card says: the wording of op, group, function, frame and stack cards (their lines,
// titles, captions, weights, memory and collectives) and the display-list entries built from
// them, from the server's page items. Read by model/viewmodel.js (GraphModel.display) and the
// panels; moved out of model/viewmodel.js.

import { idleWords, pillContent, twinWords } from "../draw/card.js";
import { formatValue, perDeviceShapes } from "../draw/theme.js";
import { costLine, formatBytes, formatCount, formatFlops, grouped } from "../format.js";
import { MORE_OUTPUTS, cardOf, itemKey, opens, outputPills } from "./items.js";

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

// A stack's summary (stackItem) or a pill's value (boundaryItem) stands in the scene where
// the server's item does: draw/card.js types a scene item's `item` as a page item, and its
// readers look at the scene item's `type` ("stack", "in", "out") before the item's fields.
/**
 * @param {StackSummary | BoundaryValue} x
 * @returns {ViewItem}
 */
export function standIn(x) {
  return /** @type {ViewItem} */ (/** @type {unknown} */ (x));
}

// A group drawn as its single op: that op's own item (viewer/API.md "One-op groups": a node
// item or a function card item, which api.js's PageItem types as its key only).
/**
 * @param {ViewItem} item
 * @returns {ViewItem | undefined}
 */
export function singleOf(item) {
  return /** @type {ViewItem | undefined} */ (item.single);
}

// The content signature of a container not fetched yet (its layout is an estimate):
// groups with the same structure share it.
/**
 * @param {Partial<ViewItem>} item
 * @param {string} key
 */
export function pendingSig(item, key) {
  return `p:${item.structure || key}:${item.node_count ?? ""}`;
}

// An item's card lines, computed once per item object (the server's answers are kept).
/**
 * @param {ViewItem} item
 * @returns {string[]}
 */
export function linesOf(item) {
  // Kept per item, for the shapes shown (global or per device: the toolbar's toggle).
  const mode = perDeviceShapes();
  let kept = item._lines;
  if (!kept || kept.mode !== mode) {
    kept = { mode, lines: cardLines(item) };
    Object.defineProperty(item, "_lines", { value: kept, enumerable: false, configurable: true, writable: true });
  }
  return kept.lines;
}

export const WEIGHT_LINES = 4; // weights listed on an op's card before "+N more"

/**
 * @param {ViewItem} item
 * @returns {string[]}
 */
// eslint-disable-next-line complexity -- a card's lines, one clause per fact the server sends for each item kind
export function cardLines(item) {
  if (item.type === "node") {
    const outs = (item.outputs || []).map(formatValue);
    const lines = outs.slice(0, 3);
    const total = item.outputs_total ?? outs.length;
    if (total > 3) lines.push(`+${total - 3} more outputs`);
    if (item.sublabel) lines.push(String(item.sublabel));
    const bodies = /** @type {BodySummary[]} */ (item.bodies || []);
    const nb = bodies.length;
    if (nb === 1 && bodies[0].role === "shard_map body") {
      const b = bodies[0];  // partial-manual (`axis_names=`): once per shard of its manual axes, not per device
      lines.push(b.shards ? `per-shard body ×${grouped(b.shards)} · opens` : `per-device body ×${grouped(b.devices || 0)} · opens`);
    }
    else if (nb) lines.push(`${nb} ${nb === 1 ? "body" : "bodies"} · not executed`);
    return lines;
  }
  /** @type {string[]} */
  const lines = [];
  const count = (/** @type {number} */ n, /** @type {string} */ word) => `${grouped(n)} ${word}${Number(n) === 1 ? "" : "s"}`;
  if (item.type === "chunk") {
    if (item.sublabel) lines.push(String(item.sublabel));
    // The calls it holds (the server's `groups`): a chunk of generate's bookkeeping says
    // where the model's calls are.
    const calls = Number(item.groups) || 0;
    const own = (Number(item.child_count) || 0) - calls;
    if (calls) lines.push(own > 0 ? `${count(calls, "call")} + ${count(own, "op")}` : count(calls, "call"));
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
export function shapesLine(item) {
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
// eslint-disable-next-line complexity -- an op card's entry, each part only when present
export function opEntry(item, within, weightPills) {
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

export const FUNCTIONAL = "torch.nn.functional.";

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
export function functionLines(item) {
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
export function frameEntry(item) {
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
// eslint-disable-next-line complexity -- a stack card's wording, each part only when present
export function stackEntry(stack, reps) {
  // Chunks of alike blocks (a ModuleList of 14,285 layers) fold with one block as their
  // words (`block`): the stack then counts blocks, not chunks.
  const block = stack.block || null;
  const first = block ? [block] : reps[0] || [];
  const frames = first.filter((it) => cardOf(it) === "group");
  const head = frames.length === 1 && first.length === 1 ? first[0] : null;
  const count = block ? Number(stack.count) : reps.length;
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
  // A Python loop's steps: what it carries and what each step slices, in the server's words.
  const loop = stack.loop && Array.isArray(stack.loop.lines) ? stack.loop : null;
  if (loop) lines.splice(0, lines.length, ...loop.lines.map(String));
  lines.push(`${grouped(count)}${loop ? " steps" : ""} × ${grouped(per)} ops = ${grouped(total)} ops`);
  if (typeof stack.routing === "string") lines.push(stack.routing); // layers alike but for what routing chose
  // Its cost: one block's and the run's sum (server's `cost`, per_block its first repetition).
  const cost = stack.cost || null;
  if (cost) {
    /** @type {{flops?: number | null}} */
    const one = cost.per_block || {};
    const est = cost.estimate ? "~" : "";
    lines.push(`${grouped(count)} × ${est}${formatFlops(one.flops || 0)} = ${est}${formatFlops(cost.flops || 0)}`);
    // a split program's FLOPs scope (global, per device, per rank) on the shorter line: the sum above fills the card
    lines.push(`${formatBytes(cost.bytes || 0)} moved` + (cost.uncounted ? ` · +${grouped(cost.uncounted)} uncounted` : "") +
      (cost.scope ? ` · FLOPs ${cost.scope}` : ""));
  }
  const title = stack.label || `${first[0] ? first[0].label : ""} …`;
  const tag = `×${grouped(Number(stack.count) || reps.length)}${loop ? " steps" : ""}`;
  return { kind: "stack", title: String(title), lines, tag, members: stack.members.flat(), period: stack.period || 1, cost };
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
export function foldEntry(fold, members) {
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
export function repetitionWords(stack, first) {
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
export function stackParams(members) {
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
export function stackItem(entry, byItem) {
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
export function boundaryJob(side, b) {
  return { key: `${side}:${b.value}`, ...pillContent(side, b) };
}

// The pill of a container's outputs past the first few: "+12 outputs", or, opened, the
// pill that folds them again ("fold 15 outputs").
/**
 * @param {string} key  MORE_OUTPUTS + the container's key
 * @param {number} hidden  how many it stands for (0: all are drawn)
 * @param {number} total
 */
export function moreOutputsJob(key, hidden, total) {
  const text = hidden ? `+${hidden} outputs` : `fold ${total} outputs`;
  return { key, kind: "out", title: text, lines: [], tag: null, parts: [{ text, font: "fontMono", tone: "name" }], look: "plain", role: null, quiet: false };
}

/**
 * @param {ViewItem} item
 * @returns {string | null}
 */
export function cardTag(item) {
  if (item.type === "node") return item.opaque ? "opaque" : null;
  if (item.type === "chunk") return "chunk";
  return item.kind || "group";
}

/**
 * @param {ViewPage} data
 * @param {string} key  "in:V" | "out:V"
 * @returns {BoundaryValue}
 */
export function boundaryItem(data, key) {
  if (key.startsWith(MORE_OUTPUTS)) {
    // the pill standing for a container's outputs past the first few (items.js outputPills)
    return { type: "out", value: -1, more: outputPills(data.outputs, false).more };
  }
  const [side, v] = key.split(":");
  const list = side === "in" ? data.inputs : data.outputs;
  const b = (list || []).find((x) => String(x.value) === v);
  return b ? { ...b, type: side } : { type: side, value: Number(v) };
}
