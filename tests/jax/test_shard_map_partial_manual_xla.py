"""A partial-manual or nested shard_map's figures against XLA's own, on 8 simulated CPU devices.

The programs of tests/viewer/test_shard_map_partial_manual.py (in the style of JAX's
shard_map documentation: full manual, ``axis_names={"i"}`` on an ``i=2 × j=4`` mesh, a
shard_map over ``j`` inside one over ``i``), each the same logical ``[16,16] @ [16,16]``
(8,192 FLOPs), captured through the worker's path and compiled by XLA (``cost_analysis()``,
one device's program). What must hold:

* the graph's global total is 8,192 in all three (the logical product), and it is the
  innermost body's FLOPs × the shards that run it (``devices_running``);
* TensorViz's per-device total equals XLA's per-device FLOPs;
* where every axis is manual (full, nested) one device's figure is the global's / 8; a
  partial-manual body's rows are replicated over the automatic ``j`` (nothing splits
  them there), so XLA's per-device figure is one ``i`` shard's: the global's / 2, not / 8.
"""

from __future__ import annotations

import pytest

pytest.importorskip("jax")

from capture.analysis.scope import cost_scope, devices_running  # noqa: E402
from capture.graph.per_device import flops_total  # noqa: E402
from viewer.projection.projection import Projection  # noqa: E402

from jax_workspace import profile, tensor, write  # noqa: E402
from sharded_captures import capture_all, read  # noqa: E402

pytestmark = [pytest.mark.jax, pytest.mark.slow]

MODEL = '''
import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P


@jax.jit
def full(a, b):
    def block(x, y):
        return lax.psum(jnp.dot(x, y), "j")
    return jax.shard_map(block, in_specs=(P("i", "j"), P("j", None)), out_specs=P("i", None))(a, b)


@jax.jit
def partial(a, b):
    return jax.shard_map(jnp.dot, in_specs=(P("i"), P()), out_specs=P("i"), axis_names={"i"})(a, b)


@jax.jit
def nested(a, b):
    def outer(x, y):
        return jax.shard_map(jnp.dot, in_specs=(P("j"), P()), out_specs=P("j"), axis_names={"j"})(x, y)
    return jax.shard_map(outer, in_specs=(P("i"), P()), out_specs=P("i"), axis_names={"i"})(a, b)
'''

GLOBAL = 2 * 16 * 16 * 16
# case: how many shards one device's program is of the global (XLA's per device × it = global)
CASES = {"full": 8, "partial": 2, "nested": 8}


@pytest.fixture(scope="module")
def caps(tmp_path_factory):
    root = write(tmp_path_factory.mktemp("ws"), {"model.py": MODEL})
    mesh = {"i": {"size": 2, "type": "auto"}, "j": {"size": 4, "type": "auto"}}
    cases = {name: {"framework": "jax", "root": str(root),
                    "table": profile(f"model:{name}", args=[tensor([16, 16]), tensor([16, 16])], mesh=mesh)}
             for name in CASES}
    files = capture_all(cases, tmp_path_factory.mktemp("out"))
    return {name: read(path) for name, path in files.items()}


@pytest.mark.parametrize("name", list(CASES))
def test_global_and_per_device_flops_agree_with_xla(caps, name):
    cap = caps[name]
    assert cap.failure is None, cap.failure
    summary = Projection(cap).cost_summary()  # api/cost: the executed program's total
    assert summary["flops"] == GLOBAL and summary["flops_scope"] == "global"
    (dot,) = [n for n in cap.nodes if n.op == "dot_general"]
    assert cap.cost.flops[dot.id] * devices_running(cap, dot.group) == GLOBAL
    xla = cap.compiled["cost"]["flops"]
    matmul = 2 * 16 * 16 * 16 // CASES[name]  # one device's share of the product, as XLA runs it
    assert matmul <= xla <= matmul * 1.15, (xla, matmul)  # full's psum adds 128
    ours = flops_total(cap)
    assert ours is not None and abs(ours / xla - 1) < 0.05, (ours, xla)
    assert cost_scope(cap, dot.group) == ("per shard" if name == "partial" else "per device")
