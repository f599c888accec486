"""The inspector on a module drawn as its one op (issue 26 items 5 and 6, the page's
part): selecting the card shows that op's view (its operands, source and measurements)
with the module named on it, one click from the module's own details; a module around
one Torch function call shows the call's operands; a group's source comes first.

GPT-2 from ``transformers`` (``real_models/captures/gpt2_torch.tvg``: ``wte`` ran one
``aten::embedding``) and a Llama-style capture built like the real one
(``layered_models.decoder_capture``: ``q_proj`` ran one ``linear`` call)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from capture.graph import graphfile
from viewer.projection.projection import Projection
from viewer.server.app import ViewerServer

from tv_browser import open_app

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from layered_models import decoder_capture  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CAPTURES = Path(__file__).resolve().parents[1] / "real_models" / "captures"
SECTIONS = "() => [...document.querySelectorAll('#insp-body h3')].map((h) => h.textContent)"
ROWS = "(s) => [...document.querySelectorAll(`#insp-body [data-section=${s}] li`)].map((li) => li.textContent)"


@pytest.fixture(scope="module")
def served():
    llama = decoder_capture(2, measured=True)
    server = ViewerServer()
    ids = SimpleNamespace(gpt2=server.add_capture(graphfile.read(CAPTURES / "gpt2_torch.tvg"), "gpt2"),
                          llama=server.add_capture(llama, "llama-style"))
    q_proj = Projection(llama).search("model.layers.0.self_attn.q_proj")["results"][0]
    server.start()
    try:
        yield SimpleNamespace(server=server, ids=ids, q_proj=q_proj)
    finally:
        server.stop()


def _open(browser, served, close_pages, which):
    app = open_app(browser, served.server.url_for(getattr(served.ids, which)))
    close_pages.append(app)
    app.js("() => localStorage.clear()")
    return app


def test_a_one_op_modules_card_shows_its_ops_operands_with_the_module_named(browser, served, close_pages):
    app = _open(browser, served, close_pages, "gpt2")
    assert app.js("() => window.tensorviz.itemInfo('g2').kind") == "group"  # the card stands for module wte
    x, y = app.item_point("g2")
    app.page.mouse.click(x, y)
    app.page.wait_for_function("() => document.getElementById('insp-title').textContent === 'aten::embedding'")
    assert app.js("() => window.tensorviz.selected") == "g2"
    assert app.js("() => document.getElementById('inspector').dataset.kind") == "node"
    module = app.page.locator("#insp-body [data-section=module] [data-module]")
    assert module.all_inner_texts() == ["Embedding · transformer.wte"]
    sections = app.js(SECTIONS)
    assert sections[0] == "Source" and sections.index("Inputs") < sections.index("Outputs") < sections.index("Measured")
    inputs = app.js(ROWS, "inputs")
    assert any("param" in r and "transformer.wte.weight" in r for r in inputs), inputs
    assert app.page.locator("#insp-body [data-section=measured] table.stats").count() == 1
    # Go to source goes to the op's line, kept for the card selected.
    app.page.locator("#insp-body [data-reveal]").first.click()
    app.page.wait_for_function("() => document.getElementById('source-view').childElementCount > 0")
    # The module's own details, one click away.
    module.click()
    app.page.wait_for_function("() => document.getElementById('insp-title').textContent === 'wte'")
    assert app.js("() => document.getElementById('inspector').dataset.kind") == "group"
    assert app.js(SECTIONS)[0] == "Source"
    assert "called at" in app.page.locator("#insp-body [data-section=group-frames]").inner_text()
    assert app.js("() => window.tensorviz.selected") == "g2"
    assert app.unexpected_errors() == []


def test_a_module_around_one_function_call_shows_the_calls_operands(browser, served, close_pages):
    app = _open(browser, served, close_pages, "llama")
    app.js("(r) => window.tensorviz.jump(r)", served.q_proj)
    app.page.wait_for_function("() => document.getElementById('insp-title').textContent === 'linear'")
    assert app.js("() => window.tensorviz.selected") == served.q_proj["key"]
    assert app.page.locator("#insp-kicker").inner_text().lower().startswith("function")
    assert app.page.locator("#insp-body [data-section=module] [data-module]").all_inner_texts() == [
        "Linear · model.layers.0.self_attn.q_proj"]
    sections = app.js(SECTIONS)
    assert sections[0] == "Source" and sections.index("Inputs") < sections.index("Outputs")
    inputs = app.js(ROWS, "inputs")
    assert inputs and inputs[0].startswith("0f32[1,8,16]")
    assert app.js(ROWS, "outputs")[0].startswith("0f32[1,8,16]")
    assert app.page.locator("#insp-body [data-section=measured] table.stats").count() == 1
    assert app.unexpected_errors() == []


def test_a_modules_source_comes_before_its_facts(browser, served, close_pages):
    app = _open(browser, served, close_pages, "gpt2")
    app.js("() => window.tensorviz.store.select('g1')")  # GPT2Model · transformer, many ops
    app.page.wait_for_function("() => document.getElementById('insp-title').textContent === 'transformer'")
    assert app.js(SECTIONS)[0] == "Source"
    assert app.page.locator("#insp-body [data-section=module]").count() == 0
    assert app.unexpected_errors() == []
