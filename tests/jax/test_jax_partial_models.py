"""A recipe's model named as a ``functools.partial`` of a Flax module class, the way
Flax's ImageNet example names ``ResNet18 = partial(ResNet, stage_sizes=…, block_cls=…)``:
built like the class, with the partial's arguments first and the recipe's init after."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
flax = pytest.importorskip("flax")

from capture.graph.model import tree_leaves  # noqa: E402
from capture.worker.errors import CaptureError  # noqa: E402

from jax_workspace import SPEC_INPUT, capture_in_process, forget_workspace_modules, profile, write  # noqa: E402

pytestmark = pytest.mark.jax

# Our own small model in the style of the example: a block class passed as a field value.
LINEN = """
from functools import partial
from typing import Any, Sequence

import flax.linen as nn

ModuleDef = Any


class Block(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        return nn.relu(nn.Dense(self.features)(x)) + x


class Wide(Block):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.features)(x) * 2.0


class Stack(nn.Module):
    depths: Sequence[int]
    block_cls: ModuleDef
    num_outputs: int
    width: int = 3

    @nn.compact
    def __call__(self, x):
        for _ in range(sum(self.depths)):
            x = self.block_cls(self.width)(x)
        return nn.Dense(self.num_outputs)(x)


Stack2 = partial(Stack, depths=[1, 1], block_cls=Block)
Stack2Wide = partial(Stack2, block_cls=Wide, num_outputs=5)
Ordered = partial(Stack, [2], Block)
"""

NNX = """
import functools

from flax import nnx


class Head(nnx.Module):
    def __init__(self, din: int, dout: int, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(din, dout, rngs=rngs)

    def __call__(self, x):
        return self.linear(x)


Head3 = functools.partial(Head, 3)
"""


@pytest.fixture
def ws(tmp_path):
    yield tmp_path
    forget_workspace_modules(tmp_path)


def modules(cap):
    return [g.attrs["class"] for g in cap.groups if g.kind == "module"]


def out_shape(cap):
    (out,) = tree_leaves(cap.outputs)
    return cap.values[out].shape


def test_linen_partial_is_built_with_its_bound_fields(ws):
    write(ws, {"models.py": LINEN})
    cap, _ = capture_in_process(ws, profile("models:Stack2", args=[SPEC_INPUT], init={"args": [], "kwargs": {"num_outputs": 4}}))
    assert cap.meta["model_kind"] == "linen" and cap.meta["state"] == "fresh_init"
    assert modules(cap).count("Block") == 2 and "Wide" not in modules(cap)
    assert out_shape(cap) == [2, 4]


def test_nested_partial_keywords_of_the_outer_one_win(ws):
    write(ws, {"models.py": LINEN})
    cap, _ = capture_in_process(ws, profile("models:Stack2Wide", args=[SPEC_INPUT]))
    assert modules(cap).count("Wide") == 2 and "Block" not in modules(cap)
    assert out_shape(cap) == [2, 5]


def test_recipe_keywords_override_the_partials_and_positional_ones_join_it(ws):
    write(ws, {"models.py": LINEN})
    cap, _ = capture_in_process(ws, profile(
        "models:Stack2", args=[SPEC_INPUT], init={"args": [], "kwargs": {"num_outputs": 4, "depths": [3]}}))
    assert modules(cap).count("Block") == 3
    forget_workspace_modules(ws)
    cap, _ = capture_in_process(ws, profile("models:Ordered", args=[SPEC_INPUT], init={"args": [6], "kwargs": {}}))
    assert modules(cap).count("Block") == 2 and out_shape(cap) == [2, 6]


def test_a_missing_field_is_the_class_constructors_error(ws):
    write(ws, {"models.py": LINEN})
    with pytest.raises(TypeError, match="num_outputs"):
        capture_in_process(ws, profile("models:Stack2", args=[SPEC_INPUT]))


def test_nnx_partial_gets_its_rngs_from_the_seed(ws):
    write(ws, {"heads.py": NNX})
    cap, _ = capture_in_process(ws, profile("heads:Head3", args=[SPEC_INPUT], init={"args": [7], "kwargs": {}}))
    assert cap.meta["model_kind"] == "nnx" and cap.meta["state"] == "fresh_init"
    assert out_shape(cap) == [2, 7]


def test_a_partial_of_a_plain_class_is_not_taken_for_a_module(ws):
    write(ws, {"other.py": "import functools\n\nclass Box:\n    def __init__(self, n):\n        self.n = n\n\n"
                           "Boxed = functools.partial(Box, 2)\n"})
    with pytest.raises(CaptureError, match="plain JAX function"):
        capture_in_process(ws, profile("other:Boxed", args=[SPEC_INPUT], init={"args": [1], "kwargs": {}}))
