"""Where a JAX graph's parameters came from (spec, Linen: "This is freshly initialized
state, not trained weights"): the coverage banner says it, and the capture summary in
the inspector carries the worker's ``meta["state_note"]`` word for word."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import make_workspace, open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# The notes exactly as capture/jax/framework.py records them (STATE_NOTES).
FRESH_NOTE = ("freshly initialized state, not trained weights: the Linen module's init with "
              "jax.random.key(seed) and the saved inputs")
CONSTRUCTED_NOTE = "built by the NNX constructor from the literal init: freshly initialised, not trained weights"
FACTORY_VARIABLES_NOTE = "the variables the init factory bound with model.bind(variables)"
FACTORY_STATE_NOTE = "the state of the module the init factory built"
CALLABLE_NOTE = "the state of the NNX modules the configured callable carries"


ABSTRACT_NOTE = ("abstract: no weights; the module the init factory built holds shapes and dtypes only "
                 "(jax.ShapeDtypeStruct, as nnx.eval_shape or jax.eval_shape builds them): nothing was computed")


def _capture(state: str | None, note: str | None, *, seed: int = 0, factory: str | None = None, model="model:MLP",
             **meta):
    cap = synthetic_capture(60, grouped=True)
    init = {"factory": factory} if factory else {"args": [], "kwargs": {}}
    cap.recipe = {"name": "p", "kind": "model", "framework": "jax", "model": model, "mode": "eval",
                  "device": "cpu", "grad_enabled": False, "seed": seed, "init": init,
                  "inputs": {"args": [], "kwargs": {}}}
    cap.meta = {"model_kind": "linen", "device": "cpu"}
    if state is not None:
        cap.meta.update(state=state, state_note=note, **meta)
    return cap


def _torch_abstract():
    from capture.graph.model import Coverage

    cap = _capture("abstract", "abstract: no weights; the module was built on fake tensors", model="llama:Llama")
    cap.framework, cap.backend = "torch", "torch_abstract"
    cap.coverage = Coverage(scope="abstract_forward")
    cap.recipe.update(framework="torch", evidence="abstract")
    return cap


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("ws"))
    server = ViewerServer(workspace=ws)
    ids = SimpleNamespace(
        fresh=server.add_capture(_capture("fresh_init", FRESH_NOTE, seed=7), "MLP (fresh)"),
        constructed=server.add_capture(_capture("constructed", CONSTRUCTED_NOTE, model="model:Net"), "Net (constructed)"),
        variables=server.add_capture(
            _capture("factory_variables", FACTORY_VARIABLES_NOTE, factory="weights:load_variables"), "MLP (factory)"),
        factory_state=server.add_capture(
            _capture("factory_state", FACTORY_STATE_NOTE, factory="weights:build_net", model="model:Net"), "Net (factory)"),
        callable_factory=server.add_capture(
            _capture("callable_state", CALLABLE_NOTE, factory="weights:make_step", model="model:step"), "step"),
        abstract_state=server.add_capture(
            _capture("factory_state", ABSTRACT_NOTE, factory="weights:gemma_shapes", model="model:Net",
                     state_abstract=True), "Net (eval_shape)"),
        torch_abstract=server.add_capture(_torch_abstract(), "Llama (abstract)"),
        plain=server.add_capture(_capture(None, None, model="model:net"), "net"),
    )
    server.start()
    try:
        yield SimpleNamespace(server=server, ids=ids)
    finally:
        server.stop()


def _open(browser, served, close_pages, which: str):
    app = open_app(browser, served.server.url_for(getattr(served.ids, which)))
    close_pages.append(app)
    return app


def _state(app):
    return app.page.locator("[data-banner=coverage] [data-state]")


def test_fresh_linen_init_is_called_fresh_in_the_coverage_banner(browser, served, close_pages, tmp_path):
    app = _open(browser, served, close_pages, "fresh")
    banner = app.page.locator("[data-banner=coverage]")
    text = banner.inner_text()
    assert "Traced program" in text  # the coverage wording stays
    state = _state(app)
    assert state.get_attribute("data-state") == "fresh_init"
    assert state.inner_text() == "Freshly initialized parameters (seed 7), not trained weights."
    shots = Path(os.environ.get("TV_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    app.page.screenshot(path=str(shots / "weights-banner-fresh.png"))

    # The summary in the inspector carries the worker's own note, word for word.
    banner.get_by_role("button", name="About this capture").click()
    app.page.wait_for_function("() => document.getElementById('inspector').dataset.kind === 'capture'")
    assert app.page.locator("#insp-kicker").inner_text().lower() == "capture"
    section = app.page.locator("#inspector [data-section=state]")
    body = section.inner_text()
    assert "Freshly initialized parameters (seed 7), not trained weights." in body
    assert FRESH_NOTE[0].upper() + FRESH_NOTE[1:] in body
    assert section.locator(".pill").inner_text() == "fresh_init"
    facts = app.page.locator("#inspector [data-section=capture-facts]").inner_text()
    assert "model:MLP" in facts and "seed" in facts and "7" in facts
    app.page.screenshot(path=str(shots / "weights-inspector-fresh.png"))
    assert app.unexpected_errors() == []


def test_constructed_nnx_state_is_also_fresh(browser, served, close_pages):
    app = _open(browser, served, close_pages, "constructed")
    state = _state(app)
    assert state.get_attribute("data-state") == "constructed"
    # The constructor made its own state (TensorViz supplied no rngs): no seed is claimed.
    assert state.inner_text() == (
        "Freshly initialized parameters (built by the constructor from the literal init), not trained weights."
    )


@pytest.mark.parametrize(
    ("which", "label", "expected"),
    [
        ("variables", "factory_variables",
         "Weights from the workspace factory weights:load_variables (bound with model.bind(variables)), "
         "not TensorViz's initialization."),
        ("factory_state", "factory_state",
         "Weights from the workspace factory weights:build_net (the state of the module it built), "
         "not TensorViz's initialization."),
        ("callable_factory", "callable_state",
         "Weights from the workspace factory weights:make_step (the state of the NNX modules its callable "
         "carries), not TensorViz's initialization."),
    ],
)
def test_factory_state_says_the_weights_came_from_the_workspace_factory(browser, served, close_pages, which, label,
                                                                       expected, tmp_path):
    app = _open(browser, served, close_pages, which)
    state = _state(app)
    assert state.get_attribute("data-state") == label
    assert state.inner_text() == expected
    shots = Path(os.environ.get("TV_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    app.page.screenshot(path=str(shots / f"weights-banner-{label}.png"), clip={"x": 0, "y": 0, "width": 1400, "height": 160})
    assert "Freshly initialized" not in app.page.locator("[data-banner=coverage]").inner_text()
    app.page.locator("#title").click()  # the title opens the same summary
    app.page.wait_for_function("() => document.getElementById('inspector').dataset.kind === 'capture'")
    assert expected in app.page.locator("#inspector [data-section=state]").inner_text()


def test_a_state_built_by_eval_shape_is_called_abstract_not_weights(browser, served, close_pages):
    """Issue 25 item 3: state from nnx.eval_shape / jax.eval_shape has no weights."""
    app = _open(browser, served, close_pages, "abstract_state")
    state = _state(app)
    assert state.get_attribute("data-state") == "factory_state"
    assert state.inner_text() == ("Abstract: no weights. The state built by the workspace factory "
                                  "weights:gemma_shapes holds shapes and dtypes only (eval_shape): nothing was computed.")
    assert "Weights from" not in app.page.locator("[data-banner=coverage]").inner_text()
    app.page.locator("#title").click()
    app.page.wait_for_function("() => document.getElementById('inspector').dataset.kind === 'capture'")
    assert "nothing was computed" in app.page.locator("#inspector [data-section=state]").inner_text()


def test_an_abstract_torch_capture_says_nothing_was_computed(browser, served, close_pages):
    """Issue 25 item 1: the banner of an abstract capture says "abstract: shapes only,
    nothing was computed", never that values were measured from a real forward."""
    app = _open(browser, served, close_pages, "torch_abstract")
    banner = app.page.locator("[data-banner=coverage]")
    text = banner.inner_text()
    assert "Abstract: shapes only, nothing was computed." in text
    assert "measured from a real forward" not in text and "Eager" not in text
    assert banner.get_attribute("data-scope") == "abstract_forward"
    assert _state(app).inner_text().startswith("Abstract: no weights.")


def test_a_capture_without_recorded_state_claims_nothing(browser, served, close_pages):
    app = _open(browser, served, close_pages, "plain")
    assert _state(app).count() == 0
    text = app.page.locator("[data-banner=coverage]").inner_text()
    assert "Freshly" not in text and "factory" not in text
    app.page.locator("[data-banner=coverage]").get_by_role("button", name="About this capture").click()
    app.page.wait_for_function("() => document.getElementById('inspector').dataset.kind === 'capture'")
    assert app.page.locator("#inspector [data-section=state]").count() == 0
    assert app.unexpected_errors() == []
