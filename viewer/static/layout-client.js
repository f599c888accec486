// Main-thread side of the layout workers: a small pool of Web Workers, numbered requests,
// the newest one wins.
//
// `request(jobs)` resolves with {seq, ms} when every job of that request is laid out, or
// with null when a newer request superseded it. Jobs come in post-order (an expanded
// container's own job before its parent's); the client hands each idle worker the next
// run of jobs that are *ready* (every expanded container inside them already laid out),
// filling in those inner sizes itself, so independent containers are laid out in parallel
// where the machine has cores. Results of a superseded request that did finish are still
// kept (they are valid for their signature).

import { CARD_STYLE } from "./theme.js";

const CHUNK_ITEMS = 1600; // items handed to one worker at a time (it batches small ones for ELK)

export class LayoutClient {
  constructor(workerUrl, size = defaultPoolSize()) {
    this.workerUrl = workerUrl;
    this.size = size;
    this.workers = [];
    // One worker starts now (ELK parses while the page loads); the others only when a
    // request has independent work for them, so a first paint never pays for them.
    this._spawn();
    this.seq = 0;
    this.layouts = new Map(); // sig -> layout, shared with the view model
    this.failed = new Set(); // sigs the worker could not lay out (their parents use plain sizes)
    this.current = null; // {seq, resolve, t0, queue:[jobs], busy:Map(worker -> chunk), chunks}
    this.totalMs = 0; // time spent inside ELK, for the benchmark
    this.jobCount = 0;
    this.superseded = 0; // requests answered "dropped" because a newer one came
  }

  get worker() {
    return this.workers[0];
  }

  _spawn() {
    const w = new Worker(this.workerUrl);
    w.onmessage = (event) => this._onMessage(w, event.data);
    w.onerror = (event) => this._fail(event.message || "layout worker failed");
    this.workers.push(w);
    return w;
  }

  has(sig) {
    return this.layouts.has(sig);
  }

  get(sig) {
    return this.layouts.get(sig);
  }

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
    return new Promise((resolve) => {
      this.current = { seq, resolve, t0: performance.now(), queue: jobs.slice(), busy: new Map(), chunks: 0 };
      this._dispatch();
    });
  }

  _ready(job) {
    return job.items.every((it) => !it.expandedSig || this.layouts.has(it.expandedSig) || this.failed.has(it.expandedSig));
  }

  // Hands each idle worker the next ready run of jobs; resolves when nothing is left.
  _dispatch() {
    const cur = this.current;
    if (!cur) return;
    cur.queue = cur.queue.filter((j) => !this.layouts.has(j.sig));
    for (let n = 0; n < this.size; n++) {
      if (!cur.queue.length) break;
      // Every started worker busy and ready work left over: start another, up to `size`.
      if (n === this.workers.length && !cur.queue.some((j) => this._ready(j) && !this._inFlight(j.sig))) break;
      const w = n < this.workers.length ? this.workers[n] : this._spawn();
      if (this._busy(w)) continue;
      const chunk = [];
      let items = 0;
      const rest = [];
      for (const job of cur.queue) {
        if (items < CHUNK_ITEMS && this._ready(job) && !this._inFlight(job.sig)) {
          chunk.push(this._withInner(job));
          items += job.items.length;
        } else {
          rest.push(job);
        }
      }
      if (!chunk.length) break; // the rest waits for a worker's results
      cur.queue = rest;
      const id = ++cur.chunks;
      cur.busy.set(w, { id, sigs: new Set(chunk.map((j) => j.sig)) });
      w.postMessage({ type: "layout", seq: cur.seq, chunk: id, style: CARD_STYLE, jobs: chunk });
    }
    if (cur.queue.length && !cur.busy.size) {
      // Nothing is ready and nothing runs (an inner layout is missing): lay out the rest
      // anyway, with plain sizes where an inner one is unknown, rather than wait forever.
      const id = ++cur.chunks;
      const chunk = cur.queue.map((j) => this._withInner(j));
      cur.queue = [];
      cur.busy.set(this.workers[0], { id, sigs: new Set(chunk.map((j) => j.sig)) });
      this.workers[0].postMessage({ type: "layout", seq: cur.seq, chunk: id, style: CARD_STYLE, jobs: chunk });
      return;
    }
    if (!cur.queue.length && !cur.busy.size) {
      this.current = null;
      cur.resolve({ seq: cur.seq, ms: performance.now() - cur.t0 });
    }
  }

  _busy(w) {
    return this.current && this.current.busy.has(w);
  }

  _inFlight(sig) {
    for (const c of this.current.busy.values()) if (c.sigs.has(sig)) return true;
    return false;
  }

  // The sizes of expanded containers inside a job, from layouts this side holds (they may
  // have come from another worker).
  _withInner(job) {
    if (!job.items.some((it) => it.expandedSig && !it.inner)) return job;
    const items = job.items.map((it) => {
      if (!it.expandedSig || it.inner || !this.layouts.has(it.expandedSig)) return it;
      const inner = this.layouts.get(it.expandedSig);
      return { ...it, inner: { w: inner.w, h: inner.h } };
    });
    return { ...job, items };
  }

  _fail(message) {
    const cur = this.current;
    if (!cur) return;
    this.current = null;
    cur.resolve({ error: message });
  }

  _onMessage(w, msg) {
    if (msg.type === "result") {
      this.layouts.set(msg.sig, msg.layout);
      this.totalMs += msg.ms;
      this.jobCount += 1;
      return;
    }
    if (msg.type === "error") {
      this.failed.add(msg.sig);
      console.warn("layout failed for", msg.sig, msg.message);
      return;
    }
    const cur = this.current;
    if (!cur || msg.seq !== cur.seq) return; // a superseded request's worker is idle again
    const chunk = cur.busy.get(w);
    if (!chunk || chunk.id !== msg.chunk) return;
    cur.busy.delete(w);
    if (msg.type === "dropped") {
      // Only a newer request drops a chunk, and that request replaced `current` already.
      return;
    }
    this._dispatch();
  }
}

// One worker per core, up to four: the page's own thread is idle while layouts run.
function defaultPoolSize() {
  const cores = (typeof navigator !== "undefined" && navigator.hardwareConcurrency) || 2;
  return Math.max(1, Math.min(4, cores));
}
