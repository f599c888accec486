"""A keyword a call's target does not declare (capture.recipe.keywords): a misspelling
is refused with "did you mean", before anything runs and in the worker; a keyword a
library's configuration class takes beyond its declared fields is passed on (issue 38,
item 5)."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util

import pytest

from capture.recipe.keywords import misspelt
from capture.worker.values import binding_problem


@pytest.mark.parametrize(("keyword", "declared", "wanted"), [
    pytest.param("num_hidden_layer", ["num_hidden_layers", "hidden_act"], "num_hidden_layers", id="plural"),
    pytest.param("hidden_sizes", ["hidden_size"], "hidden_size", id="extra-letter"),
    pytest.param("torch_dtype", ["dtype"], None, id="transformers-own"),
    pytest.param("output_attentions", ["num_attention_heads", "attention_bias"], None, id="not-close"),
    pytest.param("n_layer", ["n_layer"], None, id="declared"),
])
def test_misspelt(keyword, declared, wanted):
    assert misspelt(keyword, declared) == wanted


def accept_kwargs(cls):
    """transformers' wrap of a config dataclass: the fields, then any keyword at run time."""
    original = cls.__init__

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        names = {f.name for f in dataclasses.fields(cls)}
        original(self, *args, **{k: v for k, v in kwargs.items() if k in names})
        for k, v in kwargs.items():
            if k not in names:
                setattr(self, k, v)

    cls.__init__ = __init__
    return cls


@accept_kwargs
@dataclasses.dataclass
class Wrapped:
    num_hidden_layers: int = 32
    hidden_size: int = 4096


@dataclasses.dataclass
class Plain:
    n_layer: int = 12


@pytest.mark.parametrize(("target", "kwargs", "problem"), [
    pytest.param(Wrapped, {"num_hidden_layer": 2}, "got an unexpected keyword argument 'num_hidden_layer'; "
                 "did you mean 'num_hidden_layers'?", id="wrapped-misspelt"),
    pytest.param(Wrapped, {"attn_implementation": "eager", "hidden_size": 8}, None, id="wrapped-passed-on"),
    pytest.param(Plain, {"n_layers": 2}, "got an unexpected keyword argument 'n_layers'; did you mean 'n_layer'?",
                 id="plain-misspelt"),
    pytest.param(Plain, {"depth": 2}, "got an unexpected keyword argument 'depth'", id="plain-unknown"),
])
def test_the_workers_binding(target, kwargs, problem):
    assert binding_problem(target, (), kwargs) == problem


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers")
def test_on_transformers_own_config():
    from transformers import ModernBertConfig

    assert "did you mean 'num_hidden_layers'" in binding_problem(ModernBertConfig, (), {"num_hidden_layer": 2})
    assert binding_problem(ModernBertConfig, (), {"attn_implementation": "eager", "num_hidden_layers": 2}) is None
