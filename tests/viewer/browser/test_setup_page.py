"""A setup form's own page (``?setup=PROFILE``) in a viewer that already holds another
model's graph: the page shows that profile's form, not the newest graph (issue 15, item 1:
Open as Graph on a second model without a profile); another model's capture does not take
the page away, the capture the form starts does."""

from __future__ import annotations

import copy
import threading

import pytest

from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TINY = {
    "profile": "Tiny",
    "recipe": {
        "kind": "model", "framework": "jax", "model": "tiny:Tiny", "mode": "eval", "device": "cpu",
        "grad_enabled": False, "seed": 0, "init": {"args": [], "kwargs": {}}, "inputs": {"args": [], "kwargs": {}},
    },
    "fields": [{"name": "features", "annotation": "int", "type": "int", "default": 5, "path": "init.kwargs.features"}],
    "inputs": [{"name": "x", "path": "inputs.args[0]", "kind": "tensor", "shape": [], "unknown": ["all dimensions"],
                "dtype": "float32", "generator": {"kind": "normal"}}],
    "needs": ["x: shape (all dimensions)"],
}
NET = {**TINY, "profile": "jax_example", "recipe": {**TINY["recipe"], "model": "model:net"}, "fields": [], "needs": []}


def test_a_setup_page_shows_its_own_form_beside_another_models_graph(browser, close_pages):
    asked: list[str | None] = []
    holder: dict = {}

    def provider(profile):
        asked.append(profile)
        return copy.deepcopy({"Tiny": TINY, "jax_example": NET}.get(profile or "", TINY))

    def start_capture(profile: str) -> None:
        def work() -> None:
            holder["tiny"] = holder["server"].add_capture(synthetic_capture(60, grouped=True), f"Tiny ({profile})")

        threading.Timer(0.2, work).start()

    server = ViewerServer([(synthetic_capture(80, grouped=True), "net (jax_example)")], setup_provider=provider,
                          save_profile=lambda name, recipe: [], start_capture=start_capture)
    holder["server"] = server
    server.start()
    try:
        app = open_app(browser, server.url + "?setup=Tiny")
        close_pages.append(app)
        page = app.page
        page.locator("#setup").wait_for(state="visible")
        assert page.locator("#setup-title").inner_text() == "tiny:Tiny"
        assert page.locator("#setup-name").input_value() == "Tiny"
        assert "Set up Tiny" in page.title()
        assert asked == ["Tiny"]
        assert not page.locator("#empty").is_hidden()
        app.wait_subscribed(server)

        # Another model's capture lands: offered, not opened.
        other = server.add_capture(synthetic_capture(90, grouped=True), "net (jax_example) again")
        page.locator("[data-banner=ready]").wait_for()
        assert "capture=" not in page.url and "setup=Tiny" in page.url
        assert page.locator("#setup").is_visible()

        # The form's own capture opens, as a graph page (no ?setup any more).
        page.fill("[data-input=x] input[name=shape]", "2, 3")
        page.click("#setup-save")
        page.wait_for_url(lambda u: "capture=" in u)
        app.wait_ready()
        assert holder["tiny"] != other and f"capture={holder['tiny']}" in page.url and "setup=" not in page.url
        assert "Tiny (Tiny)" in page.title()
        assert app.unexpected_errors() == []
    finally:
        server.stop()
