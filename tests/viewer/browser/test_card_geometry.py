"""One card geometry for the layout worker and the page (viewer/static/draw/card.js): the
worker (a module worker importing it) sizes the cards it lays out, the page draws them.
On a real capture (the 12-block GPT-2 of ``tests/viewer/real_models``, first view and
Expand all) and on control-flow boundaries with bodies, every card the worker laid out has
exactly the size the page measures for the same content, and what the page draws in it
fits: every text inside the card's padding, clear of its toggle, and whole wherever the
card was not clamped to the widest card."""

from __future__ import annotations

from pathlib import Path

import pytest

from capture.graph import graphfile
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CAPTURE = Path(__file__).resolve().parents[1] / "real_models" / "captures" / "gpt2_torch.tvg"
CARDS = "() => window.tensorviz.keys().map((k) => [k, window.tensorviz.card(k)])"


def misfits(cards: list) -> list[str]:
    """What does not fit: a laid-out size that is not the measured one, a text outside the
    padding or over a toggle, a text cut short in a card that had room to grow."""
    out = []
    for key, c in cards:
        box, m = c["box"], c["measured"]
        if c["open"]:
            # A frame is measured from its inside; a box held for it may only be larger.
            if box["w"] < m["w"] or box["h"] < m["h"]:
                out.append(f"{key}: frame {box['w']}x{box['h']} smaller than its inside needs {m['w']}x{m['h']}")
        elif (box["w"], box["h"]) != (m["w"], m["h"]):
            out.append(f"{key}: laid out {box['w']}x{box['h']}, measured {m['w']}x{m['h']}")
        left, right = box["x"] + c["padX"] - 0.5, box["x"] + box["w"] - c["padX"] + 0.5
        for t in c["texts"]:
            if t["x"] < box["x"] or t["x"] + t["w"] > right or not box["y"] <= t["y"] <= box["y"] + box["h"]:
                out.append(f"{key}: {t['text']!r} at x {t['x']:.1f}..{t['x'] + t['w']:.1f} outside {left:.1f}..{right:.1f}")
            if not c["open"] and t["x"] < left:
                out.append(f"{key}: {t['text']!r} starts in the padding")
            for g in c["toggles"]:
                if abs(t["y"] - g["cy"]) < g["r"] and t["x"] < g["cx"] + g["r"] and t["x"] + t["w"] > g["cx"] - g["r"]:
                    out.append(f"{key}: {t['text']!r} runs over the toggle")
            if not c["open"] and box["w"] < c["maxWidth"] and t["text"] not in c["says"]:
                out.append(f"{key}: {t['text']!r} cut short in a {box['w']}-wide card")
    return out


@pytest.fixture(scope="module")
def gpt2():
    server = ViewerServer([(graphfile.read(CAPTURE), "gpt2_torch")])
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_the_worker_lays_out_cards_at_the_size_the_page_measures_and_draws(browser, gpt2, close_pages):
    app = open_app(browser, gpt2.url)
    close_pages.append(app)
    app.js("() => window.tensorviz.readable()")
    first = app.js(CARDS)
    kinds = {c["kind"] for _, c in first}
    assert {"node", "stack", "in", "out"} <= kinds and any(c["open"] for _, c in first)
    assert any(c["toggles"] for _, c in first if c["kind"] == "stack")
    assert misfits(first) == []
    app.js("() => window.tensorviz.expandAll()")
    assert app.js("() => window.tensorviz.estimatedKeys()") == []
    opened = app.js(CARDS)
    assert len(opened) > 400
    # Op cards listing their weights (bullets, names that lose their start) are among them:
    # the LM head's, a function call (`linear`, issue 26) drawn as its module's card.
    weighted = [c for k, c in opened if c["kind"] in ("node", "group") and not c["open"]
                and any(t["text"].startswith("…") for t in c["texts"][1:])]
    assert weighted
    assert misfits(opened) == []
    assert app.unexpected_errors() == []


def test_a_boundary_that_opens_has_its_toggle_in_its_measured_title_row(browser, close_pages):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from jax import lax

    from capture.jax.convert import convert

    def rnn(w, xs):
        def step(h, x):
            return jnp.tanh(h @ w + x), h.sum()

        h, ys = lax.scan(step, jnp.zeros(3, jnp.float32), xs)
        return lax.cond(h.sum() > 0, lambda v: v + 1.0, lambda v: jnp.cos(v) * 2.0, h), ys

    cap = convert(jax.make_jaxpr(rnn)(jnp.ones((3, 3), jnp.float32), jnp.ones((5, 3), jnp.float32)))
    server = ViewerServer([(cap, "rnn")])
    server.start()
    try:
        app = open_app(browser, server.url)
        close_pages.append(app)
        app.js("() => window.tensorviz.readable()")
        cards = app.js(CARDS)
        boundaries = [c for _, c in cards if c["kind"] == "node" and c["toggles"]]
        assert len(boundaries) >= 2  # the scan and the cond
        for c in boundaries:
            (title,) = [t for t in c["texts"] if t["text"] == c["says"][0]]
            assert title["y"] == c["toggles"][0]["cy"]  # on the title row, beside the "opaque" tag
            assert "opaque" in [t["text"] for t in c["texts"]]
        assert misfits(cards) == []
    finally:
        server.stop()
