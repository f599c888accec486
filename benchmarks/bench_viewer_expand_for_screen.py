"""Expand all laid out for the screen, against one run top to bottom, in Debian's Chromium,
side by side in one run (issue 36 item 6, issue 38 item 6).

    python benchmarks/bench_viewer_expand_for_screen.py [--capture FILE.tvg …] [--width 1400 --height 900]

For the checked-in real captures (tests/viewer/real_models/captures: a 4-layer Llama,
12-layer GPT-2, T5, ViT, ResNet-50) and any ``--capture`` given (a 405B abstract capture,
say), served by the real ``viewer.server.app``: ``window.tensorviz.expandAll({wrap:
false})`` (every container laid out in one run from top to bottom, as before) and, on a
fresh page, ``window.tensorviz.expandAll()`` (a container taller than the screen
continues in the next column). For each: Fit's zoom after it (what a person sees of the
whole model), the scene's width and height, the wall time of the action in the page, and
after Readable (``r``) whether the middle of the view holds a card and the time it took.

Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from capture.graph import graphfile  # noqa: E402
from viewer.server.app import ViewerServer  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
REAL = HERE / "tests" / "viewer" / "real_models" / "captures"
DEFAULT = ["llama_torch", "gpt2_torch", "t5_torch", "vit_torch", "resnet50_torch"]

# The item under the middle of the view after Readable: a card, or a frame's empty inside.
CENTRE = """() => {
  const tv = window.tensorviz;
  const cam = tv.camera;
  const canvas = document.querySelector('#graph').getBoundingClientRect();
  const wx = (canvas.width / 2 - cam.tx) / cam.s;
  const wy = (canvas.height / 2 - cam.ty) / cam.s;
  let hit = null;
  for (const k of tv.keys()) {
    const info = tv.itemInfo(k);
    const r = tv.itemRect(k);
    if (!r || info.open) continue;
    const [x, y] = [(r.x - cam.tx) / cam.s, (r.y - cam.ty) / cam.s];
    const [w, h] = [r.w / cam.s, r.h / cam.s];
    const d = Math.hypot(Math.max(x - wx, 0, wx - x - w), Math.max(y - wy, 0, wy - y - h));
    if (!hit || d < hit.d) hit = { d, kind: info.kind };
  }
  return hit;
}"""


def measure(browser, url: str, wrap: bool, width: int, height: int) -> dict:
    page = browser.new_page(viewport={"width": width, "height": height})
    try:
        page.goto(url)
        page.wait_for_function("() => window.tensorviz && window.tensorviz.ready", timeout=120_000)
        page.evaluate("() => localStorage.clear()")
        t0 = time.perf_counter()
        page.evaluate("(wrap) => window.tensorviz.expandAll({wrap})", wrap)
        expand_s = time.perf_counter() - t0
        page.evaluate("() => window.tensorviz.fit()")
        zoom = page.evaluate("() => window.tensorviz.camera.s")
        stats = page.evaluate("() => window.tensorviz.sceneStats()")
        t0 = time.perf_counter()
        page.evaluate("() => window.tensorviz.readable()")
        page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
        readable_s = time.perf_counter() - t0
        hit = page.evaluate(CENTRE)
        return {"zoom": zoom, "w": stats["w"], "h": stats["h"], "expand_s": expand_s, "readable_s": readable_s,
                "centre": "card" if hit and hit["d"] < 1 else f"{hit['d']:.0f} px from a card" if hit else "none"}
    finally:
        page.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--capture", action="append", default=[], help="another .tvg to measure (repeatable)")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=900)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    files = [REAL / f"{name}.tvg" for name in DEFAULT] + [Path(p) for p in args.capture]
    server = ViewerServer()
    ids = [(f.stem, server.add_capture(graphfile.read(f), f.stem)) for f in files]
    server.start()
    print(f"viewport {args.width}x{args.height}; Fit zoom after Expand all, one run top to bottom -> for the screen")
    print(f"{'capture':16} {'ops':>6} {'fit before':>10} {'fit now':>8} {'ratio':>6} {'scene before':>16} "
          f"{'scene now':>14} {'expand s':>9} {'readable s':>10} {'centre before':>16} {'centre now':>10}")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            for name, cid in ids:
                url = server.url_for(cid)
                before = measure(browser, url, False, args.width, args.height)
                now = measure(browser, url, True, args.width, args.height)
                ops = len(server._entry(str(cid)).capture.nodes)
                print(f"{name:16} {ops:>6,} {before['zoom'] * 100:>9.2f}% {now['zoom'] * 100:>7.2f}% "
                      f"{now['zoom'] / before['zoom']:>5.1f}x {before['w']:>7.0f}x{before['h']:<8.0f} "
                      f"{now['w']:>6.0f}x{now['h']:<7.0f} {now['expand_s']:>9.1f} {now['readable_s']:>10.2f} "
                      f"{before['centre']:>16} {now['centre']:>10}")
            browser.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
