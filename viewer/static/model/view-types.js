// The shapes the view model reads and builds, as types only (no code): the server's page
// items as this model reads them (viewer/API.md), the display lists, layout plans and the
// composed scene. model/viewmodel.js re-exports them under the same names.

/**
 * @typedef {import("../api.js").Page} Page
 * @typedef {import("../api.js").PageItem} PageItem
 * @typedef {import("../api.js").PageStack} PageStack
 * @typedef {import("../api.js").PageValue} PageValue
 * @typedef {import("../layout/layout-client.js").RequestJob} RequestJob
 * @typedef {import("../layout/protocol.js").Layout} Layout
 * @typedef {import("../layout/protocol.js").LabelSpot} LabelSpot
 * @typedef {import("../layout/protocol.js").Size} Size
 * @typedef {import("../draw/card.js").CardContent} CardContent
 * @typedef {import("../draw/card.js").SceneItem} CardSceneItem
 */

/**
 * A value summary on an item (`outputs`, `inputs`, `weights`; viewer/API.md): its label
 * (theme.js formatValue), and for a weight its value id, name and how many ops share it.
 * @typedef {object} ItemValue
 * @property {number} [value]
 * @property {string} [label]
 * @property {string} [device_label]  the shape one device holds, for a split value
 * @property {string} [name]
 * @property {number} [shared]
 */

/**
 * A cost on an item or a stack (viewer/API.md "Costs on items"); a stack's has `per_block`,
 * the same for its first repetition.
 * @typedef {object} ItemCost
 * @property {number | null} flops  null: no rule counted the op
 * @property {number} bytes
 * @property {number} [uncounted]  ops inside that no rule counted (not in `flops`)
 * @property {boolean} [estimate]
 * @property {boolean} [template]  one iteration of a body that did not run
 * @property {string} [scope]  a program split across devices: "global", or "per device" inside a shard_map body,
 *   "per shard" inside a partial-manual one (`axis_names=`: its shapes one shard's of its manual axes)
 * @property {number} [devices]  scope "per device": how many devices run it (its FLOPs × this: its global figure)
 * @property {number} [shards]  scope "per shard": how many shards of its manual axes run it (its FLOPs × this: its global figure)
 * @property {{flops: number, bytes: number}} [per_block]  a stack's: its first repetition's
 * @property {Record<string, number>} [flops_by_kind]  matmul, convolution, attention, pointwise, reduction/norm, scan, other
 */

/**
 * An unexecuted control-flow body (a boundary node's `bodies`, a body group's `body`).
 * @typedef {object} BodySummary
 * @property {string} [role]
 * @property {string} [template]
 * @property {number | null} [iterations]  the static trip count, null when decided at run time
 * @property {string} [selected]
 * @property {string} [closed]
 * @property {number} [devices]  a shard_map body: how many devices run it
 * @property {number} [shards]  a partial-manual shard_map body: how many shards of its manual axes run it
 */

/**
 * What one device holds (a group's `per_device_memory`, the capture's `meta.per_device_memory`), in bytes.
 * @typedef {{param_bytes?: number, input_bytes?: number, activation_bytes?: number, gradient_bytes?: number}} DeviceMemory
 */

/**
 * A collective node's exchange (`collective`, viewer/API.md): its mesh axes, how many
 * devices take part, what each sends.
 * @typedef {{op?: string, axes?: string[], devices?: number, operand_bytes?: number, bytes_sent_per_device?: number}} Collective
 */

/**
 * A module a one-op group's card stands for (`wrappers`), or the group itself.
 * @typedef {{key?: string, path?: string, name?: string, label?: string, class?: string}} Wrapper
 */

/**
 * The fields of a page item (viewer/API.md "children") the cards of this module read
 * besides those api.js types (PageItem); `_lines`: the card lines kept on it (linesOf).
 * @typedef {object} ItemFacts
 * @property {ItemValue[]} [inputs]  a group: the non-weight values entering it (first 64)
 * @property {number} [inputs_total]
 * @property {ItemValue[]} [outputs]
 * @property {number} [outputs_total]
 * @property {Array<ItemValue & {value: number}>} [weights]  an op card: the parameters it reads
 *   (first 64), each with its value id
 * @property {number} [weights_total]
 * @property {string} [path]  a module group: its attribute path (`gpt.h.3`)
 * @property {{count: number, bytes: number}} [params]  a group: the parameters used inside it
 * @property {BodySummary} [body]  a body group: what its template is
 * @property {string} [role]  a group: the router or experts words (`router: top-2 of 8, softmax scores`)
 * @property {string} [routed]  a group whose own ops depend on the data: the words (`nonzero`…)
 * @property {ItemCost} [cost]
 * @property {DeviceMemory} [per_device_memory]  a group of a program split across devices
 * @property {Collective} [collective]  a node of a collective
 * @property {unknown} [compiled]  a node: the collectives XLA runs for it (a list); a group: their count and kinds
 * @property {number} [compiled_total]  a node: how many compiled collectives it has
 * @property {{count: number, ops?: string[]}} [kernels]  a function call: its kernels
 * @property {{count: number, index: number}} [identical]  siblings of the same structure
 * @property {number} [opaque_count]
 * @property {{mode: boolean, lines: string[]}} [_lines]
 */

/** @typedef {PageItem & ItemFacts} ViewItem  a page item as this module reads it */

/**
 * The fields of a page's `stacks` entry this module reads besides PageStack's.
 * @typedef {object} StackFacts
 * @property {{start: number, period: number, count: number}[]} [inner]  runs inside one repetition
 * @property {string[]} [names]  a fold: what it holds
 * @property {number} [layers]  a plumbing fold: how many layers it feeds
 * @property {string} [routing]  layers alike but for what routing chose: the words
 * @property {{steps: number, lines: string[], sliced?: {id: number}[], read?: {id: number}[]}} [loop]  a Python loop's
 *   steps: their count, what its card says and the values every step takes a slice of or reads
 * @property {ItemCost | null} [cost]
 * @property {ViewItem} [block]  chunks of alike blocks folded: one block, the card's words (`count` counts blocks)
 * @property {number} [chunks]  and how many chunks the stack holds
 */

/** @typedef {PageStack & StackFacts} ViewStack */

/**
 * An edge of a page: `weight`, it leaves a parameter drawn inside the op that reads it.
 * @typedef {Page["edges"][number] & {weight?: boolean}} PageEdge
 */

/**
 * A page as this module reads it; `side_by_side`: a boundary node's bodies (api/bodies).
 * @typedef {Omit<Page, "items" | "stacks" | "edges"> & {items: ViewItem[], stacks?: ViewStack[], edges: PageEdge[],
 *   side_by_side?: boolean}} ViewPage
 */

/**
 * A card of a display list: the content draw/card.js measures and draws, and what the
 * model adds (`expandedSig`: an open container's signature; `weights`: the value ids of
 * an op's weight lines; a stack's `members`, `period` and `cost`; the key of a pill).
 * @typedef {CardContent & {expandedSig?: string, members?: string[], period?: number, cost?: ItemCost | null,
 *   key?: string}} Entry
 */

/**
 * An edge of a display list: its items by position, and by key.
 * @typedef {{s: number, t: number, label: string, value?: number, source: string, target: string}} DisplayEdge
 */

/**
 * A container's display list (display): its cards and their keys in order, its edges, the
 * expanded containers drawn inside it (`inner`, by position), how many cards are drawn
 * closed, the stacks' columns, its content signature, whether it is a row of bodies;
 * `pending`: not fetched yet (an estimate's).
 * @typedef {object} Display
 * @property {string} key
 * @property {string[]} keys
 * @property {Entry[]} items
 * @property {DisplayEdge[]} edges
 * @property {{i: number, key: string}[]} inner
 * @property {number} [collapsed]
 * @property {number[][]} [columns]
 * @property {string} sig
 * @property {boolean} [row]
 * @property {boolean} [pending]
 */

/**
 * A container in a plan: its display list, the boxes of the containers inside it, and
 * either its layout (real, estimated `est`, or the last real one it `waits` to grow) or
 * the `job` that lays it out; `open`: nothing inside it drawn closed.
 * @typedef {object} PlanEntry
 * @property {string} key
 * @property {Display} d
 * @property {(Size | null)[]} boxes
 * @property {Layout} [layout]
 * @property {boolean} [est]
 * @property {boolean} [waits]
 * @property {boolean} [open]
 * @property {RequestJob} [job]
 */

/** @typedef {{info: Map<string, PlanEntry>, jobs: RequestJob[], items: number}} Plan */

/**
 * A part of the last scene compose may reuse: the container it built at (x, y) for a
 * layout stamp, and how many estimated containers it holds.
 * @typedef {{stamp: string, x: number, y: number, container: SceneContainer, estimated: number}} Built
 */

/**
 * A scene item: its box, its card, the server's item (for a stack, a summary of its
 * members, stackItem; for a pill, its boundary value, boundaryItem), its container's key
 * and, when open, its own container.
 * @typedef {CardSceneItem & {item: ViewItem, parentKey: string, expanded: SceneContainer | null}} SceneItem
 */

/**
 * A stack card's item in the scene (stackItem): its first frame's (or member's) fields,
 * and the run's: its members, how many, its period, its cost and parameters in all.
 * @typedef {Omit<Partial<ViewItem>, "type" | "cost"> & {type: "stack", label: string, kind: string,
 *   members: string[], stack_count: number, period: number | undefined, fold: unknown,
 *   cost: ItemCost | undefined, stack_params: {count: number, bytes: number}}} StackSummary
 */

/** @typedef {PageValue & {type: string, more?: PageValue[]}} BoundaryValue  a pill's item in the scene: its value, `type` "in" | "out"; `more`: the outputs a "+N outputs" pill stands for */

/**
 * An edge of the scene: its points relative to its container.
 * @typedef {object} SceneEdge
 * @property {string} source
 * @property {string} target
 * @property {string} label
 * @property {number} [value]
 * @property {number[][]} points
 * @property {number[] | null} labelAt
 * @property {LabelSpot | null} labelBox
 */

/**
 * A laid-out container of the scene (absolute position), its page (null: not fetched).
 * @typedef {object} SceneContainer
 * @property {string} key
 * @property {string} sig
 * @property {number} x
 * @property {number} y
 * @property {number} w
 * @property {number} h
 * @property {SceneItem[]} items
 * @property {SceneEdge[]} edges
 * @property {ViewPage | null} data
 * @property {boolean} estimated
 */

/**
 * The composed scene: the root container, every item by key, its size, and how many
 * containers have an estimated layout.
 * @typedef {{root: SceneContainer, byKey: Map<string, SceneItem>, w: number, h: number, count: number, estimated: number}} Scene
 */

/**
 * Where the last refresh's time went (ms per phase), for benchmarks (hooks.js).
 * @typedef {object} Timings
 * @property {number} [fetch]
 * @property {number} [load]
 * @property {number} [jobs]
 * @property {number} [jobCount]
 * @property {number} [layout]
 * @property {number} [recheck]
 * @property {number} [compose]
 * @property {number} [estimated]
 * @property {number} [at]
 */

export {};
