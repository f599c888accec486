"""Models built from a configuration object, in the style of the real ones (written here,
not copied): a nanoGPT-style ``GPT(config)`` whose ``__init__`` reads ``config.n_layer``…
from an unannotated parameter, with a ``GPTConfig`` dataclass beside it; a
``transformers`` subclass ``MyLlama(LlamaForCausalLM)`` passing its config on; JAX and
Flax code taking config dataclasses. Used by the CLI's checks and captures and by the
setup form's end-to-end test."""

from __future__ import annotations

NANO_GPT = '''\
"""A small GPT in the style of nanoGPT's model.py."""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F


class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class SelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.register_buffer("mask", torch.tril(torch.ones(config.block_size, config.block_size))
                             .view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = SelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = nn.Sequential(nn.Linear(config.n_embd, 4 * config.n_embd), nn.GELU(),
                                 nn.Linear(4 * config.n_embd, config.n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.vocab_size is not None
        assert config.block_size is not None
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return self.lm_head(x[:, [-1], :]), None
'''

#: The shorthand that captures NANO_GPT in one command (issue 24's "done when").
NANO_GPT_INIT = "config=GPTConfig(n_layer=2, n_head=2, n_embd=64, block_size=32, vocab_size=100)"

MY_LLAMA = '''\
from transformers import LlamaForCausalLM


class MyLlama(LlamaForCausalLM):
    """A fine-tune's wrapper: the config goes straight on to the library model."""

    def __init__(self, config):
        super().__init__(config)

    def forward(self, input_ids):
        return super().forward(input_ids=input_ids).logits
'''

MY_LLAMA_INIT = ("config=LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, "
                 "num_attention_heads=4, num_key_value_heads=2, vocab_size=100)")

JAX_CONFIGS = '''\
import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
from flax import linen as nn


@dataclass(frozen=True)
class TransformerConfig:
    vocab_size: int = 256
    emb_dim: int = 16
    num_layers: int = 2


class Encoder(nn.Module):
    config: TransformerConfig

    @nn.compact
    def __call__(self, tokens):
        cfg = self.config
        x = nn.Embed(cfg.vocab_size, cfg.emb_dim)(tokens)
        for _ in range(cfg.num_layers):
            x = nn.Dense(cfg.emb_dim)(x)
        return x


@jax.jit
def net(x):
    return jax.nn.relu(x @ jnp.ones((3, 4)))


@functools.partial(jax.jit, static_argnames=("depth",))
def deep(x, depth):
    for _ in range(depth):
        x = jnp.tanh(x)
    return x
'''
