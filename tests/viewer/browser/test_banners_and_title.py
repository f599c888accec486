"""The page's top (issue 30 item 6): the title is cut only when nothing is left for it
(the search field gives up its room first), and stacked banners take at most two lines:
the most severe and the newest, with a count that opens the others, each banner one line
whose longer text opens in place and is its title, so every banner's text stays
reachable."""

from __future__ import annotations

from pathlib import Path

import pytest

from capture.graph import graphfile
from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CAPTURES = Path(__file__).resolve().parents[1] / "real_models" / "captures"
TOP = """() => {
  const t = document.getElementById('title'), s = document.querySelector('.search');
  const holder = document.getElementById('banners');
  const banners = [...holder.querySelectorAll('.banner')].map((b) => ({
    id: b.dataset.banner, shown: b.getClientRects().length > 0, height: b.getBoundingClientRect().height,
    truncated: b.classList.contains('truncated'), open: b.classList.contains('open'),
    title: b.querySelector('.banner-text').title, text: b.querySelector('.banner-text').textContent}));
  const more = holder.querySelector('.banner-more');
  return {title: {client: t.clientWidth, scroll: t.scrollWidth}, search: s.getBoundingClientRect().width,
          searchMin: parseFloat(getComputedStyle(s).minWidth), holder: holder.getBoundingClientRect().height, banners,
          more: more.hidden ? null : {text: more.textContent, level: [...more.classList].find((c) => c !== 'banner-more'),
                                      expanded: more.getAttribute('aria-expanded')}};
}"""
LINE = 40  # px: one banner line (34 px) and its border, with room for font differences


@pytest.fixture(scope="module")
def served():
    server = ViewerServer()
    gpt2 = server.add_capture(graphfile.read(CAPTURES / "gpt2_torch.tvg"), "GPT2LMHeadModel · gpt2")
    other = server.add_capture(synthetic_capture(20), "other")
    server.start()
    try:
        yield server, gpt2, other
    finally:
        server.stop()


@pytest.mark.parametrize("width", [1280, 1600, 1920])
def test_the_title_is_cut_only_once_the_search_field_is_at_its_narrowest(browser, served, close_pages, width):
    server, gpt2, _ = served
    app = open_app(browser, server.url_for(gpt2), viewport={"width": width, "height": 800})
    close_pages.append(app)
    top = app.js(TOP)
    if top["title"]["scroll"] > top["title"]["client"] + 1:
        assert abs(top["search"] - top["searchMin"]) < 1, top
    else:
        assert top["search"] >= top["searchMin"]
    if width >= 1600:  # a title this long fits beside every tool on a 1600 px window or wider
        assert top["title"]["scroll"] - top["title"]["client"] < 0.15 * top["title"]["scroll"], top
    if width == 1920:
        assert top["title"]["scroll"] <= top["title"]["client"] + 1, top


def test_stacked_banners_take_one_line_and_a_count_opens_them(browser, served, close_pages):
    server, gpt2, other = served
    app = open_app(browser, server.url_for(gpt2), viewport={"width": 1400, "height": 800})
    close_pages.append(app)
    app.wait_subscribed(server)
    one = app.js(TOP)
    assert [b["id"] for b in one["banners"]] == ["coverage"] and one["more"] is None
    assert one["holder"] <= LINE
    server.publish("progress", {"message": "Tracing GPT2LMHeadModel…", "fraction": 0.4})
    app.page.locator("[data-banner=progress]").wait_for(state="attached")
    # the newest is also the most severe here: one line, with the capture's note behind the count
    two = app.js(TOP)
    assert [b["id"] for b in two["banners"] if b["shown"]] == ["progress"] and two["more"]["text"] == "+1 more ▾"
    # a failure ends the progress banner; a new capture's progress follows it
    server.publish("capture-failed", {"id": other, "message": "RuntimeError: mat1 and mat2 shapes cannot be multiplied", "stage": "trace"})
    server.publish("progress", {"message": "Tracing GPT2LMHeadModel…", "fraction": 0.4})
    server.publish("stale", {"files": ["model.py", "layers/attention.py"], "capture": gpt2})
    app.page.locator("[data-banner=stale]").wait_for(state="attached")
    top = app.js(TOP)
    # the most severe (the failure) and the newest (the stale warning) lead
    assert [b["id"] for b in top["banners"] if b["shown"]] == ["capture-failed", "stale"]
    assert top["holder"] <= 2 * LINE, top
    # The count names how many more, coloured by the worst it hides.
    assert top["more"] == {"text": "+2 more ▾", "level": "info", "expanded": "false"}
    app.page.click("#banners .banner-more")
    top = app.js(TOP)
    assert [b["id"] for b in top["banners"] if b["shown"]] == ["coverage", "capture-failed", "progress", "stale"]
    assert all(b["height"] <= LINE for b in top["banners"]), top["banners"]
    assert top["holder"] <= 4 * LINE and top["more"]["expanded"] == "true"
    # A banner's own action is still a plain button of its own.
    assert app.page.locator("[data-banner=capture-failed] button").all_inner_texts() == ["Show the failure"]
    app.page.click("#banners .banner-more")
    assert app.js(TOP)["holder"] <= 2 * LINE
    # Dropped banners leave one: no count.
    server.publish("fresh", {"capture": gpt2})
    app.page.locator("[data-banner=stale]").wait_for(state="detached")
    top = app.js(TOP)
    assert [b["id"] for b in top["banners"] if b["shown"]] == ["capture-failed", "progress"]
    assert top["more"]["text"] == "+1 more ▾"
    assert app.unexpected_errors() == []


def test_a_long_banner_text_is_one_line_that_opens_in_place(browser, served, close_pages):
    server, gpt2, _ = served
    app = open_app(browser, server.url_for(gpt2), viewport={"width": 1000, "height": 800})
    close_pages.append(app)
    (coverage,) = app.js(TOP)["banners"]
    # GPT-2's coverage banner (eager, and where its weights came from) is longer than 1000 px.
    assert coverage["truncated"] and coverage["height"] <= LINE
    assert coverage["title"] == coverage["text"] and "Weights from the workspace factory" in coverage["title"]
    app.page.click("[data-banner=coverage] .banner-unfold")
    (coverage,) = app.js(TOP)["banners"]
    assert coverage["open"] and coverage["height"] > LINE
    app.page.click("[data-banner=coverage] .banner-unfold")
    (coverage,) = app.js(TOP)["banners"]
    assert not coverage["open"] and coverage["truncated"] and coverage["height"] <= LINE
    # The About button stays where it was: one button in the banner.
    assert app.page.locator("[data-banner=coverage] button").all_inner_texts() == ["About this capture"]
