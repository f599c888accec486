"""A shard_map body runs once per shard of its manual axes, not once per device of its mesh.

``jax.shard_map(f, mesh=..., axis_names={"i"})`` on an ``i=2 × j=4`` mesh makes ``i``
manual and leaves ``j`` automatic: the body sees one ``i`` shard, its shapes still global
over ``j`` (the compiler splits or replicates it over ``j``'s 4 devices). So its boundary's
global FLOPs are the body's × 2 (``i``'s size), not × 8 (the mesh's devices); a shard_map
over ``j`` nested in it is the inner body × 4 (``j``, the axis it newly makes manual), and
that inner body's figure is one device's (every axis is manual there: 8 run it). The body's
scope says so: ``per device`` only where every mesh axis is manual, else ``per shard``.

The three programs are in the style of JAX's shard_map documentation (a blocked matmul
with ``psum``; ``axis_names=`` for partial manual; a shard_map in a shard_map), all the
same logical ``[16,16] @ [16,16]`` product: 2·16·16·16 = 8,192 FLOPs globally, which every
one of them must record. Traced in this process over an abstract mesh (no devices are
needed to trace); XLA's own per-device figures: tests/jax/test_shard_map_partial_manual_xla.py."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")

from jax import lax  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from capture.analysis.analysis import Analysis  # noqa: E402
from capture.analysis.layer_table import layer_rows  # noqa: E402
from capture.analysis.scope import cost_scope, devices_running  # noqa: E402
from capture.jax.convert import convert  # noqa: E402
from viewer.projection.projection import Projection  # noqa: E402

jnp = jax.numpy
MESH = jax.sharding.AbstractMesh((2, 4), ("i", "j"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
GLOBAL = 2 * 16 * 16 * 16  # the logical [16,16] @ [16,16]


def full(a, b):
    """Every axis manual: a [8,4] block of a times a [4,16] block of b on each device, summed over j."""
    def block(x, y):
        return lax.psum(jnp.dot(x, y), "j")
    return jax.shard_map(block, mesh=MESH, in_specs=(P("i", "j"), P("j", None)), out_specs=P("i", None))(a, b)


def partial(a, b):
    """Only i manual: each i shard's [8,16] rows times all of b; j stays automatic."""
    return jax.shard_map(jnp.dot, mesh=MESH, in_specs=(P("i"), P()), out_specs=P("i"), axis_names={"i"})(a, b)


def nested(a, b):
    """i manual outside, j manual inside: each device's [2,16] rows times b."""
    def outer(x, y):
        return jax.shard_map(jnp.dot, in_specs=(P("j"), P()), out_specs=P("j"), axis_names={"j"})(x, y)
    return jax.shard_map(outer, mesh=MESH, in_specs=(P("i"), P()), out_specs=P("i"), axis_names={"i"})(a, b)


def _capture(fn):
    return convert(jax.make_jaxpr(fn)(jnp.ones((16, 16), jnp.float32), jnp.ones((16, 16), jnp.float32)))


def _bodies(cap):
    """The shard_map bodies, outermost first."""
    return [g for g in cap.groups if g.kind == "body" and g.attrs.get("role") == "shard_map body"]


# case: (each body's devices (its multiplier), manual axes, auto axes, scope, runs (devices_running)),
#       the dot's FLOPs as traced (one shard's or one device's)
CASES = [
    pytest.param(full, [(8, ["i", "j"], [], "per device", 8)], 2 * 8 * 4 * 16, id="full-manual"),
    pytest.param(partial, [(2, ["i"], ["j"], "per shard", 2)], 2 * 8 * 16 * 16, id="partial-manual"),
    pytest.param(nested, [(2, ["i"], ["j"], "per shard", 2), (4, ["j"], [], "per device", 8)], 2 * 2 * 16 * 16,
                 id="nested"),
]


@pytest.mark.parametrize("fn, want, dot_flops", CASES)
def test_a_shard_map_body_is_multiplied_by_its_manual_axes_only(fn, want, dot_flops):
    cap = _capture(fn)
    bodies = _bodies(cap)
    got = [(b.attrs["devices"], b.attrs["manual_axes"], b.attrs["auto_axes"], cost_scope(cap, b.id),
            devices_running(cap, b.id)) for b in bodies]
    assert got == want
    (dot,) = [n for n in cap.nodes if n.op == "dot_general"]
    assert cap.cost.flops[dot.id] == dot_flops
    # the global program: the logical product's FLOPs, whatever the axes made manual
    assert sum(f for n, f in zip(cap.nodes, cap.cost.flops) if n.group is None) == GLOBAL
    # each boundary: its body × its manual axes' sizes; the innermost body holds the dot
    for b in bodies:
        assert cap.cost.flops[b.attrs["node"]] * devices_running(cap, b.id) == GLOBAL * b.attrs["devices"]
    assert dot_flops * devices_running(cap, bodies[-1].id) == GLOBAL
    # the layer table's share: the body holding every FLOP is all of the program's
    rows = {r["id"]: r for r in layer_rows(Analysis(cap), all_groups=True)}
    assert rows[bodies[-1].id]["share"] == pytest.approx(1.0)


def test_a_partial_manual_body_reads_per_shard_on_its_cards():
    cap = _capture(partial)
    proj = Projection(cap)
    (body,) = _bodies(cap)
    boundary = body.attrs["node"]
    page = proj.bodies(boundary)
    (item,) = page["items"]
    summary = page["bodies"][0]
    assert summary["shards"] == 2 and "devices" not in summary and summary["executed"] is True
    assert summary["manual_axes"] == ["i"] and summary["auto_axes"] == ["j"]
    assert item["template"] == "one shard's program, as traced; each shard of i runs it (j automatic) · 2 shards of i"
    assert item["honest"] == "per shard"
    assert item["cost"]["scope"] == "per shard" and item["cost"]["shards"] == 2 and "devices" not in item["cost"]
    assert item["cost"]["flops"] * item["cost"]["shards"] == GLOBAL  # viewer/static/panels/cost.js shareOf
    assert body.attrs["note"].startswith("one shard's program") and "each shard of i" in body.attrs["note"]


def test_a_nested_bodys_cards_count_every_device_that_runs_it():
    cap = _capture(nested)
    proj = Projection(cap)
    outer, inner = _bodies(cap)
    (inner_item,) = proj.bodies(inner.attrs["node"])["items"]
    assert inner_item["honest"] == "per device"
    assert inner_item["cost"]["scope"] == "per device" and inner_item["cost"]["devices"] == 8
    assert inner_item["body"]["devices"] == 8  # 4 j shards in each of 2 i shards: every device
    (outer_item,) = proj.bodies(outer.attrs["node"])["items"]
    assert outer_item["cost"]["scope"] == "per shard" and outer_item["cost"]["shards"] == 2
    # the values inside the inner body vary over both manual axes, the enclosing one's too
    (dot,) = [n for n in cap.nodes if n.op == "dot_general"]
    assert cap.values[dot.outputs[0]].sharding["varying"] == ["i", "j"]
