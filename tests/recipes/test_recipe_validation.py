"""Recipe validation: what is accepted, and the precise message (profile, key path,
TOML line) for what is not."""

from __future__ import annotations

import sys

import pytest

from capture.recipe import (
    MAX_INPUT_ARRAYS,
    MAX_INPUT_ELEMENTS,
    DictDesc,
    Generator,
    ListDesc,
    NoneDesc,
    Recipe,
    RecipeError,
    StaticDesc,
    TensorDesc,
    TupleDesc,
    leaf_seed,
    parse_recipes_text,
    parse_value,
    profile_from_document,
)
from spec_examples import SPEC_RECIPE as SPEC_EXAMPLE



def load(text: str, name: str) -> Recipe:
    return profile_from_document(parse_recipes_text(text, file="recipes.toml"), name, text=text, file="recipes.toml")


def test_the_spec_example():
    r = load(SPEC_EXAMPLE, "jax_example")
    assert (r.kind, r.framework, r.model, r.mode, r.device, r.grad_enabled, r.seed) == (
        "model", "jax", "model:net", "eval", "cpu", False, 0)
    assert r.init.is_empty
    assert r.inputs.args == (TensorDesc((2, 3), "float32", False, Generator("full", value=1)),)
    assert r.unknown_dims() == []
    assert Recipe.from_dict(r.to_dict()) == r
    assert r.to_dict()["inputs"]["args"][0]["generator"] == {"kind": "full", "value": 1}


def test_framework_defaults_to_torch():
    r = load('version = 1\n[profiles.p]\nmodel = "m:Net"\n', "p")
    assert r.framework == "torch" and not r.framework_explicit
    assert "framework" not in r.to_table() and r.to_dict()["framework"] == "torch"


def test_value_descriptions():
    assert parse_value(3) == StaticDesc(3)
    assert parse_value("relu") == StaticDesc("relu")
    assert parse_value(True) == StaticDesc(True)
    assert parse_value({"kind": "static", "value": 2.5}) == StaticDesc(2.5)
    assert parse_value({"kind": "none"}) == NoneDesc()
    assert parse_value([1, {"kind": "none"}]) == ListDesc((StaticDesc(1), NoneDesc()))
    assert parse_value({"kind": "tuple", "items": [1]}) == TupleDesc((StaticDesc(1),))
    d = parse_value({"kind": "dict", "items": {"a": {"kind": "tensor", "shape": [], "dtype": "int64"}}})
    assert d == DictDesc((("a", TensorDesc((), "int64", False, Generator("zeros"))),))
    t = parse_value({"kind": "tensor", "shape": [2], "dtype": "bfloat16"})
    assert t.generator == Generator("normal", mean=0.0, std=1.0)


@pytest.mark.parametrize(
    "generator, dtype, expected",
    [
        pytest.param({"kind": "zeros"}, "int8", Generator("zeros"), id="zeros"),
        pytest.param("ones", "float16", Generator("ones"), id="ones-shortcut"),
        pytest.param({"kind": "arange"}, "int32", Generator("arange"), id="arange"),
        pytest.param({"kind": "full", "value": 2.0}, "int32", Generator("full", value=2), id="full-int-from-float"),
        pytest.param({"kind": "full", "value": True}, "bool", Generator("full", value=True), id="full-bool"),
        pytest.param({"kind": "normal", "mean": 1, "std": 0.5}, "float32", Generator("normal", mean=1.0, std=0.5), id="normal"),
        pytest.param({"kind": "uniform", "low": -1, "high": 1}, "float64", Generator("uniform", low=-1.0, high=1.0), id="uniform"),
        pytest.param({"kind": "randint", "low": 0, "high": 10}, "int64", Generator("randint", low=0, high=10), id="randint"),
        pytest.param({"kind": "randint", "high": 2}, "bool", Generator("randint", low=0, high=2), id="randint-bool"),
    ],
)
def test_generators(generator, dtype, expected):
    t = parse_value({"kind": "tensor", "shape": [3], "dtype": dtype, "generator": generator})
    assert t.generator == expected


def profile(body: str) -> str:
    return f'version = 1\n\n[profiles.p]\nmodel = "m:f"\n{body}\n'


@pytest.mark.parametrize(
    "text, key_path, line, problem",
    [
        pytest.param(profile('framework = "tensorflow"'), "profiles.p.framework", 5, "expected one of 'torch', 'jax'",
                     id="framework"),
        pytest.param('version = 1\n[profiles.p]\nkind = "model"\n', "profiles.p.model", 2, "missing model", id="no-model"),
        pytest.param(profile('device = "gpu"'), "profiles.p.device", 5, 'expected "cpu", "cuda:N", or "tpu"', id="device"),
        pytest.param(profile('device = "cuda"'), "profiles.p.device", 5, 'expected "cpu", "cuda:N", or "tpu"',
                     id="device-no-index"),
        pytest.param(profile('device = "tpu:x"'), "profiles.p.device", 5, 'expected "cpu", "cuda:N", or "tpu"',
                     id="device-tpu-bad-index"),
        pytest.param(profile('device = "tpu"'), "profiles.p.device", 5, "is for JAX captures", id="device-tpu-torch"),
        pytest.param(profile('framework = "torch"\ndevice = "tpu:0"'), "profiles.p.device", 6, "is for JAX captures",
                     id="device-tpu-n-torch"),
        pytest.param(profile("seed = -1"), "profiles.p.seed", 5, "expected an integer from 0", id="seed"),
        pytest.param(profile("grad_enabled = 1"), "profiles.p.grad_enabled", 5, "expected true or false", id="grad"),
        pytest.param(profile('mode = "training"'), "profiles.p.mode", 5, "expected one of 'eval', 'train'", id="mode"),
        pytest.param(profile("colour = 3"), "profiles.p.colour", 5, "unknown key", id="unknown-key"),
        pytest.param(profile('init = { factory = "m:f", args = [] }'), "profiles.p.init.factory", 5, "not both",
                     id="factory-and-args"),
        pytest.param(profile('inputs = { factory = "not a ref" }'), "profiles.p.inputs.factory", 5,
                     'expected "pkg.module:qualname"', id="bad-factory"),
        pytest.param(profile('inputs = { args = [{ kind = "tensor", shape = [2], dtype = "f32" }] }'),
                     "profiles.p.inputs.args[0].dtype", 5, "unknown dtype 'f32'", id="dtype"),
        pytest.param(profile('inputs = { args = [{ kind = "tensor", shape = [-2], dtype = "float32" }] }'),
                     "profiles.p.inputs.args[0].shape[0]", 5, "non-negative", id="negative-dim"),
        pytest.param(profile('inputs = { args = [{ kind = "tensor", dtype = "float32" }] }'),
                     "profiles.p.inputs.args[0].shape", 5, "missing shape", id="no-shape"),
        pytest.param(profile('inputs = { args = [{ kind = "tensr" }] }'),
                     "profiles.p.inputs.args[0].kind", 5, 'expected one of "tensor"', id="kind"),
        pytest.param(profile('inputs = { args = [{ shape = [2] }] }'),
                     "profiles.p.inputs.args[0]", 5, "needs a kind", id="no-kind"),
        pytest.param(
            profile('\n[profiles.p.inputs]\nargs = [\n  1,\n  { kind = "tensor", shape = [2], dtype = "int32", generator = { kind = "normal" } },\n]'),
            "profiles.p.inputs.args[1].generator.kind", 9, "normal needs a floating-point dtype", id="sub-table-line"),
        pytest.param(profile('inputs = { kwargs = { x = { kind = "tensor", shape = [2], dtype = "float32", generator = { kind = "uniform", low = 1, high = 1 } } } }'),
                     "profiles.p.inputs.kwargs.x.generator.high", 5, "high must be greater than low", id="uniform"),
        pytest.param(profile('inputs = { args = [{ kind = "tensor", shape = [2], dtype = "uint8", generator = { kind = "full", value = 256 } }] }'),
                     "profiles.p.inputs.args[0].generator.value", 5, "uint8 holds 0 to 255", id="full-range"),
        # Issue 39 item 6: a NaN or infinite fill was accepted (every value downstream NaN).
        pytest.param(profile('inputs = { args = [{ kind = "tensor", shape = [2], dtype = "float32", generator = { kind = "full", value = nan } }] }'),
                     "profiles.p.inputs.args[0].generator.value", 5, "expected a finite number, found nan", id="full-nan"),
        pytest.param(profile('inputs = { args = [{ kind = "tensor", shape = [2], dtype = "float64", generator = { kind = "full", value = -inf } }] }'),
                     "profiles.p.inputs.args[0].generator.value", 5, "expected a finite number, found -inf", id="full-inf"),
        pytest.param(profile('inputs = { args = [{ kind = "tensor", shape = [2], dtype = "int8", generator = { kind = "randint", low = 0, high = 1000 } }] }'),
                     "profiles.p.inputs.args[0].generator.high", 5, "int8 holds -128 to 127", id="randint-range"),
        pytest.param(profile('inputs = { args = [{ kind = "tensor", shape = [2], dtype = "int32", requires_grad = true }] }'),
                     "profiles.p.inputs.args[0].requires_grad", 5, "only floating-point and complex", id="int-grad"),
        pytest.param(profile('framework = "jax"\ninputs = { args = [{ kind = "tensor", shape = [2], dtype = "float32", requires_grad = true }] }'),
                     "profiles.p.inputs.args[0].requires_grad", 6, "JAX has no per-array requires_grad flag", id="jax-grad"),
        pytest.param(profile('framework = "jax"\nmode = "train"'), "profiles.p.mode", 6, 'JAX capture uses mode = "eval"', id="jax-train"),
        pytest.param(profile('framework = "jax"\nkind = "training_step"'), "profiles.p.kind", 6, "unavailable for JAX",
                     id="jax-step"),
        pytest.param(profile('step = { loss = "sum" }'), "profiles.p.step", 5, 'needs kind = "training_step"', id="step-kind"),
        pytest.param(profile('kind = "training_step"\nstep = { loss = "max" }'), "profiles.p.step.loss", 6, 'expected "sum", "mean"',
                     id="step-loss"),
        pytest.param(profile('inputs = { kwargs = { "not valid" = 1 } }'), 'profiles.p.inputs.kwargs."not valid"', 5,
                     "Python identifiers", id="kwarg-name"),
        pytest.param("version = 2\n", "version", 1, "unsupported recipes version 2", id="version"),
        pytest.param("[profiles.p]\nmodel = 'm:f'\n", "version", 1, "missing version", id="no-version"),
        pytest.param("version = 1\nprofiles = 3\n", "profiles", 2, "profiles must be a table", id="profiles-not-table"),
        pytest.param("version = 1\n[profiles.p\nmodel = 1\n", "", 2, "invalid TOML", id="toml-syntax"),
    ],
)
def test_invalid_recipes_name_the_key_path_and_line(text, key_path, line, problem):
    with pytest.raises(RecipeError) as e:
        load(text, "p")
    err = e.value
    assert err.key_path == key_path
    assert err.line == line
    assert problem in err.problem
    assert str(err).startswith(f"recipes.toml:{line}: " + (f"{key_path}: " if key_path else ""))
    if key_path.startswith("profiles.p"):
        assert err.profile == "p"


def test_line_of_a_profile_among_others():
    text = profile('seed = 1') + '\n# another\n[profiles.q]\nmodel = "m:g"\nseed = "x"\n'
    with pytest.raises(RecipeError) as e:
        load(text, "q")
    assert (e.value.key_path, e.value.line) == ("profiles.q.seed", 10)


def test_input_array_limit_names_the_numbers():
    args = [{"kind": "tensor", "shape": [1], "dtype": "float32"}] * (MAX_INPUT_ARRAYS + 1)
    with pytest.raises(RecipeError) as e:
        Recipe.from_dict({"name": "p", "model": "m:f", "inputs": {"args": args}})
    assert f"{MAX_INPUT_ARRAYS + 1:,} arrays; at most {MAX_INPUT_ARRAYS:,}" in str(e.value)


def test_input_element_limit_counts_init_and_inputs():
    half = {"kind": "tensor", "shape": [2048, 1024], "dtype": "float32"}
    ok = Recipe.from_dict({"name": "p", "model": "m:f", "init": {"args": [half]}, "inputs": {"args": [half]}})
    assert sum(t.desc.numel for t in ok.tensors()) == MAX_INPUT_ELEMENTS
    one_more = {"kind": "tensor", "shape": [1], "dtype": "float32"}
    with pytest.raises(RecipeError) as e:
        Recipe.from_dict({"name": "p", "model": "m:f", "init": {"args": [half]}, "inputs": {"args": [half, one_more]}})
    assert f"{MAX_INPUT_ELEMENTS + 1:,} elements in total; at most {MAX_INPUT_ELEMENTS:,}" in str(e.value)


def test_unknown_dims_and_leaf_order():
    r = Recipe.from_dict({
        "name": "p", "model": "m:C",
        "init": {"kwargs": {"w": {"kind": "tensor", "shape": [3], "dtype": "float32"}}},
        "inputs": {"args": [{"kind": "tuple", "items": [{"kind": "tensor", "shape": [None, "seq"], "dtype": "int32"}]}],
                   "kwargs": {"mask": {"kind": "tensor", "shape": ["?"], "dtype": "bool"}}},
    })
    leaves = r.tensors()
    assert [(l.index, l.section, l.input, l.path) for l in leaves] == [
        (0, "init", "w", "profiles.p.init.kwargs.w"),
        (1, "inputs", "args[0]", "profiles.p.inputs.args[0].items[0]"),
        (2, "inputs", "mask", "profiles.p.inputs.kwargs.mask"),
    ]
    assert [(n.input, n.axis, n.name) for n in r.unknown_dims()] == [
        ("args[0]", 0, None), ("args[0]", 1, "seq"), ("mask", 0, None)]
    assert leaf_seed(0, 2) != leaf_seed(1, 2) and leaf_seed(5, 0) == leaf_seed(5, 0)


def test_training_step_defaults_and_factories():
    r = Recipe.from_dict({"name": "p", "model": "m:f", "kind": "training_step",
                          "step": {"loss": {"factory": "losses:ce"}, "optimizer": {"factory": "opt:sgd"}}})
    assert r.step.loss == "factory" and r.step.loss_factory == "losses:ce" and r.step.optimizer_factory == "opt:sgd"
    assert r.factory_refs() == ["losses:ce", "opt:sgd"]
    assert Recipe.from_dict(r.to_dict()) == r
    assert Recipe.from_dict({"name": "p", "model": "m:f", "kind": "training_step"}).step.loss == "sum"


@pytest.mark.parametrize("one_line", [True, False], ids=["one-line", "a-level-a-line"])
def test_a_call_nested_too_deep_for_toml_names_its_line(one_line):
    """Issue 39 item 6: a call nested 300 deep was refused by the TOML parser's recursion
    limit without a line. The refusal names where the nesting goes deepest."""
    inner = '{ kind = "tensor", shape = [2], dtype = "float32" }'
    for _ in range(300):
        inner = '{ kind = "call", target = "model:Cfg", args = [' + ("" if one_line else "\n") + inner + "] }"
    text = 'version = 1\n\n[profiles.p]\nmodel = "model:Net"\n# a comment with { [ that counts for nothing\n' \
           "init = { args = [" + inner + "] }\n"
    # At Python's default recursion limit, as the CLI and the language server run (an
    # earlier test or library in this process may have raised it: then TOML's parser gets
    # through and the recipe's own depth check refuses instead).
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        with pytest.raises(RecipeError) as e:
            load(text, "p")
    finally:
        sys.setrecursionlimit(limit)
    err = e.value
    assert "nested too deeply" in err.problem
    assert err.line == (6 if one_line else 6 + 300), err.line
    assert str(err).startswith(f"recipes.toml:{err.line}: ")
