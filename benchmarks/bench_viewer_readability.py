"""Is the picture a person opens readable? Real models in the viewer, in Debian's Chromium.

    python benchmarks/bench_viewer_readability.py [--models gpt2_torch,…] [--shots /tmp/shots]

Serves each checked-in real capture (``tests/viewer/real_models/captures/*.tvg``: a
``transformers`` ResNet-18 layout and 12-block GPT-2, a Flax Linen ResNet-18 with bound
variables) with the real ``viewer.server.app.ViewerServer`` in a 1600 × 1000 headless page
and prints, per model:

* the scene's width and height in the default view (what opens, before anyone clicks),
  and the zoom it opens at;
* the Fit zoom of that view;
* items on the first paint: laid out in the scene, and drawn in the first frame;
* parameter items: parameters, buffers, variables and constants drawn as layout items
  of their own (boundary pills whose role is param/buffer/variable/const), read through
  ``window.tensorviz.itemInfo(key)`` when the app has it, else ``pill(key)``. Items are
  counted by key, so a pill for the same value in two expanded containers counts once;
* sideways drift of sibling blocks: for each run of consecutive sibling groups of the same
  class (or Flax scope name, ``ResNetBlock_0…7``) that each hold at least ``--min-ops``
  ops, the parents are expanded, every block's rectangle is read (``itemRect(key)``) and
  ``|Δ centre x| / block width`` is taken between neighbours; the worst pair is shown.

It also saves screenshots: each model's default view (``SHOTS/NAME.png``), that view at
Fit (``SHOTS/NAME_fit.png``), and the blocks' parents expanded at Fit
(``SHOTS/NAME_blocks.png``). Targets (issue 11): taller than wide, Fit ≥ 25 %, drift ≤ 0.25,
parameter items 0. Prints figures; asserts nothing. Hooks the app may not have yet
(``itemInfo``, folded "×N" cards) are feature-tested in the page, so the script runs
against older and newer viewers.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capture.graph import graphfile  # noqa: E402
from capture.graph.model import Capture  # noqa: E402
from viewer.server.app import ViewerServer  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1600, "height": 1000}
CAPTURES = ROOT / "tests" / "viewer" / "real_models" / "captures"
MODELS = ("resnet18_torch", "gpt2_torch", "resnet18_linen")
WEIGHT_ROLES = ("param", "buffer", "variable", "const")

TARGET_FIT = 0.25
TARGET_DRIFT = 0.25

# What the page shows now. Every hook beyond the documented core is feature-tested.
VIEW_STATE = """() => {
  const tv = window.tensorviz;
  const st = tv.sceneStats ? tv.sceneStats() : null;
  return {
    scale: tv.camera ? tv.camera.s : null,
    w: st ? st.w : null,
    h: st ? st.h : null,
    items: st ? st.items : null,
    drawn: st && st.drawn ? st.drawn.items : null,
    version: tv.sceneVersion,
    expanded: tv.expanded || [],
    firstPaintMs: tv.firstPaintMs,
  };
}"""

WEIGHT_ITEMS = """(roles) => {
  const tv = window.tensorviz;
  const via = typeof tv.itemInfo === 'function' ? 'itemInfo' : typeof tv.pill === 'function' ? 'pill' : null;
  const byRole = {};
  const names = [];
  let n = 0;
  if (via) {
    for (const k of tv.keys()) {
      const info = via === 'itemInfo' ? tv.itemInfo(k) : tv.pill(k);
      const role = info ? info.role : null;
      if (!roles.includes(role)) continue;
      n++;
      byRole[role] = (byRole[role] || 0) + 1;
      if (names.length < 3) names.push(info.name);
    }
  }
  return { via, n, byRole, names };
}"""

FIT = """async () => {
  const tv = window.tensorviz;
  tv.fit();
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  return tv.camera.s;
}"""

RECTS = """(keys) => keys.map((k) => window.tensorviz.itemRect(k))"""

FRAMES = "() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"


# --------------------------------------------------------------------------- blocks


@dataclass
class Run:
    """Consecutive sibling groups of one class under one parent."""

    label: str  # "transformer.h.0…11 GPT2Block ×12"
    parent_chain: list[int]  # group ids from the top down to the parent (expand these)
    members: list[int]  # group ids, in program order
    drift: list[float] = field(default_factory=list)
    shown: int = 0


def _block_class(g) -> str:
    """What makes two sibling groups "the same block": the module class, or the scope
    name without its Flax index (``ResNetBlock_3`` → ``ResNetBlock``)."""
    if g.kind == "module" and g.attrs.get("class"):
        return str(g.attrs["class"])
    return f"{g.kind}:{re.sub(r'_[0-9]+$', '', g.name)}"


def sibling_runs(capture: Capture, min_ops: int) -> list[Run]:
    groups = capture.groups
    nodes_under = [0] * len(groups)
    first_node = [len(capture.nodes)] * len(groups)
    for n in capture.nodes:
        g = n.group
        while g is not None:
            nodes_under[g] += 1
            first_node[g] = min(first_node[g], n.id)
            g = groups[g].parent
    children: dict[int | None, list[int]] = defaultdict(list)
    for g in groups:
        children[g.parent].append(g.id)

    def chain(gid: int | None) -> list[int]:
        out = []
        while gid is not None:
            out.append(gid)
            gid = groups[gid].parent
        return out[::-1]

    runs: list[Run] = []
    for parent, kids in children.items():
        kids = sorted(kids, key=lambda i: (first_node[i], i))  # program order
        i = 0
        while i < len(kids):
            j = i
            cls = _block_class(groups[kids[i]])
            while j + 1 < len(kids) and _block_class(groups[kids[j + 1]]) == cls:
                j += 1
            members = kids[i:j + 1]
            if len(members) >= 2 and all(nodes_under[m] >= min_ops for m in members):
                first, last = groups[members[0]], groups[members[-1]]
                name = lambda g: g.attrs.get("path") or g.name  # noqa: E731
                label = f"{name(first)}…{name(last).rsplit('.', 1)[-1]} {cls.split(':')[-1]} ×{len(members)}"
                runs.append(Run(label, chain(parent), members))
            i = j + 1
    return runs


# --------------------------------------------------------------------------- the page


def settle(page, quiet_ms: int = 400, limit_s: float = 20.0) -> None:
    """Wait until the scene stops changing (no new scene version for ``quiet_ms``)."""
    end = time.monotonic() + limit_s
    last = page.evaluate("() => window.tensorviz.sceneVersion")
    quiet_since = time.monotonic()
    while time.monotonic() < end:
        page.wait_for_timeout(100)
        v = page.evaluate("() => window.tensorviz.sceneVersion")
        if v != last:
            last, quiet_since = v, time.monotonic()
        elif (time.monotonic() - quiet_since) * 1000 >= quiet_ms:
            return
    page.evaluate(FRAMES)


# The laid-out item that stands for `k` when `k` itself is not laid out: a card folding
# several identical groups ("×N", `itemInfo(key).members`), in apps that fold them.
FOLDED_IN = """(k) => {
  const tv = window.tensorviz;
  if (typeof tv.itemInfo !== 'function') return null;
  for (const key of tv.keys()) {
    const info = tv.itemInfo(key);
    if (info && Array.isArray(info.members) && info.members.includes(k)) return key;
  }
  return null;
}"""


def _toggle(page, key: str) -> None:
    v = page.evaluate("() => window.tensorviz.sceneVersion")
    page.evaluate("(k) => window.tensorviz.toggle(k)", key)
    page.wait_for_function("(v) => window.tensorviz.sceneVersion > v", arg=v, timeout=120_000)
    settle(page)


def reveal(page, key: str) -> bool:
    """Make ``key`` a laid-out item, opening a folded card that holds it; False if it is not."""
    if page.evaluate("(k) => window.tensorviz.keys().includes(k)", key):
        return True
    holder = page.evaluate(FOLDED_IN, key)
    if holder is None:
        return False
    _toggle(page, holder)
    return page.evaluate("(k) => window.tensorviz.keys().includes(k)", key)


def expand(page, keys: list[str]) -> None:
    """Expand ``keys`` (top down) that are laid out (or folded into a card) and not yet expanded."""
    for k in keys:
        if not reveal(page, k):
            continue
        if not page.evaluate("(k) => window.tensorviz.expanded.includes(k)", k):
            _toggle(page, k)


def measure_drift(page, runs: list[Run]) -> None:
    for run in runs:
        expand(page, [f"g{g}" for g in run.parent_chain])
        for g in run.members:
            reveal(page, f"g{g}")
        rects = page.evaluate(RECTS, [f"g{g}" for g in run.members])
        shown = [r for r in rects if r]
        run.shown = len(shown)
        for a, b in zip(shown, shown[1:]):
            width = (a["w"] + b["w"]) / 2
            if width > 0:
                run.drift.append(abs((b["x"] + b["w"] / 2) - (a["x"] + a["w"] / 2)) / width)


def open_model(browser, name: str, shots: Path | None, min_ops: int) -> dict:
    capture = graphfile.read(CAPTURES / f"{name}.tvg")
    server = ViewerServer([(capture, name)])
    server.start()
    server.warm()
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(server.url)
        page.wait_for_function("() => window.tensorviz && window.tensorviz.ready && window.tensorviz.firstPaintMs !== null",
                               timeout=120_000)
        first = page.evaluate(VIEW_STATE)  # as first painted
        settle(page)
        opened = page.evaluate(VIEW_STATE)
        weights = page.evaluate(WEIGHT_ITEMS, list(WEIGHT_ROLES))
        if shots:
            page.screenshot(path=str(shots / f"{name}.png"))
        fit = page.evaluate(FIT)
        if shots:
            page.screenshot(path=str(shots / f"{name}_fit.png"))
        runs = sibling_runs(capture, min_ops)
        measure_drift(page, runs)
        blocks_view = None
        if runs:
            page.keyboard.press("Escape")  # toggling selects a group; close its details panel
            page.evaluate(FRAMES)
            blocks_view = page.evaluate(VIEW_STATE)
            blocks_view["fit"] = page.evaluate(FIT)
            if shots:
                page.screenshot(path=str(shots / f"{name}_blocks.png"))
        return {
            "name": name, "nodes": len(capture.nodes), "groups": len(capture.groups), "first": first,
            "opened": opened, "weights": weights, "fit": fit, "runs": runs, "blocks_view": blocks_view,
            "errors": errors,
        }
    finally:
        context.close()
        server.stop()


# --------------------------------------------------------------------------- report


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.1f}%"


def _worst(runs: list[Run]) -> tuple[float | None, Run | None]:
    measured = [(max(r.drift), r) for r in runs if r.drift]
    if not measured:
        return None, None
    return max(measured, key=lambda t: t[0])


def report(rows: list[dict]) -> None:
    print(f"viewport {VIEWPORT['width']}×{VIEWPORT['height']}; default view = what opens, before any click")
    print()
    head = (f"{'model':<16} {'ops':>4} {'scene w×h (default view)':>25} {'taller':>6} {'opens at':>8} {'Fit':>7}"
            f" {'1st paint items':>15} {'param items':>11} {'worst drift':>11}")
    print(head)
    print("-" * len(head))
    for r in rows:
        o = r["opened"]
        size = f"{o['w']:,.0f} × {o['h']:,.0f}" if o["w"] is not None else "n/a"
        taller = "yes" if o["w"] is not None and o["h"] > o["w"] else "no"
        first = f"{r['first']['items']} / {r['first']['drawn']}"
        worst, _ = _worst(r["runs"])
        w = r["weights"]
        params = f"{w['n']}" if w["via"] else "n/a"
        print(f"{r['name']:<16} {r['nodes']:>4} {size:>25} {taller:>6} {_pct(o['scale']):>8} {_pct(r['fit']):>7}"
              f" {first:>15} {params:>11} {('n/a' if worst is None else f'{worst:.2f}'):>11}")
    print("  1st paint items: laid out / drawn in the first frame; param items: via itemInfo() or pill(),"
          " by role (param/buffer/variable/const)")
    print()
    print("parameter items by role, and sibling-block drift per run (|Δ centre x| / block width, between neighbours):")
    for r in rows:
        w = r["weights"]
        roles = ", ".join(f"{k} {v}" for k, v in sorted(w["byRole"].items())) or "none"
        print(f"  {r['name']}: parameter items {roles} (read via {w['via'] or 'no hook'}; e.g. {', '.join(map(str, w['names'])) or '-'})")
        if r["first"]["scale"] != r["opened"]["scale"] or r["first"]["items"] != r["opened"]["items"]:
            print(f"    (after settling: {r['opened']['items']} items, zoom {_pct(r['opened']['scale'])})")
        for run in r["runs"]:
            if run.drift:
                print(f"    {run.label:<46} shown {run.shown:>2}/{len(run.members):<2} worst {max(run.drift):5.2f}"
                      f"  median {statistics.median(run.drift):5.2f}")
            else:
                print(f"    {run.label:<46} shown {run.shown:>2}/{len(run.members):<2} not measurable (fewer than two laid out)")
        b = r["blocks_view"]
        if b:
            print(f"    with those parents expanded: scene {b['w']:,.0f} × {b['h']:,.0f}, {b['items']} items, Fit {_pct(b['fit'])}")
        if r["errors"]:
            print(f"    page errors: {r['errors'][:3]}")
    print()
    print("targets (issue 11): taller than wide; Fit ≥ 25 %; sibling-block drift ≤ 0.25; parameter items 0")
    for r in rows:
        o = r["opened"]
        worst, _ = _worst(r["runs"])
        checks = [
            ("taller than wide", o["w"] is not None and o["h"] > o["w"]),
            ("Fit ≥ 25 %", r["fit"] is not None and r["fit"] >= TARGET_FIT),
            ("drift ≤ 0.25", worst is not None and worst <= TARGET_DRIFT),
            ("parameter items 0", bool(r["weights"]["via"]) and r["weights"]["n"] == 0),
        ]
        print(f"  {r['name']:<16} " + "  ".join(f"{label}: {'met' if ok else 'NOT met'}" for label, ok in checks))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {', '.join(MODELS)}")
    ap.add_argument("--shots", default="/tmp/shots", help="folder for screenshots ('' for none)")
    ap.add_argument("--min-ops", type=int, default=8, help="smallest block (ops inside) counted as a sibling block")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    shots = Path(args.shots) if args.shots else None
    if shots:
        shots.mkdir(parents=True, exist_ok=True)
    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            for name in args.models.split(","):
                rows.append(open_model(browser, name.strip(), shots, args.min_ops))
        finally:
            browser.close()
    report(rows)
    if shots:
        print(f"\nscreenshots: {shots}/NAME.png (default view), NAME_fit.png (default view at Fit),"
              " NAME_blocks.png (blocks' parents expanded, at Fit)")


if __name__ == "__main__":
    main()
