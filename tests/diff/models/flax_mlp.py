"""A Flax Linen MLP in the style of the Flax examples, at two feature sizes."""

from typing import Sequence

import jax
import jax.numpy as jnp
from flax import linen as nn


class MLP(nn.Module):
    features: Sequence[int]

    @nn.compact
    def __call__(self, x):
        for i, feat in enumerate(self.features):
            x = nn.Dense(feat)(x)
            if i != len(self.features) - 1:
                x = nn.relu(x)
        return x


def _bound(features):
    model = MLP(features)
    variables = model.init(jax.random.key(0), jnp.zeros((2, 8), jnp.float32))
    return model.bind(variables)


def narrow() -> MLP:
    return _bound([16, 16, 4])


def wide() -> MLP:
    return _bound([16, 32, 4])
