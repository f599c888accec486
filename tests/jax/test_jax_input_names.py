"""Names people wrote (issue 11, item 7): a JAX capture records, in
``meta["input_names"]``, each input leaf's name from the callable's signature and its
PyTree path (``x``, ``w1``, ``params.Dense_0.kernel``), beside the unchanged
``inputs`` structure (``args`` / ``kwargs`` / ``variables`` / ``state``)."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
flax = pytest.importorskip("flax")

from capture.graph.model import tree_leaves  # noqa: E402

from jax_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write  # noqa: E402

pytestmark = pytest.mark.jax

MODELS = """
import functools

import jax
import jax.numpy as jnp
from flax import linen as nn
from flax import nnx


def mlp(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


@jax.jit
def jitted(x, w):
    return x @ w


def star(x, *rest, scale):
    return x * scale + rest[0]


def tree_fn(params, x):
    return x @ params["dense"]["w"] + params["b"][0]


def tree_inputs():
    return {"args": ({"dense": {"w": jnp.ones((3, 4))}, "b": [jnp.ones((4,))]}, jnp.ones((2, 3)))}


def affine(scale, x, b):
    return x * scale + b


def partial_factory():
    return functools.partial(affine, 2.0)


class Scaler:
    def apply(self, x, y):
        return x * y


scale_apply = Scaler().apply


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = False):
        x = nn.Dense(8)(x)
        x = nn.BatchNorm(use_running_average=not train)(x)
        return nn.Dense(4, kernel_init=nn.with_partitioning(nn.initializers.lecun_normal(), (None, "model")))(x)


class Net(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.lin = nnx.Linear(3, 4, rngs=rngs)
        self.norm = nnx.BatchNorm(4, rngs=rngs)
        self.layers = nnx.List([nnx.Linear(4, 4, rngs=rngs)])

    def __call__(self, tokens):
        return self.layers[0](self.norm(self.lin(tokens)))


def encode(encoder, x, *, head):
    return head(encoder(x))


def two_modules():
    return functools.partial(encode, Net(nnx.Rngs(0)), head=nnx.Linear(4, 2, rngs=nnx.Rngs(1)))
"""


@pytest.fixture
def ws(tmp_path):
    write(tmp_path, {"models.py": MODELS})
    yield tmp_path
    forget_workspace_modules(tmp_path)


def names(ws, model, **fields):
    """``(capture, {structure path: recorded name})``: each value leaf of the inputs by
    where it sits (``args[0]``, ``kwargs.scale``, ``variables.params…``)."""
    cap, _ = capture_in_process(ws, profile(model, **fields))
    recorded = {}
    for v, name in cap.meta["input_names"]:
        assert type(v) is int and isinstance(name, str) and v not in recorded
        recorded[v] = name
    # every array leaf of the inputs is named, and nothing else
    assert sorted(recorded) == sorted(tree_leaves(cap.inputs))
    return cap, {path: recorded[v] for path, v in _paths(cap.inputs, "")}


def _paths(tree, path):
    if "value" in tree:
        yield path, tree["value"]
    for i, c in enumerate(tree.get("list") or tree.get("tuple") or []):
        yield from _paths(c, f"{path}[{i}]")
    for k, c in tree.get("dict") or []:
        yield from _paths(c, f"{path}.{k}" if path else str(k))


X = tensor([2, 3])


@pytest.mark.parametrize(("model", "fields", "expected"), [
    pytest.param("models:mlp", {"args": [X, tensor([3, 4]), tensor([4, 2])]},
                 {"args[0]": "x", "args[1]": "w1", "args[2]": "w2"}, id="function"),
    pytest.param("models:jitted", {"args": [X, tensor([3, 4])]}, {"args[0]": "x", "args[1]": "w"}, id="jax.jit"),
    pytest.param("models:star", {"args": [X, X], "kwargs": {"scale": X}},
                 {"args[0]": "x", "args[1]": "args[1]", "kwargs.scale": "scale"}, id="star-args-fall-back"),
    pytest.param("models:mlp", {"args": [X], "kwargs": {"w2": tensor([4, 2]), "w1": tensor([3, 4])}},
                 {"args[0]": "x", "kwargs.w1": "w1", "kwargs.w2": "w2"}, id="kwargs-keep-their-names"),
    pytest.param("models:tree_fn", {"inputs": {"factory": "models:tree_inputs"}},
                 {"args[0].b[0]": "params.b[0]", "args[0].dense.w": "params.dense.w", "args[1]": "x"}, id="pytree-paths"),
    pytest.param("models:affine", {"init": {"factory": "models:partial_factory"}, "args": [X, X]},
                 {"args[0]": "x", "args[1]": "b"}, id="functools.partial"),
    pytest.param("models:scale_apply", {"args": [X, X]},
                 {"args[0]": "x", "args[1]": "y"}, id="bound-method"),
])
def test_arguments_are_named_after_the_callable_parameters(ws, model, fields, expected):
    _, got = names(ws, model, **fields)
    assert got == expected


def test_linen_inputs_and_variables(ws):
    cap, got = names(ws, "models:MLP", args=[X])
    assert cap.meta["model_kind"] == "linen"
    assert got == {
        "args[0]": "x",
        "variables.params.Dense_0.kernel": "params.Dense_0.kernel",
        "variables.params.Dense_0.bias": "params.Dense_0.bias",
        "variables.params.BatchNorm_0.scale": "params.BatchNorm_0.scale",
        "variables.params.BatchNorm_0.bias": "params.BatchNorm_0.bias",
        "variables.batch_stats.BatchNorm_0.mean": "batch_stats.BatchNorm_0.mean",
        "variables.batch_stats.BatchNorm_0.var": "batch_stats.BatchNorm_0.var",
        "variables.params.Dense_1.bias": "params.Dense_1.bias",
        # a boxed (nn.Partitioned) kernel is named by where it sits, not by its .value
        "variables.params.Dense_1.kernel.value": "params.Dense_1.kernel",
    }


@pytest.mark.slow
def test_nnx_module_state_is_named_by_attribute_path(ws):
    cap, got = names(ws, "models:Net", args=[X])
    assert cap.meta["model_kind"] == "nnx"
    assert got == {
        "args[0]": "tokens",
        "state.0.lin.kernel.value": "lin.kernel", "state.0.lin.bias.value": "lin.bias",
        "state.0.norm.mean.value": "norm.mean", "state.0.norm.var.value": "norm.var",
        "state.0.norm.scale.value": "norm.scale", "state.0.norm.bias.value": "norm.bias",
        "state.0.layers.0.kernel.value": "layers[0].kernel", "state.0.layers.0.bias.value": "layers[0].bias",
    }


def test_nnx_modules_a_partial_binds_are_prefixed_by_their_parameter(ws):
    _, got = names(ws, "models:encode", init={"factory": "models:two_modules"}, args=[X])
    assert got["args[0]"] == "x"
    assert got["state.0.lin.kernel.value"] == "encoder.lin.kernel"
    assert got["state.1.kernel.value"] == "head.kernel"
    assert sorted(n.split(".")[0] for p, n in got.items() if p.startswith("state")) == ["encoder"] * 8 + ["head"] * 2
