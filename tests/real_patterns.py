"""Models of our own written with the few lines of a pattern from the five real
repositories of issue 36 (never their files): what a suggested command, the setup form
and the capture must handle the first time.

* ``WHISPERISH``: a dimensions dataclass of ten required ints, ``forward(mel, tokens)``
  with the mel's length tied to the audio context (``2 * n_audio_ctx``) by an assert;
  a sparse buffer (Whisper's ``alignment_heads``).
* ``FASTISH``: gpt-fast's ``ModelArgs`` whose defaults are a 7B model, a ``forward``
  that asserts the caches were set up (``setup_caches``) and indexes with an optional
  ``input_pos``.
* ``MINIISH``: minGPT's set-up: ``config`` unannotated, built by
  ``GPT.get_default_config()``, attributes the constructor asserts are set, and a preset
  table looked up by ``config.model_type``.
* ``GEMMAISH`` (NNX): a frozen config dataclass with required fields, an enum sequence
  (``attention_types: Iterable[AttentionType]``), ``float | None`` and bools; a
  ``__call__`` with shape comments and ``cache: Cache | None``.
* ``VITISH`` (Linen): ``patches: Any`` read as ``self.patches.size``, ``transformer: Any``
  unpacked into a submodule, an untyped image input and a keyword-only ``train`` flag.
"""

from __future__ import annotations

WHISPERISH = '''\
from dataclasses import dataclass

import torch
from torch import Tensor, nn


@dataclass
class ModelDimensions:
    n_mels: int
    n_audio_ctx: int
    n_audio_state: int
    n_audio_head: int
    n_audio_layer: int
    n_vocab: int
    n_text_ctx: int
    n_text_state: int
    n_text_head: int
    n_text_layer: int


class AudioEncoder(nn.Module):
    def __init__(self, n_mels, n_ctx, n_state):
        super().__init__()
        self.conv = nn.Conv1d(n_mels, n_state, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positional_embedding", torch.zeros(n_ctx, n_state))

    def forward(self, x: Tensor):
        x = self.conv(x).permute(0, 2, 1)
        assert x.shape[1:] == self.positional_embedding.shape, "incorrect audio shape"
        return x + self.positional_embedding


class TextDecoder(nn.Module):
    def __init__(self, n_vocab, n_ctx, n_state):
        super().__init__()
        self.token_embedding = nn.Embedding(n_vocab, n_state)
        self.positional_embedding = nn.Parameter(torch.zeros(n_ctx, n_state))

    def forward(self, x: Tensor, xa: Tensor):
        h = self.token_embedding(x) + self.positional_embedding[: x.shape[-1]]
        return h @ xa.mean(1, keepdim=True).transpose(1, 2)


class Whisperish(nn.Module):
    def __init__(self, dims: ModelDimensions):
        super().__init__()
        self.dims = dims
        self.encoder = AudioEncoder(dims.n_mels, dims.n_audio_ctx, dims.n_audio_state)
        self.decoder = TextDecoder(dims.n_vocab, dims.n_text_ctx, dims.n_text_state)
        all_heads = torch.zeros(dims.n_text_layer, dims.n_text_head, dtype=torch.bool)
        all_heads[dims.n_text_layer // 2:] = True
        self.register_buffer("alignment_heads", all_heads.to_sparse(), persistent=False)

    def forward(self, mel: torch.Tensor, tokens: torch.Tensor):
        return self.decoder(tokens, self.encoder(mel))
'''

FASTISH = '''\
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor, nn


@dataclass
class ModelArgs:
    block_size: int = 2048
    vocab_size: int = 32000
    n_layer: int = 32
    n_head: int = 32
    dim: int = 4096
    n_local_heads: int = -1
    head_dim: int = 64

    def __post_init__(self):
        if self.n_local_heads == -1:
            self.n_local_heads = self.n_head
        self.head_dim = self.dim // self.n_head


class KVCache(nn.Module):
    def __init__(self, max_batch_size, max_seq_length, n_heads, head_dim):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(max_batch_size, n_heads, max_seq_length, head_dim))

    def update(self, input_pos, k_val):
        k_out = self.k_cache
        k_out[:, :, input_pos] = k_val
        return k_out


class Attention(nn.Module):
    def __init__(self, config: ModelArgs):
        super().__init__()
        self.wq = nn.Linear(config.dim, config.dim)
        self.n_head, self.head_dim = config.n_head, config.head_dim
        self.kv_cache = None

    def forward(self, x: Tensor, mask: Tensor, input_pos: Tensor) -> Tensor:
        b, s, d = x.shape
        q = self.wq(x).view(b, s, self.n_head, self.head_dim).transpose(1, 2)
        k = self.kv_cache.update(input_pos, q)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=mask)
        return y.transpose(1, 2).reshape(b, s, d)


class Transformer(nn.Module):
    def __init__(self, config: ModelArgs) -> None:
        super().__init__()
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim)
        self.layers = nn.ModuleList(Attention(config) for _ in range(config.n_layer))
        self.freqs_cis: Optional[Tensor] = None

    def setup_caches(self, max_batch_size, max_seq_length):
        for b in self.layers:
            b.kv_cache = KVCache(max_batch_size, max_seq_length, self.config.n_head, self.config.head_dim)
        self.freqs_cis = torch.ones(self.config.block_size)
        self.causal_mask = torch.tril(torch.ones(max_seq_length, max_seq_length, dtype=torch.bool))

    def forward(self, idx: Tensor, input_pos: Optional[Tensor] = None) -> Tensor:
        assert self.freqs_cis is not None, "Caches must be initialized first"
        mask = self.causal_mask[None, None, input_pos]
        x = self.tok_embeddings(idx) * self.freqs_cis[input_pos][None, :, None]
        for layer in self.layers:
            x = layer(x, mask, input_pos)
        return x
'''

MINIISH = '''\
import torch
from torch import nn


class CfgNode:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class GPT(nn.Module):
    @staticmethod
    def get_default_config():
        C = CfgNode()
        C.model_type = "gpt"
        C.n_layer = None
        C.n_embd = None
        C.vocab_size = None
        C.block_size = None
        return C

    def __init__(self, config):
        super().__init__()
        assert config.vocab_size is not None
        assert config.block_size is not None
        type_given = config.model_type is not None
        params_given = all([config.n_layer is not None, config.n_embd is not None])
        assert type_given ^ params_given
        if type_given:
            config.__dict__.update({
                "gpt2": dict(n_layer=12, n_embd=768),
                "gpt": dict(n_layer=12, n_embd=768),
                "gpt-nano": dict(n_layer=3, n_embd=48),
            }[config.model_type])
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.h = nn.ModuleList(nn.Linear(config.n_embd, config.n_embd) for _ in range(config.n_layer))

    def forward(self, idx, targets=None):
        b, t = idx.size()
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for block in self.h:
            x = block(x)
        return x
'''

GEMMAISH = '''\
from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable
from typing import Any

import jax.numpy as jnp
from flax import nnx

Array = Any
Cache = dict


class AttentionType(enum.Enum):
    GLOBAL = 1
    LOCAL_SLIDING = 2


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    num_layers: int
    num_embed: int
    embed_dim: int
    num_heads: int
    final_logit_softcap: float | None
    use_post_attn_norm: bool
    attention_types: Iterable[AttentionType]
    dropout_rate: float = 0.0


class Transformer(nnx.Module):
    def __init__(self, config: TransformerConfig, *, rngs: nnx.Rngs):
        self.embedder = nnx.Embed(config.num_embed, config.embed_dim, rngs=rngs)
        self.layers = nnx.List([
            nnx.Linear(config.embed_dim, config.embed_dim, rngs=rngs)
            for _, kind in zip(range(config.num_layers), config.attention_types)
        ])
        self.softcap = config.final_logit_softcap

    def __call__(
        self,
        last_tokens: Array,  # [B, L]
        positions: Array,  # [B, L]
        cache: Cache | None,  # (sequence length L')
        attention_mask: Array,  # [B, L, L']
    ):
        x = self.embedder(last_tokens) + positions[..., None]
        for layer in self.layers:
            x = layer(x)
            x = jnp.einsum("bld,blm->bmd", x, attention_mask.astype(x.dtype))
        logits = self.embedder.attend(x)
        if self.softcap is not None:
            logits = jnp.tanh(logits / self.softcap) * self.softcap
        return logits, cache
'''

VITISH = '''\
from typing import Any

import flax.linen as nn
import jax.numpy as jnp


class Encoder(nn.Module):
    num_layers: int
    mlp_dim: int

    @nn.compact
    def __call__(self, x, *, train):
        for _ in range(self.num_layers):
            x = nn.Dropout(0.1)(nn.Dense(x.shape[-1])(nn.relu(nn.Dense(self.mlp_dim)(x))), deterministic=not train)
        return x


class VisionTransformer(nn.Module):
    num_classes: int
    patches: Any
    transformer: Any
    hidden_size: int

    @nn.compact
    def __call__(self, inputs, *, train):
        x = inputs
        n, h, w, c = x.shape
        x = nn.Conv(self.hidden_size, self.patches.size, strides=self.patches.size, padding="VALID")(x)
        n, h, w, c = x.shape
        x = jnp.reshape(x, [n, h * w, c])
        x = Encoder(name="Transformer", **self.transformer)(x, train=train)
        return nn.Dense(self.num_classes)(x[:, 0])
'''

#: file name → source, as a workspace holds them.
FILES = {
    "whisperish.py": WHISPERISH,
    "fastish.py": FASTISH,
    "miniish.py": MINIISH,
    "gemmaish.py": GEMMAISH,
    "vitish.py": VITISH,
}
