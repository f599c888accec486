"""Names people wrote (issue 11, item 7) as the viewer reads them (``capture.analysis.value_names``):
real JAX and Torch captures name their inputs after the callable's parameters and their
PyTree paths (``x``, ``w1``, ``params.Dense_0.kernel``), keep the structure path
(``args[0]``, ``variables.params.Dense_0.kernel``) as the searchable path, and a capture
that recorded no names is named exactly as before."""

from __future__ import annotations

import pytest

from capture.graph import graphfile
from capture_workspace import forget_workspace_modules, profile_table, run_framework, tensor, write
from capture.analysis.value_names import input_names, key_suffix, measured_name, recorded_names

JAX_MODELS = """
import functools

import jax
from flax import linen as nn
from flax import nnx


def mlp(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


def star(x, *rest, mask):
    return x * mask + rest[0]


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(4)(x)


class Net(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.lin = nnx.Linear(3, 4, rngs=rngs)
        self.norm = nnx.BatchNorm(4, rngs=rngs)

    def __call__(self, x):
        return self.norm(self.lin(x))
"""

TORCH_MODELS = """
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(16, 8)

    def forward(self, input_ids, attention_mask=None):
        return self.embed(input_ids) * attention_mask.unsqueeze(-1)
"""

X = tensor([2, 3])


@pytest.fixture
def ws(tmp_path):
    yield tmp_path
    forget_workspace_modules(tmp_path)


def jax_capture(ws, model, **fields):
    pytest.importorskip("jax")
    pytest.importorskip("flax")
    from capture.jax import framework as fw

    write(ws, {"models.py": JAX_MODELS})
    cap, _ = run_framework(fw, ws, profile_table(model, framework="jax", **fields), None)
    return graphfile.decode(graphfile.encode(cap))  # as the viewer reads it: through the file


def torch_capture(ws, model, **fields):
    pytest.importorskip("torch")
    from capture.torch import framework as fw

    write(ws, {"tmodels.py": TORCH_MODELS})
    cap, _ = run_framework(fw, ws, profile_table(model, **fields), None)
    return graphfile.decode(graphfile.encode(cap))


def named(cap) -> dict[str, tuple[str, str]]:
    """``{name: (path, role)}`` for the capture's inputs, as the projection names them."""
    return {name: (path, role) for _, name, path, role in input_names(cap.inputs, cap.meta)}


# --------------------------------------------------------------------------- real JAX captures


@pytest.mark.jax
def test_jax_function_inputs_are_named_after_its_parameters(ws):
    cap = jax_capture(ws, "models:mlp", args=[X, tensor([3, 4]), tensor([4, 2])])
    assert named(cap) == {"x": ("args[0]", "input"), "w1": ("args[1]", "input"), "w2": ("args[2]", "input")}


@pytest.mark.jax
def test_jax_kwargs_keep_their_names_and_star_args_fall_back(ws):
    cap = jax_capture(ws, "models:star", args=[X, X], kwargs={"mask": X})
    assert named(cap) == {"x": ("args[0]", "input"), "args[1]": ("args[1]", "input"),
                          "mask": ("kwargs.mask", "input")}


@pytest.mark.jax
def test_linen_input_and_variables(ws):
    cap = jax_capture(ws, "models:MLP", args=[X])
    assert named(cap) == {
        "x": ("args[0]", "input"),
        "params.Dense_0.kernel": ("variables.params.Dense_0.kernel", "variable"),
        "params.Dense_0.bias": ("variables.params.Dense_0.bias", "variable"),
    }


@pytest.mark.jax
def test_nnx_module_state(ws):
    cap = jax_capture(ws, "models:Net", args=[X])
    got = named(cap)
    assert got["x"] == ("args[0]", "input")
    assert got["lin.kernel"] == ("state[0].lin.kernel.value", "variable")
    assert {n for n, (_, role) in got.items() if role == "variable"} == {
        "lin.kernel", "lin.bias", "norm.mean", "norm.var", "norm.scale", "norm.bias"}


# --------------------------------------------------------------------------- a real Torch capture


@pytest.mark.torch
@pytest.mark.parametrize(("fields", "expected"), [
    pytest.param({"args": [tensor([2, 5], "int64", generator={"kind": "randint", "low": 0, "high": 16}),
                           tensor([2, 5], generator={"kind": "ones"})]},
                 {"args[0]": "input_ids", "args[1]": "attention_mask"}, id="positional"),
    pytest.param({"args": [tensor([2, 5], "int64", generator={"kind": "randint", "low": 0, "high": 16})],
                  "kwargs": {"attention_mask": tensor([2, 5], generator={"kind": "ones"})}},
                 {"args[0]": "input_ids", "kwargs.attention_mask": "attention_mask"}, id="keyword"),
])
def test_torch_inputs_are_named_after_forward_parameters(ws, fields, expected):
    cap = torch_capture(ws, "tmodels:Encoder", **fields)
    got = {}
    for v, _, path, role in input_names(cap.inputs, cap.meta):
        name, role = measured_name(cap.values[v].measured)  # the tracer's label comes first
        got[path] = name
        assert role == "input"
    assert got == expected


# --------------------------------------------------------------------------- the rules


def values(n):
    return [{"value": i} for i in range(n)]


CALL = {"dict": [["args", {"tuple": values(2)}], ["kwargs", {"dict": [["mask", {"value": 2}]]}],
                 ["variables", {"dict": [["params", {"dict": [["Dense_0", {"dict": [["kernel", {"value": 3}]]}]]}]]}]]}


@pytest.mark.parametrize(("inputs", "expected"), [
    pytest.param(CALL, [(0, "args[0]", "args[0]", "input"), (1, "args[1]", "args[1]", "input"),
                        (2, "mask", "kwargs.mask", "input"),
                        (3, "variables.params.Dense_0.kernel", "variables.params.Dense_0.kernel", "variable")],
                 id="call-form"),
    pytest.param({"list": [{"value": 0}, {"tuple": [{"value": 1}]}]},
                 [(0, "args[0]", "args[0]", "input"), (1, "args[1][0]", "args[1][0]", "input")], id="root-list"),
    pytest.param({"value": 0}, [(0, "input", "input", "input")], id="root-value"),
    pytest.param({"dict": [["a", {"value": 0}], [3, {"value": 1}]]},
                 [(0, "a", "a", "input"), (1, "[3]", "[3]", "input")], id="root-dict"),
    pytest.param({"dict": [["args", {"tuple": [{"dict": [["odd key", {"value": 0}]]}]}],
                           ["kwargs", {"dict": [["y", {"list": [{"value": 1}]}]]}]]},
                 [(0, "args[0]['odd key']", "args[0]['odd key']", "input"), (1, "y[0]", "kwargs.y[0]", "input")],
                 id="nested"),
    pytest.param({"dict": [["args", {"tuple": []}], ["state", {"dict": [["w", {"value": 0}]]}]]},
                 [(0, "state.w", "state.w", "variable")], id="nnx-state"),
    pytest.param({"dict": [["args", "junk"], ["kwargs", {"dict": [["x", {"value": 99}], ["z", {"value": "1"}]]}]]},
                 [(99, "x", "kwargs.x", "input")], id="hostile"),
])
def test_without_recorded_names_the_structure_names_as_before(inputs, expected):
    assert input_names(inputs) == expected
    assert input_names(inputs, {"model_kind": "function"}) == expected


def test_recorded_names_replace_the_name_and_keep_the_path_and_role():
    meta = {"input_names": [[0, "x"], [1, "w1"], [2, "mask"], [3, "params.Dense_0.kernel"]]}
    assert input_names(CALL, meta) == [
        (0, "x", "args[0]", "input"), (1, "w1", "args[1]", "input"), (2, "mask", "kwargs.mask", "input"),
        (3, "params.Dense_0.kernel", "variables.params.Dense_0.kernel", "variable")]
    # a value the capture did not name keeps its structure name
    assert input_names(CALL, {"input_names": [[1, "w1"]]})[0] == (0, "args[0]", "args[0]", "input")


@pytest.mark.parametrize("meta", [
    pytest.param(None, id="none"),
    pytest.param([["x"]], id="not-a-dict"),
    pytest.param({"input_names": "x"}, id="not-a-list"),
    pytest.param({"input_names": [[0], [0, 1], ["0", "x"], [True, "x"], [1.0, "x"], [0, ""], [0, "x", 1], 7]},
                 id="bad-entries"),
])
def test_malformed_recorded_names_are_ignored(meta):
    assert recorded_names(meta) == {}
    assert [n for _, n, _, _ in input_names(CALL, meta)] == [
        "args[0]", "args[1]", "mask", "variables.params.Dense_0.kernel"]


def test_recorded_names_first_entry_wins_and_long_names_are_cut():
    assert recorded_names({"input_names": [[0, "x"], [0, "y"], [1, "n" * 500]]}) == {0: "x", 1: "n" * 200}


@pytest.mark.parametrize(("m", "expected"), [
    pytest.param({"param": "stem.weight"}, ("stem.weight", "param"), id="param"),
    pytest.param({"buffer": "norm.running_mean", "input": "x"}, ("norm.running_mean", "buffer"), id="buffer-first"),
    pytest.param({"input": "input_ids"}, ("input_ids", "input"), id="input"),
    pytest.param({"param": 7, "input": ""}, None, id="hostile"),
])
def test_measured_name(m, expected):
    assert measured_name(m) == expected


@pytest.mark.parametrize(("key", "suffix"), [("kernel", ".kernel"), (0, "[0]"), ("odd key", "['odd key']"),
                                             ("0a", "['0a']")])
def test_key_suffix(key, suffix):
    assert key_suffix(key) == suffix


def test_the_recorded_state_key_gives_the_variable_role():
    """The JAX worker records which input key holds the state (``meta["state_key"]``);
    the key names are guessed only for files written before it did."""
    tree = {"dict": [["args", {"tuple": [{"value": 0}]}], ["kwargs", {"dict": []}],
                     ["state", {"dict": [["w", {"value": 1}]]}], ["variables", {"dict": [["b", {"value": 2}]]}]]}
    roles = lambda meta: [(n, r) for _, n, _, r in input_names(tree, meta)]  # noqa: E731
    assert roles({"state_key": "variables"}) == [("args[0]", "input"), ("state.w", "input"), ("variables.b", "variable")]
    assert roles({"state_key": "state"}) == [("args[0]", "input"), ("state.w", "variable"), ("variables.b", "input")]
    # A function: nothing is state, whatever its keys are called.
    assert roles({"state_key": None}) == [("args[0]", "input"), ("state.w", "input"), ("variables.b", "input")]
    # Hostile values name no key; "args"/"kwargs" are never state.
    assert roles({"state_key": 7}) == roles({"state_key": "args"}) == roles({"state_key": None})
    # Written before state_key: both legacy keys.
    assert roles({}) == [("args[0]", "input"), ("state.w", "variable"), ("variables.b", "variable")]
