"""An NNX module built from the literal init with the rngs TensorViz supplies is built
abstractly (``nnx.eval_shape``): its fresh weights are never shown, only their shapes and
dtypes, and running each initializer cost XLA a compile (3.7 s of CPU for a 12-layer
transformer, 16x the trace). A constructor that needs concrete values runs eagerly; either
way the graph is the same."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
flax = pytest.importorskip("flax")

from jax_workspace import SPEC_INPUT, capture_in_process, forget_workspace_modules, profile, write  # noqa: E402

pytestmark = [pytest.mark.jax, pytest.mark.slow]

MODELS = """
import jax.numpy as jnp
from flax import nnx

CALLS = []

class Net(nnx.Module):
    def __init__(self, *, rngs: nnx.Rngs):
        self.up = nnx.Linear(3, 8, rngs=rngs)
        self.norm = nnx.LayerNorm(8, rngs=rngs)
        self.drop = nnx.Dropout(0.1, rngs=rngs)
        self.down = nnx.Linear(8, 4, rngs=rngs)
        CALLS.append("Net")

    def __call__(self, x):
        return self.down(self.drop(nnx.relu(self.norm(self.up(x)))))

class Concrete(Net):
    # reads an initialised weight as a Python number: needs concrete arrays
    def __init__(self, *, rngs: nnx.Rngs):
        super().__init__(rngs=rngs)
        self.scale = float(jnp.abs(self.up.kernel[...]).max()) > -1.0
"""


@pytest.fixture
def ws(tmp_path):
    yield tmp_path
    forget_workspace_modules(tmp_path)


def _shape(cap):
    return ([(n.op, [cap.values[v].shape for v in n.outputs]) for n in cap.nodes],
            [(g.kind, g.name) for g in cap.groups[1:]], [(v.shape, v.dtype) for v in cap.values])


def test_fresh_nnx_state_is_built_abstractly_and_an_eager_build_gives_the_same_graph(ws):
    write(ws, {"nets.py": MODELS})
    abstract, _ = capture_in_process(ws, profile("nets:Net", args=[SPEC_INPUT]))
    eager, _ = capture_in_process(ws, profile("nets:Concrete", args=[SPEC_INPUT]))
    assert abstract.meta["state"] == eager.meta["state"] == "fresh_init"
    assert "abstractly (nnx.eval_shape" in abstract.meta["state_note"]
    assert "not trained weights" in abstract.meta["state_note"]
    assert "abstractly" not in eager.meta["state_note"]  # float() of a traced weight: built again, eagerly
    assert "state_abstract" not in abstract.meta  # a fresh init stands for the values it would compute
    assert _shape(abstract) == _shape(eager)
    assert abstract.meta["input_names"] == eager.meta["input_names"]
    assert abstract.meta.get("rng_streams") == eager.meta.get("rng_streams")
    import sys

    assert sys.modules["nets"].CALLS == ["Net", "Net", "Net"]  # abstract once; the concrete one twice
