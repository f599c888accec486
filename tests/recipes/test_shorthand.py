"""The command-line shorthand (``--input x=float32[2,3]``, ``--init 'config=GPTConfig(n_layer=4)'``),
shared with ``tensorviz open``: the VALUE grammar, read with Python's parser and never
evaluated (tensorviz_lsp/setup/shorthand_values.py), and the profile it builds."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capture.recipe import (
    CallDesc,
    DictDesc,
    Generator,
    ListDesc,
    NoneDesc,
    Recipe,
    RefDesc,
    StaticDesc,
    TensorDesc,
    TupleDesc,
)
from tensorviz_lsp.setup.shorthand import (
    Names,
    ShorthandError,
    build_recipe,
    call_setup,
    default_profile_name,
    factory_ref,
    parse_argument,
    parse_target,
    parse_value_spec,
)

NORMAL = Generator("normal", mean=0.0, std=1.0)
ZEROS = Generator("zeros")


def static_resolve(name: str) -> str:
    """A resolver for tests of the grammar alone: every name is in ``model``."""
    return f"model:{name}"


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("float32[2,3]", TensorDesc((2, 3), "float32", False, NORMAL), id="tensor"),
        pytest.param("int64[]", TensorDesc((), "int64", False, ZEROS), id="scalar-tensor"),
        pytest.param("float32[ batch , 3 ]", TensorDesc(("batch", 3), "float32", False, NORMAL), id="named-dim"),
        pytest.param("bool[?]", TensorDesc((None,), "bool", False, ZEROS), id="unknown-dim"),
        pytest.param("float32[2]:ones", TensorDesc((2,), "float32", False, Generator("ones")), id="ones"),
        pytest.param("float32[2]:full(1)", TensorDesc((2,), "float32", False, Generator("full", value=1)), id="full"),
        pytest.param("int32[4]:randint(0,10)", TensorDesc((4,), "int32", False, Generator("randint", low=0, high=10)), id="randint"),
        pytest.param("float64[2]:uniform(-1, 1)", TensorDesc((2,), "float64", False, Generator("uniform", low=-1.0, high=1.0)), id="uniform"),
        # The issue's `idx=int64 [1,16]` used to become a string: a space is only a space.
        pytest.param("int64 [1, 16]", TensorDesc((1, 16), "int64", False, ZEROS), id="space-before-shape"),
        pytest.param("int64 [1,16] : randint(0, 100)", TensorDesc((1, 16), "int64", False, Generator("randint", low=0, high=100)), id="spaced-generator"),
        pytest.param("8", StaticDesc(8), id="int"),
        pytest.param("-2.5e3", StaticDesc(-2500.0), id="float"),
        pytest.param("+3", StaticDesc(3), id="plus"),
        pytest.param("1e-6", StaticDesc(1e-6), id="exponent"),
        pytest.param("true", StaticDesc(True), id="true"),
        pytest.param("False", StaticDesc(False), id="false"),
        pytest.param("none", NoneDesc(), id="none"),
        pytest.param("None", NoneDesc(), id="None"),
        pytest.param("'relu'", StaticDesc("relu"), id="quoted"),
        pytest.param("'a b'", StaticDesc("a b"), id="quoted-space"),
        pytest.param('"8"', StaticDesc("8"), id="quoted-number-is-a-string"),
        pytest.param("'GPTConfig()'", StaticDesc("GPTConfig()"), id="a-quoted-call-is-a-string"),
        pytest.param("(3, 3)", TupleDesc((StaticDesc(3), StaticDesc(3))), id="tuple"),
        pytest.param("[1, 'a', none]", ListDesc((StaticDesc(1), StaticDesc("a"), NoneDesc())), id="list"),
        pytest.param("{'k': 1, 'x': float32[2]}", DictDesc((("k", StaticDesc(1)), ("x", TensorDesc((2,), "float32", False, NORMAL)))), id="dict"),
    ],
)
def test_values(text, expected):
    assert parse_value_spec(text) == expected


def test_infinity_and_nan_are_numbers():
    assert parse_value_spec("inf") == StaticDesc(math.inf)
    assert parse_value_spec("-inf") == StaticDesc(-math.inf)
    assert math.isnan(parse_value_spec("nan").value)


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("GPTConfig()", CallDesc("model:GPTConfig"), id="bare"),
        pytest.param(
            "GPTConfig(n_layer=4, n_embd=128)",
            CallDesc("model:GPTConfig", (), (("n_layer", StaticDesc(4)), ("n_embd", StaticDesc(128)))), id="keywords"),
        pytest.param(
            "Outer(Inner(2, bias=false), x=int64[1,16], ks=(3, 3))",
            CallDesc("model:Outer", (CallDesc("model:Inner", (StaticDesc(2),), (("bias", StaticDesc(False)),)),),
                     (("x", TensorDesc((1, 16), "int64", False, ZEROS)),
                      ("ks", TupleDesc((StaticDesc(3), StaticDesc(3)))))), id="nested-with-a-tensor"),
        pytest.param("transformers.LlamaConfig(vocab_size=100)",
                     CallDesc("model:transformers.LlamaConfig", (), (("vocab_size", StaticDesc(100)),)), id="dotted"),
    ],
)
def test_calls(text, expected):
    assert parse_value_spec(text, static_resolve) == expected


@pytest.mark.parametrize(
    "text, problem",
    [
        pytest.param("flaot32[2]", "unknown dtype 'flaot32'", id="dtype"),
        pytest.param("float32[2,-1]", "is not a size", id="negative"),
        pytest.param("float32[2", r"expected DTYPE\[DIMS\]", id="unclosed"),
        pytest.param("float32[2]:gauss", "unknown generator", id="generator"),
        pytest.param("float32[2]:full", "full takes 1 argument", id="arity"),
        pytest.param("int32[2]:normal(0,1)", "normal needs a floating-point dtype", id="generator-dtype"),
        # What used to become a silent string is an error that says how to write it.
        pytest.param("relu", r"relu is a name, not a value: a string is quoted \('relu'\)", id="bare-word"),
        pytest.param("GPTConfig", r"object is built by a call \(GPTConfig\(\)", id="class-without-call"),
        # without the model's module to look a name up in (with it, a name is the object: a ref)
        pytest.param("nn.GELU", r"nn.GELU is a name, not a value: a string is quoted \('nn.GELU'\), and an object is "
                     r"built by a call \(nn.GELU\(\), with its arguments\)", id="dotted-without-call"),
        pytest.param("'unterminated", "not a value Python can read", id="quote"),
        pytest.param("a b", "not a value Python can read", id="two-words"),
        pytest.param("float32", r"a tensor also needs its shape, e.g. float32\[2,3\]", id="dtype-alone"),
        pytest.param("x + 1", "nothing is evaluated here", id="expression"),
        pytest.param("lambda: 1", "nothing is evaluated here", id="lambda"),
        pytest.param("tv_factory:build", "given with --init-factory tv_factory:build or --inputs-factory", id="factory-ref"),
        pytest.param("setup/make.py:build", "a reference to a function, not a value", id="factory-path-ref"),
        pytest.param("{1: 2}", "dictionary keys are quoted strings", id="dict-key"),
        pytest.param("b'x'", "a bytes is not a value", id="bytes"),
        pytest.param("-'a'", "only a number can have a sign", id="sign"),
        pytest.param("GPTConfig()", "a call needs the model's module", id="call-without-module"),
        pytest.param("", "no value", id="empty"),
        pytest.param("float32[2**40]", r"dimension '2\*\*40' is not a size", id="expression-dim"),
    ],
)
def test_bad_values(text, problem):
    with pytest.raises(ShorthandError, match=problem):
        parse_value_spec(text)


def test_tensors_inside_calls_and_containers_take_unknown_and_scalar_shapes():
    assert parse_value_spec("f(x=float32[], y=[int8[?, 2]], s='int8[]')", static_resolve) == CallDesc(
        "model:f", (), (("x", TensorDesc((), "float32", False, NORMAL)),
                        ("y", ListDesc((TensorDesc((None, 2), "int8", False, ZEROS),))),
                        ("s", StaticDesc("int8[]"))))


@pytest.mark.parametrize(
    "text, problem",
    [
        pytest.param("f(*a)", r"\*a cannot be unpacked here", id="star"),
        pytest.param("f(**k)", r"\*\*k cannot be unpacked here", id="double-star"),
        pytest.param("f()(1)", "only a name or a dotted name can be called", id="call-of-a-call"),
        pytest.param("f(x=float32[2**3])", "is not a size", id="inner-bad-tensor"),
    ],
)
def test_bad_calls(text, problem):
    with pytest.raises(ShorthandError, match=problem):
        parse_value_spec(text, static_resolve)


def test_a_name_is_the_object_it_names():
    # Flax's block_cls=ResNetBlock, torchvision's block=Bottleneck, act=nn.relu: named, not called
    assert parse_value_spec("ResNetBlock", static_resolve) == RefDesc("model:ResNetBlock")
    assert parse_value_spec("f(act=nn.relu, blocks=[A, B])", static_resolve) == CallDesc(
        "model:f", (), (("act", RefDesc("model:nn.relu")),
                        ("blocks", ListDesc((RefDesc("model:A"), RefDesc("model:B"))))))
    assert RefDesc("model:A").to_dict() == {"kind": "ref", "target": "model:A"}
    # the words and dtypes keep their meaning
    assert parse_value_spec("none", static_resolve) == NoneDesc()
    with pytest.raises(ShorthandError, match="float32 is a dtype"):
        parse_value_spec("float32", static_resolve)


def test_a_name_the_model_module_does_not_know_says_what_it_has(tmp_path):
    (tmp_path / "models.py").write_text("import flax.linen as nn\n\nclass ResNetBlock(nn.Module):\n    pass\n")
    names = Names(tmp_path, tmp_path / "models.py", "models")
    assert parse_value_spec("ResNetBlock", names) == RefDesc("models:ResNetBlock")
    assert parse_value_spec("nn.relu", names) == RefDesc("flax.linen:relu")
    with pytest.raises(ShorthandError, match=r"ResNetBlok is not a value here: a string is quoted \('ResNetBlok'\), "
                       r"an object is built by a call \(ResNetBlok\(\.\.\.\)\), and a class or function is named "
                       r"as the model's module names it \(ResNetBlok is not defined or imported in models.py "
                       r"\(it has: ResNetBlock\)"):
        parse_value_spec("ResNetBlok", names)


def test_the_recipe_bounds_a_value():
    with pytest.raises(ShorthandError, match="nested more than 32 deep"):
        parse_value_spec("[" * 40 + "]" * 40)
    with pytest.raises(ShorthandError, match="100,003 characters long; at most 100,000"):
        parse_value_spec("'" + "a" * 100_001 + "'")


def test_named_and_positional_arguments():
    assert parse_argument("x=float32[2]")[0] == "x"
    assert parse_argument("float32[2]")[0] is None
    with pytest.raises(ShorthandError, match="nothing is evaluated here"):
        parse_argument("x==1")  # not NAME=VALUE, and not a value either
    with pytest.raises(ShorthandError, match="not a value Python can read"):
        parse_argument("a b=c")
    setup = call_setup(["float32[2]", "x=int8[1]", "3"])
    assert [type(a).__name__ for a in setup.args] == ["TensorDesc", "StaticDesc"]
    assert [k for k, _ in setup.kwargs] == ["x"]


def test_an_argument_error_names_the_flag_and_the_argument():
    with pytest.raises(ShorthandError) as info:
        call_setup(["config=GPTConfig"], "--init")
    assert (info.value.flag, info.value.name) == ("--init", "config")
    assert str(info.value).startswith("--init config=GPTConfig: GPTConfig is a name, not a value")
    with pytest.raises(ShorthandError, match="idx is given twice"):
        call_setup(["idx=int64[1]", "idx=int64[2]"], "--input")
    with pytest.raises(ShorthandError, match="to build the model with a function of yours, give --init-factory m:f"):
        call_setup(["factory=m:f"], "--init")
    with pytest.raises(ShorthandError, match="to make the inputs with a function of yours, give --inputs-factory m:f"):
        call_setup(["m:f"], "--input")


def test_targets(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text("")
    (tmp_path / "pkg" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    t = parse_target("pkg/model.py:Net.forward")
    assert (t.workspace, t.module, t.qualname, t.ref) == (tmp_path, "pkg.model", "Net.forward", "pkg.model:Net.forward")
    assert parse_target("pkg/__init__.py:f").module == "pkg"
    assert parse_target(str(tmp_path / "pkg" / "model.py") + ":f", tmp_path / "pkg").module == "model"
    # Named like the symbol, as the editor's lens names it (issue 30), numbered when taken.
    assert default_profile_name(t) == "Net_forward"
    assert default_profile_name(t, {"Net_forward"}) == "Net_forward_2"
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
    assert (r.name, r.model, r.framework) == ("MLP", "model:MLP", "jax")
    assert r.init.kwargs == (("width", StaticDesc(8)),)
    updated = build_recipe(t, inputs=["x=float32[4,3]"], existing=Recipe.from_dict({**r.to_dict(), "seed": 7}))
    assert updated.framework == "jax" and updated.seed == 7 and updated.init == r.init
    assert updated.inputs.kwargs[0][1].shape == (4, 3)
    plain = build_recipe(t, inputs=["float32[1]"])
    assert plain.framework == "torch" and "framework" not in plain.to_table()


def test_build_recipe_with_calls_and_factories(tmp_path, monkeypatch):
    (tmp_path / "model.py").write_text("")
    (tmp_path / "setup.py").write_text("def build():\n    pass\n")
    monkeypatch.chdir(tmp_path)
    t = parse_target("model.py:GPT")
    r = build_recipe(t, inits=["config=GPTConfig(n_layer=2, vocab_size=100)"], inputs=["idx=int64[1,16]"],
                     resolve=static_resolve)
    (key, config), = r.init.kwargs
    assert key == "config" and config == CallDesc("model:GPTConfig", (), (("n_layer", StaticDesc(2)), ("vocab_size", StaticDesc(100))))
    assert r.to_table()["init"] == {"args": [], "kwargs": {"config": {"kind": "call", "target": "model:GPTConfig",
                                                                     "kwargs": {"n_layer": 2, "vocab_size": 100}}}}
    made = build_recipe(t, init_factory=factory_ref("setup.py:build", tmp_path, "--init-factory"),
                        inputs_factory="setup:batch", existing=r)
    assert (made.init.factory, made.inputs.factory) == ("setup:build", "setup:batch")
    assert made.init.kwargs == () and made.inputs.kwargs == ()
    with pytest.raises(ShorthandError, match="either --init .* or --init-factory"):
        build_recipe(t, inits=["width=8"], init_factory="setup:build")
    with pytest.raises(ShorthandError, match="either --input/--fixture or --inputs-factory"):
        build_recipe(t, inputs=["x=float32[2]"], inputs_factory="setup:batch")
    with pytest.raises(ShorthandError, match="--abstract is a Torch choice"):
        build_recipe(t, framework="jax", evidence="abstract")


def test_factory_references(tmp_path, monkeypatch):
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "make-model.py").write_text("def build():\n    pass\n")
    (tmp_path / "setup.py").write_text("")
    monkeypatch.chdir(tmp_path)
    assert factory_ref("tv_factory:build", tmp_path, "--init-factory") == "tv_factory:build"
    assert factory_ref("setup.py:build", tmp_path, "--init-factory") == "setup:build"
    assert factory_ref("tools/make-model.py:build", tmp_path, "--init-factory") == "tools/make-model.py:build"
    for bad, problem in [("build", "expected MODULE:FUNCTION or FILE.py:FUNCTION, e.g. --init-factory setup.py:build"),
                         ("nofile.py:build", "no file nofile.py"), ("setup:1x", "is not a Python name"),
                         ("my-mod:build", "is not a dotted module name")]:
        with pytest.raises(ShorthandError, match=problem):
            factory_ref(bad, tmp_path, "--init-factory")


# --------------------------------------------------------------------------- property: text ↔ description


def _text(desc) -> str:
    """A description written in the shorthand (what a person would type)."""
    if isinstance(desc, TensorDesc):
        return f"{desc.dtype}[{', '.join(str(d) for d in desc.shape)}]"
    if isinstance(desc, StaticDesc):
        v = desc.value
        return ("true" if v else "false") if isinstance(v, bool) else repr(v)
    if isinstance(desc, NoneDesc):
        return "none"
    if isinstance(desc, ListDesc):
        return "[" + ", ".join(_text(d) for d in desc.items) + "]"
    if isinstance(desc, TupleDesc):
        return "(" + "".join(_text(d) + ", " for d in desc.items) + ")"
    if isinstance(desc, DictDesc):
        return "{" + ", ".join(f"{k!r}: {_text(d)}" for k, d in desc.items) + "}"
    args = [_text(d) for d in desc.args] + [f"{k}={_text(d)}" for k, d in desc.kwargs]
    return f"{desc.target.partition(':')[2]}({', '.join(args)})"


_names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda n: n not in ("true", "false", "none", "inf", "nan") and n.isidentifier() and n not in __import__("keyword").kwlist)
_leaves = st.one_of(
    st.integers(-(1 << 62), 1 << 62).map(StaticDesc),
    st.floats(allow_nan=False, allow_infinity=False).map(StaticDesc),
    st.booleans().map(StaticDesc),
    st.text(max_size=8).map(StaticDesc),
    st.just(NoneDesc()),
    st.builds(lambda shape, dtype: TensorDesc(tuple(shape), dtype, False, NORMAL if dtype == "float32" else ZEROS),
              st.lists(st.integers(0, 9), max_size=3), st.sampled_from(["float32", "int64", "bool"])),
)
_values = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: ListDesc(tuple(xs))),
        st.lists(inner, max_size=3).map(lambda xs: TupleDesc(tuple(xs))),
        st.dictionaries(st.text(max_size=4), inner, max_size=3).map(lambda d: DictDesc(tuple(d.items()))),
        st.builds(lambda name, args, kwargs: CallDesc(f"model:{name.capitalize()}", tuple(args), tuple(kwargs.items())),
                  _names, st.lists(inner, max_size=2), st.dictionaries(_names, inner, max_size=2)),
    ),
    max_leaves=12,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_values)
def test_what_a_description_says_in_the_shorthand_reads_back_as_it(desc):
    assert parse_value_spec(_text(desc), static_resolve) == desc


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=60))
def test_any_text_is_a_value_or_a_shorthand_error(text):
    try:
        parse_value_spec(text, static_resolve)
    except ShorthandError as exc:
        assert str(exc)


def test_token_ids_without_a_generator_draw_below_the_vocabulary(tmp_path, monkeypatch):
    # discovery reads idx as token ids bounded by config.vocab_size (nanoGPT's model)
    from config_models import NANO_GPT
    from discovery import discover_source
    from tensorviz_lsp.setup.shorthand import TokenIds

    (tmp_path / "model.py").write_text(NANO_GPT)
    monkeypatch.chdir(tmp_path)
    t = parse_target("model.py:GPT")
    (gpt,) = [c for c in discover_source(NANO_GPT, "model.py").candidates if c.qualname == "GPT"]
    tokens = TokenIds.of(gpt)

    def generator(inits, inputs):
        r = build_recipe(t, inits=inits, inputs=inputs, resolve=static_resolve, tokens=tokens)
        return (r.inputs.kwargs[0][1] if r.inputs.kwargs else r.inputs.args[0]).generator

    assert generator(["config=GPTConfig(vocab_size=100)"], ["idx=int64[1,16]"]) == Generator("randint", low=0, high=100)
    assert generator(["GPTConfig(vocab_size=7)"], ["int64[1,16]"]) == Generator("randint", low=0, high=7)  # by position
    # the config's own default when the call leaves it
    assert generator(["config=GPTConfig(n_layer=2)"], ["idx=int64[1,16]"]) == Generator("randint", low=0, high=50304)
    # a generator given, another dtype, another input or a bound nobody can tell: as written
    assert generator(["config=GPTConfig(vocab_size=100)"], ["idx=int64[1,16]:ones"]) == Generator("ones")
    assert generator(["config=GPTConfig(vocab_size=100)"], ["idx=float32[1,16]"]) == NORMAL
    assert generator(["config=GPTConfig(vocab_size=100)"], ["targets=int64[1,16]"]) == ZEROS
    assert generator(["config=GPTConfig(50)"], ["idx=int64[1,16]"]) == ZEROS  # a positional may set it
    assert generator(["config=make_config()"], ["idx=int64[1,16]"]) == ZEROS
    # without discovery's reading (--framework given, discovery not asked), zeros as before
    assert build_recipe(t, inits=["config=GPTConfig(vocab_size=100)"], inputs=["idx=int64[1,16]"],
                        resolve=static_resolve).inputs.kwargs[0][1].generator == ZEROS
