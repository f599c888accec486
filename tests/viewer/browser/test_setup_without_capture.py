"""Open as Graph for a symbol with no saved profile: the server holds no capture yet, only a
setup provider. The app shows the setup form and a calm "no graph yet" state (not an error);
"Save & capture" saves, starts the capture, and the new graph opens when it is ready."""

from __future__ import annotations

import copy
import os
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOTS = os.environ.get("TENSORVIZ_SCREENSHOTS")

# What the language server's setup provider sends for the spec's Flax MLP with no profile
# (tensorviz_lsp/features/open_graph.py: setup_form): no shape yet, `width` prefilled.
SETUP = {
    "profile": "MLP",
    "recipe": {
        "kind": "model", "framework": "jax", "model": "mlp:MLP", "mode": "eval", "device": "cpu",
        "grad_enabled": False, "seed": 0, "init": {"args": [], "kwargs": {}}, "inputs": {"args": [], "kwargs": {}},
    },
    "fields": [{"name": "width", "annotation": "int", "type": "int", "default": 8, "required": False,
                "path": "init.kwargs.width"}],
    "inputs": [{"name": "x", "annotation": None, "path": "inputs.args[0]", "kwarg": False, "kind": "tensor",
                "shape": [], "unknown": ["all dimensions"], "dtype": "float32", "generator": {"kind": "normal"}}],
    "needs": ["x: shape (all dimensions)"],
}


def _shot(page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"))


@pytest.fixture
def served():
    saved: list[tuple[str, dict]] = []
    started: list[str] = []
    holder: dict = {}

    def start_capture(profile: str) -> None:
        started.append(profile)
        server = holder["server"]

        def work() -> None:  # the capture arrives a moment later, as from the worker
            server.publish("progress", {"message": "Tracing MLP…", "fraction": 0.5})
            server.add_capture(synthetic_capture(120, grouped=True), f"MLP ({profile})")

        threading.Timer(0.3, work).start()

    def provider(profile):
        form = copy.deepcopy(SETUP)
        if saved:  # as the language server does: the saved profile, nothing needed any more
            name, recipe = saved[-1]
            arg = recipe["inputs"]["args"][0]
            form.update(profile=name, recipe=recipe, needs=[])
            form["inputs"][0].update(shape=arg["shape"], unknown=[], dtype=arg["dtype"], generator=arg["generator"])
        return form

    server = ViewerServer(
        setup_provider=provider,
        save_profile=lambda name, recipe: saved.append((name, recipe)) or [],
        start_capture=start_capture,
    )
    holder["server"] = server
    server.start()
    try:
        yield SimpleNamespace(server=server, saved=saved, started=started)
    finally:
        server.stop()


def test_no_capture_yet_shows_the_setup_form_not_an_error(browser, served, close_pages):
    app = open_app(browser, served.server.url)
    close_pages.append(app)
    page = app.page
    page.locator("#setup").wait_for(state="visible")
    _shot(page, "no-capture-1-form")
    assert app.js("() => window.tensorviz.error") is None
    assert page.locator("[data-banner=load]").count() == 0, "no 'Could not load the graph' banner"
    empty = page.locator("#empty")
    assert empty.is_visible()
    assert "no graph yet" in empty.inner_text().lower()
    assert "Set up MLP" in empty.inner_text() and "Save & capture" in empty.inner_text()
    assert "Loading" not in page.locator("#title").inner_text()
    assert page.locator("#btn-setup").is_visible()
    assert page.locator("[data-field=width] input").input_value() == "8"
    shape = page.locator("[data-input=x] input[name=shape]")
    assert shape.get_attribute("aria-invalid") == "true"
    assert "needed" in page.locator("[data-input=x]").inner_text()
    assert page.evaluate("() => document.activeElement.name") == "shape", "the cursor waits in the shape field"
    assert page.locator("[data-input=x] input[name=generator-value]").is_hidden(), "normal takes no fill value"
    # The canvas tools have nothing to act on yet.
    assert not page.locator("#btn-fit").is_visible()
    assert not page.locator("#search").is_visible()

    # Closing the form leaves a way back to it.
    page.keyboard.press("Escape")
    page.keyboard.press("Escape")
    assert page.locator("#setup").is_hidden()
    page.locator("#empty button").click()
    page.locator("#setup").wait_for(state="visible")

    # An unknown shape left empty is not taken for a scalar.
    page.click("#setup-save")
    page.locator("#setup-errors li").first.wait_for()
    assert "enter the shape of x" in page.locator("[data-input=x] .field-error").inner_text()
    assert served.saved == [] and served.started == []
    shape.fill("2, 3")
    assert shape.get_attribute("aria-invalid") is None, "a whole shape settles what was needed"
    assert page.locator("[data-input=x] .need").is_hidden()
    page.click("#setup-save")
    _shot(page, "no-capture-2-started")
    # The capture becomes ready: the app opens it by itself (this page started it).
    page.wait_for_url("**/?capture=*", timeout=30_000)
    app.wait_ready()
    app.wait("() => window.tensorviz.firstPaintMs !== null")
    _shot(page, "no-capture-3-graph")
    assert app.js("() => window.tensorviz.error") is None
    assert app.painted_pixels() > 500
    assert page.locator("#empty").is_hidden()
    assert page.locator("#setup").is_hidden(), "nothing is needed any more: the graph is not covered"
    assert page.locator("#btn-fit").is_visible() and page.locator("#btn-setup").is_visible()
    assert served.started == ["MLP"]
    name, recipe = served.saved[0]
    assert name == "MLP" and recipe["inputs"]["args"][0]["shape"] == [2, 3]
    assert recipe["init"]["kwargs"] == {"width": 8}
    assert app.unexpected_errors() == []


def test_no_capture_and_no_setup_still_says_so(browser, close_pages):
    with ViewerServer() as server:
        app = open_app(browser, server.url)
        close_pages.append(app)
        assert "no capture yet" in (app.js("() => window.tensorviz.error") or "")
        assert app.page.locator("[data-banner=load]").is_visible()
        assert app.page.locator("#setup").is_hidden()
