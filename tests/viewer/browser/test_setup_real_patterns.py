"""The setup form is no dead end for real setups (issue 36, item 2), on models of our own
written with the five repositories' patterns (tests/real_patterns.py): a call where a
config goes (minGPT's ``GPT.get_default_config()``), steps after construction (its
config attributes, gpt-fast's ``setup_caches``), ``none`` for Gemma's ``cache: Cache |
None``, a flag as ``false``, token ids whose vocabulary the code does not say left to
fill in, and Gemma's tokens as integers. What the form saves is read by the shorthand's
own reader and checked by the command line's checks, through the language server's
save hook (``ViewerSetup.save_from_viewer``'s :func:`read_form_recipe`).

Screenshots go to ``$TENSORVIZ_SCREENSHOTS`` when it is set.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from tensorviz_lsp.backends import RealBackends
from tensorviz_lsp.features.form_values import read_form_recipe, steps_text, value_text
from tensorviz_lsp.features.setup_form import SetupContext, draft_recipe, setup_form
from viewer.server.app import ViewerServer

from tv_browser import open_app

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from real_patterns import FILES  # noqa: E402

SHOTS = os.environ.get("TENSORVIZ_SCREENSHOTS")


def _shot(page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def _candidate(root: Path, file: str, qualname: str):
    found = RealBackends().discover(FILES[file], root / file, root)
    (cand,) = [c for c in found.candidates if c.qualname == qualname]
    return cand


@pytest.fixture
def ws(tmp_path):
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def _form(root: Path, file: str, qualname: str, recipe=None) -> dict:
    cand = _candidate(root, file, qualname)
    model = f"{file.removesuffix('.py')}:{qualname}"
    return setup_form(SetupContext(root, (root / file).as_uri(), cand, qualname,
                                   recipe if recipe is not None else draft_recipe(cand, model)))


# ------------------------------------------------------------------ the provider (no browser)

def test_an_untyped_config_is_a_value_built_by_the_models_builder(ws):
    form = _form(ws, "miniish.py", "GPT")
    (config,) = form["fields"]
    assert (config["type"], config["text"]) == ("value", "GPT.get_default_config()")
    assert form["steps"]["lines"] == ['config.model_type="gpt-nano"', "config.vocab_size=100", "config.block_size=64"]
    (idx,) = form["inputs"]
    assert idx["generator"] == {"kind": "randint", "low": 0, "high": 100}, "the bound the step sets"
    saved = {**draft_recipe(_candidate(ws, "miniish.py", "GPT"), "miniish:GPT"),
             "init": {"args": [], "kwargs": {"config": {"kind": "call", "target": "miniish:CfgNode"}}}}
    (idx,) = _form(ws, "miniish.py", "GPT", saved)["inputs"]
    assert idx["generator"]["high"] is None, "the vocabulary is not known: no bound is made up"


def test_none_flags_and_integers_are_offered_as_the_code_says(ws):
    form = _form(ws, "gemmaish.py", "Transformer")
    by_name = {i["name"]: i for i in form["inputs"]}
    assert (by_name["cache"]["kind"], by_name["cache"]["text"]) == ("value", "none")
    assert (by_name["last_tokens"]["dtype"], by_name["last_tokens"]["shape"]) == ("int32", [1, 16])
    assert by_name["positions"]["generator"] == {"kind": "arange"}
    assert (by_name["attention_mask"]["dtype"], by_name["attention_mask"]["shape"]) == ("bool", [1, 16, 16])
    fields = form["fields"][0]["config"]["fields"]
    types = {f["name"]: f["type"] for f in fields}
    assert (types["final_logit_softcap"], types["attention_types"]) == ("value", "value")
    vit = {i["name"]: i for i in _form(ws, "vitish.py", "VisionTransformer")["inputs"]}
    assert (vit["train"]["kind"], vit["train"]["text"]) == ("value", "false")


def test_a_method_the_forward_needs_is_a_prefilled_step(ws):
    form = _form(ws, "fastish.py", "Transformer")
    assert form["steps"]["lines"] == ["model.setup_caches(max_batch_size=1, max_seq_length=64)"]
    by_name = {i["name"]: i for i in form["inputs"]}
    assert by_name["input_pos"]["needed"] == "forward indexes with input_pos and never checks it for None"
    assert by_name["input_pos"]["generator"] == {"kind": "arange"} and by_name["input_pos"]["kwarg"]


def test_the_forms_text_is_read_and_checked_as_the_shorthand(ws):
    cand = _candidate(ws, "miniish.py", "GPT")
    recipe = {**draft_recipe(cand, "miniish:GPT"), "steps_text": ["config.vocab_size=100", "config.block_size=16"]}
    recipe["init"] = {"args": [], "kwargs": {"config": {"kind": "text", "text": "GPT.get_default_config()"}}}
    recipe["inputs"] = {"args": [{"kind": "tensor", "shape": [1, 8], "dtype": "int64"}], "kwargs": {}}
    read, errors = read_form_recipe(ws, "GPT", recipe, cand)
    assert errors == []
    assert read["init"]["kwargs"]["config"] == {
        "kind": "call", "target": "miniish:GPT.get_default_config",
        "then": [{"set": "vocab_size", "value": 100}, {"set": "block_size", "value": 16}]}
    assert steps_text(read) == ["config.vocab_size = 100", "config.block_size = 16"]
    # The command line's checks: the builder's config without the vocabulary it asserts.
    recipe["steps_text"] = ["config.block_size=16"]
    _, errors = read_form_recipe(ws, "GPT", recipe, cand)
    assert errors == [{"path": "steps", "message": "GPT.get_default_config() leaves config.vocab_size unset, and the "
                                                   "constructor asserts it is set (a step config.vocab_size=100)"}]
    recipe["init"]["kwargs"]["config"]["text"] = "Cfg()"
    _, errors = read_form_recipe(ws, "GPT", recipe, cand)
    assert errors[0]["path"] == "init.kwargs.config"
    assert errors[0]["message"].startswith("Cfg(): Cfg is not defined or imported in miniish.py")


@pytest.mark.parametrize(("desc", "text"), [
    pytest.param({"kind": "none"}, "none", id="none"),
    pytest.param(False, "false", id="bool"),
    pytest.param({"kind": "tuple", "items": [{"kind": "ref", "target": "gemmaish:AttentionType.GLOBAL"}]},
                 "(AttentionType.GLOBAL,)", id="tuple-of-ref"),
    pytest.param({"kind": "call", "target": "types:SimpleNamespace", "kwargs": {"size": {"kind": "tuple",
                  "items": [4, 4]}}}, "types.SimpleNamespace(size=(4, 4))", id="stdlib-call"),
    pytest.param({"kind": "tensor", "shape": [16], "dtype": "int64", "generator": {"kind": "arange"}},
                 "int64[16]:arange", id="tensor"),
])
def test_saved_values_come_back_as_text(desc, text):
    assert value_text(desc, "gemmaish") == text


# ------------------------------------------------------------------ in the browser

@pytest.fixture
def served(ws):
    saved: list[tuple[str, dict]] = []
    started: list[str] = []
    cand = _candidate(ws, "miniish.py", "GPT")

    def provider(profile):
        return _form(ws, "miniish.py", "GPT", saved[-1][1] if saved else None)

    def save(name, recipe):
        read, errors = read_form_recipe(ws, name, recipe, cand)
        errors = errors or RealBackends().save_profile(ws, name, read)
        if not errors:
            saved.append((name, read))
        return errors

    server = ViewerServer(setup_provider=provider, save_profile=save, start_capture=started.append)
    server.start()
    try:
        yield SimpleNamespace(server=server, root=ws, saved=saved, started=started)
    finally:
        server.stop()


@pytest.mark.browser
def test_mingpts_documented_setup_from_the_form(browser, served, close_pages):
    app = open_app(browser, served.server.url, ready=False)
    close_pages.append(app)
    page = app.page
    page.locator("#setup").wait_for(state="visible")
    config = page.locator("[data-field=config] input")
    assert config.input_value() == "GPT.get_default_config()"
    steps = page.locator("#setup-steps")
    assert steps.input_value().splitlines() == ['config.model_type="gpt-nano"', "config.vocab_size=100",
                                                "config.block_size=64"]
    card = page.locator("[data-input=idx]")
    assert card.locator("[name=generator-high]").input_value() == "100"  # config.vocab_size=100, set by a step
    _shot(page, "real-form-1-mingpt")
    steps.scroll_into_view_if_needed()
    _shot(page, "real-form-1b-mingpt-steps")
    card.locator("[name=generator-high]").fill("")
    assert "enter the vocabulary size" in card.inner_text()
    card.locator("input[name=shape]").fill("1, 8")
    page.click("#setup-save")
    page.locator("#setup-errors li").first.wait_for()
    assert "randint draws integers below a whole number high" in page.locator("#setup-errors").inner_text()
    card.locator("[name=generator-high]").fill("100")
    assert app.save_setup() == "Capture started.", page.locator("#setup-errors").inner_text()
    assert served.started == ["GPT"]
    profile = tomllib.loads((served.root / ".tensorviz" / "recipes.toml").read_text())["profiles"]["GPT"]
    assert profile["init"]["kwargs"]["config"]["target"] == "miniish:GPT.get_default_config"
    assert [s["set"] for s in profile["init"]["kwargs"]["config"]["then"]] == ["model_type", "vocab_size", "block_size"]
    _shot(page, "real-form-2-mingpt-saved")
    assert app.unexpected_errors() == []
