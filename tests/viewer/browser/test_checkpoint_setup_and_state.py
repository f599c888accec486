"""Trained weights in the viewer: the setup form's "Weights and batch" section (Torch's
``init.checkpoint``/``init.strict`` and ``inputs.fixture``/``inputs.fixture_keys``), with
the recipe's own validation, and the coverage banner and capture summary saying
"trained weights from runs/best.pt" against a fresh initialisation."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from capture.recipe import Recipe, RecipeError
from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TORCH_RECIPE = {
    "kind": "model", "framework": "torch", "model": "model:Net", "mode": "eval", "device": "cpu",
    "grad_enabled": False, "seed": 0, "init": {"args": [], "kwargs": {}},
    "inputs": {"args": [{"kind": "tensor", "shape": [2, 4], "dtype": "float32", "requires_grad": False,
                         "generator": {"kind": "normal", "mean": 0.0, "std": 1.0}}], "kwargs": {}},
}
SETUP = {
    "profile": "net",
    "recipe": TORCH_RECIPE,
    "inputs": [{"name": "x", "path": "inputs.args[0]", "kind": "tensor", "shape": [2, 4], "dtype": "float32",
                "generator": {"kind": "normal"}, "unknown": []}],
    "fields": [],
    "needs": [],
    "symbol": {"qualname": "Net", "kind": "torch_module", "framework": "torch"},
}


def _capture(meta: dict, *, framework="torch", init=None):
    cap = synthetic_capture(60, grouped=True)
    cap.framework = framework
    cap.recipe = {**TORCH_RECIPE, "name": "net", "framework": framework,
                  "init": init or {"args": [], "kwargs": {}, "checkpoint": "runs/best.pt", "strict": True}}
    cap.meta = {"model_kind": "module", "device": "cpu", **meta}
    return cap


CHECKPOINT = {"state": "checkpoint", "checkpoint": "runs/best.pt", "checkpoint_strict": True,
              "state_note": "trained weights from runs/best.pt (4 tensors, loaded weights-only with strict key "
                            "checking) into the module the init built"}
LOOSE = {"state": "checkpoint", "checkpoint": "runs/best.pt", "checkpoint_strict": False,
         "checkpoint_missing": ["fc2.bias"], "checkpoint_unexpected": ["head.weight", "head.bias"],
         "state_note": "trained weights from runs/best.pt (3 tensors, loaded weights-only without strict key "
                       "checking) into the module the init built"}
FRESH = {"state": "fresh_init",
         "state_note": "freshly initialized by the module's constructor after torch.manual_seed(seed), not trained weights"}


@pytest.fixture(scope="module")
def served():
    saved: list[tuple[str, dict]] = []
    setups = {"net": SETUP, "jax": {**SETUP, "profile": "jax", "recipe": {**TORCH_RECIPE, "framework": "jax"},
                                     "symbol": {"qualname": "net", "kind": "jax_function", "framework": "jax"}}}
    which = {"setup": "net"}

    def provider(profile):
        return copy.deepcopy(setups[which["setup"]])

    def save(name, recipe):  # what the language server's save hook does (backends.save_profile)
        try:
            Recipe.from_dict({"name": name, **recipe})
        except RecipeError as exc:
            return [{"path": exc.key_path.replace(f"profiles.{name}.", "", 1), "message": exc.problem}]
        saved.append((name, recipe))
        return []

    server = ViewerServer(setup_provider=provider, save_profile=save, start_capture=lambda name: None)
    ids = SimpleNamespace(
        checkpoint=server.add_capture(_capture(CHECKPOINT), "Net (trained)"),
        loose=server.add_capture(_capture(LOOSE, init={"args": [], "kwargs": {}, "checkpoint": "runs/best.pt",
                                                       "strict": False}), "Net (loose)"),
        fresh=server.add_capture(_capture(FRESH, init={"args": [], "kwargs": {}}), "Net (fresh)"),
    )
    server.start()
    try:
        yield SimpleNamespace(server=server, saved=saved, ids=ids, which=which)
    finally:
        server.stop()


def _open(browser, served, close_pages, which):
    app = open_app(browser, served.server.url_for(getattr(served.ids, which)))
    close_pages.append(app)
    return app


def _state(app):
    return app.page.locator("[data-banner=coverage] [data-state]")


def test_the_banner_says_trained_weights_from_the_checkpoint(browser, served, close_pages, tmp_path):
    app = _open(browser, served, close_pages, "checkpoint")
    state = _state(app)
    assert state.get_attribute("data-state") == "checkpoint"
    assert state.inner_text() == "Trained weights from runs/best.pt, not TensorViz's initialization."
    assert "Freshly" not in app.page.locator("[data-banner=coverage]").inner_text()
    shots = Path(os.environ.get("TV_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    app.page.screenshot(path=str(shots / "weights-banner-checkpoint.png"), clip={"x": 0, "y": 0, "width": 1400, "height": 160})
    app.page.locator("[data-banner=coverage]").get_by_role("button", name="About this capture").click()
    app.page.wait_for_function("() => document.getElementById('inspector').dataset.kind === 'capture'")
    section = app.page.locator("#inspector [data-section=state]").inner_text()
    assert "Trained weights from runs/best.pt" in section and "Trained weights from runs/best.pt (4 tensors" in section
    assert app.unexpected_errors() == []


def test_a_non_strict_load_lists_missing_and_unexpected_keys_in_the_summary(browser, served, close_pages, tmp_path):
    app = _open(browser, served, close_pages, "loose")
    assert _state(app).inner_text() == (
        "Trained weights from runs/best.pt (strict = false: 1 key missing (kept at initialization); "
        "2 unexpected keys ignored).")
    app.page.locator("[data-banner=coverage]").get_by_role("button", name="About this capture").click()
    app.page.wait_for_function("() => document.getElementById('inspector').dataset.kind === 'capture'")
    facts = app.page.locator("#inspector [data-section=capture-facts]").inner_text()
    assert "runs/best.pt (strict = false)" in facts
    section = app.page.locator("#inspector [data-section=state]")
    assert section.locator("[data-keys=missing] li").all_inner_texts() == ["fc2.bias"]
    assert section.locator("[data-keys=unexpected] li").all_inner_texts() == ["head.weight", "head.bias"]
    shots = Path(os.environ.get("TV_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    app.page.screenshot(path=str(shots / "weights-inspector-checkpoint-loose.png"))
    assert app.unexpected_errors() == []


def test_a_fresh_torch_module_is_called_fresh(browser, served, close_pages):
    app = _open(browser, served, close_pages, "fresh")
    assert _state(app).get_attribute("data-state") == "fresh_init"
    assert _state(app).inner_text() == "Freshly initialized parameters (seed 0), not trained weights."


def test_the_setup_form_saves_a_checkpoint_and_a_fixture(browser, served, close_pages, tmp_path):
    served.which["setup"] = "net"
    app = open_app(browser, served.server.url_for(served.ids.fresh))
    close_pages.append(app)
    page = app.page
    page.click("#btn-setup")
    page.locator("#setup").wait_for(state="visible")
    saved_box = page.locator("#setup-saved")
    assert saved_box.is_visible()
    strict = page.locator("#setup-saved [name=strict]")
    assert strict.is_checked() and strict.is_disabled()  # nothing to check without a checkpoint

    # The recipe's own rule: a path leaving the workspace is named next to its control.
    page.fill("#setup-saved [name=checkpoint]", "../best.pt")
    page.click("#setup-save")
    page.locator("#setup-errors li").first.wait_for()
    assert "leaves the workspace through '..'" in page.locator("[data-saved=checkpoint] .field-error").inner_text()
    assert page.locator("#setup-saved [name=checkpoint]").get_attribute("aria-invalid") == "true"
    assert served.saved == []

    page.fill("#setup-saved [name=checkpoint]", "runs/best.pt")
    assert not strict.is_disabled()
    strict.uncheck()
    page.fill("#setup-saved [name=fixture]", "data/batch.pt")
    assert "replaced" in page.locator("#setup-inputs").get_attribute("class")
    page.fill("#setup-saved [name=fixture_keys]", "ids=x")
    shots = Path(os.environ.get("TV_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "setup-weights-and-batch.png"))
    assert app.save_setup() == "Capture started."
    name, recipe = served.saved[-1]
    assert name == "net"
    assert recipe["init"] == {"args": [], "kwargs": {}, "checkpoint": "runs/best.pt", "strict": False}
    assert recipe["inputs"] == {"fixture": "data/batch.pt", "fixture_keys": {"ids": "x"}}
    assert app.unexpected_errors() == []


def test_the_section_is_absent_for_jax(browser, served, close_pages):
    served.which["setup"] = "jax"
    try:
        app = open_app(browser, served.server.url_for(served.ids.fresh))
        close_pages.append(app)
        app.page.click("#btn-setup")
        app.page.locator("#setup").wait_for(state="visible")
        assert not app.page.locator("#setup-saved").is_visible()
    finally:
        served.which["setup"] = "net"
