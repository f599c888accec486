"""The capture summary ("About this capture") lists the RNG streams the worker recorded
in ``meta["rng_streams"]``, each with where its key came from."""

from __future__ import annotations

import pytest

from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import make_workspace, open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

STREAMS = [
    {"name": "lstm", "origin": "bound", "where": "model.bind(variables, rngs=...)",
     "note": "bound by seq2seq:bound_model with model.bind(variables, rngs=...)"},
    {"name": "dropout", "origin": "seed", "where": "seed 3",
     "note": "derived from seed 3 and the stream name (jax.random.fold_in(jax.random.key(3), "
             "zlib.crc32('dropout'.encode()) & 0x7FFFFFFF))"},
    {"name": "sample", "origin": "input", "where": "rngs.sample", "note": "given as input"},
]


def test_about_this_capture_lists_the_streams(browser, close_pages, tmp_path):
    ws = make_workspace(tmp_path / "ws")
    cap = synthetic_capture(30, grouped=True)
    cap.meta = {"model_kind": "linen", "device": "cpu", "rng_streams": STREAMS}
    plain = synthetic_capture(30, grouped=True)
    plain.meta = {"model_kind": "function"}
    server = ViewerServer(workspace=ws)
    with_streams = server.add_capture(cap, "seq2seq")
    without = server.add_capture(plain, "plain")
    server.start()
    try:
        app = open_app(browser, server.url_for(with_streams))
        close_pages.append(app)
        app.page.locator("#title").click()
        app.page.wait_for_function("() => document.getElementById('inspector').dataset.kind === 'capture'")
        section = app.page.locator("#inspector [data-section=rng-streams]")
        names = section.locator("dt").all_inner_texts()
        assert names == ["lstm", "dropout", "sample"]
        assert [section.locator("dt").nth(i).get_attribute("data-origin") for i in range(3)] == ["bound", "seed", "input"]
        details = section.locator("dd").all_inner_texts()
        assert details[0] == "bound by seq2seq:bound_model with model.bind(variables, rngs=...)"
        assert details[1].startswith("derived from seed 3 and the stream name (jax.random.fold_in(")
        assert details[2] == "given as input (rngs.sample)"
        assert "random streams" in app.page.locator("#inspector h3").all_inner_texts()[-1].lower()
        app.page.screenshot(path=str(tmp_path / "rng-streams.png"))
        assert app.unexpected_errors() == []

        other = open_app(browser, server.url_for(without))
        close_pages.append(other)
        other.page.locator("#title").click()
        other.page.wait_for_function("() => document.getElementById('inspector').dataset.kind === 'capture'")
        assert other.page.locator("#inspector [data-section=rng-streams]").count() == 0
    finally:
        server.stop()
