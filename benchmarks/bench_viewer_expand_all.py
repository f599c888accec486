"""Expand all at scale, in Debian's Chromium, side by side in one run.

    python benchmarks/bench_viewer_expand_all.py [--sizes 10000,50000] [--frames 120]
        [--baseline DIR]

For synthetic layered captures of 20 ops per block (a jit holding N layer scopes, each
with an attention and an mlp scope of 10 ops): 500 blocks (10,000 nodes) and 2,500 blocks
(50,000 nodes), once as the synthetic generator makes them (the blocks' wiring differs) and
once with every block identical (the same ops, wiring, shapes and source lines, as in a
real transformer), served by the real `viewer.server.app`:

* expand all: `window.tensorviz.expandAll()` from the collapsed first view until the scene
  is laid out at Fit, where the action leaves the camera (one `api/subtree` request; the
  containers the view shows are laid out for real, the others get estimated layouts until
  they come into view), wall time in the page; where that time went (the subtree fetch,
  planning, waiting for layouts, composing the scene), the layout jobs it ran (identical
  blocks share one), the time inside ELK and how many containers are still estimates;
* readable: from Fit to Readable detail at the centre of the graph until every container
  the view shows is laid out for real (`window.tensorviz.settle()`);
* redraw: the renderer's own draw time per frame while panning at Fit and at Readable
  detail afterwards (the 16 ms budget).

`--baseline DIR` measures a checkout of another version (say, `git worktree add DIR main`)
the same way, in a subprocess, and prints the two side by side with ratios.

Prints figures and ratios; asserts nothing. Targets (issue 11): 10k nodes in <= 1.5 s,
50k in <= 5 s, a 10k graph whose blocks all differ in <= 3 s; redraws < 16 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
ROOT = Path(os.environ.get("TV_BENCH_ROOT") or HERE)  # the version measured
sys.path.insert(0, str(ROOT))
sys.path.append(str(HERE / "tests"))  # synthetic.py: test-only, not shipped

from synthetic import synthetic_capture  # noqa: E402
from viewer.server.app import ViewerServer  # noqa: E402

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


EXPAND = """async () => {
  const tv = window.tensorviz;
  const t0 = performance.now();
  await tv.expandAll();
  const ms = performance.now() - t0;
  const t = tv.timings || null;
  let phases = null;
  if (t && t.log) {
    // The refreshes of this action (the first pass, then the settling of what is in view).
    const mine = t.log.filter((x) => x.at >= t0);
    const sum = (k) => mine.reduce((n, x) => n + (x[k] || 0), 0);
    phases = { fetch: mine.length ? mine[0].fetch || 0 : 0, plan: sum("jobs") + sum("recheck"), layout: sum("layout"), compose: sum("compose"), passes: mine.length };
  }
  return { ms, phases, estimated: tv.estimatedKeys ? tv.estimatedKeys().length : 0 };
}"""

READABLE = """async () => {
  const tv = window.tensorviz;
  tv.readable();
  if (!tv.settle) return { ms: null, estimated: null };
  const t0 = performance.now();
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  await tv.settle();
  return { ms: performance.now() - t0, estimated: tv.estimatedKeys().length };
}"""


def measure(browser, url: str, frames: int) -> dict:
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(url)
    page.wait_for_function("() => window.tensorviz && window.tensorviz.ready", timeout=120_000)
    jobs0 = page.evaluate("() => window.tensorviz.layoutJobs")
    elk0 = page.evaluate("() => window.tensorviz.layoutTotalMs")
    got = page.evaluate(EXPAND)
    stats = page.evaluate("() => window.tensorviz.sceneStats()")
    out = {
        "expand_ms": got["ms"],
        "phases": got["phases"],
        "estimated": got["estimated"],
        "jobs": page.evaluate("() => window.tensorviz.layoutJobs") - jobs0,
        "elk_ms": page.evaluate("() => window.tensorviz.layoutTotalMs") - elk0,
        "items": stats["items"],
    }
    page.evaluate("() => window.tensorviz.fit()")
    draws = page.evaluate(PAN, frames)
    out["fit_p95"] = statistics.quantiles(draws, n=20)[18] if len(draws) > 1 else draws[0]
    got = page.evaluate(READABLE)
    out["readable_ms"] = got["ms"]
    out["readable_estimated"] = got["estimated"]
    draws = page.evaluate(PAN, frames)
    out["readable_p95"] = statistics.quantiles(draws, n=20)[18] if len(draws) > 1 else draws[0]
    page.close()
    return out


def run(sizes: list[int], frames: int, emit) -> list:
    from playwright.sync_api import sync_playwright

    rows = []
    with ViewerServer() as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        for n in sizes:
            blocks = n // OPS_PER_BLOCK
            for kind in ("identical", "differ"):
                cap = synthetic_capture(n, layers=blocks, grouped=True)
                if kind == "identical":
                    cap = identical_blocks(cap)
                cid = server.add_capture(cap, f"{n} {kind}")
                server.warm(cid)
                t0 = time.perf_counter()
                r = measure(browser, server.url_for(cid), frames)
                r["total_s"] = time.perf_counter() - t0
                row = {"n": n, "blocks": blocks, "kind": kind, **r}
                rows.append(row)
                emit(row)
        browser.close()
    return rows


def line(row: dict) -> str:
    ph = row.get("phases")
    where = (f" [fetch {ph['fetch']:.0f}, plan {ph['plan']:.0f}, layout {ph['layout']:.0f}, compose {ph['compose']:.0f} ms; "
             f"{ph['passes']} passes]") if ph else ""
    readable = f"; readable laid out in {row['readable_ms']:.0f} ms" if row.get("readable_ms") is not None else ""
    return (f"{row['n']:>7,} nodes {row['blocks']:>5} blocks {row['kind']:>9}: expand all {row['expand_ms']:8.0f} ms{where} "
            f"({row['jobs']} layout jobs, {row['elk_ms']:.0f} ms in ELK, {row['items']:,} items, {row['estimated']} estimated)"
            f"{readable}; redraw p95 {row['fit_p95']:.1f} ms at Fit, {row['readable_p95']:.1f} ms readable")


TARGETS = {10000: 1500, 50000: 5000}


def target_of(row: dict) -> int | None:
    return 3000 if (row["kind"] == "differ" and row["n"] == 10000) else TARGETS.get(row["n"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,50000")
    ap.add_argument("--frames", type=int, default=120)
    ap.add_argument("--baseline", help="a checkout of another version, measured the same way for comparison")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one JSON row per line (the baseline run)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.json:
        run(sizes, args.frames, lambda row: print(json.dumps(row), flush=True))
        return

    base = {}
    if args.baseline:
        print(f"baseline: {args.baseline}", flush=True)
        env = {**os.environ, "TV_BENCH_ROOT": str(Path(args.baseline).resolve()), "PYTHONPATH": str(Path(args.baseline).resolve())}
        proc = subprocess.run([sys.executable, __file__, "--sizes", args.sizes, "--frames", str(args.frames), "--json"],
                              env=env, capture_output=True, text=True, check=True)
        for text in proc.stdout.splitlines():
            row = json.loads(text)
            base[(row["n"], row["kind"])] = row
            print("  before " + line(row), flush=True)
        print("this version:", flush=True)
    rows = run(sizes, args.frames, lambda row: print(("  after  " if base else "") + line(row), flush=True))
    print()
    cols = "before     after    ratio" if base else "     s"
    print(f"{'expand all':>24}  {cols}   target")
    for row in rows:
        target = target_of(row)
        b = base.get((row["n"], row["kind"]))
        got = f"{b['expand_ms'] / 1000:6.2f} s  {row['expand_ms'] / 1000:6.2f} s  {row['expand_ms'] / b['expand_ms']:6.2f}" if b else f"{row['expand_ms'] / 1000:6.2f} s"
        goal = f"<= {target / 1000:.1f} s (ratio {row['expand_ms'] / target:.2f})" if target else ""
        print(f"{row['n']:>8,} {row['kind']:>9} {got}   {goal}")
    print(f"{'redraw p95 Fit/readable':>24}")
    for row in rows:
        b = base.get((row["n"], row["kind"]))
        before = f"{b['fit_p95']:5.1f}/{b['readable_p95']:5.1f} ms  " if b else ""
        print(f"{row['n']:>8,} {row['kind']:>9} {before}{row['fit_p95']:5.1f}/{row['readable_p95']:5.1f} ms   < 16 ms")


if __name__ == "__main__":
    main()
