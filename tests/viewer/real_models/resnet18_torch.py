"""A ResNet-18-layout conv net from Hugging Face ``transformers``' own ResNet code.

Nothing here is written for TensorViz: ``ResNetModel`` is the library's class, built
from a config only (no weights are downloaded). The layout is ResNet-18's (basic
blocks, two per stage, four stages); the widths are small so the capture stays small.
"""

from transformers import ResNetConfig, ResNetModel

CONFIG = dict(
    num_channels=3,
    embedding_size=16,
    hidden_sizes=[16, 32, 64, 128],
    depths=[2, 2, 2, 2],
    layer_type="basic",
    hidden_act="relu",
)


def build() -> ResNetModel:
    """The init factory: a freshly initialised ResNet-18-layout model (seeded by the profile)."""
    return ResNetModel(ResNetConfig(**CONFIG))
