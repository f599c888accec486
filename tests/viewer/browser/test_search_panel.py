"""The search panel on a real capture (issue 26 item 6, the page's part): GPT-2 from
``transformers`` (``real_models/captures/gpt2_torch.tvg``). A module path finds the
module; results are listed under the layer that holds them (a heading per layer with its
title and count); every row tells its result apart (kind, label, class, where it sits,
shape); filters by op, class, shape and dtype are offered from what the results hold and
typed inline (`class:GPT2Attention`, `op:addmm`); arrows and Enter pick in the order
listed; nothing found says so and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from capture.graph import graphfile
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CAPTURES = Path(__file__).resolve().parents[1] / "real_models" / "captures"

LISTED = """() => [...document.querySelectorAll('#search-list > li')].map((li) => li.classList.contains('layer-head')
  ? {head: li.querySelector('.layer-title').textContent, count: Number(li.querySelector('.layer-count').textContent), layer: li.dataset.layer}
  : li.getAttribute('role') === 'option'
    ? {key: li.dataset.key, type: li.dataset.type, selected: li.getAttribute('aria-selected') === 'true',
       label: li.querySelector('.rlabel').firstChild.textContent, cls: li.querySelector('.rclass')?.textContent ?? null,
       shape: li.querySelector('.rshape').textContent, why: li.querySelector('.rwhy').textContent,
       reads: [...li.children].map((c) => c.classList.contains('rlabel')
         ? [...c.childNodes].filter((n) => !(n.classList && n.classList.contains('rkey'))).map((n) => n.textContent).join('')
         : c.textContent).join(' | ')}
    : {other: li.textContent})"""
FILTERS = """() => Object.fromEntries([...document.querySelectorAll('#search-filters select')].map((s) => [s.dataset.filter,
  {value: s.value, disabled: s.disabled, on: s.closest('.filter').classList.contains('on'),
   options: [...s.options].map((o) => o.value)}]))"""
SUMMARY = "() => document.getElementById('search-summary').textContent"


@pytest.fixture(scope="module")
def served():
    server = ViewerServer([(graphfile.read(CAPTURES / "gpt2_torch.tvg"), "gpt2")])
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def app(browser, served, close_pages):
    a = open_app(browser, served.url, viewport={"width": 1600, "height": 1000})
    close_pages.append(a)
    a.js("() => localStorage.clear()")
    return a


def _search(app, text: str, *, until: str = "li[role=option]") -> list[dict]:
    app.page.fill("#search", "")
    app.page.fill("#search", text)
    app.page.wait_for_function(
        "([t, sel]) => !document.getElementById('search-results').hidden && document.getElementById('search').value === t"
        " && document.getElementById('search-list').dataset.query === t && (sel === '' || document.querySelector('#search-list ' + sel))",
        arg=[text, until])
    return app.js(LISTED)


def _heads_and_rows(listed):
    heads = [x for x in listed if "head" in x]
    rows = [x for x in listed if "key" in x]
    return heads, rows


def _group_of(path: str) -> str:
    """The item key of the module group at ``path`` (ids change when the capture is regenerated)."""
    (g,) = [g for g in graphfile.read(CAPTURES / "gpt2_torch.tvg").groups
            if g.kind == "module" and g.attrs.get("path") == path]
    return f"g{g.id}"


def test_a_module_path_finds_the_module_listed_under_its_layer_and_enter_reveals_it(app):
    layer, mlp = _group_of("transformer.h.0"), _group_of("transformer.h.0.mlp")
    listed = _search(app, "transformer.h.0.mlp")
    assert listed[0] == {"head": "GPT2Block · transformer.h.0", "count": len(listed) - 1, "layer": layer}
    first = listed[1]
    assert (first["type"], first["label"], first["cls"], first["key"], first["selected"]) == (
        "group", "transformer.h.0.mlp", "GPT2MLP", mlp, True)
    assert first["shape"] == "f32[1,8,64]" and "module path" in first["why"]
    app.page.keyboard.press("Enter")
    app.wait(f"() => window.tensorviz.selected === '{mlp}'")
    assert mlp in app.keys()
    assert app.page.locator("#search-results").is_hidden()
    assert app.unexpected_errors() == []


def test_results_are_grouped_by_layer_and_no_two_rows_read_alike(app):
    listed = _search(app, "mlp")
    heads, rows = _heads_and_rows(listed)
    # Twelve blocks, each a heading with its class and path, in order of first appearance.
    assert [h["head"] for h in heads][:12] == [f"GPT2Block · transformer.h.{k}" for k in range(12)]
    # Every heading counts the rows under it, up to the next heading.
    position = 0
    for h in heads:
        i = listed.index(h, position)
        under = 0
        for x in listed[i + 1:]:
            if "head" in x:
                break
            under += "key" in x
        assert h["count"] == under, h
        position = i + 1
    # Each block's MLP module is under its own block, labelled by its full path.
    for k, h in enumerate(heads[:12]):
        i = listed.index(h)
        assert any(x.get("label") == f"transformer.h.{k}.mlp" and x.get("cls") == "GPT2MLP" for x in listed[i + 1:i + 1 + h["count"]])
    reads = [r["reads"] for r in rows]
    assert len(set(reads)) == len(reads), [x for x in reads if reads.count(x) > 1][:4]
    assert "108 matches in 12 layers" in app.js(SUMMARY) and "first 50 shown" in app.js(SUMMARY)


def test_an_inline_class_filter_narrows_and_shows_as_typed(app):
    listed = _search(app, "class:GPT2Attention")
    heads, rows = _heads_and_rows(listed)
    assert rows and all(".attn" in r["why"] for r in rows), [r for r in rows if ".attn" not in r["why"]][:3]
    assert heads[0]["head"] == "GPT2Block · transformer.h.0"
    f = app.js(FILTERS)
    assert f["class"]["disabled"] and f["class"]["on"] and f["class"]["value"] == "gpt2attention"
    assert not f["op"]["on"] and f["op"]["value"] == ""


def test_filter_controls_offer_what_the_results_hold_and_narrow_them(app):
    _search(app, "transformer.h.1")
    f = app.js(FILTERS)
    assert {"GPT2MLP", "GPT2Attention", "Conv1D", "GPT2Block"} <= set(f["class"]["options"])
    assert "f32" in f["dtype"]["options"] and "f32[1,8,64]" in f["shape"]["options"]
    # Every op inside the blocks' MLPs (typed), then only their addmm (chosen).
    _search(app, "class:GPT2MLP")
    f = app.js(FILTERS)
    assert {"aten::addmm", "aten::mul.Tensor", "aten::tanh"} <= set(f["op"]["options"]), f["op"]["options"]
    app.page.select_option("#search-filters select[data-filter=op]", "aten::addmm")
    app.page.wait_for_function("() => document.querySelectorAll('#search-list li[role=option]').length === 24")
    heads, rows = _heads_and_rows(app.js(LISTED))
    assert {r["label"] for r in rows} == {"aten::addmm"}
    # c_fc and c_proj of each of the twelve blocks, under the block that holds them.
    assert [h["head"] for h in heads] == [f"GPT2Block · transformer.h.{k}" for k in range(12)]
    assert [h["count"] for h in heads] == [2] * 12
    assert [r["why"].split(" · ")[0] for r in rows[:2]] == ["transformer.h.0.mlp.c_fc", "transformer.h.0.mlp.c_proj"]
    f = app.js(FILTERS)
    assert f["op"]["on"] and f["op"]["value"] == "aten::addmm" and f["class"]["value"] == "gpt2mlp"
    # The controls are made again with the answer: the one used keeps the keyboard.
    assert app.js("() => document.activeElement.dataset.filter") == "op"
    # A second filter narrows further; the chip's × removes it again.
    app.page.select_option("#search-filters select[data-filter=shape]", "f32[8,256]")
    app.page.wait_for_function("() => document.querySelectorAll('#search-list li[role=option]').length === 12")
    assert all(r["why"].split(" · ")[0].endswith(".mlp.c_fc") for r in _heads_and_rows(app.js(LISTED))[1])
    app.page.click("#search-filters .filter[data-filter=shape] .clear")
    app.page.wait_for_function("() => document.querySelectorAll('#search-list li[role=option]').length === 24")
    app.page.click("#search-filters .filter[data-filter=op] .clear")
    app.page.wait_for_function("() => !document.querySelector('#search-filters select[data-filter=op]').closest('.filter').classList.contains('on')"
                               " && document.querySelectorAll('#search-list li[role=option]').length > 24")


def test_an_inline_op_filter_alone_lists_every_such_op(app):
    listed = _search(app, "op:addmm")
    heads, rows = _heads_and_rows(listed)
    assert rows and {r["label"] for r in rows} == {"aten::addmm"}
    assert [h["head"] for h in heads][:2] == ["GPT2Block · transformer.h.0", "GPT2Block · transformer.h.1"]
    assert app.js(SUMMARY).startswith("48 matches in")


def test_arrows_move_through_the_rows_as_listed_and_enter_reveals_the_one_chosen(app):
    listed = _search(app, "mlp")
    _, rows = _heads_and_rows(listed)
    app.page.keyboard.press("ArrowDown")
    app.page.keyboard.press("ArrowDown")
    chosen = [r for r in app.js(LISTED) if r.get("selected")]
    assert [r["key"] for r in chosen] == [rows[2]["key"]]
    assert app.js("() => document.getElementById('search').getAttribute('aria-activedescendant')") == "search-opt-2"
    app.page.keyboard.press("ArrowUp")
    app.page.keyboard.press("ArrowUp")
    app.page.keyboard.press("ArrowUp")  # wraps to the last row
    assert [r["key"] for r in app.js(LISTED) if r.get("selected")] == [rows[-1]["key"]]
    app.page.keyboard.press("ArrowDown")
    app.page.keyboard.press("ArrowDown")
    app.page.keyboard.press("ArrowDown")  # rows[2] again, past the first layer's heading order
    target = rows[2]
    app.page.keyboard.press("Enter")
    if target["type"] == "value":
        app.wait("() => document.getElementById('inspector').dataset.kind === 'value'")
    else:
        app.wait("(k) => window.tensorviz.selected === k", target["key"])


def test_nothing_found_says_so_and_how_to_search(app):
    listed = _search(app, "zzz_no_such_thing", until="")
    app.page.wait_for_function("() => document.getElementById('search-summary').classList.contains('none')")
    assert [x for x in listed if "key" in x] == []
    text = app.js(SUMMARY)
    assert text.startswith("No match for “zzz_no_such_thing”.") and "module path" in text
    # With a filter, the message names it.
    _search(app, "zzz_no_such_thing dtype:f32", until="")
    app.page.wait_for_function("() => document.getElementById('search-summary').textContent.includes('dtype f32')")
    assert "Remove a filter" in app.js(SUMMARY)
    assert app.unexpected_errors() == []
