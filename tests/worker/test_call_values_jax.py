"""JAX callables built from, or given, a config object described in the recipe (issue
24): a Linen module whose field is a config dataclass, an NNX module whose constructor
takes one (``rngs`` still supplied by TensorViz), and a plain function taking a config
among its inputs (a static value of the trace)."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
flax = pytest.importorskip("flax")

from capture.graph import graphfile  # noqa: E402
from capture.graph.model import describe_tree, tree_leaves  # noqa: E402
from capture.jax import framework  # noqa: E402

from capture_workspace import forget_workspace_modules, profile_table, run_framework, tensor, write  # noqa: E402

pytestmark = pytest.mark.jax

MODELS = '''
import dataclasses

import jax.numpy as jnp
from flax import linen as nn
from flax import nnx
from flax import struct


@struct.dataclass
class MLPConfig:
    width: int = 16
    depth: int = 3
    out: int = 4


@dataclasses.dataclass(frozen=True)
class ScaleConfig:
    scale: float = 1.0
    power: int = 1


class LinenMLP(nn.Module):
    config: MLPConfig

    @nn.compact
    def __call__(self, x):
        for _ in range(self.config.depth):
            x = nn.relu(nn.Dense(self.config.width)(x))
        return nn.Dense(self.config.out)(x)


class NNXMLP(nnx.Module):
    def __init__(self, config, d_in, rngs: nnx.Rngs):
        self.layers = nnx.List([
            nnx.Linear(d_in if i == 0 else config.width, config.width, rngs=rngs) for i in range(config.depth)
        ])
        self.head = nnx.Linear(config.width, config.out, rngs=rngs)

    def __call__(self, x):
        for layer in self.layers:
            x = nnx.relu(layer(x))
        return self.head(x)


def scaled(x, config):
    return jnp.tanh(x * config.scale) ** config.power
'''


@pytest.fixture
def ws(tmp_path):
    write(tmp_path, {"jmodels.py": MODELS})
    yield tmp_path
    forget_workspace_modules(tmp_path)


def capture(ws, table):
    cap, _ = run_framework(framework, ws, table, None)
    return graphfile.decode(graphfile.encode(cap))


def call(target, **kwargs):
    return {"kind": "call", "target": target, "kwargs": kwargs}


def dots(cap) -> int:
    return sum(1 for n in cap.nodes if n.op == "dot_general")


def output(cap) -> str:
    return describe_tree(cap.outputs, {v.id: v for v in cap.values})


def test_a_linen_module_whose_field_is_a_config(ws):
    table = profile_table(
        "jmodels:LinenMLP", framework="jax",
        init={"kwargs": {"config": call("jmodels:MLPConfig", width=8, depth=2, out=3)}}, args=[tensor([2, 5])],
    )
    cap = capture(ws, table)
    assert cap.failure is None
    assert dots(cap) == 3  # depth 2, then the head
    assert output(cap) == "float32[2,3]"


def test_an_nnx_module_taking_a_config_keeps_its_supplied_rngs(ws):
    table = profile_table(
        "jmodels:NNXMLP", framework="jax",
        init={"kwargs": {"config": call("jmodels:MLPConfig", width=8, depth=1, out=2), "d_in": 5}},
        args=[tensor([2, 5])],
    )
    cap = capture(ws, table)
    assert cap.failure is None
    assert dots(cap) == 2
    assert output(cap) == "float32[2,2]"
    assert cap.meta["state"] == "fresh_init"


def test_a_function_taking_a_config_among_its_inputs(ws):
    table = profile_table(
        "jmodels:scaled", framework="jax",
        kwargs={"x": tensor([3, 4]), "config": call("jmodels:ScaleConfig", scale=0.5, power=3)},
    )
    cap = capture(ws, table)
    assert cap.failure is None
    ops = [n.op for n in cap.nodes]
    assert "tanh" in ops and "integer_pow" in ops
    [power] = [n for n in cap.nodes if n.op == "integer_pow"]
    assert power.params["y"] == 3
    # The config is a static input of the trace, not an array argument.
    assert len(list(tree_leaves(cap.inputs))) == 1
