"""Steps after construction in a recipe (``init.then``, a call's ``then``): the strict,
hostile validator with key paths and TOML lines, and the round trip (issue 36, item 4)."""

from __future__ import annotations

import pytest

from capture.recipe import CallDesc, CallStep, RecipeError, SetStep, parse_profile, parse_recipes_text


def table(init=None, inputs=None):
    return {"model": "m:M", "init": init or {}, "inputs": inputs or {}}


def test_steps_round_trip():
    config = {"kind": "call", "target": "m:GPT.get_default_config",
              "then": [{"set": "model_type", "value": "gpt-nano"}, {"set": "vocab_size", "value": 100}]}
    then = [{"call": "setup_caches", "kwargs": {"max_batch_size": 1, "max_seq_length": 64}},
            {"set": "attention.kv_cache", "value": {"kind": "none"}}]
    r = parse_profile("p", table({"kwargs": {"config": config}, "then": then}))
    assert r.init.then == (CallStep("setup_caches", (), (("max_batch_size", _static(1)), ("max_seq_length", _static(64)))),
                           SetStep("attention.kv_cache", _none()))
    (_, call), = r.calls()
    assert isinstance(call, CallDesc) and call.then[0] == SetStep("model_type", _static("gpt-nano"))
    again = parse_profile("p", {k: v for k, v in r.to_dict().items() if k != "name"})
    assert again == r


def test_tensors_in_steps_are_seeded_after_the_arguments():
    tensor = {"kind": "tensor", "shape": [2], "dtype": "float32"}
    r = parse_profile("p", table({"kwargs": {"w": tensor}, "then": [{"call": "load", "args": [tensor]}]},
                                 {"args": [tensor]}))
    assert [leaf.path for leaf in r.tensors()] == ["profiles.p.init.kwargs.w", "profiles.p.init.then[0].args[0]",
                                                   "profiles.p.inputs.args[0]"]


def test_a_factory_takes_steps_too():
    r = parse_profile("p", table({"factory": "setup:build", "then": [{"call": "setup_caches"}]}))
    assert r.init.factory == "setup:build" and r.init.then == (CallStep("setup_caches"),)
    assert r.to_dict()["init"] == {"factory": "setup:build", "then": [{"call": "setup_caches"}]}


@pytest.mark.parametrize(("init", "inputs", "path", "problem"), [
    pytest.param({"then": {"call": "x"}}, None, "profiles.p.init.then", "expected an array of steps", id="not-array"),
    pytest.param({"then": [3]}, None, "profiles.p.init.then[0]", "expected a step table", id="not-table"),
    pytest.param({"then": [{}]}, None, "profiles.p.init.then[0]", "a step has exactly one of set", id="empty"),
    pytest.param({"then": [{"call": "a", "set": "b", "value": 1}]}, None, "profiles.p.init.then[0]",
                 "a step has exactly one of set", id="both"),
    pytest.param({"then": [{"set": "a"}]}, None, "profiles.p.init.then[0].value", "missing value", id="set-no-value"),
    pytest.param({"then": [{"call": "a", "value": 1}]}, None, "profiles.p.init.then[0].value",
                 "unknown key (expected call, args, kwargs)", id="call-with-value"),
    pytest.param({"then": [{"call": "__class__"}]}, None, "profiles.p.init.then[0].call",
                 "'__class__': a step never reaches Python's own attributes", id="dunder"),
    pytest.param({"then": [{"set": "a.__dict__.b", "value": 1}]}, None, "profiles.p.init.then[0].set",
                 "'__dict__': a step never reaches", id="dunder-inside"),
    pytest.param({"then": [{"call": "a-b"}]}, None, "profiles.p.init.then[0].call",
                 "expected an attribute or method name", id="not-identifier"),
    pytest.param({"then": [{"call": ".".join("a" * 9)}]}, None, "profiles.p.init.then[0].call",
                 "at most 8 dotted parts", id="too-deep"),
    pytest.param({"then": [{"call": "a"}] * 65}, None, "profiles.p.init.then", "at most 64 steps", id="too-many"),
    pytest.param({"then": [{"call": "a", "kwargs": {"1x": 2}}]}, None, "profiles.p.init.then[0].kwargs.1x",
                 "keyword names must be Python identifiers", id="bad-keyword"),
    pytest.param({"kwargs": {"c": {"kind": "call", "target": "m:C", "then": [{"call": 1}]}}}, None,
                 "profiles.p.init.kwargs.c.then[0].call", "expected an attribute or method name", id="in-a-call"),
    pytest.param(None, {"then": []}, "profiles.p.inputs.then", "steps after construction (then) belong to init",
                 id="inputs"),
])
def test_malformed_steps_name_the_key(init, inputs, path, problem):
    with pytest.raises(RecipeError) as info:
        parse_profile("p", table(init, inputs))
    assert info.value.key_path == path
    assert problem in info.value.problem, info.value.problem


def test_a_step_error_carries_its_toml_line():
    text = ('version = 1\n\n[profiles.p]\nmodel = "m:M"\n\n[profiles.p.init]\nkwargs = {}\n'
            'then = [{ call = "setup_caches" }, { set = "__x", value = 1 }]\n')
    doc = parse_recipes_text(text)
    with pytest.raises(RecipeError) as info:
        parse_profile("p", doc["profiles"]["p"], text=text)
    assert info.value.line == 8 and info.value.key_path == "profiles.p.init.then[1].set"


def _static(v):
    from capture.recipe import StaticDesc

    return StaticDesc(v)


def _none():
    from capture.recipe import NoneDesc

    return NoneDesc()
