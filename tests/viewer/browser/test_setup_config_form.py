"""The setup form for a model built from a config (issue 24 item 3), as a person sees it:
nanoGPT-style ``GPT(config)`` read by the real discovery, the form the language server's
provider makes of it (``setup_form``), the real app in Chromium and the real recipe rules
saving ``.tensorviz/recipes.toml``; the saved profile then captures through the real
``tensorviz capture --profile``.

``config`` is a nested group "GPTConfig · 7 fields" prefilled with what the command line
suggests over the class's defaults (issue 49: small sizes, the CLI's own Suggester); what
differs from the defaults is saved, as a ``call`` of ``model:GPTConfig``; the token input
``idx`` is ``int64[1,16]`` drawn below the vocabulary the group holds; the init and the
inputs may come from a factory instead, with the contract written next to it.

Screenshots go to ``$TENSORVIZ_SCREENSHOTS`` when it is set.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from capture import recipe as recipe_model
from capture.graph import graphfile
from config_models import JAX_CONFIGS, MY_LLAMA, NANO_GPT
from tensorviz_lsp.backends import RealBackends
from tensorviz_lsp.features.form_values import read_form_recipe
from tensorviz_lsp.features.setup_form import SetupContext, init_contract, draft_recipe, setup_form, setup_needs
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = pytest.mark.slow

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_TRANSFORMERS = HAS_TORCH and importlib.util.find_spec("transformers") is not None
REPO = Path(__file__).resolve().parents[3]
SHOTS = os.environ.get("TENSORVIZ_SCREENSHOTS")
GPT_FIELDS = ["block_size", "vocab_size", "n_layer", "n_head", "n_embd", "dropout", "bias"]


def _shot(page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def _candidate(root: Path, file: str, text: str, qualname: str):
    (root / file).write_text(text)
    found = RealBackends().discover(text, root / file, root)
    (cand,) = [c for c in found.candidates if c.qualname == qualname]
    return cand


def _form(root: Path, cand, model: str, recipe=None) -> dict:
    recipe = recipe if recipe is not None else draft_recipe(cand, model)
    file = model.partition(":")[0] + ".py"
    return setup_form(SetupContext(root, (root / file).as_uri(), cand, cand.qualname, recipe))


# ------------------------------------------------------------------ the provider (no browser)

def test_a_config_parameter_is_a_group_of_the_classes_fields(tmp_path):
    cand = _candidate(tmp_path, "model.py", NANO_GPT, "GPT")
    form = _form(tmp_path, cand, "model:GPT")
    (config,) = form["fields"]
    group = config["config"]
    assert (config["name"], config["path"], config["required"]) == ("config", "init.kwargs.config", False)
    assert (group["name"], group["target"], group["where"], group["complete"]) == ("GPTConfig", "model:GPTConfig",
                                                                                  "model.py", True)
    assert [f["name"] for f in group["fields"]] == GPT_FIELDS
    by_name = {f["name"]: f for f in group["fields"]}
    assert (by_name["n_layer"]["default"], by_name["n_layer"]["type"]) == (12, "int")
    assert by_name["vocab_size"]["path"] == "init.kwargs.config.kwargs.vocab_size"
    assert (by_name["dropout"]["type"], by_name["bias"]["type"]) == ("float", "bool")
    # The group starts from the command line's suggestion (sizes shrunk), and the token
    # ids run at the CLI's batch and length: nothing is needed.
    assert {n: f["suggested"] for n, f in by_name.items() if "suggested" in f} == {
        "block_size": 64, "vocab_size": 100, "n_layer": 2, "n_head": 4, "n_embd": 64}
    assert form["needs"] == []
    assert setup_needs(cand, draft_recipe(cand, "model:GPT")) == []

    (idx,) = form["inputs"]
    assert (idx["dtype"], idx["shape"], idx["generator"]) == ("int64", [1, 16],
                                                              {"kind": "randint", "low": 0, "high": 100})
    assert idx["token"]["high_from"] == "config.vocab_size"
    assert idx["token"]["high_path"] == by_name["vocab_size"]["path"], "the bound follows the group's field"

    init, inputs = form["factories"]["init"], form["factories"]["inputs"]
    assert init["value"] is None and init["contract"] == init_contract("torch_module", "GPT")
    assert "nn.Module" in init["contract"] and '{"args": (...), "kwargs": {...}}' in inputs["contract"]
    assert ("evidence" in form) == bool(getattr(recipe_model, "EVIDENCE", ()))


NON_LITERAL = """\
from dataclasses import dataclass, field

import torch.nn as nn


@dataclass
class Cfg:
    sizes: list = field(default_factory=list)
    width: int = 8


class Net(nn.Module):
    def __init__(self, cfg: Cfg):
        super().__init__()

    def forward(self, x):
        return x
"""


def test_a_default_that_is_no_literal_is_shown_as_written_and_left_unset(tmp_path):
    cand = _candidate(tmp_path, "model.py", NON_LITERAL, "Net")
    (cfg,) = _form(tmp_path, cand, "model:Net")["fields"]
    sizes, width = cfg["config"]["fields"]
    assert (sizes["name"], sizes["default_text"], sizes["default"]) == ("sizes", "field(default_factory=list)", None)
    assert "default_text" not in width and width["default"] == 8


def test_saved_calls_and_factories_come_back_into_the_form(tmp_path):
    cand = _candidate(tmp_path, "model.py", NANO_GPT, "GPT")
    recipe = draft_recipe(cand, "model:GPT")
    recipe["init"] = {"factory": "setup:build"}
    recipe["inputs"] = {"factory": "setup:batch"}
    form = _form(tmp_path, cand, "model:GPT", recipe)
    assert (form["factories"]["init"]["value"], form["factories"]["inputs"]["value"]) == ("setup:build", "setup:batch")
    assert form["needs"] == [], "the factories give the model and its inputs"

    call = {"kind": "call", "target": "model:GPTConfig", "kwargs": {"n_layer": 2}}
    recipe = draft_recipe(cand, "model:GPT")
    recipe["init"] = {"args": [], "kwargs": {"config": call}}
    (config,) = _form(tmp_path, cand, "model:GPT", recipe)["fields"]
    assert config["value"] == call and config["config"]["target"] == "model:GPTConfig"


def test_each_kind_of_symbol_has_its_factory_contract(tmp_path):
    assert ".bind(variables)" in init_contract("linen_module", "M") and "nnx.Rngs" in init_contract("nnx_module", "M")
    assert "functools.partial" in init_contract("jax_function", "f")


def test_a_required_static_argument_of_a_jax_function_is_asked(tmp_path):
    cand = _candidate(tmp_path, "model.py", JAX_CONFIGS, "deep")
    assert [i["name"] for i in cand.inputs if i.get("static")] == ["depth"]
    form = _form(tmp_path, cand, "model:deep")
    (depth,) = [f for f in form["fields"] if f["name"] == "depth"]
    assert depth["path"] == "inputs.kwargs.depth" and depth["required"]
    # Prefilled with what the command line suggests for it (--input depth=8): not needed.
    assert depth["text"] == "8"
    assert not any(isinstance(n, dict) and n["path"] == "inputs.kwargs.depth" for n in form["needs"])
    recipe = draft_recipe(cand, "model:deep")
    assert {"path": "inputs.kwargs.depth", "message": "depth: a static argument of deep (a Python value)"} in \
        setup_needs(cand, recipe), "nothing saved gives it yet"
    assert "evidence" not in form, "a JAX capture is traced already"


# ------------------------------------------------------------------ in the browser

@pytest.fixture
def served(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    cand = _candidate(root, "model.py", NANO_GPT, "GPT")
    backends = RealBackends()
    saved: list[tuple[str, dict]] = []
    started: list[str] = []

    def provider(profile):
        recipe = saved[-1][1] if saved else draft_recipe(cand, "model:GPT")
        return _form(root, cand, "model:GPT", recipe)

    def save(name, recipe):
        # As the language server's save hook (ViewerSetup.save_from_viewer): the form's
        # texts (values, the steps box) read and checked, then validated and written.
        read, errors = read_form_recipe(root, name, recipe, cand)
        errors = errors or backends.save_profile(root, name, read)
        if not errors:
            saved.append((name, read))
        return errors

    server = ViewerServer(setup_provider=provider, save_profile=save, start_capture=started.append)
    server.start()
    try:
        yield SimpleNamespace(server=server, root=root, saved=saved, started=started)
    finally:
        server.stop()


def _saved_profile(root: Path, name: str) -> dict:
    return tomllib.loads((root / ".tensorviz" / "recipes.toml").read_text())["profiles"][name]


@pytest.mark.browser
def test_the_config_group_saves_only_what_changed(browser, served, close_pages):
    app = open_app(browser, served.server.url, ready=False)
    close_pages.append(app)
    page = app.page
    page.locator("#setup").wait_for(state="visible")
    group = page.locator("fieldset[data-field=config]")
    summary = group.locator("summary").inner_text()
    assert summary.startswith("GPTConfig · 7 fields") and summary.endswith("model.py"), summary
    assert [group.locator(f"[data-config-field={n}] [data-path]").input_value() for n in ("n_layer", "vocab_size")] \
        == ["2", "100"], "prefilled with the command line's suggestion"
    card = page.locator("[data-input=idx]")
    assert card.locator("[name=dtype]").input_value() == "int64"
    assert card.locator("[name=generator]").input_value() == "randint"
    assert card.locator("[name=generator-high]").input_value() == "100"
    assert "Token ids, drawn below 100 (config.vocab_size)" in card.inner_text()
    _shot(page, "config-form-1-prefilled")

    # The person edits fields and the vocabulary: the token bound follows it.
    for name, value in [("n_layer", "2"), ("n_head", "2"), ("n_embd", "64"), ("block_size", "32"),
                        ("vocab_size", "120")]:
        group.locator(f"[data-config-field={name}] input").fill(value)
    assert card.locator("[name=generator-high]").input_value() == "120"
    card.locator("input[name=shape]").fill("1, 16")
    # A call typed where a number goes is refused, not saved as a string.
    group.locator("[data-config-field=dropout] input").fill("Dropout(0.1)")
    page.click("#setup-save")
    page.locator("#setup-errors li").first.wait_for()
    assert "dropout: expected a number (e.g. 0.1), got Dropout(0.1)" in page.locator("#setup-errors").inner_text()
    assert served.saved == []
    group.locator("[data-config-field=dropout] input").fill("0.0")  # the default again: not written
    assert app.save_setup() == "Capture started.", page.locator("#setup-errors").inner_text()
    _shot(page, "config-form-2-saved")
    assert served.started == ["GPT"]
    profile = _saved_profile(served.root, "GPT")
    assert profile["init"]["kwargs"]["config"] == {
        "kind": "call", "target": "model:GPTConfig",
        "kwargs": {"block_size": 32, "vocab_size": 120, "n_layer": 2, "n_head": 2, "n_embd": 64},
    }
    (idx,) = profile["inputs"]["args"]
    assert (idx["shape"], idx["dtype"], idx["generator"]["kind"], idx["generator"]["high"]) == ([1, 16], "int64",
                                                                                                   "randint", 120)
    assert app.unexpected_errors() == []


@pytest.mark.browser
def test_the_init_factory_is_a_choice_with_its_contract(browser, served, close_pages):
    app = open_app(browser, served.server.url, ready=False)
    close_pages.append(app)
    page = app.page
    page.locator("#setup").wait_for(state="visible")
    factory = page.locator("[data-factory=init]")
    assert factory.is_hidden() and page.locator("fieldset[data-field=config]").is_visible()
    page.locator("[data-mode='init:factory']").check()
    assert factory.is_visible() and page.locator("fieldset[data-field=config]").is_hidden()
    assert "a ready instance of GPT (an nn.Module)" in factory.inner_text()
    _shot(page, "config-form-3-factory")
    page.locator("[data-input=idx] input[name=shape]").fill("1, 16")
    page.click("#setup-save")
    page.locator("#setup-errors li").first.wait_for()
    assert "name the function that builds the model" in page.locator("#setup-errors").inner_text()
    (served.root / "setup.py").write_text("def build():\n    raise NotImplementedError\n")
    factory.locator("input").fill("setup:build")
    assert app.save_setup() == "Capture started.", page.locator("#setup-errors").inner_text()
    profile = _saved_profile(served.root, "GPT")
    assert profile["init"] == {"factory": "setup:build"} or profile["init"].get("factory") == "setup:build"
    assert "config" not in str(profile["init"])
    assert app.unexpected_errors() == []


@pytest.mark.browser
@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_the_form_as_it_opens_captures_nanogpt(browser, served, close_pages):
    """Issue 24's "done when", with issue 49's prefill: the form as it opens (the command
    line's suggestion: a 2-layer GPT, token ids [1, 16]) saves a profile that captures."""
    app = open_app(browser, served.server.url, ready=False)
    close_pages.append(app)
    page = app.page
    page.locator("#setup").wait_for(state="visible")
    assert page.locator("[data-input=idx] input[name=shape]").input_value().replace(" ", "") == "1,16"
    assert app.save_setup() == "Capture started.", page.locator("#setup-errors").inner_text()
    assert served.started == ["GPT"]
    profile = _saved_profile(served.root, "GPT")
    assert profile["init"]["kwargs"]["config"] == {
        "kind": "call", "target": "model:GPTConfig",
        "kwargs": {"block_size": 64, "vocab_size": 100, "n_layer": 2, "n_head": 4, "n_embd": 64}}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "tensorviz_lsp", "capture", "--profile", "GPT"], cwd=served.root,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    c = graphfile.read(proc.stdout.strip())
    assert c.failure is None
    paths = {g.attrs.get("path") for g in c.groups if g.kind == "module"}
    assert {"transformer.h.0", "transformer.h.1", "lm_head"} <= paths and "transformer.h.2" not in paths


LLAMA_SMALL = {"num_hidden_layers": "2", "hidden_size": "64", "intermediate_size": "128", "num_attention_heads": "4",
               "num_key_value_heads": "2", "vocab_size": "100"}


@pytest.fixture
def served_llama(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    cand = _candidate(root, "llama.py", MY_LLAMA, "MyLlama")
    backends = RealBackends()
    started: list[str] = []

    def provider(profile):
        return _form(root, cand, "llama:MyLlama")

    def save(name, recipe):
        read, errors = read_form_recipe(root, name, recipe, cand)
        return errors or backends.save_profile(root, name, read)

    server = ViewerServer(setup_provider=provider, save_profile=save,
                          start_capture=started.append)
    server.start()
    try:
        yield SimpleNamespace(server=server, root=root, started=started)
    finally:
        server.stop()


@pytest.mark.browser
@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="needs transformers")
def test_a_transformers_subclass_opens_with_llamaconfigs_fields(browser, served_llama, close_pages):
    """``class MyLlama(LlamaForCausalLM)`` with ``__init__(self, config)``: the group is
    LlamaConfig's fields read from the installed transformers' source, prefilled with the command
    line's suggestion over its defaults; six edits and a shape save a call of transformers:LlamaConfig that captures."""
    app = open_app(browser, served_llama.server.url, ready=False)
    close_pages.append(app)
    page = app.page
    page.locator("#setup").wait_for(state="visible")
    group = page.locator("fieldset[data-field=config]")
    assert group.locator("summary").inner_text().startswith("LlamaConfig · ")
    field = lambda name: group.locator(f"[data-config-field={name}] [data-path]")  # noqa: E731
    assert [field(n).input_value() for n in ("num_hidden_layers", "hidden_size", "vocab_size")] == ["2", "64", "100"]
    assert field("num_key_value_heads").input_value() == "" and field("num_key_value_heads").get_attribute("placeholder") == "None"
    card = page.locator("[data-input=input_ids]")
    assert card.locator("[name=dtype]").input_value() == "int64"
    for name, value in LLAMA_SMALL.items():
        field(name).fill(value)
    assert card.locator("[name=generator-high]").input_value() == "100"
    card.locator("input[name=shape]").fill("1, 8")
    _shot(page, "config-form-4-llama")
    assert app.save_setup() == "Capture started.", page.locator("#setup-errors").inner_text()
    assert served_llama.started == ["MyLlama"]
    profile = _saved_profile(served_llama.root, "MyLlama")
    config = profile["init"]["kwargs"]["config"]
    assert (config["kind"], config["target"]) == ("call", "transformers:LlamaConfig")
    assert config["kwargs"] == {**{k: int(v) for k, v in LLAMA_SMALL.items()}, "max_position_embeddings": 64}
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "tensorviz_lsp", "capture", "--profile", "MyLlama"],
                          cwd=served_llama.root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    c = graphfile.read(proc.stdout.strip())
    assert c.failure is None
    paths = {g.attrs.get("path") for g in c.groups if g.kind == "module"}
    assert {"model.layers.0", "model.layers.1"} <= paths and "model.layers.2" not in paths
    assert app.unexpected_errors() == []


@pytest.mark.browser
def test_calls_before_construction_are_saved_from_their_box(browser, served, close_pages):
    """The form's --before: a call a line in "Before construction", saved as init.before."""
    app = open_app(browser, served.server.url, ready=False)
    close_pages.append(app)
    page = app.page
    page.locator("#setup").wait_for(state="visible")
    box = page.locator("#setup-before-box")
    assert "BEFORE CONSTRUCTION" in box.inner_text().upper() and "initialize_model_parallel" in box.inner_text()
    page.locator("#setup-before").fill("torch.manual_seed(1)\n")
    assert app.save_setup() == "Capture started.", page.locator("#setup-errors").inner_text()
    profile = _saved_profile(served.root, "GPT")
    assert profile["init"]["before"] == [{"kind": "call", "target": "torch:manual_seed", "args": [1]}]
    assert app.unexpected_errors() == []
