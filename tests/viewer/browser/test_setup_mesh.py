"""The setup form's Mesh field (issue 34): offered with what "simulated" means, prefilled
from a saved mesh, and sent as the recipe's text (``data=4,model=2``, which the recipe
reads as its mesh table); emptied, no mesh."""

from __future__ import annotations

import copy
import os
from types import SimpleNamespace

import pytest

from synthetic import synthetic_capture
from tensorviz_lsp.features.setup_form import MESH_HELP
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOTS = os.environ.get("TENSORVIZ_SHOTS")

SETUP = {
    "profile": "fsdp",
    "recipe": {"kind": "model", "framework": "jax", "model": "train:step", "mode": "eval", "device": "cpu",
               "grad_enabled": False, "seed": 0, "init": {"args": [], "kwargs": {}},
               "inputs": {"factory": "train:batch"}, "mesh": {"data": 2, "model": 4}},
    "inputs": [],
    "fields": [],
    "needs": [],
    "factories": {"init": None, "inputs": {"value": "train:batch", "placeholder": "", "contract": "the inputs"}},
    "mesh": {"value": "data=2,model=4", "placeholder": "data=4,model=2", "help": MESH_HELP},
}


@pytest.fixture(scope="module")
def served():
    saved: list[tuple[str, dict]] = []

    def save(name, recipe):
        saved.append((name, recipe))
        return []

    server = ViewerServer([(synthetic_capture(50), "step")], setup_provider=lambda profile: copy.deepcopy(SETUP),
                          save_profile=save, start_capture=lambda name: None)
    server.start()
    try:
        yield SimpleNamespace(server=server, saved=saved)
    finally:
        server.stop()


def test_the_mesh_field(browser, served, close_pages):
    app = open_app(browser, served.server.url)
    close_pages.append(app)
    page = app.page
    page.click("#btn-setup")
    field = page.locator("#setup-mesh input[name=mesh]")
    field.wait_for()
    assert field.input_value() == "data=2,model=4"
    assert "simulated" in page.locator("#setup-mesh small").inner_text()
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, "setup-mesh.png"))
    field.fill("data=4, model=2:explicit")
    app.save_setup()
    assert served.saved[-1][1]["mesh"] == "data=4, model=2:explicit"
    field.fill("")
    app.save_setup()
    assert "mesh" not in served.saved[-1][1]
