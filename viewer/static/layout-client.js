// Main-thread side of the layout worker: numbered requests, the newest one wins.
//
// `request(jobs)` resolves with {seq, layouts: Map(sig -> layout), ms} when every job of
// that request is laid out, or with null when a newer request superseded it. Results of a
// superseded request that did finish are still kept (they are valid for their signature).

import { CARD_STYLE } from "./theme.js";

export class LayoutClient {
  constructor(workerUrl) {
    this.worker = new Worker(workerUrl);
    this.seq = 0;
    this.layouts = new Map(); // sig -> layout, shared with the view model
    this.waiting = new Map(); // seq -> {resolve, want:Set, t0}
    this.totalMs = 0; // time spent inside ELK, for the benchmark
    this.jobCount = 0;
    this.superseded = 0; // requests answered "dropped" because a newer one came
    this.worker.onmessage = (event) => this._onMessage(event.data);
    this.worker.onerror = (event) => {
      for (const [, w] of this.waiting) w.resolve({ error: event.message || "layout worker failed" });
      this.waiting.clear();
    };
  }

  has(sig) {
    return this.layouts.has(sig);
  }

  get(sig) {
    return this.layouts.get(sig);
  }

  request(jobs) {
    const seq = ++this.seq;
    // Older requests are superseded: resolve them as dropped now, the worker will skip them.
    for (const [s, w] of this.waiting) {
      w.resolve(null);
      this.waiting.delete(s);
      this.superseded += 1;
    }
    const t0 = performance.now();
    if (!jobs.length) return Promise.resolve({ seq, ms: 0 });
    return new Promise((resolve) => {
      this.waiting.set(seq, { resolve, t0 });
      this.worker.postMessage({ type: "layout", seq, style: CARD_STYLE, jobs });
    });
  }

  _onMessage(msg) {
    if (msg.type === "result") {
      this.layouts.set(msg.sig, msg.layout);
      this.totalMs += msg.ms;
      this.jobCount += 1;
      return;
    }
    const w = this.waiting.get(msg.seq);
    if (!w) return;
    if (msg.type === "done") {
      this.waiting.delete(msg.seq);
      w.resolve({ seq: msg.seq, ms: performance.now() - w.t0 });
    } else if (msg.type === "dropped") {
      this.waiting.delete(msg.seq);
      w.resolve(null);
    } else if (msg.type === "error") {
      console.warn("layout failed for", msg.sig, msg.message);
    }
  }
}
