"""Real JAX captures hold only declared ``meta`` keys (``capture/graph/meta.py``), with
the worker's own additions (per-device memory, the interpreter's environment) and through
a graph file, as a viewer reads them. The static scan of the writers:
tests/foundation/test_capture_meta.py."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
flax = pytest.importorskip("flax")

from capture.graph import graphfile  # noqa: E402
from capture.graph.device_memory import annotate  # noqa: E402
from capture.graph.meta import unknown_keys  # noqa: E402
from capture.worker.libframes import environment  # noqa: E402

from jax_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write  # noqa: E402

pytestmark = pytest.mark.jax

MODELS = '''
import jax
import jax.numpy as jnp
from flax import linen as nn


class Net(nn.Module):
    """Batch statistics updated (mutable), dropout drawing from a stream."""

    @nn.compact
    def __call__(self, x, train: bool = True):
        x = nn.Dense(4)(x)
        x = nn.BatchNorm(use_running_average=not train)(x)
        return nn.Dropout(rate=0.5, deterministic=not train)(x)


def looped(x):
    """A scan body (meta.bodies) and a literal constant."""
    def body(c, _):
        return jnp.sin(c) * 2.0, c.sum()
    c, ys = jax.lax.scan(body, x, None, length=3)
    return c + jnp.cos(ys).sum()
'''


@pytest.fixture
def ws(tmp_path):
    write(tmp_path, {"models.py": MODELS})
    yield tmp_path
    forget_workspace_modules(tmp_path)


def _as_the_worker_sends(cap):
    annotate(cap)
    cap.meta["environment"] = environment()
    return graphfile.decode(graphfile.encode(cap))


@pytest.mark.parametrize("table,expect", [
    (profile("models:Net", args=[tensor([2, 3])], kwargs={"train": True}),
     {"state", "state_key", "flax_version", "rng_streams", "updated_collections", "input_names"}),
    (profile("models:looped", args=[tensor([3])]), {"bodies", "input_names", "jax_enable_x64"}),
])
def test_a_real_jax_capture_holds_only_declared_meta_keys(ws, table, expect):
    cap = _as_the_worker_sends(capture_in_process(ws, table)[0])
    assert cap.failure is None
    assert expect <= set(cap.meta), sorted(cap.meta)  # the capture is the one meant
    assert {"per_device_memory", "environment", "graph"} <= set(cap.meta)
    assert unknown_keys(cap.meta) == []
