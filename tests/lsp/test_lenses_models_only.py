"""Lenses on models, not on their helpers (issue 49, item 6): a JAX file of our own shaped
like bonsai's Qwen3 (a model function and an NNX module calling helpers such as ``shard``
and ``count_left_pads``, which discovery finds too) gets lenses on the models only; a
helper with a saved profile keeps its lens."""

from __future__ import annotations

from tensorviz_lsp.backends import RealBackends
from tensorviz_lsp.features.lenses import models_only

SOURCE = '''
import jax
import jax.numpy as jnp
from flax import nnx


def shard(x, spec):
    return jax.lax.with_sharding_constraint(x, spec)


def count_left_pads(tokens):
    return jnp.sum(jnp.cumsum(tokens != 0, axis=-1) == 0, axis=-1)


def rms_norm(x, eps=1e-6):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)


class Block(nnx.Module):
    def __init__(self, dim: int, rngs: nnx.Rngs):
        self.proj = nnx.Linear(dim, dim, rngs=rngs)

    def __call__(self, x):
        return rms_norm(self.proj(x))


class Model(nnx.Module):
    def __init__(self, dim: int, rngs: nnx.Rngs):
        self.block = Block(dim, rngs)

    def __call__(self, tokens, x):
        pads = count_left_pads(tokens)
        return shard(self.block(x), None), pads


@jax.jit
def decode_step(params, x):
    return rms_norm(x) * params
'''


def _candidates(tmp_path):
    (tmp_path / "qwenish.py").write_text(SOURCE)
    return RealBackends().discover(SOURCE, tmp_path / "qwenish.py", tmp_path).candidates


def test_helpers_get_no_lens(tmp_path):
    cands = _candidates(tmp_path)
    assert {"shard", "count_left_pads", "rms_norm", "decode_step", "Block", "Model"} <= {c.qualname for c in cands}
    shown = [c.qualname for c in models_only(cands, SOURCE, lambda c: False)]
    assert shown == ["Block", "Model", "decode_step"]


def test_a_helper_with_a_saved_profile_keeps_its_lens(tmp_path):
    cands = _candidates(tmp_path)
    shown = [c.qualname for c in models_only(cands, SOURCE, lambda c: c.qualname == "shard")]
    assert shown == ["shard", "Block", "Model", "decode_step"]


def test_a_file_that_does_not_parse_keeps_every_lens(tmp_path):
    cands = _candidates(tmp_path)
    assert models_only(cands, SOURCE + "\ndef broken(:\n", lambda c: False) == cands
