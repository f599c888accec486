"""A ViT-B/16-layout vision transformer in Flax Linen (our own code), in the style of the
Linen ViTs people write after Google's ``vision_transformer``: a patch embedding
convolution, a class token, an ``Encoder`` that adds a learned position embedding and runs
``encoderblock_0`` … ``encoderblock_11`` (``Encoder1DBlock``: LayerNorm, multi-head
self-attention, residual; LayerNorm, ``MlpBlock``, residual), a final LayerNorm and a
``Dense`` head on the class token. Narrow widths keep the capture small; the depth (12)
and the structure are ViT-B's.

``bound()`` is the recipe's init factory: it initialises the parameters and returns
``model.bind(variables)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import linen as nn


class MlpBlock(nn.Module):
    mlp_dim: int

    @nn.compact
    def __call__(self, x):
        width = x.shape[-1]
        y = nn.Dense(self.mlp_dim)(x)
        y = nn.gelu(y)
        return nn.Dense(width)(y)


class Encoder1DBlock(nn.Module):
    mlp_dim: int
    num_heads: int

    @nn.compact
    def __call__(self, x):
        y = nn.LayerNorm()(x)
        y = nn.MultiHeadDotProductAttention(num_heads=self.num_heads)(y, y)
        x = x + y
        y = nn.LayerNorm()(x)
        return x + MlpBlock(self.mlp_dim)(y)


class Encoder(nn.Module):
    num_layers: int
    mlp_dim: int
    num_heads: int

    @nn.compact
    def __call__(self, x):
        pos = self.param("pos_embedding", nn.initializers.normal(stddev=0.02), (1,) + x.shape[1:])
        x = x + pos
        for i in range(self.num_layers):
            x = Encoder1DBlock(self.mlp_dim, self.num_heads, name=f"encoderblock_{i}")(x)
        return nn.LayerNorm(name="encoder_norm")(x)


class VisionTransformer(nn.Module):
    num_classes: int = 10
    patch: int = 8
    hidden: int = 32
    num_layers: int = 12
    mlp_dim: int = 64
    num_heads: int = 4

    @nn.compact
    def __call__(self, x):
        x = nn.Conv(self.hidden, (self.patch, self.patch), strides=(self.patch, self.patch), padding="VALID",
                    name="embedding")(x)
        n, h, w, c = x.shape
        x = jnp.reshape(x, (n, h * w, c))
        cls = self.param("cls", nn.initializers.zeros, (1, 1, c))
        x = jnp.concatenate([jnp.tile(cls, (n, 1, 1)), x], axis=1)
        x = Encoder(self.num_layers, self.mlp_dim, self.num_heads, name="Transformer")(x)
        return nn.Dense(self.num_classes, name="head")(x[:, 0])


IMAGE = (1, 32, 32, 3)  # NHWC, as Flax convolutions expect


def bound() -> VisionTransformer:
    """The init factory: the ViT bound to its freshly initialised parameters."""
    model = VisionTransformer()
    variables = model.init(jax.random.key(0), jnp.zeros(IMAGE, jnp.float32))
    return model.bind(variables)
