"""Hostile recipes: every generated TOML document, profile table and value description
is either a valid recipe or a clean :class:`RecipeError`, never another exception."""

from __future__ import annotations

import sys

import math

import pytest
import tomlkit
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from capture.recipe import (
    DTYPES,
    GENERATORS,
    Recipe,
    RecipeError,
    parse_profile,
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


@pytest.mark.slow
@SETTINGS
@given(descriptions)
@example({"kind": "tensor", "shape": [1] * 40, "dtype": "float32"})
@example(DEEP)
@example({"kind": "tensor", "shape": [4096, 4096], "dtype": "float32"})
@example({"kind": "tensor", "shape": [2], "dtype": "float32", "generator": {"kind": "normal", "std": math.nan}})
def test_value_descriptions_are_valid_or_a_recipe_error(desc):
    _check(lambda: parse_value(desc, at="x"))


@pytest.mark.slow
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


@pytest.mark.slow
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


# -- where errors point, and what a hostile file costs (issue 29 item 11) -----------------

BAD_NAMES = [
    pytest.param('version = 1\n\n[profiles."bad name"]\nmodel = "m:f"\n', "bad name", 3, id="header"),
    pytest.param('version = 1\n[profiles.ok]\nmodel = "m:f"\n\n[profiles."a.b"]\nmodel = "m:f"\n', "a.b", 5,
                 id="dotted-among-others"),
    pytest.param('version = 1\nprofiles = { "x y" = { model = "m:f" } }\n', "x y", 2, id="inline"),
    pytest.param('version = 1\n\n\n[profiles.""]\nmodel = "m:f"\n', "", 4, id="empty"),
    pytest.param('version = 1\n[profiles.' + "n" * 200 + ']\nmodel = "m:f"\n', "n" * 200, 2, id="too-long"),
    pytest.param("version = 1\n[profiles.'caf\u00e9']\nmodel = 'm:f'\n", "caf\u00e9", 2, id="literal-key"),
]


@pytest.mark.parametrize("text, name, line", BAD_NAMES)
def test_a_profile_name_error_carries_its_line(text, name, line):
    with pytest.raises(RecipeError) as info:
        profile_from_document(parse_recipes_text(text, file="r.toml"), name, text=text, file="r.toml")
    assert "profile name" in info.value.problem
    assert info.value.line == line and str(info.value).startswith(f"r.toml:{line}: ")


def test_a_profile_nested_too_deeply_carries_its_line():
    table: dict = {"model": "m:f", "inputs": {"args": []}}
    leaf = table["inputs"]["args"]
    for _ in range(5000):
        leaf.append([])
        leaf = leaf[0]
    text = 'version = 1\n\n[profiles.deep]\nmodel = "m:f"\n'
    with pytest.raises(RecipeError) as info:
        parse_profile("deep", table, text=text)
    assert info.value.line in (3, 4)


@pytest.mark.parametrize("depth", [None, 50_000], ids=["twice the recursion limit", "50k"])
def test_profiles_in_survives_arrays_nested_deeper_than_the_parser_recurses(depth):
    from tensorviz_lsp.backends import profiles_in

    # Deeper than the parser can recurse now (a library imported earlier in the session
    # may have raised the limit: 1,000 levels then parse).
    depth = depth or 2 * max(sys.getrecursionlimit(), 1_000)

    text = 'version = 1\n[profiles.p]\nmodel = "m:f"\nx = ' + "[" * depth + "]" * depth + "\n"
    assert profiles_in(text) == {}  # unreadable: no lenses, no crash of the lens request
    with pytest.raises(RecipeError, match="nested too deeply"):
        parse_recipes_text(text)


def test_every_profile_of_a_big_file_is_checked_against_one_line_locator(monkeypatch):
    """The editor's recipe diagnostics: one locator for the file, however many profiles
    and problems (a locator per profile made 4,000 profiles take 44 s)."""
    from capture.recipe import toml_lines as parse_module
    from tensorviz_lsp.backends import every_problem

    built = []
    original = parse_module._Locator.__init__

    def counting(self, text):
        built.append(len(text))
        original(self, text)

    monkeypatch.setattr(parse_module._Locator, "__init__", counting)
    monkeypatch.setattr(parse_module, "_locators", [])
    n = 300
    text = "version = 1\n" + "".join(
        f'\n[profiles.p{i}]\nmodel = "m:f"\nseed = "x"\ndevice = "tpu"\n' for i in range(n))
    issues = every_problem(text)
    assert len(built) == 1
    assert len(issues) == 2 * n
    # An equal text in another string object (a buffer and the file on disk) reuses it.
    copy = "".join(list(text))
    assert copy is not text and parse_module.locator_for(copy) is parse_module.locator_for(text)
    assert len(built) == 1
    lines = text.splitlines()
    for issue in issues:
        key = issue.path.rsplit(".", 1)[-1]
        assert lines[issue.line - 1].startswith(f"{key} = "), issue
        header = max(i for i in range(issue.line) if lines[i].startswith("[profiles."))
        assert lines[header] == f"[profiles.{issue.profile}]"
