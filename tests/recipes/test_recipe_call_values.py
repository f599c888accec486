"""The ``call`` value description: an object built by calling a class or function with
described arguments, nested to any depth; what validation accepts, and the profile, key
path and line of what it refuses."""

from __future__ import annotations

import pytest

from capture.recipe import (
    MAX_DEPTH,
    CallDesc,
    DictDesc,
    Recipe,
    RecipeError,
    StaticDesc,
    TensorDesc,
    parse_recipes_text,
    parse_value,
    profile_from_document,
)

GPT = """\
version = 1

[profiles.gpt]
model = "model:GPT"
init = { kwargs = { config = { kind = "call", target = "model:GPTConfig", kwargs = { n_layer = 2, n_embd = 64 } } } }
inputs = { args = [{ kind = "tensor", shape = [1, 16], dtype = "int64" }] }
"""

# The same setup written with sub-tables, as a person edits a long one.
GPT_TABLES = """\
version = 1

[profiles.gpt]
model = "model:GPT"

[profiles.gpt.init.kwargs.config]
kind = "call"
target = "model:GPTConfig"

[profiles.gpt.init.kwargs.config.kwargs]
n_layer = 2
n_embd = 64

[profiles.gpt.inputs]
args = [{ kind = "tensor", shape = [1, 16], dtype = "int64" }]
"""


def load(text: str, name: str = "gpt") -> Recipe:
    return profile_from_document(parse_recipes_text(text, file="recipes.toml"), name, text=text, file="recipes.toml")


def test_a_config_object_in_init():
    r = load(GPT)
    [(key, config)] = r.init.kwargs
    assert key == "config"
    assert config == CallDesc("model:GPTConfig", (), (("n_layer", StaticDesc(2)), ("n_embd", StaticDesc(64))))
    assert r.calls() == [("profiles.gpt.init.kwargs.config", config)]
    # The target is imported like a factory: it joins the refs the recipe names.
    assert r.factory_refs() == ["model:GPTConfig"]


def test_sub_tables_read_the_same():
    assert load(GPT_TABLES) == load(GPT)


def test_round_trip_through_plain_data():
    r = load(GPT)
    data = r.to_dict()
    assert data["init"]["kwargs"]["config"] == {
        "kind": "call", "target": "model:GPTConfig", "kwargs": {"n_layer": 2, "n_embd": 64},
    }
    assert Recipe.from_dict(data) == r


def test_nested_calls_tensors_and_every_target_form():
    desc = parse_value(
        {
            "kind": "call",
            "target": "transformers:AutoConfig.from_pretrained",
            "args": ["gpt2"],
            "kwargs": {
                "inner": {"kind": "call", "target": "configs/06_cfg.py:Inner", "kwargs": {
                    "deeper": {"kind": "call", "target": "pkg.mod:Outer.Nested"},
                    "table": {"kind": "tensor", "shape": [2, 3], "dtype": "float32"},
                }},
                "pairs": {"kind": "dict", "items": {"a b": {"kind": "call", "target": "m:f"}}},
            },
        },
        at="x",
    )
    assert isinstance(desc, CallDesc) and desc.target == "transformers:AutoConfig.from_pretrained"
    assert desc.args == (StaticDesc("gpt2"),)
    inner = dict(desc.kwargs)["inner"]
    assert inner.target == "configs/06_cfg.py:Inner"
    assert dict(inner.kwargs)["deeper"] == CallDesc("pkg.mod:Outer.Nested")
    assert isinstance(dict(inner.kwargs)["table"], TensorDesc)
    assert isinstance(dict(desc.kwargs)["pairs"], DictDesc)
    # An empty call writes only what it has.
    assert CallDesc("m:f").to_dict() == {"kind": "call", "target": "m:f"}


def test_tensors_inside_calls_are_leaves_in_written_order():
    r = Recipe.from_dict({
        "name": "p", "model": "m:Net",
        "init": {"kwargs": {"config": {"kind": "call", "target": "m:Config", "args": [
            {"kind": "tensor", "shape": [2], "dtype": "float32"},
        ], "kwargs": {
            "table": {"kind": "call", "target": "m:Table", "kwargs": {
                "w": {"kind": "tensor", "shape": ["rows", 4], "dtype": "float32"},
            }},
        }}}},
        "inputs": {"args": [{"kind": "tensor", "shape": [3], "dtype": "int64"}]},
    })
    assert [(leaf.index, leaf.section, leaf.input, leaf.path) for leaf in r.tensors()] == [
        (0, "init", "config", "profiles.p.init.kwargs.config.args[0]"),
        (1, "init", "config", "profiles.p.init.kwargs.config.kwargs.table.kwargs.w"),
        (2, "inputs", "args[0]", "profiles.p.inputs.args[0]"),
    ]
    # An unknown dimension inside a call is asked for like any other.
    [need] = r.unknown_dims()
    assert (need.input, need.path, need.axis, need.name) == (
        "config", "profiles.p.init.kwargs.config.kwargs.table.kwargs.w", 0, "rows",
    )
    assert [path for path, _ in r.calls()] == [
        "profiles.p.init.kwargs.config", "profiles.p.init.kwargs.config.kwargs.table",
    ]


def test_calls_in_inputs_for_jax():
    r = Recipe.from_dict({
        "name": "p", "framework": "jax", "model": "m:apply",
        "inputs": {"kwargs": {
            "x": {"kind": "tensor", "shape": [2, 3], "dtype": "float32"},
            "config": {"kind": "call", "target": "m:Config", "kwargs": {"depth": 2}},
        }},
    })
    assert dict(r.inputs.kwargs)["config"] == CallDesc("m:Config", (), (("depth", StaticDesc(2)),))


def profile(init: str) -> str:
    return f'version = 1\n\n[profiles.p]\nmodel = "model:GPT"\ninit = {init}\n'


@pytest.mark.parametrize(
    "text, key_path, line, problem",
    [
        pytest.param(
            profile('{ kwargs = { config = { kind = "call", target = "model:GPTConfig", kwargs = { n_layer = { kind = "tensr" } } } } }'),
            "profiles.p.init.kwargs.config.kwargs.n_layer.kind", 5, 'expected one of "tensor"', id="nested-value",
        ),
        pytest.param(
            profile('{ kwargs = { config = { kind = "call", kwargs = { n_layer = 2 } } } }'),
            "profiles.p.init.kwargs.config.target", 5, "missing target", id="no-target",
        ),
        pytest.param(
            profile('{ kwargs = { config = { kind = "call", target = "GPTConfig" } } }'),
            "profiles.p.init.kwargs.config.target", 5, 'expected "pkg.module:qualname"', id="target-without-module",
        ),
        pytest.param(
            profile('{ kwargs = { config = { kind = "call", target = "/abs/model.py:GPTConfig" } } }'),
            "profiles.p.init.kwargs.config.target", 5, "is absolute", id="absolute-path-target",
        ),
        pytest.param(
            profile('{ kwargs = { config = { kind = "call", target = "../up.py:GPTConfig" } } }'),
            "profiles.p.init.kwargs.config.target", 5, "leaves the workspace", id="path-leaves-workspace",
        ),
        pytest.param(
            profile('{ kwargs = { config = { kind = "call", target = "model:GPTConfig", args = 3 } } }'),
            "profiles.p.init.kwargs.config.args", 5, "expected an array", id="args-not-array",
        ),
        pytest.param(
            profile('{ kwargs = { config = { kind = "call", target = "model:GPTConfig", kwargs = { "n-layer" = 2 } } } }'),
            'profiles.p.init.kwargs.config.kwargs.n-layer', 5, "Python identifiers", id="kwarg-not-identifier",
        ),
        pytest.param(
            profile('{ kwargs = { config = { kind = "call", target = "model:GPTConfig", kwarg = { n = 1 } } } }'),
            "profiles.p.init.kwargs.config.kwarg", 5, "unknown key (expected kind, target, args, kwargs, then)",
            id="misspelt-key",
        ),
        pytest.param(
            'version = 1\n\n[profiles.p]\nmodel = "model:GPT"\n\n[profiles.p.init.kwargs.config]\nkind = "call"\n'
            'target = "model:GPTConfig"\n\n[profiles.p.init.kwargs.config.kwargs]\nn_head = 2\nn_layer = "four"\n'
            'vocab_size = { kind = "static" }\n',
            "profiles.p.init.kwargs.config.kwargs.vocab_size.value", 13, "missing value", id="sub-table-line",
        ),
    ],
)
def test_refusals_name_the_profile_key_path_and_line(text, key_path, line, problem):
    with pytest.raises(RecipeError) as e:
        load(text, "p")
    err = e.value
    assert (err.profile, err.key_path, err.line) == ("p", key_path, line)
    assert problem in err.problem
    assert str(err).startswith(f"recipes.toml:{line}: {key_path}: ")


def test_depth_is_bounded_through_calls():
    value: dict = {"kind": "call", "target": "m:f"}
    for _ in range(MAX_DEPTH + 1):
        value = {"kind": "call", "target": "m:f", "args": [value]}
    with pytest.raises(RecipeError, match=f"nested more than {MAX_DEPTH} deep"):
        parse_value(value, at="x")


def test_jax_requires_grad_inside_a_call_is_refused_where_it_is():
    with pytest.raises(RecipeError) as e:
        Recipe.from_dict({
            "name": "p", "framework": "jax", "model": "m:apply",
            "inputs": {"kwargs": {"config": {"kind": "call", "target": "m:Config", "kwargs": {
                "w": {"kind": "tensor", "shape": [2], "dtype": "float32", "requires_grad": True},
            }}}},
        })
    assert e.value.key_path == "profiles.p.inputs.kwargs.config.kwargs.w.requires_grad"


def test_input_limits_count_tensors_inside_calls():
    big = {"kind": "tensor", "shape": [2048, 2048], "dtype": "float32"}
    with pytest.raises(RecipeError, match="elements in total"):
        Recipe.from_dict({
            "name": "p", "model": "m:Net",
            "init": {"kwargs": {"config": {"kind": "call", "target": "m:Config", "args": [big, big]}}},
        })


# --------------------------------------------------------------------------- ref: an object named, not called

RESNET = """\
version = 1

[profiles.r]
model = "models:ResNet"
framework = "jax"
init = { kwargs = { block_cls = { kind = "ref", target = "models:ResNetBlock" }, act = { kind = "ref", target = "flax.linen:relu" }, conv = { kind = "call", target = "m:make", kwargs = { cls = { kind = "ref", target = "blocks/06_b.py:Conv" } } } } }
inputs = { args = [{ kind = "tensor", shape = [1, 8, 8, 3], dtype = "float32" }] }
"""


def test_a_ref_names_a_class_or_function_and_joins_the_imported_refs():
    from capture.recipe import RefDesc

    r = load(RESNET, "r")
    kwargs = dict(r.init.kwargs)
    assert kwargs["block_cls"] == RefDesc("models:ResNetBlock") and kwargs["act"] == RefDesc("flax.linen:relu")
    assert dict(kwargs["conv"].kwargs)["cls"] == RefDesc("blocks/06_b.py:Conv")
    # imported like a call's target, in the order written (the trust gate and the sources see them)
    assert r.factory_refs() == ["models:ResNetBlock", "flax.linen:relu", "m:make", "blocks/06_b.py:Conv"]
    assert r.to_dict()["init"]["kwargs"]["block_cls"] == {"kind": "ref", "target": "models:ResNetBlock"}
    assert Recipe.from_dict(r.to_dict()) == r


@pytest.mark.parametrize(
    "value, problem",
    [
        pytest.param('{ kind = "ref" }', "missing target: the class or function named", id="no-target"),
        pytest.param('{ kind = "ref", target = "ResNetBlock" }', 'expected "pkg.module:qualname"', id="bad-target"),
        pytest.param('{ kind = "ref", target = "m:A", args = [1] }', "unknown key", id="arguments"),
        pytest.param('{ kind = "reference", target = "m:A" }', '"call", "ref", found', id="kind"),
    ],
)
def test_a_bad_ref_names_its_key_path_and_line(value, problem):
    text = f'version = 1\n\n[profiles.r]\nmodel = "m:Net"\ninit = {{ kwargs = {{ block = {value} }} }}\n'
    with pytest.raises(RecipeError) as exc:
        load(text, "r")
    assert problem in str(exc.value)
    assert str(exc.value).startswith("recipes.toml:5: profiles.r.init.kwargs.block")
