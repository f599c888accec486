"""The recipe's ``compile`` (issue 46): whether XLA compiles a JAX capture's program for its
devices: ``auto`` (the default, unwritten: with a mesh), ``on``, ``off``; JAX only; the
shorthand's ``--compile``."""

from __future__ import annotations

import pytest

from capture.recipe import Recipe, RecipeError
from tensorviz_lsp.setup.shorthand import ShorthandError, build_recipe, parse_target


def table(**extra):
    return {"name": "p", "framework": "jax", "model": "m:f", **extra}


@pytest.mark.parametrize("mode", ["auto", "on", "off"])
def test_the_modes(mode):
    r = Recipe.from_dict(table(compile=mode))
    assert r.compile == mode
    assert ("compile" in r.to_table()) == (mode != "auto")
    assert Recipe.from_dict(r.to_dict()) == r


def test_mistakes_name_the_key():
    with pytest.raises(RecipeError, match="expected one of 'auto', 'on', 'off'") as err:
        Recipe.from_dict(table(compile="always"))
    assert err.value.key_path == "profiles.p.compile"
    with pytest.raises(RecipeError, match="compile is a JAX key") as err:
        Recipe.from_dict({"name": "p", "framework": "torch", "model": "m:f", "compile": "on"})
    assert err.value.key_path == "profiles.p.compile"


def test_the_shorthand(tmp_path, monkeypatch):
    (tmp_path / "m.py").write_text("")
    monkeypatch.chdir(tmp_path)
    t = parse_target("m.py:f")
    r = build_recipe(t, inputs=["x=float32[4]"], framework="jax", compile_mode="on")
    assert r.compile == "on"
    assert build_recipe(t, existing=r, compile_mode="auto").compile == "auto"
    assert build_recipe(t, existing=r).compile == "on"  # kept when not given
    with pytest.raises(ShorthandError, match="--compile is a JAX choice"):
        build_recipe(t, inputs=["x=float32[4]"], framework="torch", compile_mode="off")
