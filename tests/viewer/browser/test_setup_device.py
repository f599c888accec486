"""The setup form's Device choice (issue 47): cpu, cuda:0 and, for JAX, tpu, prefilled from
the saved device (one outside the usual choices, ``tpu:1``, is offered too) and saved as
the recipe's ``device``."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from synthetic import synthetic_capture
from tensorviz_lsp.features.setup_form import _device_choice
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SETUP = {
    "profile": "tpu",
    "recipe": {"kind": "model", "framework": "jax", "model": "m:net", "mode": "eval", "device": "tpu:1",
               "grad_enabled": False, "seed": 0, "init": {"args": [], "kwargs": {}},
               "inputs": {"factory": "m:batch"}},
    "inputs": [],
    "fields": [],
    "needs": [],
    "factories": {"init": None, "inputs": {"value": "m:batch", "placeholder": "", "contract": "the inputs"}},
    "device": _device_choice("tpu:1", "jax"),
}


def test_device_choices_follow_the_framework():
    assert [c["value"] for c in _device_choice(None, "jax")["choices"]] == ["cpu", "cuda:0", "tpu"]
    assert [c["value"] for c in _device_choice("cuda:2", "torch")["choices"]] == ["cpu", "cuda:0", "cuda:2"]
    assert _device_choice(None, "torch")["value"] == "cpu"


@pytest.fixture(scope="module")
def served():
    saved: list[tuple[str, dict]] = []

    def save(name, recipe):
        saved.append((name, recipe))
        return []

    server = ViewerServer([(synthetic_capture(50), "net")], setup_provider=lambda profile: copy.deepcopy(SETUP),
                          save_profile=save, start_capture=lambda name: None)
    server.start()
    try:
        yield SimpleNamespace(server=server, saved=saved)
    finally:
        server.stop()


def test_the_device_field(browser, served, close_pages):
    app = open_app(browser, served.server.url)
    close_pages.append(app)
    page = app.page
    page.click("#btn-setup")
    select = page.locator("#setup-device select[name=device]")
    select.wait_for()
    assert select.input_value() == "tpu:1"
    options = select.locator("option").all_inner_texts()
    assert [o.split(":")[0] for o in options[:3]] == ["cpu", "cuda", "tpu"]
    assert "no accelerator" in options[0]
    app.save_setup()
    assert served.saved[-1][1]["device"] == "tpu:1"
    select.select_option("cpu")
    app.save_setup()
    assert served.saved[-1][1]["device"] == "cpu"
