"""The command-line shorthand (``--input x=float32[2,3]``), shared with ``tensorviz open``."""

from __future__ import annotations

import pytest

from capture.recipe import Generator, NoneDesc, Recipe, StaticDesc, TensorDesc
from tensorviz_lsp.shorthand import (
    ShorthandError,
    build_recipe,
    call_setup,
    default_profile_name,
    parse_argument,
    parse_target,
    parse_value_spec,
)

NORMAL = Generator("normal", mean=0.0, std=1.0)


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("float32[2,3]", TensorDesc((2, 3), "float32", False, NORMAL), id="tensor"),
        pytest.param("int64[]", TensorDesc((), "int64", False, Generator("zeros")), id="scalar-tensor"),
        pytest.param("float32[ batch , 3 ]", TensorDesc(("batch", 3), "float32", False, NORMAL), id="named-dim"),
        pytest.param("bool[?]", TensorDesc((None,), "bool", False, Generator("zeros")), id="unknown-dim"),
        pytest.param("float32[2]:ones", TensorDesc((2,), "float32", False, Generator("ones")), id="ones"),
        pytest.param("float32[2]:full(1)", TensorDesc((2,), "float32", False, Generator("full", value=1)), id="full"),
        pytest.param("int32[4]:randint(0,10)", TensorDesc((4,), "int32", False, Generator("randint", low=0, high=10)), id="randint"),
        pytest.param("float64[2]:uniform(-1, 1)", TensorDesc((2,), "float64", False, Generator("uniform", low=-1.0, high=1.0)), id="uniform"),
        pytest.param("8", StaticDesc(8), id="int"),
        pytest.param("-2.5e3", StaticDesc(-2500.0), id="float"),
        pytest.param("true", StaticDesc(True), id="true"),
        pytest.param("False", StaticDesc(False), id="false"),
        pytest.param("none", NoneDesc(), id="none"),
        pytest.param("relu", StaticDesc("relu"), id="word"),
        pytest.param("'a b'", StaticDesc("a b"), id="quoted"),
        pytest.param('"8"', StaticDesc("8"), id="quoted-number-is-a-string"),
    ],
)
def test_values(text, expected):
    assert parse_value_spec(text) == expected


@pytest.mark.parametrize(
    "text, problem",
    [
        pytest.param("flaot32[2]", "unknown dtype 'flaot32'", id="dtype"),
        pytest.param("float32[2,-1]", "is not a size", id="negative"),
        pytest.param("float32[2", r"expected DTYPE\[DIMS\]", id="unclosed"),
        pytest.param("float32[2]:gauss", "unknown generator", id="generator"),
        pytest.param("float32[2]:full", "full takes 1 argument", id="arity"),
        pytest.param("int32[2]:normal(0,1)", "normal needs a floating-point dtype", id="generator-dtype"),
        pytest.param("'unterminated", None, id="quote"),
    ],
)
def test_bad_values(text, problem):
    if problem is None:
        assert parse_value_spec(text) == StaticDesc("'unterminated")
        return
    with pytest.raises(ShorthandError, match=problem):
        parse_value_spec(text)


def test_named_and_positional_arguments():
    assert parse_argument("x=float32[2]")[0] == "x"
    assert parse_argument("float32[2]")[0] is None
    assert parse_argument("a b=c") == (None, StaticDesc("a b=c"))
    setup = call_setup(["float32[2]", "x=int8[1]", "3"])
    assert [type(a).__name__ for a in setup.args] == ["TensorDesc", "StaticDesc"]
    assert [k for k, _ in setup.kwargs] == ["x"]


def test_targets(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text("")
    (tmp_path / "pkg" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    t = parse_target("pkg/model.py:Net.forward")
    assert (t.workspace, t.module, t.qualname, t.ref) == (tmp_path, "pkg.model", "Net.forward", "pkg.model:Net.forward")
    assert parse_target("pkg/__init__.py:f").module == "pkg"
    assert parse_target(str(tmp_path / "pkg" / "model.py") + ":f", tmp_path / "pkg").module == "model"
    assert default_profile_name(t) == "pkg_model_Net_forward"
    for bad, problem in [("pkg/model.py", "FILE.py:SYMBOL"), ("pkg/model.py:1x", "not a Python name"),
                         ("pkg/none.py:f", "no file"), ("pkg/model.txt:f", "not a .py file")]:
        with pytest.raises(ShorthandError, match=problem):
            parse_target(bad)
    with pytest.raises(ShorthandError, match="not inside the workspace"):
        parse_target("pkg/model.py:f", tmp_path / "elsewhere")


def test_build_recipe_new_and_update(tmp_path, monkeypatch):
    (tmp_path / "model.py").write_text("")
    monkeypatch.chdir(tmp_path)
    t = parse_target("model.py:MLP")
    r = build_recipe(t, inputs=["x=float32[2,3]"], inits=["width=8"], framework="jax")
    assert (r.name, r.model, r.framework) == ("model_MLP", "model:MLP", "jax")
    assert r.init.kwargs == (("width", StaticDesc(8)),)
    updated = build_recipe(t, inputs=["x=float32[4,3]"], existing=Recipe.from_dict({**r.to_dict(), "seed": 7}))
    assert updated.framework == "jax" and updated.seed == 7 and updated.init == r.init
    assert updated.inputs.kwargs[0][1].shape == (4, 3)
    plain = build_recipe(t, inputs=["float32[1]"])
    assert plain.framework == "torch" and "framework" not in plain.to_table()
