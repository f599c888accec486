// Starts the first layout worker while the page's HTML is still being read: index.html
// loads this module (no imports) before app.js, so the worker loads its modules while the
// app's 40 modules load, instead of after them (it was made ~0.45-0.65 s from navigation,
// and the first layout waited for it). The page's LayoutClient (layout-client.js) adopts
// it: one worker, started earlier.

/** The worker's script, as the page names it (app.js). */
export const WORKER_URL = "static/layout/layout.worker.js";

/** @type {{url: string, worker: Worker, failed: boolean} | undefined} */
const started = (() => {
  try {
    const worker = new Worker(WORKER_URL, { type: "module" });
    const got = { url: WORKER_URL, worker, failed: false };
    // Failing before the client adopts it (its script did not load), the error has no
    // other listener: the client then starts its own, whose failure it hears.
    worker.addEventListener("error", () => {
      got.failed = true;
    });
    return got;
  } catch {
    return undefined; // the client starts its own
  }
})();
/** @type {any} */ (globalThis).tensorvizEarlyWorker = started;
