"""TensorViz's own test framework ("fake") lives in the tests, not in the package: recipes
naming it are invalid and messages list only torch and jax, unless
``TENSORVIZ_TEST_PLUGINS`` names its file."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import capture
import fake_framework
from capture.frameworks import FRAMEWORKS as REGISTRY
from capture.frameworks import TEST_PLUGINS_ENV, framework_info, framework_names, load_framework
from capture.recipe import FRAMEWORKS, Recipe, RecipeError, parse_profile

USERS_SEE = "expected one of 'torch', 'jax', found 'fake'"


@pytest.fixture
def user_env(monkeypatch):
    monkeypatch.delenv(TEST_PLUGINS_ENV, raising=False)


def test_users_see_only_torch_and_jax(user_env):
    assert tuple(FRAMEWORKS) == ("torch", "jax") and "fake" not in FRAMEWORKS
    assert framework_names() == ("torch", "jax")
    assert list(REGISTRY) == ["torch", "jax"] and "fake" not in REGISTRY
    with pytest.raises(KeyError, match=r"known: torch, jax'?\)"):
        framework_info("fake")


def test_test_helpers_do_not_ship():
    package = Path(capture.__file__).parent
    assert not (package / "frameworks" / "fake.py").exists() and not (package / "synthetic.py").exists()
    assert importlib.util.find_spec("capture.frameworks.fake") is None


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("1", id="old-switch"),
        pytest.param("fake", id="no-path"),
        pytest.param("fake=relative/fake_framework.py", id="relative-path"),
        pytest.param("torch=/abs/plugin.py", id="shadows-torch"),
        pytest.param("not-a-name=/abs/plugin.py", id="bad-name"),
    ],
)
def test_a_malformed_plugin_setting_is_refused_by_name(monkeypatch, value):
    monkeypatch.setenv(TEST_PLUGINS_ENV, value)
    with pytest.raises(ValueError, match=TEST_PLUGINS_ENV):
        framework_names()


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


def test_the_setting_adds_the_plugin(monkeypatch):
    monkeypatch.setenv(TEST_PLUGINS_ENV, fake_framework.PLUGIN)
    assert framework_names() == ("torch", "jax", "fake")
    assert FRAMEWORKS == ("torch", "jax")  # what a user may name (the CLI's choices)
    assert Recipe.from_dict({"name": "p", "framework": "fake", "model": "m:f"}).framework == "fake"
    assert framework_info("fake").requires == ("msgpack",)
    assert load_framework("fake").VERSION == fake_framework.VERSION


NPU_PLUGIN = '''
from capture.frameworks.capabilities import Capabilities

VERSION = "1"
CAPABILITIES = Capabilities(label="Npu", devices=("cpu", "npu"), device_forms={"npu": "both"})
'''


@pytest.mark.parametrize(("framework", "device", "problem"), [
    pytest.param("npu", "npu", None, id="bare"),
    pytest.param("npu", "npu:3", None, id="indexed"),
    pytest.param("npu", "npu:03", "expected", id="bad-index"),
    pytest.param("npu", "cuda:0", 'is for Torch/JAX captures: a npu capture runs on "cpu" or "npu" / "npu:N"',
                 id="a-family-it-does-not-declare"),
    pytest.param("torch", "npu:0", 'is for Npu captures: a torch capture runs on "cpu" or "cuda:N"', id="torch"),
])
def test_a_framework_declares_its_own_device_family(monkeypatch, tmp_path, framework, device, problem):
    """A device family no shipped framework has is the declaring framework's own: the
    recipe's device grammar and its messages come from the declarations."""
    plugin = tmp_path / "npu_plugin.py"
    plugin.write_text(NPU_PLUGIN)
    monkeypatch.setenv(TEST_PLUGINS_ENV, f"npu={plugin}")
    table = {"name": "p", "framework": framework, "model": "m:f", "device": device}
    if problem is None:
        assert Recipe.from_dict(table).device == device
    else:
        with pytest.raises(RecipeError, match=problem.replace("(", r"\(").replace(")", r"\)")):
            Recipe.from_dict(table)
