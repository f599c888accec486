"""The browser app at scale, in Debian's Chromium, side by side in one run.

    python benchmarks/bench_viewer_browser.py [--frames 240] [--sizes 1000,10000,100000]
        [--baseline DIR]

For synthetic captures of 1,000 / 10,000 / 100,000 nodes (grouped: a jit holding layer
scopes, each with attention/mlp scopes) and one flat 5,000-node jit, served by the real
`viewer.server.app` (its index built before the page asks, as a language server would have
it by the time a person opens the page):

* first paint: navigation start → the first canvas frame with graph items on it;
* layout: wall time of the initial layout request (worker round trip), and the time
  spent inside ELK for it;
* frame time while panning and zooming at Fit (and, "readable", at Readable detail about
  the view's centre; "cards", at Readable detail centred on the first op card, so that full
  cards, lines and labels are on screen), measured in the page over `--frames`
  animation frames: `draw` is the renderer's own work per frame (what the 16 ms budget is
  about), `rAF` the interval between requestAnimationFrame timestamps (headless Chromium
  paces these at the display rate, so ~16.7 ms means no frame was dropped);
* JS heap: used size from the DevTools protocol (`Runtime.getHeapUsage`), page + worker
  not included separately.

Each size is measured twice: as first opened, and after opening more of it ("expanded":
the first layer's scopes, or the flat jit's first four chunks: node cards on screen).
`--baseline DIR` measures a checkout of another version (say, `git worktree add DIR main`)
the same way, in a subprocess, and prints its figures beside these with ratios.

Prints figures; asserts nothing. Targets: the 100,000-node capture first paints in
under 2 s; panning stays under 16 ms per frame at every size.
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

PAN_ZOOM = """async ([frames, where]) => {
  const tv = window.tensorviz;
  if (where === 'fit') tv.fit();
  else tv.readable();
  if (where === 'cards') {
    // Readable detail on the node cards: the view centred on the first op card laid out.
    const key = tv.keys().find((k) => tv.itemInfo(k).kind === 'node');
    if (key) tv.center(key);
  }
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const c = document.getElementById('graph').getBoundingClientRect();
  const before = tv.sceneStats().drawMs.length;
  const stamps = [];
  const drawn = [];
  await new Promise((resolve) => {
    let i = 0;
    const step = (t) => {
      stamps.push(t);
      drawn.push(tv.sceneStats().drawn.items);
      if (i >= frames) return resolve();
      // Pan out and back, then zoom in and back out about the centre: ends where it began.
      const phase = Math.floor(i / 30) % 4;
      if (phase === 0) tv.panBy(9, 4);
      else if (phase === 1) tv.panBy(-9, -4);
      else if (phase === 2) tv.zoomAt(c.width / 2, c.height / 2, 1.03);
      else tv.zoomAt(c.width / 2, c.height / 2, 1 / 1.03);
      i++;
      requestAnimationFrame(step);
    };
    requestAnimationFrame(step);
  });
  const draws = tv.sceneStats().drawMs.slice(-frames);
  const intervals = [];
  for (let i = 1; i < stamps.length; i++) intervals.push(stamps[i] - stamps[i - 1]);
  return { draws, intervals, items: tv.sceneStats().items, drawn: Math.max(...drawn), scale: tv.camera.s };
}"""


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))
    return xs[k]


def measure(page, cdp, frames: int, where: str = "fit") -> dict:
    got = page.evaluate(PAN_ZOOM, [frames, where])
    heap = cdp.send("Runtime.getHeapUsage")
    return {
        "items": got["items"],
        "drawn": got["drawn"],
        "scale": got["scale"],
        "draw_med": statistics.median(got["draws"]),
        "draw_p95": pct(got["draws"], 95),
        "raf_med": statistics.median(got["intervals"]),
        "raf_p95": pct(got["intervals"], 95),
        "heap_mb": heap["usedSize"] / 2**20,
    }


def expand(page, keys: list[str]) -> None:
    for k in keys:
        if k in page.evaluate("() => window.tensorviz.expanded"):
            continue
        v = page.evaluate("() => window.tensorviz.sceneVersion")
        page.evaluate("(k) => window.tensorviz.toggle(k)", k)
        page.wait_for_function("(v) => window.tensorviz.sceneVersion > v", arg=v, timeout=120_000)


def run(args) -> list[dict]:
    from playwright.sync_api import sync_playwright

    cases = [(f"grouped {int(n):,}", synthetic_capture(int(n), grouped=True, opaque_every=11), ["g1", "g2", "g3"])
             for n in args.sizes.split(",")]
    cases.append(("flat jit 5,000", synthetic_capture(5000, grouped=False, opaque_every=11),
                  ["c0:0", "c0:1", "c0:2", "c0:3"]))

    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        for name, capture, more in cases:
            server = ViewerServer([(capture, name)])
            server.start()
            t = time.perf_counter()
            server.warm()  # the index (timed apart), so first paint measures the page
            index_s = time.perf_counter() - t
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            page = context.new_page()
            cdp = context.new_cdp_session(page)
            page.goto(server.url)
            page.wait_for_function("() => window.tensorviz && window.tensorviz.ready && window.tensorviz.firstPaintMs !== null",
                                   timeout=120_000)
            first = page.evaluate("() => ({paint: window.tensorviz.firstPaintMs, layout: window.tensorviz.layoutMs,"
                                  " elk: window.tensorviz.layoutTotalMs, marks: window.tensorviz.marks})")
            opened = measure(page, cdp, args.frames)
            t = time.perf_counter()
            elk0 = page.evaluate("() => window.tensorviz.layoutTotalMs")
            expand(page, more)
            expand_s = time.perf_counter() - t
            elk1 = page.evaluate("() => window.tensorviz.layoutTotalMs")
            expanded = measure(page, cdp, args.frames)
            readable = measure(page, cdp, args.frames, "readable")
            cards = measure(page, cdp, args.frames, "cards")
            rows.append({"name": name, "index_s": index_s, "first": first, "expand_s": expand_s, "expand_elk_ms": elk1 - elk0,
                         "views": {"opened": opened, "expanded": expanded, "readable": readable, "cards": cards}})
            context.close()
            server.stop()
        browser.close()
    return rows


def report(rows: list[dict], base: dict[str, dict]) -> None:
    def pair(now: float, before: float | None, unit: str, width: int = 7, digits: int = 0) -> str:
        text = f"{now:>{width}.{digits}f}{unit}"
        if before is None:
            return text
        ratio = now / before if before else float("nan")
        return f"{before:>{width}.{digits}f}{unit} → {text} ({ratio:4.2f}×)"

    side = "before → after (ratio)" if base else ""
    print(f"{'capture':<18} {'index':>7} {'1st paint':>9} {'layout':>8} {'in ELK':>8} {'capture→':>9}  {side}")
    for r in rows:
        b = base.get(r["name"])
        f = r["first"]
        if b:
            bf = b["first"]
            print(f"{r['name']:<18} index {pair(r['index_s'] * 1000, b['index_s'] * 1000, 'ms')}; 1st paint "
                  f"{pair(f['paint'], bf['paint'], 'ms')}; layout {pair(f['layout'], bf['layout'], 'ms')}; in ELK "
                  f"{pair(f['elk'], bf['elk'], 'ms')}; capture→ {pair(f['marks'].get('capture', 0), bf['marks'].get('capture', 0), 'ms')}")
        else:
            print(f"{r['name']:<18} {r['index_s'] * 1000:>5.0f}ms {f['paint']:>7.0f}ms {f['layout']:>6.0f}ms "
                  f"{f['elk']:>6.0f}ms {f['marks'].get('capture', 0):>7.0f}ms")
    print("  index: server projection build; 1st paint: from navigation start; layout: initial request,"
          " worker round trip; capture→: when api/capture answered")
    print()
    print(f"{'capture':<18} {'view':<9} {'items':>6} {'drawn':>6} {'scale':>7} {'draw med':>9} {'draw p95':>9}"
          f" {'rAF med':>8} {'rAF p95':>8} {'heap':>8}  {side}")
    for r in rows:
        b = base.get(r["name"])
        for label, m in r["views"].items():
            line = (f"{r['name']:<18} {label:<9} {m['items']:>6} {m['drawn']:>6} {m['scale']:>7.3f} {m['draw_med']:>7.2f}ms"
                    f" {m['draw_p95']:>7.2f}ms {m['raf_med']:>6.1f}ms {m['raf_p95']:>6.1f}ms {m['heap_mb']:>6.1f}MB")
            if b:
                bm = b["views"][label]
                line += (f"  draw p95 {pair(m['draw_p95'], bm['draw_p95'], 'ms', 5, 2)}, heap "
                         f"{pair(m['heap_mb'], bm['heap_mb'], 'MB', 5, 1)}")
            print(line)
        expand_line = f"{'':<18} expanding took {r['expand_s']:.2f}s wall, {r['expand_elk_ms']:.0f}ms inside ELK"
        if b:
            expand_line += f" (before: {b['expand_s']:.2f}s wall, {b['expand_elk_ms']:.0f}ms inside ELK; ratio {r['expand_s'] / b['expand_s']:.2f}×)"
        print(expand_line)
    worst = max(max(m["draw_p95"] for m in r["views"].values()) for r in rows)
    big = [r for r in rows if r["name"].startswith("grouped 100,000")]
    print()
    if big:
        print(f"target: 100,000-node first paint < 2000 ms: {big[0]['first']['paint']:.0f} ms")
    print(f"target: pan/zoom draw p95 < 16 ms at every size: worst {worst:.2f} ms")
    print("  (scale: the view's zoom when measuring; items: laid out; drawn: most items drawn in one frame)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=int, default=240)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--baseline", help="a checkout of another version, measured the same way for comparison")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # the rows as JSON (the baseline run)
    args = ap.parse_args()
    if args.json:
        print(json.dumps(run(args)))
        return
    base = {}
    if args.baseline:
        env = {**os.environ, "TV_BENCH_ROOT": str(Path(args.baseline).resolve()), "PYTHONPATH": str(Path(args.baseline).resolve())}
        proc = subprocess.run([sys.executable, __file__, "--sizes", args.sizes, "--frames", str(args.frames), "--json"],
                              env=env, capture_output=True, text=True, check=True)
        base = {r["name"]: r for r in json.loads(proc.stdout.strip().splitlines()[-1])}
        print(f"baseline: {args.baseline}")
    report(run(args), base)


if __name__ == "__main__":
    main()
