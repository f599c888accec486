"""Building an NNX model abstractly does not search the trace once per RNG draw
(capture.jax.tracer_errors): Flax reads ``sharding`` of each traced count update, and JAX
builds that AttributeError's message by walking every equation traced so far."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
nnx = pytest.importorskip("flax.nnx")

from jax._src import core  # noqa: E402
from jax._src.interpreters import partial_eval  # noqa: E402

from capture.jax.tracer_errors import plain_sharding_errors  # noqa: E402

pytestmark = pytest.mark.jax


class Block(nnx.Module):
    def __init__(self, d, rngs):
        self.up = nnx.Linear(d, 2 * d, rngs=rngs)
        self.down = nnx.Linear(2 * d, d, rngs=rngs)


class Stack(nnx.Module):
    def __init__(self, n, rngs):
        self.blocks = nnx.List([Block(8, rngs) for _ in range(n)])


@pytest.fixture
def searches(monkeypatch):
    """How many times JAX searched a trace for a value's progenitors."""
    calls = []
    original = partial_eval.JaxprStackFrame.find_progenitors

    def counted(self, tracer):
        calls.append(1)
        return original(self, tracer)

    monkeypatch.setattr(partial_eval.JaxprStackFrame, "find_progenitors", counted)
    return calls


def _shapes(model):
    return jax.tree.map(lambda x: (x.shape, str(x.dtype)), nnx.state(model))


def test_an_abstract_nnx_build_searches_the_trace_no_more(searches):
    plain = nnx.eval_shape(lambda r: Stack(6, r), nnx.Rngs(0))
    assert searches, "JAX no longer searches the trace for a tracer's sharding: the workaround can go"
    searches.clear()
    with plain_sharding_errors():
        quick = nnx.eval_shape(lambda r: Stack(6, r), nnx.Rngs(0))
    assert searches == []
    assert _shapes(quick) == _shapes(plain)


def test_the_error_is_the_same_kind_and_the_property_comes_back():
    original = vars(core.Tracer)["sharding"]
    seen = []

    def f(x):
        seen.append(getattr(x, "sharding", "absent"))
        with pytest.raises(AttributeError, match="The 'sharding' attribute is not available on traced array"):
            x.sharding  # noqa: B018
        return x

    with pytest.raises(RuntimeError), plain_sharding_errors():
        jax.make_jaxpr(f)(1.0)
        raise RuntimeError("left by an error")
    assert seen == ["absent"]
    assert vars(core.Tracer)["sharding"] is original
