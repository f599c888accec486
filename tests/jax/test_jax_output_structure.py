"""The output structure of a capture comes from the result the program built, read by
JAX's key paths inside the trace: no output container is rebuilt around placeholders.

Spec ("Open a function"): "Flax structs, named tuples, FrozenDicts and other registered
containers normalize to dictionaries of their registered child keys. Static PyTree
metadata is not serialized. Capture never reconstructs these containers with
graph-reference objects, so array invariants in a custom constructor remain valid."
"""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from jax_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write  # noqa: E402

pytestmark = pytest.mark.jax

MODEL = """
import jax
import jax.numpy as jnp
from flax import struct


@jax.tree_util.register_pytree_with_keys_class
class Moments:
    \"\"\"Mean and variance of a batch; the constructor keeps them consistent.\"\"\"

    def __init__(self, mean, var, axis):
        if not isinstance(mean, jax.Array) or mean.shape != var.shape:
            raise TypeError(f"Moments needs two arrays of one shape, got {type(mean).__name__}")
        self.mean, self.var, self.axis = mean, var, axis
        self.std = jnp.sqrt(var)  # derived: needs a real array

    def tree_flatten_with_keys(self):
        keys = jax.tree_util.GetAttrKey
        return ((keys("mean"), self.mean), (keys("var"), self.var)), self.axis

    @classmethod
    def tree_unflatten(cls, axis, children):
        return cls(*children, axis)


@struct.dataclass
class Summary:
    moments: Moments
    count: jax.Array
    label: str = struct.field(pytree_node=False, default="batch")


def summarize(x):
    m = Moments(jnp.mean(x, axis=0), jnp.var(x, axis=0), 0)
    return Summary(moments=m, count=jnp.asarray(x.shape[0], jnp.int32)), [m.std, None]
"""


@pytest.fixture
def ws(tmp_path):
    write(tmp_path, {"stats.py": MODEL})
    yield tmp_path
    forget_workspace_modules(tmp_path)


def test_an_output_container_whose_constructor_checks_its_arrays(ws):
    """Flax structs, named tuples, FrozenDicts and other registered containers normalize
    to dictionaries of their registered child keys. Static PyTree metadata is not
    serialized. Capture never reconstructs these containers with graph-reference objects,
    so array invariants in a custom constructor remain valid."""
    cap, _ = capture_in_process(ws, profile("stats:summarize", args=[tensor([5, 3])]))
    import stats

    x = jnp.ones((5, 3))
    with pytest.raises(TypeError, match="Moments needs two arrays"):  # what rebuilding around placeholders does
        jax.make_jaxpr(stats.summarize, return_shape=True)(x)

    def shape(leaf):
        return cap.values[leaf["value"]].shape

    summary, rest = cap.outputs["tuple"]
    fields = dict(summary["dict"])
    assert list(fields) == ["moments", "count"]  # registered children only: no static label
    moments = dict(fields["moments"]["dict"])
    assert list(moments) == ["mean", "var"] and shape(moments["mean"]) == shape(moments["var"]) == [3]
    assert shape(fields["count"]) == []
    std, none = rest["list"]
    assert shape(std) == [3] and none == {"static": None}
    # each output leaf is the value the program computed for it
    closed = jax.make_jaxpr(lambda x: jax.tree_util.tree_leaves(stats.summarize(x)))(x)
    assert [cap.values[leaf["value"]].shape for leaf in (moments["mean"], moments["var"], fields["count"], std)] \
        == [list(v.aval.shape) for v in closed.jaxpr.outvars]
