"""A Torch model that wraps Hugging Face ``transformers``' GPT-2 (built from a config, no
weights downloaded), as a project's own code wraps a library model: ``self.lm``. Three
factories differ in one config field each, like an edit between two captures:
``n_layer`` 2 → 3, and ``n_embd`` 64 → 96."""

import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel

BASE = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=32, use_cache=False)


class Wrapped(nn.Module):
    """The language model under ``lm`` and a small head on its logits."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.lm = GPT2LMHeadModel(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids).logits.log_softmax(-1)


def two_layers() -> Wrapped:
    return Wrapped(GPT2Config(**BASE))


def three_layers() -> Wrapped:
    return Wrapped(GPT2Config(**{**BASE, "n_layer": 3}))


def wider() -> Wrapped:
    return Wrapped(GPT2Config(**{**BASE, "n_embd": 96}))
