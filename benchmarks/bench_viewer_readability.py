"""Does the graph speak in layers? Real models in the viewer, in Debian's Chromium (issue 26).

    python benchmarks/bench_viewer_readability.py [--models gpt2_torch,…] [--nanogpt PATH] [--shots DIR]

Serves each real capture with the real ``viewer.server.app.ViewerServer`` in a 1600 × 1000
headless page: the checked-in ones (``tests/viewer/real_models/captures/*.tvg``: GPT-2 and
Llama 4 layers and T5 from ``transformers``, a vit-pytorch style ViT, torchvision style
ResNet-50, a ``transformers`` ResNet-18 layout, Linen ViT-B/16 and ResNet-18 in the style of
Flax's examples) and, with ``--nanogpt PATH`` (nanoGPT's own ``model.py``, e.g.
``/work/realmodels/nanogpt_model.py``), nanoGPT captured into a temporary folder through
the CLI (``tensorviz capture model.py:GPT --init 'config=GPTConfig(...)'``). It prints, per
model:

* **first view** (what opens, before anyone clicks): cards drawn (op, function, group,
  stack and chunk cards; open frames and boundary pills apart), whether the trunk the
  server names (``api/capture`` ``trunk``) is open, the zoom it opens at and its Fit zoom;
* **largest group's share**: of the first view's area, the share spent on the item (card
  or frame) holding the most ops, the frames holding the whole program aside: the
  decoder stack's frame when the trunk is open, a small card when a head opened instead;
* **one opened block**: the first block of the largest stack (else the largest group of
  the first view) opened with every module inside it (not function calls): its cards,
  how many of them are kernels (op cards of one ATen kernel, or one JAX primitive) and
  how many function calls;
* **one card per nn.Linear**: after Expand all, ``Linear`` modules drawn as exactly one
  closed card, of all ``Linear`` modules (Torch);
* **stacks**: every stack the pages fold (``label ×count``, its period), and the share of
  the model's blocks (its block class: ``GPT2Block``, ``LlamaDecoderLayer``, …) inside one;
* **overlapping edge labels** after Expand all: pairs of placed label boxes that overlap
  each other or a card of their container (``window.tensorviz.edgeLabels()``), and the
  labels dropped for want of room (the shape shows on hover);
* **drift**: the worst sideways step between consecutive repetitions of a stack after
  Expand all (``|Δ centre x| / width``: a staircase when large);
* **Fit legibility after Expand all**: the share of open frames whose name is drawn at a
  readable size at Fit (a far name, 10.5 px on screen whatever the zoom, or a header of
  at least 8 px), and how many of those stand beside their frame rather than in it.

Targets (issue 26) are printed beside the figures: every Llama/GPT/ViT block stacked, the
(Attention, FeedForward) pairs folded, zero overlapping labels, one card per
``nn.Linear``, the trunk open in the first view. It saves screenshots (``--shots DIR``,
default /tmp/shots): ``NAME_first.png`` (first view), ``NAME_fit.png`` (first view at
Fit), ``NAME_block.png`` (the opened block), ``NAME_all_fit.png`` and
``NAME_all_readable.png`` (Expand all, at Fit and at Readable). Prints figures; asserts
nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capture.graph import graphfile  # noqa: E402
from capture.graph.model import Capture  # noqa: E402
from viewer.projection.projection import Projection  # noqa: E402
from viewer.server.app import ViewerServer  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1600, "height": 1000}
CAPTURES = ROOT / "tests" / "viewer" / "real_models" / "captures"
MODELS = ("gpt2_torch", "llama_torch", "vit_torch", "t5_torch", "resnet50_torch", "resnet18_torch", "vit_linen",
          "resnet18_linen")
NANOGPT = "nanogpt"
# nanoGPT at GPT-2's layout, as small as the checked-in GPT-2 (12 blocks, width 64).
NANOGPT_INIT = "config=GPTConfig(n_layer=12, n_head=4, n_embd=64, vocab_size=128, block_size=32)"
NANOGPT_INPUT = "idx=int64[1,8]"
# The class of each model's repeated block: what "every block stacked" counts.
BLOCKS = {
    NANOGPT: ("Block",), "gpt2_torch": ("GPT2Block",), "llama_torch": ("LlamaDecoderLayer",),
    "vit_torch": ("Attention", "FeedForward"), "t5_torch": ("T5Block",), "resnet50_torch": ("Bottleneck",),
    "resnet18_torch": ("ResNetBasicLayer",), "vit_linen": ("Encoder1DBlock",), "resnet18_linen": ("ResNetBlock",),
}
# Where the issue sets "every block stacked (all layers)" and "pairs folded".
STACK_TARGET = {NANOGPT, "gpt2_torch", "llama_torch", "vit_torch", "vit_linen"}
READABLE_PX = 8.0  # a frame header smaller than this on screen is not read
OPEN_CARDS = ("node", "function", "group", "stack", "chunk")

FRAMES = "() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"
# Every laid-out item by meaning, with its box in world units.
ITEMS = """() => {
  const tv = window.tensorviz;
  const out = {};
  for (const k of tv.keys()) {
    const i = tv.itemInfo(k);
    const c = tv.card(k);
    out[k] = { kind: i.kind, card: i.card, open: i.open, title: i.title, members: i.members, box: c ? c.box : null };
  }
  return out;
}"""
SCENE = "() => { const s = window.tensorviz.sceneStats(); return { w: s.w, h: s.h, s: window.tensorviz.camera.s }; }"
FIT = """async () => {
  window.tensorviz.fit();
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  return window.tensorviz.camera.s;
}"""
READABLE = """async () => {
  window.tensorviz.readable();
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  return window.tensorviz.camera.s;
}"""
# The header font's size in world px (draw/card.js CARD_STYLE.fontHeader, "600 12px …").
HEADER_PX = "() => { const t = window.tensorviz.card(window.tensorviz.keys()[0]); return t ? t.header : null; }"


def _meets(a: dict, b: dict) -> bool:
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def _beside(far: dict) -> bool:
    """A far name that stands out of the frame it names (wider than it, or beside it)."""
    of, box = far.get("of"), far.get("box")
    if not of or not box:
        return bool(far.get("outside"))
    return box["x"] + box["w"] > of["x"] + of["w"] + 1 or box["x"] < of["x"] - 1


@dataclass
class Row:
    name: str
    ops: int
    groups: int
    first_cards: int = 0
    first_frames: int = 0
    first_zoom: float = 0.0
    first_fit: float = 0.0
    trunk: list[str] = field(default_factory=list)
    trunk_open: bool = False
    largest: str = ""
    largest_share: float = 0.0
    block: str = ""
    block_cards: int = 0
    block_kernels: int = 0
    block_calls: int = 0
    linear_one_card: int = 0
    linears: int = 0
    stacks: list[str] = field(default_factory=list)
    blocks_stacked: int = 0
    blocks_total: int = 0
    pairs_folded: bool | None = None
    label_pairs: int = 0
    label_on_card: int = 0
    labels_placed: int = 0
    labels_dropped: int = 0
    drift: float | None = None
    all_fit: float = 0.0
    frames: int = 0
    frames_named: int = 0
    frames_beside: int = 0
    errors: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- the capture


def op_counts(capture: Capture) -> tuple[list[int], dict[int, list[int]]]:
    """Ops under each group (its whole subtree) and each group's children."""
    groups = capture.groups
    under = [0] * len(groups)
    for n in capture.nodes:
        g = n.group
        while g is not None:
            under[g] += 1
            g = groups[g].parent
    children: dict[int, list[int]] = defaultdict(list)
    for g in groups:
        if g.parent is not None:
            children[g.parent].append(g.id)
    return under, children


def descendants(children: dict[int, list[int]], g: int) -> list[int]:
    out, todo = [], [g]
    while todo:
        x = todo.pop()
        out.append(x)
        todo.extend(children.get(x, ()))
    return out


def capture_nanogpt(model_py: Path, tmp: Path) -> Capture:
    """nanoGPT through the CLI's shorthand, in a workspace of its own (a copy of model.py)."""
    shutil.copy(model_py, tmp / "model.py")
    out = tmp / "nanogpt.tvg"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tensorviz_lsp", "capture", f"{tmp / 'model.py'}:GPT", "--workspace", str(tmp),
           "--init", NANOGPT_INIT, "--input", NANOGPT_INPUT, "-o", str(out)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"nanoGPT capture failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return graphfile.read(out)


# --------------------------------------------------------------------------- the page


def settle(page, quiet_ms: int = 400, limit_s: float = 30.0) -> None:
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
            break
    page.evaluate(FRAMES)


def toggle(page, key: str) -> None:
    page.evaluate("async (k) => { await window.tensorviz.toggle(k); }", key)
    settle(page, quiet_ms=200)


def reveal(page, key: str) -> bool:
    """Make ``key`` a laid-out item, unfolding the stack that holds it."""
    items = page.evaluate(ITEMS)
    if key in items:
        return True
    holder = next((k for k, i in items.items() if i["members"] and key in i["members"]), None)
    if holder is None:
        return False
    toggle(page, holder)
    return key in page.evaluate(ITEMS)


def open_block(page, block: int, inside: set[str]) -> dict[str, dict]:
    """Open group ``block`` and every module inside it (not function calls); its cards."""
    if not reveal(page, f"g{block}"):
        return {}
    for _ in range(64):
        items = page.evaluate(ITEMS)
        closed = [k for k, i in items.items() if k in inside and i["card"] in ("group", "stack") and not i["open"]]
        if not closed:
            break
        toggle(page, closed[0])
    items = page.evaluate(ITEMS)
    return {k: i for k, i in items.items() if k in inside and not i["open"] and i["card"] in OPEN_CARDS}


def first_view(page, row: Row, capture: Capture, proj: Projection, under: list[int], shots: Path | None) -> None:
    items = page.evaluate(ITEMS)
    scene = page.evaluate(SCENE)
    row.first_zoom = scene["s"]
    row.first_cards = sum(1 for i in items.values() if not i["open"] and i["card"] in OPEN_CARDS)
    row.first_frames = sum(1 for i in items.values() if i["open"])
    trunk = proj.summary()["trunk"]
    row.trunk = [t["title"] for t in trunk]
    expanded = set(page.evaluate("() => window.tensorviz.expanded"))
    row.trunk_open = bool(trunk) and trunk[-1]["key"] in expanded

    def ops(key: str, info: dict) -> int:
        if info["members"]:
            return sum(ops(m, {"members": None}) for m in info["members"] if m.startswith("g"))
        return under[int(key[1:])] if key.startswith("g") else 1

    total = len(capture.nodes)
    sized = [(ops(k, i), k, i) for k, i in items.items() if i["box"] and i["kind"] in ("group", "stack", "chunk")]
    sized = [t for t in sized if t[0] < total]
    if sized and scene["w"] and scene["h"]:
        n, k, i = max(sized, key=lambda t: t[0])
        b = i["box"]
        row.largest = f"{i['title']} ({n} ops, {'open' if i['open'] else 'closed'})"
        row.largest_share = b["w"] * b["h"] / (scene["w"] * scene["h"])
    if shots:
        page.screenshot(path=str(shots / f"{row.name}_first.png"))
    row.first_fit = page.evaluate(FIT)
    if shots:
        page.screenshot(path=str(shots / f"{row.name}_fit.png"))


def stacks_read(row: Row, views: dict, under: list[int], cls: dict[int, str | None], name: str) -> dict | None:
    """The projection's stacks into ``row`` (their labels, the model's blocks inside one,
    whether Attention/FeedForward pairs fold); the stack holding the most ops, None without one."""
    block_classes = BLOCKS.get(name, ())
    stacked: set[str] = set()
    largest_stack = None
    for v in views.values():
        for st in v["stacks"]:
            row.stacks.append(f"{st['label']} ×{st['count']}" + (f" (period {st['period']})" if st["period"] > 1 else ""))
            stacked.update(k for rep in st["members"] for k in rep)
            size = sum(under[int(k[1:])] for k in st["members"][0] if k.startswith("g"))
            if largest_stack is None or size > largest_stack[0]:
                largest_stack = (size, st)
            if tuple(st["pattern"]) == ("Attention", "FeedForward"):
                row.pairs_folded = True
    blocks = [g for g, c in cls.items() if c in block_classes and under[g] > 0]
    row.blocks_total = len(blocks)
    row.blocks_stacked = sum(1 for g in blocks if f"g{g}" in stacked)
    if name == "vit_torch" and row.pairs_folded is None:
        row.pairs_folded = False
    return largest_stack[1] if largest_stack is not None else None


def block_to_open(capture: Capture, under: list[int], largest_stack: dict | None) -> int | None:
    """The group to open: the first repetition of the largest stack, else the group holding
    the most ops short of the whole program."""
    if largest_stack is not None:
        return int(next(k for k in largest_stack["members"][0] if k.startswith("g"))[1:])
    return max((g for g in range(len(capture.groups)) if under[g] < len(capture.nodes)),
               key=lambda g: under[g], default=None)


def measure_block(page, row: Row, capture: Capture, children: dict[int, list[int]], block: int,
                  shots: Path | None) -> None:
    """Open ``block`` with every module inside it; count its cards into ``row``."""
    inside = {f"g{g}" for g in descendants(children, block)} - {f"g{block}"}
    inside |= {f"n{n.id}" for n in capture.nodes if n.group is not None and f"g{n.group}" in inside | {f"g{block}"}}
    cards = open_block(page, block, inside)
    row.block = capture.groups[block].attrs.get("path") or capture.groups[block].name
    row.block_cards = len(cards)
    row.block_kernels = sum(1 for i in cards.values() if i["card"] == "node")
    row.block_calls = sum(1 for i in cards.values() if i["card"] == "function")
    if shots:
        page.screenshot(path=str(shots / f"{row.name}_block.png"))


def labels_read(page, row: Row) -> None:
    """Edge labels placed and dropped, and those meeting another label or a card, into ``row``."""
    for c in page.evaluate("() => window.tensorviz.edgeLabels()"):
        labels = c["labels"]
        row.labels_placed += len(labels)
        row.labels_dropped += c["unlabelled"]
        for i, a in enumerate(labels):
            row.label_pairs += sum(1 for b in labels[i + 1:] if _meets(a, b))
            row.label_on_card += sum(1 for d in c["cards"] if _meets(a, d))


def stack_drift(views: dict, items: dict[str, dict]) -> float | None:
    """The worst |Δ centre x|/width between consecutive repetitions of a stack; None without two."""
    worst = None
    for v in views.values():
        for st in v["stacks"]:
            heads = [items.get(rep[0], {}).get("box") for rep in st["members"]]
            heads = [b for b in heads if b]
            for a, b in zip(heads, heads[1:]):
                d = abs((a["x"] + a["w"] / 2) - (b["x"] + b["w"] / 2)) / max(a["w"], b["w"], 1)
                worst = d if worst is None else max(worst, d)
    return worst


def frames_named_read(page, row: Row) -> None:
    """At Fit, the open frames and how many have their name drawn readable (or beside them)."""
    far = page.evaluate("() => window.tensorviz.farDrawn()")
    header = page.evaluate(HEADER_PX) or 0
    frames = [k for k, i in page.evaluate(ITEMS).items() if i["open"]]
    row.frames = len(frames)
    named = [f for f in far if f["frame"]]
    if header * row.all_fit >= READABLE_PX and not named:
        row.frames_named = row.frames  # headers are drawn, and big enough to read
    else:
        row.frames_named = min(len(named), row.frames)
        row.frames_beside = sum(1 for f in named if _beside(f))


def measure_expand_all(page, row: Row, views: dict, cls: dict[int, str | None], under: list[int],
                       shots: Path | None) -> None:
    """Expand all, then its Linear cards, edge labels, stack drift and frame names into ``row``."""
    page.keyboard.press("Escape")
    page.evaluate("async () => { await window.tensorviz.expandAll(); await window.tensorviz.settle(); }")
    settle(page)
    items = page.evaluate(ITEMS)
    linears = [g for g, c in cls.items() if c == "Linear" and under[g] > 0]
    row.linears = len(linears)
    row.linear_one_card = sum(1 for g in linears if f"g{g}" in items and not items[f"g{g}"]["open"]
                              and items[f"g{g}"]["card"] in ("function", "node"))
    labels_read(page, row)
    row.drift = stack_drift(views, items)

    row.all_fit = page.evaluate(FIT)
    frames_named_read(page, row)
    if shots:
        page.screenshot(path=str(shots / f"{row.name}_all_fit.png"))
    page.evaluate(READABLE)
    if shots:
        page.screenshot(path=str(shots / f"{row.name}_all_readable.png"))


def measure(browser, name: str, capture: Capture, shots: Path | None) -> Row:
    proj = Projection(capture)
    under, children = op_counts(capture)
    row = Row(name, len(capture.nodes), len(capture.groups))
    views = proj.subtree(-1)["views"]
    cls = {g.id: g.attrs.get("class") for g in capture.groups if isinstance(g.attrs, dict)}
    largest_stack = stacks_read(row, views, under, cls, name)

    server = ViewerServer([(capture, name)])
    server.start()
    server.warm()
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.on("pageerror", lambda e: row.errors.append(str(e)))
    try:
        page.goto(server.url)
        page.wait_for_function("() => window.tensorviz && window.tensorviz.ready && window.tensorviz.firstPaintMs !== null",
                               timeout=120_000)
        settle(page)
        first_view(page, row, capture, proj, under, shots)
        block = block_to_open(capture, under, largest_stack)  # one block opened, with every module inside it
        if block is not None:
            measure_block(page, row, capture, children, block, shots)
        measure_expand_all(page, row, views, cls, under, shots)
        return row
    finally:
        context.close()
        server.stop()


# --------------------------------------------------------------------------- report


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.1f}%"


def _mark(ok: bool) -> str:
    return "met" if ok else "NOT met"


def report(rows: list[Row]) -> None:
    print(f"viewport {VIEWPORT['width']}×{VIEWPORT['height']}; first view = what opens, before any click")
    print()
    head = (f"{'model':<15} {'ops':>4} {'1st cards':>9} {'trunk open':>10} {'largest share':>13} {'block cards':>11}"
            f" {'kernels':>7} {'calls':>5} {'Linear=1 card':>13} {'stacked':>8} {'label overlaps':>14}"
            f" {'drift':>5} {'Fit all':>7} {'named at Fit':>12}")
    print(head)
    print("-" * len(head))
    for r in rows:
        linear = f"{r.linear_one_card}/{r.linears}" if r.linears else "-"
        stacked = f"{r.blocks_stacked}/{r.blocks_total}" if r.blocks_total else "-"
        named = f"{r.frames_named}/{r.frames}" if r.frames else "-"
        print(f"{r.name:<15} {r.ops:>4} {r.first_cards:>9} {('yes' if r.trunk_open else 'no'):>10}"
              f" {_pct(r.largest_share):>13} {r.block_cards:>11} {r.block_kernels:>7} {r.block_calls:>5} {linear:>13}"
              f" {stacked:>8} {r.label_pairs + r.label_on_card:>14} {('-' if r.drift is None else f'{r.drift:.2f}'):>5}"
              f" {_pct(r.all_fit):>7} {named:>12}")
    print("  1st cards: closed cards in the first view (op, function, group, stack); largest share: of the first"
          " view's area, the item holding the most ops (whole-program frames aside); block: the first block of the"
          " largest stack opened with its modules; kernels: kernel (JAX: primitive) cards in it, calls: function cards; stacked:"
          " blocks of the model's block class inside a stack; label overlaps: after Expand all, label×label plus"
          " label×card pairs; drift: worst |Δ centre x|/width between a stack's repetitions after Expand all;"
          " named at Fit: open frames whose name is drawn readable at Fit after Expand all")
    print()
    for r in rows:
        print(f"{r.name}: {r.ops} ops, {r.groups} groups")
        print(f"  first view: {r.first_cards} cards, {r.first_frames} open frames, opens at {_pct(r.first_zoom)},"
              f" Fit {_pct(r.first_fit)}; trunk {' > '.join(r.trunk) or '(none)'}")
        print(f"  largest group in it: {r.largest or '-'}: {_pct(r.largest_share)} of the view")
        print(f"  block {r.block or '-'} opened: {r.block_cards} cards, {r.block_kernels} kernel cards,"
              f" {r.block_calls} function cards")
        print(f"  stacks ({len(r.stacks)}): {'; '.join(r.stacks[:6]) or 'none'}{' …' if len(r.stacks) > 6 else ''}")
        print(f"  after Expand all: {r.labels_placed} edge labels placed, {r.labels_dropped} dropped (shown on hover),"
              f" {r.label_pairs} label pairs overlapping, {r.label_on_card} labels over a card; Fit {_pct(r.all_fit)},"
              f" {r.frames_named}/{r.frames} frames named readably ({r.frames_beside} beside their frame)")
        if r.errors:
            print(f"  page errors: {r.errors[:3]}")
    print()
    print("targets (issue 26): every Llama/GPT/ViT block stacked; (Attention, FeedForward) pairs folded;"
          " zero overlapping labels; one card per nn.Linear; the trunk open in the first view")
    for r in rows:
        checks = [("trunk open", r.trunk_open), ("0 overlapping labels", r.label_pairs + r.label_on_card == 0)]
        if r.linears:
            checks.append(("1 card per Linear", r.linear_one_card == r.linears))
        if r.name in STACK_TARGET:
            checks.append(("every block stacked", r.blocks_total > 0 and r.blocks_stacked == r.blocks_total))
        if r.pairs_folded is not None:
            checks.append(("pairs folded", r.pairs_folded))
        print(f"  {r.name:<15} " + "  ".join(f"{label}: {_mark(ok)}" for label, ok in checks))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {', '.join(MODELS)}")
    ap.add_argument("--nanogpt", default="", help="nanoGPT's model.py, captured through the CLI (skipped when not given)")
    ap.add_argument("--shots", default="/tmp/shots", help="folder for screenshots ('' for none)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    shots = Path(args.shots) if args.shots else None
    if shots:
        shots.mkdir(parents=True, exist_ok=True)
    models: list[tuple[str, Capture]] = []
    if args.nanogpt:
        with tempfile.TemporaryDirectory(prefix="tv-nanogpt-") as tmp:
            models.append((NANOGPT, capture_nanogpt(Path(args.nanogpt), Path(tmp))))
    else:
        print("nanoGPT: skipped (no --nanogpt PATH to its model.py)")
    for name in filter(None, (m.strip() for m in args.models.split(","))):
        if name not in MODELS:
            ap.error(f"unknown model {name!r} (choose from {', '.join(MODELS)})")
        models.append((name, graphfile.read(CAPTURES / f"{name}.tvg")))
    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            for name, capture in models:
                rows.append(measure(browser, name, capture, shots))
        finally:
            browser.close()
    report(rows)
    if shots:
        print(f"\nscreenshots: {shots}/NAME_first.png, NAME_fit.png, NAME_block.png, NAME_all_fit.png,"
              " NAME_all_readable.png")


if __name__ == "__main__":
    main()
