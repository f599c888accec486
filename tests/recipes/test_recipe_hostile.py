"""Hostile recipes: every generated TOML document, profile table and value description
is either a valid recipe or a clean :class:`RecipeError`, never another exception."""

from __future__ import annotations

import math

import tomlkit
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from capture.recipe import (
    DTYPES,
    GENERATORS,
    Recipe,
    RecipeError,
    parse_recipes_text,
    parse_value,
    profile_from_document,
)
from spec_examples import SPEC_RECIPE as SPEC_EXAMPLE

DEEP: list = [1]
for _ in range(40):
    DEEP = [DEEP]

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["float32", "int8", "bool", "tensor", "list", "dict", "tuple", "none", "static", "batch", "?"]),
)
anything = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=8), st.sampled_from(["kind", "shape", "dtype", "items", "value"])), inner, max_size=4),
    ),
    max_leaves=20,
)

dims = st.one_of(st.integers(-2, 5000), st.none(), st.sampled_from(["batch", "?", "", "1x", "seq_len"]), st.floats(0, 4))
generators = st.one_of(
    st.sampled_from(GENERATORS + ("bogus",)),
    st.fixed_dictionaries(
        {"kind": st.sampled_from(GENERATORS + ("bogus",))},
        optional={
            "value": scalars, "mean": scalars, "std": scalars, "low": scalars, "high": scalars, "extra": scalars,
        },
    ),
    anything,
)
tensors = st.fixed_dictionaries(
    {"kind": st.just("tensor")},
    optional={
        "shape": st.one_of(st.lists(dims, max_size=5), anything),
        "dtype": st.one_of(st.sampled_from(DTYPES + ("float", "f32", "")), anything),
        "requires_grad": st.one_of(st.booleans(), scalars),
        "generator": generators,
        "junk": scalars,
    },
)
descriptions = st.recursive(
    st.one_of(tensors, scalars, st.just({"kind": "none"}), anything),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.fixed_dictionaries({"kind": st.sampled_from(["list", "tuple"]), "items": st.lists(inner, max_size=3)}),
        st.fixed_dictionaries({"kind": st.just("dict"), "items": st.dictionaries(st.text(max_size=5), inner, max_size=3)}),
        st.fixed_dictionaries(
            {"kind": st.just("call")},
            optional={
                "target": st.one_of(st.sampled_from(["m:F", "pkg.m:F.g", "d/06_f.py:F", "F", "../x.py:F", ""]), scalars),
                "args": st.one_of(st.lists(inner, max_size=3), scalars),
                "kwargs": st.one_of(st.dictionaries(st.text(max_size=5), inner, max_size=3), scalars),
                "junk": scalars,
            },
        ),
    ),
    max_leaves=12,
)
call_setups = st.one_of(
    st.fixed_dictionaries({}, optional={"args": st.lists(descriptions, max_size=3),
                                        "kwargs": st.dictionaries(st.text(max_size=6), descriptions, max_size=3)}),
    st.fixed_dictionaries({"factory": st.one_of(st.sampled_from(["m:f", "pkg.m:F.g", "m", ":f"]), scalars)}),
    anything,
)
profiles = st.fixed_dictionaries(
    {},
    optional={
        "kind": st.one_of(st.sampled_from(["model", "training_step"]), scalars),
        "framework": st.one_of(st.sampled_from(["torch", "jax", "fake", "tf"]), scalars),
        "model": st.one_of(st.sampled_from(["model:net", "a.b:C.d", "bad", "a:"]), scalars),
        "mode": st.one_of(st.sampled_from(["eval", "train"]), scalars),
        "device": st.one_of(st.sampled_from(["cpu", "cuda:0", "cuda:12", "cuda", "cuda:-1", "tpu"]), scalars),
        "grad_enabled": st.one_of(st.booleans(), scalars),
        "seed": st.one_of(st.integers(-5, 1 << 40), scalars),
        "init": call_setups,
        "inputs": call_setups,
        "step": st.one_of(st.fixed_dictionaries({}, optional={"loss": st.one_of(st.sampled_from(["sum", "mean", "max"]), anything),
                                                              "optimizer": anything}), anything),
        "other": anything,
    },
)


def _check(outcome_fn):
    try:
        result = outcome_fn()
    except RecipeError as exc:
        text = str(exc)  # must render
        assert text
        assert exc.line is None or exc.line >= 1
        return None
    assert isinstance(result, (Recipe,)) or result is not None
    return result


@SETTINGS
@given(descriptions)
@example({"kind": "tensor", "shape": [1] * 40, "dtype": "float32"})
@example(DEEP)
@example({"kind": "tensor", "shape": [4096, 4096], "dtype": "float32"})
@example({"kind": "tensor", "shape": [2], "dtype": "float32", "generator": {"kind": "normal", "std": math.nan}})
def test_value_descriptions_are_valid_or_a_recipe_error(desc):
    _check(lambda: parse_value(desc, at="x"))


@SETTINGS
@given(profiles)
def test_profile_tables_are_valid_or_a_recipe_error(table):
    recipe = _check(lambda: Recipe.from_dict({"name": "p", **table}))
    if recipe is not None:
        # A valid recipe survives its own plain form.
        assert Recipe.from_dict(recipe.to_dict()) == recipe
        assert isinstance(recipe.unknown_dims(), list)


def _to_toml(value):
    """TOML cannot hold null; drop None the way a user could not write it either."""
    if isinstance(value, dict):
        return {str(k): _to_toml(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_to_toml(v) for v in value if v is not None]
    if isinstance(value, int) and not -(1 << 63) <= value < (1 << 63):
        return str(value)
    return value


@SETTINGS
@given(profiles)
def test_toml_documents_are_valid_or_a_recipe_error(table):
    try:
        text = tomlkit.dumps({"version": 1, "profiles": {"p": _to_toml(table)}})
    except Exception:
        return  # not representable as TOML at all
    _check(lambda: profile_from_document(parse_recipes_text(text), "p", text=text))


@SETTINGS
@given(st.data())
def test_mutated_spec_example_text_is_valid_or_a_recipe_error(data):
    text = SPEC_EXAMPLE
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(text)))
        action = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        chunk = data.draw(st.sampled_from(['"', "[", "]", "{", "}", ",", "=", "\n", "#", "null", "-1", "x", ".", "'"]))
        if action == "insert":
            text = text[:pos] + chunk + text[pos:]
        elif action == "delete":
            text = text[:pos] + text[pos + len(chunk):]
        else:
            text = text[:pos] + chunk + text[pos + 1:]

    def load():
        doc = parse_recipes_text(text, file="r.toml")
        names = list(doc.get("profiles", {})) or ["jax_example"]
        return profile_from_document(doc, names[0], text=text, file="r.toml")

    _check(load)


@SETTINGS
@given(st.text(max_size=200))
def test_arbitrary_text_is_a_recipe_error_or_valid(text):
    _check(lambda: profile_from_document(parse_recipes_text(text), "p", text=text))
