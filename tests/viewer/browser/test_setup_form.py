"""The setup form: content from the server's setup provider, validation messages from its
save hook, "Save & capture" through the capture hook."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RECIPE = {
    "kind": "model",
    "framework": "jax",
    "model": "model:MLP",
    "mode": "eval",
    "device": "cpu",
    "grad_enabled": False,
    "seed": 0,
    "init": {"args": [], "kwargs": {}},
    "inputs": {"args": [{"kind": "tensor", "shape": [2, "batch"], "dtype": "float32", "requires_grad": False,
                         "generator": {"kind": "full", "value": 1}}], "kwargs": {}},
}

SETUP = {
    "profile": None,
    "recipe": RECIPE,
    "inputs": [
        {"name": "x", "path": "inputs.args[0]", "kind": "tensor", "shape": [2, "batch"], "dtype": "float32",
         "generator": {"kind": "full", "value": 1}, "unknown": ["batch"]},
    ],
    "fields": [
        {"name": "width", "annotation": "int", "type": "int", "default": 8, "path": "init.kwargs.width"},
        {"name": "use_bias", "annotation": "bool", "type": "bool", "default": True, "path": "init.kwargs.use_bias"},
        {"name": "act", "annotation": "str", "type": "str", "default": "relu", "path": "init.kwargs.act"},
    ],
    "needs": [{"path": "inputs.args[0].shape", "message": "dimension 'batch' of input x is unknown"}],
}


@pytest.fixture(scope="module")
def served():
    saved: list[tuple[str, dict]] = []
    started: list[str] = []

    def provider(profile):
        return copy.deepcopy(SETUP)

    def save(name, recipe):
        errors = []
        width = recipe.get("init", {}).get("kwargs", {}).get("width")
        if not isinstance(width, int) or width <= 0:
            errors.append({"path": "init.kwargs.width", "message": "width must be a positive integer"})
        if errors:
            return errors
        saved.append((name, recipe))
        return []

    server = ViewerServer([(synthetic_capture(200), "mlp")], setup_provider=provider, save_profile=save,
                          start_capture=started.append)
    server.start()
    try:
        yield SimpleNamespace(server=server, saved=saved, started=started)
    finally:
        server.stop()


def test_setup_form_asks_for_unknown_dimensions_validates_and_saves(browser, served, close_pages):
    app = open_app(browser, served.server.url)
    close_pages.append(app)
    page = app.page
    assert page.locator("#btn-setup").is_visible()
    form = page.locator("#setup")
    form.wait_for(state="visible")  # opened by itself: something is needed
    assert "batch" in page.locator("#setup-needs").inner_text()
    shape = page.locator("[data-input=x] input[name=shape]")
    assert shape.get_attribute("aria-invalid") == "true"
    assert page.locator("[data-input=x] select[name=dtype]").input_value() == "float32"
    assert page.locator("[data-input=x] select[name=generator]").input_value() == "full"
    # Linen annotations became fields, defaults prefilled.
    width = page.locator("[data-field=width] input")
    assert width.input_value() == "8"
    assert page.locator("[data-field=use_bias] select").input_value() == "true"
    assert page.locator("[data-field=act] input").input_value() == "relu"

    page.fill("#setup-name", "mlp_small")
    shape.fill("2, 3")
    width.fill("-4")
    page.click("#setup-save")
    page.locator("#setup-errors li").first.wait_for()
    assert "width must be a positive integer" in page.locator("#setup-errors").inner_text()
    assert width.get_attribute("aria-invalid") == "true"
    assert "width must be a positive integer" in page.locator("[data-field=width] .field-error").inner_text()
    assert served.saved == [] and served.started == []

    width.fill("16")
    page.select_option("[data-input=x] select[name=dtype]", "bfloat16")
    assert app.save_setup() == "Capture started."
    assert len(served.saved) == 1
    name, recipe = served.saved[0]
    assert name == "mlp_small"
    arg = recipe["inputs"]["args"][0]
    assert arg["shape"] == [2, 3] and arg["dtype"] == "bfloat16"
    assert arg["generator"] == {"kind": "full", "value": 1}
    assert recipe["init"]["kwargs"] == {"width": 16, "use_bias": True, "act": "relu"}
    assert recipe["framework"] == "jax" and recipe["model"] == "model:MLP"
    assert served.started == ["mlp_small"]
    page.locator("[data-banner=progress]").wait_for()


def test_a_shape_that_is_not_numbers_is_refused_before_saving(browser, served, close_pages):
    app = open_app(browser, served.server.url)
    close_pages.append(app)
    page = app.page
    page.locator("#setup").wait_for(state="visible")
    before = len(served.saved)
    page.fill("[data-input=x] input[name=shape]", "2, batch")
    page.click("#setup-save")
    page.locator("#setup-errors li").first.wait_for()
    assert "whole number" in page.locator("[data-input=x] .field-error").inner_text()
    assert len(served.saved) == before
    page.keyboard.press("Escape")
    page.keyboard.press("Escape")
    form_hidden = page.locator("#setup").is_hidden()
    assert form_hidden


def test_the_profile_name_follows_the_recipes_one_rule(browser, served, close_pages):
    """The suggested name and the check on a typed one come from capture.recipe (the
    schema): the symbol's own spelling, and a dot refused as the recipe refuses it."""
    from capture.recipe import PROFILE_NAME_RULE, profile_name

    app = open_app(browser, served.server.url)
    close_pages.append(app)
    page = app.page
    page.locator("#setup").wait_for(state="visible")
    assert page.locator("#setup-name").input_value() == profile_name("MLP") == "MLP"
    before = len(served.saved)
    page.fill("[data-input=x] input[name=shape]", "2, 3")
    page.fill("#setup-name", "mlp.small")
    page.click("#setup-save")
    page.locator("#setup-errors li").first.wait_for()
    assert f"a profile name is {PROFILE_NAME_RULE}" in page.locator("#setup-errors").inner_text()
    assert page.locator("#setup-name").get_attribute("aria-invalid") == "true"
    assert len(served.saved) == before
