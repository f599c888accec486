// Main-thread side of the layout workers: a small pool of Web Workers, numbered requests,
// the newest one wins.
//
// `request(jobs)` resolves with {seq, ms} when every job of that request is laid out, or
// with null when a newer request superseded it. A job is one container:
// {jid, sig, items, edges, row, columns}; an item that is an expanded container carries either the
// size of its inside (`inner` {w, h}, known when the job was made) or `child`, the jid of
// the job of the same request that lays that inside out (and `hold`, a box held for it:
// boxFor). The client hands each idle worker the next run of jobs that are *ready* (every
// `child` laid out), filling in those sizes itself, so independent containers are laid
// out in parallel where the machine has cores. A finished layout is kept under
// layoutKey(sig, inner sizes): the view model finds it there. Jobs whose key is laid out
// already (structurally identical containers) cost nothing. Results of a superseded
// request that did finish are still kept (they are valid for their key). The messages to
// and from the workers are made and named by protocol.js, which the worker imports too.

import { CARD_STYLE, charMeasurer, FRAME, measureCard } from "../draw/card.js";
import { FromWorker, layoutRequest } from "./protocol.js";

/**
 * @typedef {import("./protocol.js").Size} Size
 * @typedef {import("./protocol.js").JobItem} JobItem
 * @typedef {import("./protocol.js").JobEdge} JobEdge
 * @typedef {import("./protocol.js").LayoutJob} LayoutJob
 * @typedef {import("./protocol.js").Layout} Layout
 * @typedef {import("./protocol.js").Result} Result
 * @typedef {import("./protocol.js").Done} Done
 * @typedef {import("./protocol.js").Dropped} Dropped
 * @typedef {import("./protocol.js").LayoutError} LayoutError
 * @typedef {import("./protocol.js").Version} Version
 */

/**
 * An item of a requested job: a card, or an expanded container whose inside the job
 * `child` of the same request lays out (`hold`: the box held for it, boxFor).
 * @typedef {JobItem & {child?: string, hold?: Size | null}} RequestItem
 */

/**
 * One container of a request (the view model makes them), `jid` its id in the request.
 * @typedef {object} RequestJob
 * @property {string} jid
 * @property {string} sig
 * @property {RequestItem[]} items
 * @property {JobEdge[]} edges
 * @property {boolean} [row]
 * @property {number[][]} [columns]
 */

/**
 * A job ready for a worker (its children's sizes filled in, `sig` its layout key) and the
 * jids of the request's jobs it lays out.
 * @typedef {LayoutJob & {jids?: string[]}} ReadyJob
 */

/**
 * How a request ended: laid out (`ms` after it was made), failed, or null when a newer one
 * superseded it.
 * @typedef {{seq: number, ms: number} | {error: string} | null} Outcome
 */

/**
 * The request being laid out.
 * @typedef {object} Pending
 * @property {number} seq
 * @property {(outcome: Outcome) => void} resolve
 * @property {number} t0  performance.now() when it was made
 * @property {RequestJob[]} queue  jobs waiting for a child's layout
 * @property {ReadyJob[]} ready  jobs no worker has yet
 * @property {Map<Worker, {id: number, sigs: Set<string>}>} busy  the chunk each worker lays out
 * @property {number} chunks  chunks handed out so far
 * @property {Map<string, Layout | null>} done  jid -> layout (null: failed)
 * @property {Map<string, string[]>} waiting  layout key in a worker -> jids waiting for it
 * @property {Map<string, Size>} top  the jobs whose layout is the whole view's shape, with what
 *   the containers around them add to it (topJobs)
 */

/** @typedef {Result | Done | Dropped | LayoutError | Version} WorkerAnswer */

const CHUNK_ITEMS = 1600; // items handed to one worker at a time (it batches small ones for ELK)

// A short, stable hash of a text (cyrb53, plus its length): layout cache keys, here and in
// viewmodel.js.
/**
 * @param {string} text
 * @returns {string}
 */
export function hash(text) {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (h2 >>> 0).toString(36) + (h1 >>> 0).toString(36) + ":" + text.length.toString(36);
}

// The cache key of a container's layout: its content signature and the sizes of the
// expanded containers inside it (`inners`, by item position; null for other items).
/**
 * @param {string} sig
 * @param {(Size | null | undefined)[]} inners
 * @returns {string}
 */
export function layoutKey(sig, inners) {
  let text = "";
  for (const b of inners) if (b) text += `${b.w}x${b.h},`;
  return text ? `${sig}~${hash(text)}` : sig;
}

// The box a container takes in its parent: the box held for it, grown where its real
// layout is wider or taller (so that laying it out moves nothing around it, or only makes
// room: viewmodel.js grownLayout), while the real layout fills a fair part of it; else
// its own size.
/**
 * @param {Size} size  the container's own layout
 * @param {Size | null | undefined} hold  the box held for it
 * @returns {Size}
 */
export function boxFor(size, hold) {
  if (!hold) return { w: size.w, h: size.h };
  const w = Math.max(size.w, hold.w);
  const h = Math.max(size.h, hold.h);
  if (size.w * size.h >= 0.45 * w * h) return { w, h };
  return { w: size.w, h: size.h };
}

export class LayoutClient {
  /**
   * @param {string | URL} workerUrl
   * @param {number} [size]  workers in the pool, at most
   */
  constructor(workerUrl, size = defaultPoolSize()) {
    this.workerUrl = workerUrl;
    this.size = size;
    /** @type {Worker[]} */
    this.workers = [];
    // One worker starts now, or the one index.html started before the app's modules loaded
    // is adopted (early-worker.js); the others only when a request has independent work
    // for them, so a first paint never pays for them.
    this._spawn(adoptEarly(workerUrl));
    this.seq = 0;
    /** @type {Map<string, Layout>} */
    this.layouts = new Map(); // sig -> layout, shared with the view model
    /** @type {Set<string>} */
    this.failed = new Set(); // sigs the worker could not lay out (their parents use plain sizes)
    /** @type {Pending | null} */
    this.current = null;
    this.totalMs = 0; // time spent inside ELK, for the benchmark
    this.jobCount = 0;
    /** @type {{items: number, edges: number, ms: number}[]} */
    this.recent = []; // the last jobs laid out, for the benchmark
    /** @type {Map<string, [number, number]>} */
    this.sizes = new Map(); // layout key in a worker -> [items, edges]
    this.superseded = 0; // requests answered "dropped" because a newer one came
    /** @type {number | null} */
    this.firstRequestAt = null; // performance.now() of the first request with work (benchmarks: the gap before layout)
    // The screen the graph is shown on (CSS px of the canvas), set by the page, and
    // whether layouts are made for it (`wrapping`: after Expand all or Depth…, where a
    // container taller than the screen is laid out in columns, layout.worker.js wrap; the
    // first view reads top to bottom).
    /** @type {Size | null} */
    this.screen = null;
    this.wrapping = false;
  }

  // The view the layouts are made for: {w, h} in CSS px (null: no wrapping). Rounded, so
  // that a few pixels of resizing reuse the same layouts.
  /**
   * @param {number} w
   * @param {number} h
   */
  setScreen(w, h) {
    this.screen = w > 0 && h > 0 ? { w: Math.max(400, Math.round(w / 50) * 50), h: Math.max(300, Math.round(h / 50) * 50) } : null;
  }

  get worker() {
    return this.workers[0];
  }

  /** @param {Worker | null} [early]  a worker started already for this client's script */
  _spawn(early = null) {
    // A module worker: it imports the card geometry the page draws with (draw/card.js).
    /** @type {Worker} */
    const w = early || new Worker(this.workerUrl, { type: "module" });
    w.onmessage = (event) => this._onMessage(w, event.data);
    w.onerror = (event) => this._fail(event.message || "layout worker failed");
    this.workers.push(w);
    return w;
  }

  // Layouts are kept per screen (a tall container wraps to fit it): the view model asks by
  // its own key (layoutKey), this client adds the screen's.
  /** @param {string} key */
  keyed(key) {
    return this.wrapping && this.screen ? `${key}@${this.screen.w}x${this.screen.h}` : key;
  }

  /** @param {string} sig */
  has(sig) {
    return this.layouts.has(this.keyed(sig));
  }

  /** @param {string} sig */
  get(sig) {
    return this.layouts.get(this.keyed(sig));
  }

  /**
   * @param {string} sig
   * @param {Layout} layout
   */
  put(sig, layout) {
    this.layouts.set(this.keyed(sig), layout);
  }

  /**
   * @param {RequestJob[]} jobs  in post-order: a child's job before its parent's
   * @returns {Promise<Outcome>}
   */
  request(jobs) {
    const seq = ++this.seq;
    // An older request is superseded: resolve it as dropped now; its workers finish the
    // job they are on and skip the rest.
    if (this.current) {
      this.current.resolve(null);
      this.superseded += 1;
      this.current = null;
    }
    if (!jobs.length) return Promise.resolve({ seq, ms: 0 });
    if (this.firstRequestAt === null) this.firstRequestAt = performance.now();
    return /** @type {Promise<Outcome>} */ (new Promise((resolve) => {
      this.current = {
        seq, resolve, t0: performance.now(), queue: jobs.slice(), ready: [], busy: new Map(), chunks: 0, top: topJobs(jobs),
        done: new Map(), // jid -> layout (null: failed)
        waiting: new Map(), // layout key in a worker -> jids waiting for it
      };
      this._dispatch();
    }));
  }

  // Moves every job whose children are laid out to `ready`, with its sizes filled in;
  // one whose layout is known (or in a worker already) needs no worker of its own.
  _promote() {
    const cur = this.current;
    if (!cur) return;
    let moved = true;
    while (moved) {
      moved = false;
      /** @type {RequestJob[]} */
      const rest = [];
      for (const job of cur.queue) {
        if (!job.items.every((it) => !it.child || cur.done.has(it.child))) {
          rest.push(job);
          continue;
        }
        const fin = this._withInner(job);
        if (this.layouts.has(fin.sig) || this.failed.has(fin.sig)) {
          cur.done.set(job.jid, this.layouts.get(fin.sig) || null);
          moved = true;
        } else if (cur.waiting.has(fin.sig)) {
          cur.waiting.get(fin.sig)?.push(job.jid);
        } else if (cur.ready.some((r) => r.sig === fin.sig)) {
          cur.ready.find((r) => r.sig === fin.sig)?.jids?.push(job.jid);
        } else {
          fin.jids = [job.jid];
          cur.ready.push(fin);
        }
      }
      cur.queue = rest;
    }
  }

  // Hands each idle worker the next ready run of jobs; resolves when nothing is left.
  // eslint-disable-next-line complexity -- the request queue: which batch goes to which free worker
  _dispatch() {
    const cur = this.current;
    if (!cur) return;
    this._promote();
    for (let n = 0; n < this.size && cur.ready.length; n++) {
      // Every started worker busy and ready work left over: start another, up to `size`.
      if (n === this.workers.length && !cur.ready.length) break;
      const w = n < this.workers.length ? this.workers[n] : this._spawn();
      if (this._busy(w)) continue;
      // An even share of the ready work per worker of the pool, so that it runs in parallel.
      const readyItems = cur.ready.reduce((k, j) => k + j.items.length, 0);
      const share = Math.min(CHUNK_ITEMS, Math.ceil(readyItems / this.size));
      /** @type {LayoutJob[]} */
      const chunk = [];
      let items = 0;
      while (cur.ready.length && (items < share || !chunk.length)) {
        const job = /** @type {ReadyJob} */ (cur.ready.shift());
        chunk.push({ sig: job.sig, items: job.items, edges: job.edges, row: job.row, columns: job.columns, wrap: job.wrap });
        cur.waiting.set(job.sig, job.jids || []);
        this.sizes.set(job.sig, [job.items.length, job.edges.length]);
        items += job.items.length;
      }
      const id = ++cur.chunks;
      cur.busy.set(w, { id, sigs: new Set(chunk.map((j) => j.sig)) });
      w.postMessage(layoutRequest(cur.seq, id, chunk));
    }
    if (!cur.busy.size && (cur.queue.length || cur.ready.length)) {
      // Nothing runs and nothing is ready: a child's job is missing from the request.
      this._fail("layout jobs wait for a container that no job lays out");
      return;
    }
    if (!cur.queue.length && !cur.ready.length && !cur.busy.size) {
      this.current = null;
      cur.resolve({ seq: cur.seq, ms: performance.now() - cur.t0 });
    }
  }

  /** @param {Worker} w */
  _busy(w) {
    return this.current && this.current.busy.has(w);
  }

  // The job with the sizes of its `child` containers filled in (box held for them or
  // their own), under its layout key.
  /**
   * @param {RequestJob} job
   * @returns {ReadyJob}
   */
  _withInner(job) {
    const cur = this.current;
    const items = job.items.map((it) => {
      if (!it.child) return it;
      const layout = cur && cur.done.get(it.child);
      const { child, hold, ...rest } = it;
      return { ...rest, inner: layout ? boxFor(layout, hold) : (hold ? { w: hold.w, h: hold.h } : { w: 160, h: 40 }) };
    });
    // Laid out for the screen (a tall container wraps into columns): the screen is part of the key.
    const key = this.keyed(layoutKey(job.sig, items.map((it) => it.inner || null)));
    const around = cur && cur.top.get(job.jid);
    const wrap = job.row || !this.wrapping || !this.screen ? null
      : around ? { ...this.screen, top: true, around } : { ...this.screen, top: false };
    return { sig: key, items, edges: job.edges, row: job.row, columns: job.columns, wrap };
  }

  /** @param {string} message */
  _fail(message) {
    const cur = this.current;
    if (!cur) return;
    this.current = null;
    cur.resolve({ error: message });
  }

  /**
   * @param {Worker} w
   * @param {WorkerAnswer} msg
   */
  // eslint-disable-next-line complexity -- one case per message the worker sends
  _onMessage(w, msg) {
    if (msg.type === FromWorker.VERSION) return;
    if (msg.type === FromWorker.RESULT || msg.type === FromWorker.ERROR) {
      if (msg.type === FromWorker.RESULT) {
        this.layouts.set(msg.sig, msg.layout);
        this.totalMs += msg.ms;
        this.jobCount += 1;
        const [items, edges] = this.sizes.get(msg.sig) || [0, 0];
        this.recent.push({ items, edges, ms: msg.ms });
        if (this.recent.length > 200) this.recent.splice(0, 100);
      } else {
        this.failed.add(msg.sig);
        console.warn("layout failed for", msg.sig, msg.message);
      }
      this.sizes.delete(msg.sig);
      const cur = this.current;
      if (cur && msg.seq === cur.seq && cur.waiting.has(msg.sig)) {
        for (const jid of cur.waiting.get(msg.sig) || []) cur.done.set(jid, msg.type === FromWorker.RESULT ? msg.layout : null);
        cur.waiting.delete(msg.sig);
      }
      return;
    }
    const cur = this.current;
    if (!cur || msg.seq !== cur.seq) return; // a superseded request's worker is idle again
    const chunk = cur.busy.get(w);
    if (!chunk || chunk.id !== msg.chunk) return;
    cur.busy.delete(w);
    if (msg.type === FromWorker.DROPPED) {
      // Only a newer request drops a chunk, and that request replaced `current` already.
      return;
    }
    this._dispatch();
  }
}

// The jobs whose shape is the shape of the whole view: the request's outermost container
// and, while a container holds one expanded container (and cards around it), that one
// (Llama's scene, LlamaForCausalLM, its LlamaModel). They are wrapped to fit the screen;
// the containers inside them as compactly as they can (layout.worker.js wrapColumns).
// Each with what the containers around it add to its size (`around`): their frames and
// padding, and the cards above and below it (the input and output pills, the LM head), so
// that its shape is chosen for the whole view's.
/**
 * @param {RequestJob[]} jobs
 * @returns {Map<string, Size>}
 */
export function topJobs(jobs) {
  const byJid = new Map(jobs.map((j) => [j.jid, j]));
  /** @type {Set<string>} */
  const inner = new Set();
  for (const j of jobs) for (const it of j.items) if (it.child) inner.add(it.child);
  /** @type {Map<string, Size>} */
  const top = new Map();
  const pad = 2 * PADDING;
  const frame = { w: 2 * FRAME.inset.x, h: FRAME.inset.y + CARD_STYLE.groupPadBottom };
  for (const root of jobs) {
    if (inner.has(root.jid)) continue;
    /** @type {RequestJob | undefined} */
    let j = root;
    let around = { w: 0, h: 0 };
    while (j && !top.has(j.jid)) {
      top.set(j.jid, around);
      /** @type {RequestItem[]} */
      const kids = j.items.filter((it) => it.child);
      if (kids.length !== 1) break;
      let others = 0;
      for (const it of j.items) if (!it.child) others += measureCard(it, charMeasurer).h + BETWEEN_LAYERS;
      around = { w: around.w + pad + frame.w, h: around.h + pad + frame.h + others };
      j = byJid.get(/** @type {string} */ (kids[0].child));
    }
  }
  return top;
}

// ELK's padding around a container's cards and the room between two layers of them when
// laid out for the screen (layout.worker.js LAYOUT_OPTIONS, DENSE).
const PADDING = 10;
const BETWEEN_LAYERS = 22;

// The worker index.html started early for `workerUrl` (early-worker.js), taken once; null
// when there is none (a test page, another script) or it failed before it was adopted.
/**
 * @param {string | URL} workerUrl
 * @returns {Worker | null}
 */
function adoptEarly(workerUrl) {
  const g = /** @type {any} */ (globalThis);
  const early = g.tensorvizEarlyWorker;
  if (!early || early.url !== String(workerUrl)) return null;
  g.tensorvizEarlyWorker = undefined;
  if (early.failed) {
    early.worker.terminate();
    return null;
  }
  return early.worker;
}

// One worker per core, up to four: the page's own thread is idle while layouts run.
function defaultPoolSize() {
  const cores = (typeof navigator !== "undefined" && navigator.hardwareConcurrency) || 2;
  return Math.max(1, Math.min(4, cores));
}
