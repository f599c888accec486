"""Expand all at scale, in Debian's Chromium, side by side in one run.

    python benchmarks/bench_viewer_expand_all.py [--sizes 10000,50000] [--frames 120]

For synthetic layered captures of 20 ops per block (a jit holding N layer scopes, each
with an attention and an mlp scope of 10 ops): 500 blocks (10,000 nodes) and 2,500 blocks
(50,000 nodes), once as the synthetic generator makes them (the blocks' wiring differs) and
once with every block identical (the same ops, wiring, shapes and source lines, as in a
real transformer), served by the real `viewer.server`:

* expand all: `window.tensorviz.expandAll()` from the collapsed first view until the scene
  is laid out (one `api/subtree` request, one layout request), wall time in the page;
  the layout jobs it ran (identical blocks share one) and the time inside ELK;
* redraw: the renderer's own draw time per frame while panning at Fit and at Readable
  detail afterwards (the 16 ms budget).

Prints figures and ratios; asserts nothing. Targets (issue 11): 10k nodes in <= 1.5 s,
50k in <= 5 s, a 10k graph whose blocks all differ in <= 3 s; redraws < 16 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))  # synthetic.py: test-only, not shipped

from capture.model import Frame  # noqa: E402
from synthetic import synthetic_capture  # noqa: E402
from viewer.server import ViewerServer  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
OPS_PER_BLOCK = 20

PAN = """async (frames) => {
  const tv = window.tensorviz;
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const before = tv.sceneStats().drawMs.length;
  await new Promise((resolve) => {
    let i = 0;
    const step = () => {
      if (i >= frames) return resolve();
      tv.panBy(i % 60 < 30 ? 7 : -7, i % 60 < 30 ? 3 : -3);
      i++;
      requestAnimationFrame(step);
    };
    requestAnimationFrame(step);
  });
  return tv.sceneStats().drawMs.slice(-frames);
}"""


def identical_blocks(capture):
    """The same capture with every block wired like the first: each node of a block reads
    the same relative operands, and carries the same frame, as a real model's repeated
    layer does."""
    per = OPS_PER_BLOCK
    nodes = capture.nodes
    first_out = {n.id: n.outputs[0] for n in nodes}
    for n in nodes:
        block, k = divmod(n.id, per)
        template = nodes[k]
        n.op = template.op
        n.frame = template.frame
        shifted = []
        for o in template.inputs:
            if o.value is None:
                shifted.append(o)
                continue
            src = next((m.id for m in nodes[:per] if first_out[m.id] == o.value), None)
            if src is None:  # the capture input, for the first block
                v = first_out[block * per - 1] if block else o.value
            else:
                v = first_out[block * per + src]
            shifted.append(type(o)(o.position, v))
        n.inputs = shifted
    return capture


def measure(browser, url: str, frames: int) -> dict:
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(url)
    page.wait_for_function("() => window.tensorviz && window.tensorviz.ready", timeout=120_000)
    jobs0 = page.evaluate("() => window.tensorviz.layoutJobs")
    elk0 = page.evaluate("() => window.tensorviz.layoutTotalMs")
    ms = page.evaluate("async () => { const t0 = performance.now(); await window.tensorviz.expandAll(); return performance.now() - t0; }")
    stats = page.evaluate("() => window.tensorviz.sceneStats()")
    out = {
        "expand_ms": ms,
        "jobs": page.evaluate("() => window.tensorviz.layoutJobs") - jobs0,
        "elk_ms": page.evaluate("() => window.tensorviz.layoutTotalMs") - elk0,
        "items": stats["items"],
    }
    page.evaluate("() => window.tensorviz.fit()")
    draws = page.evaluate(PAN, frames)
    out["fit_p95"] = statistics.quantiles(draws, n=20)[18] if len(draws) > 1 else draws[0]
    page.evaluate("() => window.tensorviz.readable()")
    draws = page.evaluate(PAN, frames)
    out["readable_p95"] = statistics.quantiles(draws, n=20)[18] if len(draws) > 1 else draws[0]
    page.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,50000")
    ap.add_argument("--frames", type=int, default=120)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    rows = []
    with ViewerServer() as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        for n in [int(s) for s in args.sizes.split(",")]:
            blocks = n // OPS_PER_BLOCK
            for kind in ("identical", "differ"):
                cap = synthetic_capture(n, layers=blocks, grouped=True)
                if kind == "identical":
                    cap = identical_blocks(cap)
                cid = server.add_capture(cap, f"{n} {kind}")
                server.warm(cid)
                t0 = time.perf_counter()
                r = measure(browser, server.url_for(cid), args.frames)
                r["total_s"] = time.perf_counter() - t0
                rows.append((n, blocks, kind, r))
                print(f"{n:>7,} nodes {blocks:>5} blocks {kind:>9}: expand all {r['expand_ms']:8.0f} ms "
                      f"({r['jobs']} layout jobs, {r['elk_ms']:.0f} ms in ELK, {r['items']:,} items); "
                      f"redraw p95 {r['fit_p95']:.1f} ms at Fit, {r['readable_p95']:.1f} ms readable", flush=True)
        browser.close()
    print()
    targets = {10000: 1500, 50000: 5000}
    for n, blocks, kind, r in rows:
        target = 3000 if (kind == "differ" and n == 10000) else targets.get(n)
        if target:
            print(f"{n:>7,} {kind:>9}: {r['expand_ms'] / 1000:.2f} s vs target {target / 1000:.1f} s "
                  f"(ratio {r['expand_ms'] / target:.2f})")


if __name__ == "__main__":
    main()
