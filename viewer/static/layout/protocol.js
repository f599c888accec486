// The layout worker's messages, defined once (as Model Explorer's worker_events does):
// the kinds are shared constants and each message is made by one constructor here, so
// the page (layout-client.js) and the worker (layout.worker.js) cannot disagree on a
// field's name. Both import this module; nothing else talks to the worker.
//
// A request may come as several chunks, one per worker of the pool (layout-client.js);
// `chunk` is echoed. A newer request (a larger `seq`) wins: the worker abandons an older
// batch between two jobs and answers DROPPED for it.

/** What the page asks. */
export const ToWorker = Object.freeze({
  LAYOUT: "layout",
  VERSION: "version",
});

/** What the worker answers. */
export const FromWorker = Object.freeze({
  RESULT: "result", // one per finished job
  DONE: "done", // every job of a chunk answered
  DROPPED: "dropped", // the chunk was abandoned: a newer request came
  ERROR: "error", // a job could not be laid out at all (not even the plain column)
  VERSION: "version",
});

/**
 * A card to lay out: its content as draw/card.js measures it.
 * @typedef {object} JobItem
 * @property {"node"|"group"|"chunk"|"stack"|"in"|"out"} kind
 * @property {string} title
 * @property {string[]} lines
 * @property {string|null} [tag]
 * @property {string} [caption]  an op card: the module it stands for (`q_proj · Linear`)
 * @property {number} [weightStart]  lines from here on are weights (a bullet each)
 * @property {boolean} [toggle]  a node that opens (a +/- button on its title row)
 * @property {{text: string, font: string, tone?: string}[]} [parts]  a pill's texts
 * @property {boolean} [quiet]  a parameter's smaller pill
 * @property {Size} [inner]  an expanded container: the size of its inside (its frame is measured from it)
 */

/**
 * @typedef {{w: number, h: number}} Size
 * @typedef {{x: number, y: number, w: number, h: number}} Box
 * @typedef {{s: number, t: number, label?: string}} JobEdge  items by position
 */

/**
 * One container to lay out.
 * @typedef {object} LayoutJob
 * @property {string} sig  its layout key: the cache key of the result
 * @property {JobItem[]} items
 * @property {JobEdge[]} edges
 * @property {boolean} [row]  a row of bodies side by side (unconnected items in one layer)
 * @property {number[][]} [columns]  item positions that stand in one column, in order (the
 *   blocks of an unfolded stack): the edges from each to the next are drawn straight
 * @property {(Size & {top?: boolean, around?: Size}) | null} [wrap]  the screen it is laid out for:
 *   taller than it, it wraps into columns; `top`: its shape is the whole view's, `around`
 *   what the containers around it add to its size (layout-client.js topJobs)
 */

/**
 * A container laid out; coordinates relative to it.
 * @typedef {object} Layout
 * @property {number} w
 * @property {number} h
 * @property {Box[]} boxes  by item position
 * @property {LayoutEdge[]} edges
 * @property {boolean} [fallback]  ELK refused it: the items in one column
 * @property {boolean} [fast]  too big for ELK within a frame's budget: laid out by layered.js
 * @property {number} [wrapped]  wrapped into this many columns for the screen (job.wrap)
 */

/**
 * An edge of a layout: `e` its position among the job's edges, its route, where a label
 * may go, and the label the worker placed (`label`: where it covers no card, no other label).
 * @typedef {object} LayoutEdge
 * @property {number} e
 * @property {number[][]} points
 * @property {number[] | null} labelAt
 * @property {LabelSpot} [label]
 */

/**
 * An edge label's text and anchor: `y` its middle, `w` its text's width (draw/card.js labelRect).
 * @typedef {{text: string, x: number, y: number, w: number}} LabelSpot
 */

/**
 * @typedef {{type: "layout", seq: number, chunk: number, jobs: LayoutJob[]}} LayoutRequest
 * @typedef {{type: "version"}} VersionRequest
 * @typedef {{type: "result", seq: number, sig: string, layout: Layout, ms: number}} Result
 * @typedef {{type: "done", seq: number, chunk: number, ms: number}} Done
 * @typedef {{type: "dropped", seq: number, chunk: number}} Dropped
 * @typedef {{type: "error", seq: number, sig: string, message: string}} LayoutError
 * @typedef {{type: "version", elk: string, ownHandler: boolean}} Version
 */

/**
 * @param {number} seq @param {number} chunk @param {LayoutJob[]} jobs
 * @returns {LayoutRequest} jobs in post-order: an expanded child's job before its parent's
 */
export const layoutRequest = (seq, chunk, jobs) => ({ type: ToWorker.LAYOUT, seq, chunk, jobs });
/** @returns {VersionRequest} */
export const versionRequest = () => ({ type: ToWorker.VERSION });

/** @param {number} seq @param {string} sig @param {Layout} layout @param {number} ms @returns {Result} */
export const result = (seq, sig, layout, ms) => ({ type: FromWorker.RESULT, seq, sig, layout, ms });
/** @param {number} seq @param {number} chunk @param {number} ms @returns {Done} */
export const done = (seq, chunk, ms) => ({ type: FromWorker.DONE, seq, chunk, ms });
/** @param {number} seq @param {number} chunk @returns {Dropped} */
export const dropped = (seq, chunk) => ({ type: FromWorker.DROPPED, seq, chunk });
/** @param {number} seq @param {string} sig @param {string} message @returns {LayoutError} */
export const layoutError = (seq, sig, message) => ({ type: FromWorker.ERROR, seq, sig, message });
/**
 * @param {string} elk @param {boolean} ownHandler
 * @returns {Version} which ELK answered, and that the worker's own handler (not ELK's) did
 */
export const version = (elk, ownHandler) => ({ type: FromWorker.VERSION, elk, ownHandler });
