"""Torch models built from a config object described in the recipe (issue 24): a
nanoGPT-style model whose constructor takes a config dataclass, and a ``transformers``
subclass built from ``transformers:LlamaConfig``, both without a factory file."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from capture.graph import graphfile  # noqa: E402
from capture.graph.model import describe_tree, tree_leaves  # noqa: E402
from capture.torch import framework  # noqa: E402

from capture_workspace import forget_workspace_modules, profile_table, run_framework, tensor, write  # noqa: E402

pytestmark = pytest.mark.torch

# In the style of nanoGPT's model.py: a config dataclass, and modules that read it.
GPTISH = '''
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class TinyConfig:
    context: int = 64
    vocab_size: int = 512
    n_layer: int = 6
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True


class SelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.out = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, c))


class Layer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.norm1 = nn.LayerNorm(config.n_embd)
        self.attn = SelfAttention(config)
        self.norm2 = nn.LayerNorm(config.n_embd)
        self.ff = nn.Sequential(nn.Linear(config.n_embd, 4 * config.n_embd), nn.GELU(), nn.Linear(4 * config.n_embd, config.n_embd))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.ff(self.norm2(x))


class TinyGPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.vocab_size is not None
        self.config = config
        self.body = nn.ModuleDict(dict(
            tok=nn.Embedding(config.vocab_size, config.n_embd),
            pos=nn.Embedding(config.context, config.n_embd),
            layers=nn.ModuleList([Layer(config) for _ in range(config.n_layer)]),
            norm=nn.LayerNorm(config.n_embd),
        ))
        self.head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

    def forward(self, idx, targets=None):
        t = idx.size(1)
        assert t <= self.config.context
        x = self.body.tok(idx) + self.body.pos(torch.arange(t, device=idx.device))
        for layer in self.body.layers:
            x = layer(x)
        logits = self.head(self.body.norm(x))
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss
'''

LLAMA = '''
from transformers import LlamaForCausalLM


class MyLlama(LlamaForCausalLM):
    def __init__(self, config):
        super().__init__(config)
'''


@pytest.fixture
def ws(tmp_path):
    yield tmp_path
    forget_workspace_modules(tmp_path)


def capture(ws, table):
    cap, ctx = run_framework(framework, ws, table, None)
    cap.recipe = ctx.recipe.to_dict()
    return graphfile.decode(graphfile.encode(cap))


def module_paths(cap) -> set[str]:
    return {g.attrs["path"] for g in cap.groups if g.kind == "module"}


def test_a_nanogpt_style_model_from_a_config_call(ws):
    write(ws, {"gptish.py": GPTISH})
    config = {"kind": "call", "target": "gptish:TinyConfig",
              "kwargs": {"n_layer": 2, "n_head": 2, "n_embd": 32, "context": 32, "vocab_size": 100}}
    idx = tensor([1, 16], "int64", generator={"kind": "randint", "high": 100})
    cap = capture(ws, profile_table("gptish:TinyGPT", init={"kwargs": {"config": config}}, args=[idx]))
    assert cap.failure is None
    values = {v.id: v for v in cap.values}
    # The config reached the constructor: two layers, width 32, a 100-token vocabulary.
    assert {"body.layers.0", "body.layers.1"} <= module_paths(cap)
    assert "body.layers.2" not in module_paths(cap)
    assert describe_tree(cap.outputs, values) == "(float32[1,16,100], None)"
    embedding = [n for n in cap.nodes if n.op == "aten::embedding"]
    assert len(embedding) == 2
    # Token ids past the 100-row embedding would have failed the forward.
    [token_ids] = tree_leaves(cap.inputs)
    assert (values[token_ids].dtype, values[token_ids].shape) == ("int64", [1, 16])


@pytest.mark.slow
def test_a_transformers_subclass_from_a_library_config_call(ws):
    pytest.importorskip("transformers")
    write(ws, {"llama.py": LLAMA})
    config = {"kind": "call", "target": "transformers:LlamaConfig", "kwargs": {
        "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 100,
    }}
    ids = tensor([1, 8], "int64", generator={"kind": "randint", "high": 100})
    cap = capture(ws, profile_table("llama:MyLlama", init={"kwargs": {"config": config}}, kwargs={"input_ids": ids}))
    assert cap.failure is None
    values = {v.id: v for v in cap.values}
    [root] = [g for g in cap.groups if g.kind == "module" and g.parent is None]
    assert root.attrs["class"] == "MyLlama"
    assert {"model.layers.0", "model.layers.1"} <= module_paths(cap)
    assert "model.layers.2" not in module_paths(cap)
    logits = dict(cap.outputs["dict"])["logits"]
    assert describe_tree(logits, values) == "float32[1,8,100]"


TINY_GPT2 = '''
from transformers import GPT2LMHeadModel


class TinyGPT(GPT2LMHeadModel):
    pass
'''


@pytest.mark.slow  # measured over 3 s in the fast tier
def test_from_pretrained_reads_the_local_cache_and_fails_with_the_librarys_message(ws, tmp_path):
    """``transformers:AutoConfig.from_pretrained`` with ``args = [name]``, in a real
    worker: offline (HF_HUB_OFFLINE=1 in the capture environment) it reads the local
    cache; a name the cache lacks fails with transformers' own message, at the key path."""
    transformers = pytest.importorskip("transformers")
    from capture.recipe import Recipe
    from capture.session.runner import run_capture

    hub = tmp_path / "hf" / "hub" / "models--tiny-org--tiny-gpt"
    (hub / "refs").mkdir(parents=True)
    (hub / "refs" / "main").write_text("0123abcd")
    (hub / "snapshots" / "0123abcd").mkdir(parents=True)
    transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=64,
                            bos_token_id=0, eos_token_id=0).to_json_file(hub / "snapshots" / "0123abcd" / "config.json")
    write(ws, {"gpt.py": TINY_GPT2})
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}

    def recipe(name):
        return Recipe.from_dict({
            "name": "p", "model": "gpt:TinyGPT",
            "init": {"kwargs": {"config": {"kind": "call", "target": "transformers:AutoConfig.from_pretrained",
                                           "args": [name]}}},
            "inputs": {"kwargs": {"input_ids": tensor([1, 8], "int64", generator={"kind": "randint", "high": 100})}},
        })

    cap = run_capture(ws, recipe("tiny-org/tiny-gpt"), env=env)
    assert cap.failure is None, cap.failure
    assert {"transformer.h.0", "transformer.h.1"} <= module_paths(cap) and "transformer.h.2" not in module_paths(cap)
    logits = dict(cap.outputs["dict"])["logits"]
    assert describe_tree(logits, {v.id: v for v in cap.values}) == "float32[1,8,100]"

    missing = run_capture(ws, recipe("tiny-org/absent"), env=env).failure
    assert (missing.stage, missing.type) == ("trace", "OSError")
    assert missing.message.startswith(
        "profiles.p.init.kwargs.config: calling transformers:AutoConfig.from_pretrained raised OSError: "
    )
    assert "couldn't find them in the cached files" in missing.message
    assert missing.details["key_path"] == "profiles.p.init.kwargs.config"
