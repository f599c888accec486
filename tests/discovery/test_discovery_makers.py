"""Same-file functions that build a value a model takes (issue 49, item 3): bonsai's
pattern of ``init_cache(cfg, batch_size, token_len, generate_steps) -> Cache`` for a
``cache`` argument, on models of our own."""

from __future__ import annotations

from typing import Any

import pytest
from discovery_helpers import discover_snippet

HEADER = '''
from typing import Any
import torch
from torch import nn

class Config:
    dim: int = 8

class State:
    pass

'''


def _made_by(source: str, name: str, qualname: str = "Net") -> Any:
    result = discover_snippet(HEADER + source)
    cand = next(c for c in result.candidates if c.qualname == qualname)
    found = [p for p in (*cand.call_inputs, *cand.setup_fields) if p.name == name]
    assert found, [p.name for p in cand.call_inputs]
    hints = found[0].hints
    return hints.made_by if hints is not None else None


NET = '''
class Net(nn.Module):
    def forward(self, x: torch.Tensor, {param}):
        return x
'''


@pytest.mark.parametrize("param, maker, expected", [
    # by the return annotation
    ("state: State", "def fresh(cfg: Config, batch: int, flag=True) -> State: ...",
     ("fresh", (("cfg", "Config"), ("batch", "int")))),
    # by its name: init_/make_/create_/build_/new_/empty_ NAME, NAME_init
    ("cache", "def init_cache(cfg, n: int, *, steps: int, dtype=None): ...",
     ("init_cache", (("cfg", ""), ("n", "int"), ("steps", "int")))),
    ("cache", "def make_cache(): ...", ("make_cache", ())),
    ("memory", "def memory_init(size): ...", ("memory_init", (("size", ""),))),
    # an array, a builtin or a module is what a shape or a factory describes, not a maker
    ("x2: torch.Tensor", "def ones() -> torch.Tensor: ...", None),
    ("n: int", "def count() -> int: ...", None),
    ("cache: State", "def other(cfg) -> Config: ...", None),
    ("cache", "def cache_of(x): ...", None),
])
def test_a_maker_is_found_by_its_return_annotation_or_its_name(param, maker, expected):
    assert _made_by(NET.format(param=param) + "\n" + maker + "\n", param.split(":")[0]) == expected


def test_a_configured_or_subclassed_parameter_keeps_its_own_description():
    source = '''
from dataclasses import dataclass

@dataclass
class Cfg:
    dim: int = 8

class Net(nn.Module):
    def __init__(self, cfg: Cfg):
        super().__init__()

    def forward(self, x):
        return x

def make_cfg() -> Cfg: ...
'''
    assert _made_by(source, "cfg") is None


def test_a_function_candidate_is_not_its_own_maker():
    source = '''
import jax

@jax.jit
def init_cache(cache, x):
    return x
'''
    result = discover_snippet(source)
    cand = next(c for c in result.candidates if c.qualname == "init_cache")
    assert all(i.hints is None or i.hints.made_by is None for i in cand.call_inputs)


def test_the_maker_is_in_the_candidates_json():
    result = discover_snippet(HEADER + NET.format(param="cache") + "\ndef init_cache(cfg: Config, b: int): ...\n")
    hints = next(i for i in result.candidates[0].to_json()["call_inputs"] if i["name"] == "cache")["hints"]
    assert hints["made_by"] == {"name": "init_cache", "parameters": [{"name": "cfg", "annotation": "Config"},
                                                                     {"name": "b", "annotation": "int"}],
                                "float32": []}


@pytest.mark.parametrize("default, widened", [
    ("jnp.bfloat16", ("dtype",)), ("torch.float16", ("dtype",)), ("torch.half", ("dtype",)),
    ("jnp.float32", ()), ("None", ()),
])
def test_a_half_precision_dtype_default_of_a_maker_is_widened(default, widened):
    """bonsai's ``init_cache(..., dtype=jnp.bfloat16)``: a half-precision cache beside fresh
    float32 parameters fails their first update."""
    result = discover_snippet(HEADER + NET.format(param="cache") + f"\ndef init_cache(n: int, dtype={default}): ...\n")
    hints = next(i for i in result.candidates[0].call_inputs if i.name == "cache").hints
    assert hints.made_by_float32 == widened
