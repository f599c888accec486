"""TensorViz's own test framework ("fake") is hidden from users: recipes naming it are
invalid and messages list only torch and jax, unless ``TENSORVIZ_TEST_FRAMEWORKS=1``."""

from __future__ import annotations

import pytest

from capture.frameworks import FRAMEWORKS as REGISTRY
from capture.frameworks import TEST_FRAMEWORKS_ENV, framework_info, framework_names
from capture.recipe import FRAMEWORKS, Recipe, RecipeError, parse_profile

USERS_SEE = "expected one of 'torch', 'jax', found 'fake'"


@pytest.fixture
def user_env(monkeypatch):
    monkeypatch.delenv(TEST_FRAMEWORKS_ENV, raising=False)


def test_users_see_only_torch_and_jax(user_env):
    assert tuple(FRAMEWORKS) == ("torch", "jax") and "fake" not in FRAMEWORKS
    assert framework_names() == ("torch", "jax")
    assert list(REGISTRY) == ["torch", "jax"] and "fake" not in REGISTRY
    with pytest.raises(KeyError, match=r"known: torch, jax'?\)"):
        framework_info("fake")


@pytest.mark.parametrize("value", ["0", "", "true", "yes"])
def test_only_the_exact_switch_shows_it(monkeypatch, value):
    monkeypatch.setenv(TEST_FRAMEWORKS_ENV, value)
    assert "fake" not in FRAMEWORKS


def test_a_recipe_naming_fake_is_invalid_for_users(user_env):
    with pytest.raises(RecipeError) as info:
        Recipe.from_dict({"name": "p", "framework": "fake", "model": "m:f"})
    assert USERS_SEE in str(info.value)
    with pytest.raises(RecipeError) as info:
        parse_profile("p", {"framework": "fake", "model": "m:f"})
    assert USERS_SEE in str(info.value) and "profiles.p.framework" in str(info.value)


def test_an_unknown_framework_message_lists_only_user_frameworks(user_env):
    with pytest.raises(RecipeError) as info:
        Recipe.from_dict({"name": "p", "framework": "tensorflow", "model": "m:f"})
    assert "expected one of 'torch', 'jax', found 'tensorflow'" in str(info.value)


def test_the_switch_shows_it(monkeypatch):
    monkeypatch.setenv(TEST_FRAMEWORKS_ENV, "1")
    assert tuple(FRAMEWORKS) == ("torch", "jax", "fake")
    assert Recipe.from_dict({"name": "p", "framework": "fake", "model": "m:f"}).framework == "fake"
    assert framework_info("fake").requires == ("msgpack",)
