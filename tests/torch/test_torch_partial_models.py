"""A recipe's model named as a ``functools.partial`` of an ``nn.Module`` class
(``resnet_small = partial(ResNet, Block, [1, 1])``): built like the class, with the
partial's arguments first and the recipe's init after."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from capture.graph.model import tree_leaves  # noqa: E402

from torch_workspace import capture_in_process, profile, tensor, write  # noqa: E402

pytestmark = pytest.mark.torch

MODELS = """
from functools import partial

from torch import nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return self.fc(x).relu() + x


class Net(nn.Module):
    def __init__(self, block, depths, width=4, classes=10):
        super().__init__()
        self.blocks = nn.Sequential(*[block(width) for _ in range(sum(depths))])
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return self.head(self.blocks(x))


small = partial(Net, Block, [1, 1])
small_wide = partial(small, width=6, classes=3)
"""


def classes(cap):
    return [g.attrs.get("class") for g in cap.groups if g.kind == "module"]


def out_shape(cap):
    (out,) = tree_leaves(cap.outputs)
    return {v.id: v for v in cap.values}[out].shape


def test_partial_is_built_as_its_class(ws):
    write(ws, {"nets.py": MODELS})
    cap, _ = capture_in_process(ws, profile("nets:small", args=[tensor([2, 4])]))
    assert classes(cap).count("Block") == 2 and cap.meta["state"] == "fresh_init"
    assert out_shape(cap) == [2, 10]


def test_recipe_init_joins_the_partial_and_overrides_its_keywords(ws):
    write(ws, {"nets.py": MODELS})
    cap, _ = capture_in_process(ws, profile("nets:small_wide", args=[tensor([2, 6])],
                                            init={"args": [], "kwargs": {"classes": 5}}))
    assert out_shape(cap) == [2, 5]


def test_with_an_init_factory_the_factorys_module_is_the_model(ws):
    # as for any callable target: the partial is not called, the factory builds the model
    write(ws, {"nets.py": MODELS + "\n\ndef wide():\n    return Net(Block, [1], width=6, classes=2)\n"})
    cap, _ = capture_in_process(ws, profile("nets:small", args=[tensor([2, 6])], init={"factory": "nets:wide"}))
    assert classes(cap).count("Block") == 1 and out_shape(cap) == [2, 2]
    assert cap.meta["state"] == "factory_state"
