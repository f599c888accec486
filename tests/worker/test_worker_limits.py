"""Each capture limit is configurable and reported by name, with the numbers."""

from __future__ import annotations

import pytest

from capture.session.runner import run_capture
from capture.worker.builder import GraphBuilder
from capture.worker.errors import LimitExceeded
from capture.worker.limits import Limits
from fake_workspace import fake_recipe, tensor


@pytest.mark.parametrize(
    "model, kwargs, limits, limit, reached",
    [
        pytest.param("models:chain", {"n": 30}, Limits(max_ops=20), "max_ops", 21, id="ops"),
        # Each add makes one value; the input is value 0.
        pytest.param("models:chain", {"n": 30}, Limits(max_values=10), "max_values", 11, id="values"),
        pytest.param("models:nested", {"depth": 20}, Limits(max_groups=5), "max_groups", 6, id="groups"),
        pytest.param("models:wide", {"n": 2000}, Limits(max_result_bytes=4096), "max_result_bytes", None, id="result-bytes"),
    ],
)
def test_limit_is_reported(workspace, model, kwargs, limits, limit, reached):
    c = run_capture(workspace, fake_recipe(model, tensor(2, 3), **kwargs), limits=limits)
    f = c.failure
    assert (f.stage, f.type) == ("limit", "LimitExceeded")
    assert f.details["limit"] == limit
    assert f.details["maximum"] == getattr(limits, limit)
    if reached is not None:
        assert f.details["reached"] == reached
    else:
        assert f.details["reached"] > limits.max_result_bytes
    assert f"limit of {getattr(limits, limit):,}" in f.message and limit in f.message
    assert not c.nodes


def test_ops_limit_points_at_the_user_line(workspace):
    c = run_capture(workspace, fake_recipe("models:chain", tensor(2), n=30), limits=Limits(max_ops=5))
    assert [(fr.file, fr.function) for fr in c.failure.frames][-1] == ("models.py", "chain")


def test_within_limits_succeeds(workspace):
    c = run_capture(workspace, fake_recipe("models:chain", tensor(2), n=30), limits=Limits(max_ops=30, max_values=31))
    assert c.failure is None and len(c.nodes) == 30


def test_seconds_limit_is_the_deadline(workspace):
    c = run_capture(workspace, fake_recipe("crashy:hang", tensor(2)), limits=Limits(max_seconds=1.0))
    assert c.failure.stage == "deadline"
    assert c.failure.details["limit"] == "max_seconds" and c.failure.details["maximum"] == 1.0


def test_builder_enforces_limits_directly():
    b = GraphBuilder(Limits(max_values=1, max_ops=1, max_groups=1))
    v = b.value([2], "float32")
    with pytest.raises(LimitExceeded) as e:
        b.value([2], "float32")
    assert e.value.limit == "max_values"
    b.node("neg", outputs=[v])
    with pytest.raises(LimitExceeded):
        b.node("neg", outputs=[v])
    b.group("scope", "a")
    with pytest.raises(LimitExceeded):
        b.group("scope", "b")


def test_builder_adopting_values_and_groups_enforces_the_same_limits():
    # The Torch trace's per-value and per-module-call paths: the shape list and the attrs
    # dict become the builder's own (not copied), and the limits hold as for value()/group().
    b = GraphBuilder(Limits(max_values=1, max_groups=1))
    shape, measured, attrs = [2, 3], {"bytes": 24}, {"path": ""}
    v = b.adopt_value(shape, "float32", measured)
    assert b.values[v].shape is shape and b.values[v].measured is measured and b.values[v].dtype == "float32"
    with pytest.raises(LimitExceeded) as e:
        b.adopt_value([2], "float32", None)
    assert (e.value.limit, e.value.maximum, e.value.reached) == ("max_values", 1, 2)
    g = b.adopt_group("module", "root", None, attrs)
    assert b.groups[g].attrs is attrs and (b.groups[g].kind, b.groups[g].name) == ("module", "root")
    with pytest.raises(LimitExceeded) as e:
        b.adopt_group("module", "child", g, {})
    assert (e.value.limit, e.value.maximum, e.value.reached) == ("max_groups", 1, 2)
    assert len(b.values) == 1 and len(b.groups) == 1


def test_limits_from_untrusted_data_keep_defaults():
    assert Limits.from_dict({"max_ops": -1, "max_values": "many", "bogus": 3, "max_seconds": 2}) == Limits(max_seconds=2.0)
    assert Limits.from_dict(Limits(max_ops=7).to_dict()) == Limits(max_ops=7)


@pytest.mark.parametrize("kind", ["module", "jit", "remat", "custom_vjp", "scope", "body"])
def test_max_groups_caps_groups_of_every_kind(kind):
    # Not only nested calls: an unexecuted control-flow body is a group and counts too.
    b = GraphBuilder(Limits(max_groups=2))
    b.group("module", "outer")
    b.group(kind, "first")
    with pytest.raises(LimitExceeded) as e:
        b.group(kind, "second")
    assert (e.value.limit, e.value.maximum, e.value.reached) == ("max_groups", 2, 3)
