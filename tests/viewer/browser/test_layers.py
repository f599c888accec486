"""The graph speaks in layers (issue 26, the browser side), on the real captures of
``tests/viewer/real_models``: a module that ran one op is that op's card with the module
named on it, modules that ran nothing are named in their parent's card, not drawn; the
first view opens the trunk and not the head beside it; after Expand all the blocks of a
stack stand in one column (Llama's decoder layers no longer step sideways), no edge label
covers another label or a card, and at Fit every frame is still named (semantic zoom);
the Kernels toggle asks for every kernel and back.

Checked by meaning through ``window.tensorviz`` hooks, not by pixels."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from capture.graph import graphfile
from viewer.projection.projection import Projection
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CAPTURES = Path(__file__).resolve().parents[1] / "real_models" / "captures"
VIEW = {"width": 1600, "height": 1000}
INFOS = "() => Object.fromEntries(window.tensorviz.keys().map((k) => [k, window.tensorviz.itemInfo(k)]))"


@pytest.fixture(scope="module")
def served():
    server = ViewerServer()
    ids = SimpleNamespace(
        gpt2=server.add_capture(graphfile.read(CAPTURES / "gpt2_torch.tvg"), "gpt2"),
        llama=server.add_capture(graphfile.read(CAPTURES / "llama_torch.tvg"), "llama"),
    )
    server.start()
    try:
        yield SimpleNamespace(server=server, ids=ids)
    finally:
        server.stop()


def _open(browser, served, close_pages, which):
    app = open_app(browser, served.server.url_for(getattr(served.ids, which)), viewport=VIEW)
    close_pages.append(app)
    app.js("() => localStorage.clear()")
    return app


def _meets(a, b) -> bool:
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def test_a_one_op_module_is_its_op_card_with_the_module_named_and_idle_modules_are_listed(browser, served, close_pages):
    app = _open(browser, served, close_pages, "gpt2")
    infos = app.js(INFOS)
    # wte and wpe ran one aten::embedding each: drawn as that op, the module on its caption,
    # titled by the function it ran under (`F.embedding`, recorded on the kernel: issue 26)
    singles = {i["caption"]: i for i in infos.values() if i["caption"]}
    assert {"wte · Embedding", "wpe · Embedding"} <= set(singles)
    assert singles["wte · Embedding"]["card"] == "node" and singles["wte · Embedding"]["title"] == "embedding"
    assert singles["wte · Embedding"]["weights"] == ["transformer.wte.weight"]
    # an idle module (the eval-mode dropout) is no box of its own, but its parent names it
    assert not [k for k, i in infos.items() if i["server"] == "idle"]
    transformer = next(i for i in infos.values() if i["role"] == "GPT2Model")
    assert transformer["open"] and transformer["title"] == "GPT2Model · transformer"
    # a one-op module does not open: it is all there is
    key = next(k for k, i in infos.items() if i["caption"] == "wte · Embedding")
    assert app.js("(k) => window.tensorviz.store.canOpen(k)", key) is False
    assert app.unexpected_errors() == []


def test_the_first_view_opens_the_trunk_and_keeps_the_head_beside_it_closed(browser, served, close_pages):
    app = _open(browser, served, close_pages, "llama")
    trunk = Projection(graphfile.read(CAPTURES / "llama_torch.tvg"))
    path = trunk.trunk()
    assert len(path) == 2  # LlamaForCausalLM, then LlamaModel · model
    expanded = set(app.js("() => window.tensorviz.expanded"))
    infos = app.js(INFOS)
    model = next(k for k, i in infos.items() if i["role"] == "LlamaModel")
    assert model in expanded
    # the four decoder layers are one stack card; lm_head, beside the trunk, stays closed
    stacks = [i for i in infos.values() if i["kind"] == "stack"]
    assert len(stacks) == 1 and len(stacks[0]["members"]) == 4
    heads = [k for k, i in infos.items() if i["name"] == "lm_head" or (i["caption"] or "").startswith("lm_head")]
    assert len(heads) == 1 and heads[0] not in expanded
    # the trunk ends on the decoder stack: the rotary embedding beside it (a stem of
    # kernels) stays a card, so the first screen shows the layers, not its ops
    rotary = [k for k, i in infos.items() if i["role"] == "LlamaRotaryEmbedding"]
    assert len(rotary) == 1 and rotary[0] not in expanded
    assert app.unexpected_errors() == []


def test_expand_all_lays_a_stack_out_in_columns_with_no_label_over_a_label_or_a_card(browser, served, close_pages):
    app = _open(browser, served, close_pages, "llama")
    app.js("async () => { await window.tensorviz.expandAll(); }")
    infos = app.js(INFOS)
    layers = [k for k, i in infos.items() if i["role"] == "LlamaDecoderLayer"]
    assert len(layers) == 4 and all(infos[k]["open"] for k in layers)
    rects = [app.item_rect(k) for k in layers]
    # Laid out for the screen (issue 36 item 6): the layers continue in the next column
    # rather than one thin column, each column's blocks aligned, in reading order.
    columns: list[list[dict]] = []
    for r in rects:
        if columns and r["y"] > columns[-1][-1]["y"] and abs(r["x"] - columns[-1][-1]["x"]) < 0.02 * r["w"]:
            columns[-1].append(r)
        else:
            assert not columns or r["x"] >= columns[-1][-1]["x"] + columns[-1][-1]["w"] - 0.5, rects
            columns.append([r])
    assert len(columns) >= 2, rects
    placed = 0
    for c in app.js("() => window.tensorviz.edgeLabels()"):
        labels = c["labels"]
        placed += len(labels)
        for i, a in enumerate(labels):
            assert not [b for b in labels[i + 1:] if _meets(a, b)], f"{c['key']}: {a['text']} covers another label"
            assert not [d for d in c["cards"] if _meets(a, d)], f"{c['key']}: {a['text']} covers a card"
    assert placed > 100
    assert app.unexpected_errors() == []


def test_at_fit_after_expand_all_every_block_is_still_named(browser, served, close_pages):
    app = _open(browser, served, close_pages, "gpt2")
    app.js("async () => { await window.tensorviz.expandAll(); }")
    app.js("() => window.tensorviz.fit()")
    assert app.js("() => window.tensorviz.camera.s") < 0.2  # far below the titles' level of detail (0.6)
    app.js("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
    far = app.js("() => window.tensorviz.farDrawn()")
    names = [f["full"] for f in far if f["frame"]]
    # the blocks are named, class and path, with how many ops each holds
    blocks = [f for f in far if f["frame"] and f["full"].endswith("· GPT2Block")]
    assert len(blocks) >= 10 and all(f["sub"] == "35 ops" for f in blocks), names
    boxes = [f["box"] for f in far]
    assert not [1 for i, a in enumerate(boxes) for b in boxes[i + 1:] if _meets(a, b)]  # no name over a name
    assert app.unexpected_errors() == []


def test_the_kernels_toggle_asks_for_every_kernel_and_back(browser, served, close_pages):
    app = _open(browser, served, close_pages, "gpt2")
    app.js("async () => { await window.tensorviz.expandAll(); }")
    nodes = lambda: len([k for k in app.keys() if k.startswith("n")])  # noqa: E731
    layers = nodes()
    views = Projection(graphfile.read(CAPTURES / "gpt2_torch.tvg")).subtree(-1, kernels=True)["views"]
    every = sum(1 for v in views.values() for it in v["items"] if it["type"] == "node")
    assert every > layers  # GPT-2 has a bookkeeping op the default pages elide
    app.page.click("#btn-kernels")
    app.wait("() => window.tensorviz.kernels === true")
    app.wait("(n) => window.tensorviz.keys().filter((k) => k.startsWith('n')).length > n", layers, timeout=60_000)
    assert nodes() <= every
    assert app.page.locator("#btn-kernels").get_attribute("aria-pressed") == "true"
    assert app.js("async () => await window.tensorviz.setKernels(false)") is True
    assert nodes() == layers and app.js("() => window.tensorviz.kernels") is False
    assert app.unexpected_errors() == []
