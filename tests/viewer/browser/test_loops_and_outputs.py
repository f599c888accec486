"""Issue 49, item 5, in the app: a Python loop over time steps is one stack card
"loop · model.py:21–22 ×64 steps" that says what it carries and unfolds into its steps;
a model returning a dict of many auxiliary outputs draws the first few as pills and one
"+13 outputs" pill for the rest (a list in the inspector, all of them on double-click),
so the model's frame and its header stay in the first view."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from viewer.server.app import ViewerServer

from tv_browser import VIEWPORT, open_app

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests: loop_models
from loop_models import _Builder, loop_capture  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]

AUX = [f"block{i}_{what}" for i in range(5) for what in ("out", "mean", "max")]  # 15 auxiliary outputs


def aux_capture():
    """big_vision's ViT pattern: ``return logits, out`` with ``out`` a dict of 15 tensors
    taken along the way."""
    b = _Builder()
    model = b.group("module", "AuxViT", None, path="", **{"class": "AuxViT"})
    x = b.value([2, 16])
    h, aux = x, []
    for i, name in enumerate(AUX):
        h = b.node("aten::tanh" if i % 3 == 0 else "aten::mean.dim", [h], model, 20 + i, [2, 16])
        aux.append([name, {"value": h}])
    logits = b.node("aten::addmm", [h], model, 40, [2, 10])
    cap = b.capture([x], [logits])
    cap.outputs = {"tuple": [{"value": logits}, {"dict": aux}]}
    return cap


@pytest.fixture(scope="module")
def served():
    server = ViewerServer()
    ids = SimpleNamespace(aux=server.add_capture(aux_capture(), "aux outputs"),
                          loop=server.add_capture(loop_capture(64), "selective scan"))
    server.start()
    try:
        yield SimpleNamespace(server=server, ids=ids)
    finally:
        server.stop()


def _open(browser, served, close_pages, which):
    app = open_app(browser, served.server.url_for(getattr(served.ids, which)))
    close_pages.append(app)
    app.wait("() => window.tensorviz.firstPaintMs !== null")
    return app


def _toggled(app, key):
    version = app.scene_version
    app.js("(k) => window.tensorviz.toggle(k)", key)
    app.wait_scene_after(version)


def test_many_outputs_fold_into_one_pill_and_the_header_stays_in_view(browser, served, close_pages, tmp_path):
    app = _open(browser, served, close_pages, "aux")
    keys = app.keys()
    pills = [k for k in keys if k.startswith("out:") and not k.startswith("out:more:")]
    # the root and the model frame each draw three pills (the same values: one key each,
    # the logits first) and "+13 outputs"
    assert len(pills) == 3 and {"out:more:g0", "out:more:g-1"} <= set(keys)
    more = app.js("(k) => window.tensorviz.pill(k)", "out:more:g0")
    assert more["texts"] == ["+13 outputs"]
    first = app.js("(k) => window.tensorviz.itemInfo(k)", pills[0])
    assert first["name"] == "[0]"
    # the model's frame, its header included, is on screen in the first view
    frame = app.item_rect("g0")
    assert frame["x"] >= 0 and frame["y"] >= 0 and frame["x"] + frame["w"] <= VIEWPORT["width"]
    app.page.screenshot(path=str(tmp_path / "aux_first_view.png"))
    # selected, the pill lists what it stands for
    app.js("(k) => window.tensorviz.center(k)", "out:more:g0")
    x, y = app.item_point("out:more:g0", dy=app.item_rect("out:more:g0")["h"] / 2)
    app.page.mouse.click(x, y)
    app.wait("() => document.querySelectorAll('[data-section=more-outputs] dt').length === 13")
    names = app.js("() => [...document.querySelectorAll('[data-section=more-outputs] dt')].map((e) => e.textContent)")
    assert names[-1] == "[1].block4_max"
    # opened, each output is a pill; the pill that folds them again says how many
    _toggled(app, "out:more:g0")
    assert app.js("(k) => window.tensorviz.pill(k)", "out:more:g0")["texts"] == ["fold 16 outputs"]
    assert len([k for k in app.keys() if k.startswith("out:") and not k.startswith("out:more:")]) == 16
    _toggled(app, "out:more:g0")
    assert app.js("(k) => window.tensorviz.pill(k)", "out:more:g0")["texts"] == ["+13 outputs"]
    assert app.unexpected_errors() == []


def test_a_loop_over_time_steps_is_one_stack_of_steps(browser, served, close_pages, tmp_path):
    app = _open(browser, served, close_pages, "loop")
    stacks = [k for k in app.keys() if k.startswith("s")]
    assert len(stacks) == 1
    info = app.js("(k) => window.tensorviz.itemInfo(k)", stacks[0])
    assert info["title"] == "loop · model.py:21–22"
    card = app.js("(k) => window.tensorviz.card(k)", stacks[0])
    assert "×64 steps" in card["says"]
    assert info["lines"][:2] == ["carries f32[2,8,4] step to step", "per step: a slice of f32[2,64,8,4] ×3"]
    assert "64 steps × 6 ops = 384 ops" in info["lines"]
    app.page.screenshot(path=str(tmp_path / "loop_first_view.png"))
    # unfolded: the steps, the first one open on its ops
    _toggled(app, stacks[0])
    steps = [k for k in app.keys() if ((app.js("(k) => window.tensorviz.itemInfo(k)", k) or {}).get("name") or "").startswith("step ")]
    assert len(steps) == 64
    assert app.js("(k) => window.tensorviz.itemInfo(k)", steps[0])["open"] is True
    app.page.screenshot(path=str(tmp_path / "loop_unfolded.png"))
    assert app.unexpected_errors() == []
