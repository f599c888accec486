"""Calls before construction (issue 49, item 3): ``init.before`` sets up library state the
model's constructor reads but does not create (fairscale's model-parallel groups in Meta's
llama3), run by the Torch capture in this process. A library of our own stands in for
fairscale: its layers assert the group was initialised, as fairscale's do."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from capture.recipe import RecipeError, parse_profile  # noqa: E402
from capture.worker.errors import CaptureError  # noqa: E402

from torch_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write  # noqa: E402

pytestmark = pytest.mark.torch

PARALLEL = '''
_GROUP = None
CALLS = []


def initialize_model_parallel(size, *, backend="fake"):
    global _GROUP
    CALLS.append((size, backend))
    _GROUP = {"size": size}


def get_model_parallel_world_size():
    assert _GROUP is not None, "model parallel group is not initialized"
    return _GROUP["size"]
'''

MODEL = '''
import torch
from torch import nn

from mp.parallel import get_model_parallel_world_size


class ColumnParallel(nn.Linear):
    def __init__(self, d_in, d_out):
        super().__init__(d_in, d_out // get_model_parallel_world_size())


class Block(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.up = ColumnParallel(dim, 4 * dim)

    def forward(self, x):
        return self.up(x).relu()
'''

BEFORE = [{"kind": "call", "target": "mp.parallel:initialize_model_parallel", "args": [2],
           "kwargs": {"backend": "gloo"}}]


@pytest.fixture
def bws(ws):
    write(ws, {"mp/__init__.py": "", "mp/parallel.py": PARALLEL, "block.py": MODEL})
    yield ws
    forget_workspace_modules(ws)


def test_without_the_call_the_constructor_fails_saying_why(bws):
    # In this process the model's own exception arrives as raised (the worker records it).
    with pytest.raises(AssertionError, match="model parallel group is not initialized"):
        capture_in_process(bws, profile("block:Block", args=[tensor([2, 8])]))


def test_the_call_before_construction_sets_the_state_up(bws):
    import sys

    cap = capture_in_process(bws, profile("block:Block", args=[tensor([2, 8])],
                                          init={"args": [], "kwargs": {}, "before": BEFORE}))[0]
    assert cap.failure is None
    weight = [v for v in cap.values if v.measured and v.measured.get("param") == "up.weight"]
    assert weight and weight[0].shape == [16, 8], "d_out // world size 2"
    assert sys.modules["mp.parallel"].CALLS == [(2, "gloo")]
    assert cap.recipe["init"]["before"] == BEFORE


def test_a_failing_call_names_its_key_path(bws):
    bad = [{"kind": "call", "target": "mp.parallel:initialize_model_parallel", "kwargs": {"sizes": 2}}]
    with pytest.raises(CaptureError) as info:
        capture_in_process(bws, profile("block:Block", args=[tensor([2, 8])],
                                        init={"args": [], "kwargs": {}, "before": bad}))
    assert "profiles.p.init.before[0]" in info.value.message


@pytest.mark.parametrize("init, problem", [
    ({"before": [3]}, "profiles.p.init.before[0]: a step before construction is a call"),
    ({"before": {"kind": "call", "target": "m:f"}}, "profiles.p.init.before: expected an array of calls"),
])
def test_before_must_be_calls(init, problem):
    with pytest.raises(RecipeError) as info:
        parse_profile("p", profile("block:Block", args=[tensor([2, 8])], init={"args": [], "kwargs": {}, **init}))
    assert problem in str(info.value)


def test_before_belongs_to_init():
    table = profile("block:Block", inputs={"args": [], "kwargs": {}, "before": BEFORE})
    with pytest.raises(RecipeError) as info:
        parse_profile("p", table)
    assert "profiles.p.inputs.before: calls before construction (before) belong to init" in str(info.value)


def test_before_round_trips():
    r = parse_profile("p", profile("block:Block", init={"args": [], "kwargs": {}, "before": BEFORE}))
    assert parse_profile("p", r.to_table()) == r
    assert r.init.to_dict()["before"] == BEFORE
