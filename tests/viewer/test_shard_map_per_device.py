"""A ``shard_map`` body's figures are one device's, not one iteration's: every device of its
mesh runs it once (capture/analysis/body_templates.template_bodies), where a ``cond``
branch is a template. So its cost on a card is not ``template`` ("per iteration") but
``scope: "per device"`` with how many ``devices`` run it; its share of the program's FLOPs
(the layer table's, the cost panel's) is its FLOPs × its devices of the global total, the
share of its boundary node (a shard_map is its body × its devices, capture/jax/cost.py);
and the capture's counts say how many bodies of each kind were converted.

Traced in this process over an abstract mesh of 8 devices (no devices are needed to trace:
JAX's CPU device count is fixed once its backend starts)."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")

from jax import lax  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from capture.analysis.analysis import Analysis  # noqa: E402
from capture.analysis.layer_table import layer_rows  # noqa: E402
from capture.jax.convert import convert  # noqa: E402
from viewer.projection.projection import ROOT, Projection  # noqa: E402

jnp = jax.numpy
f32 = jnp.float32


def _mesh(shape, names):
    return jax.sharding.AbstractMesh(shape, names, axis_types=(jax.sharding.AxisType.Auto,) * len(shape))


def _block(a, b):
    return lax.psum(jnp.dot(a, b), "i")


def _net(a, b):
    c = jax.shard_map(_block, mesh=_mesh((8,), ("i",)), in_specs=(P(None, "i"), P("i", None)), out_specs=P())(a, b)
    return lax.cond(c.sum() > 0, lambda v: jnp.tanh(v), lambda v: v - 1.0, c)


def _in_branch(a, b):
    inner = jax.shard_map(_block, mesh=_mesh((8,), ("i",)), in_specs=(P(None, "i"), P("i", None)), out_specs=P())
    return lax.cond(a.sum() > 0, inner, lambda x, y: jnp.zeros((8, 4), x.dtype), a, b)


def _capture(fn):
    return convert(jax.make_jaxpr(fn)(jnp.ones((8, 16), f32), jnp.ones((16, 4), f32)))


@pytest.fixture(scope="module")
def net():
    cap = _capture(_net)
    (body,) = [g.id for g in cap.groups if g.kind == "body" and g.attrs["role"] == "shard_map body"]
    (boundary,) = [n.id for n in cap.nodes if n.op == "shard_map"]
    (dot,) = [n.id for n in cap.nodes if n.op == "dot_general"]
    # one device: an [8, 2] block times a [2, 4] block; the boundary: that on each of 8 devices
    assert cap.cost.flops[dot] == 2 * 8 * 2 * 4 and cap.cost.flops[boundary] == 8 * 2 * 8 * 2 * 4
    return cap, Projection(cap), body, boundary, dot


def test_a_shard_map_bodys_card_cost_is_per_device_and_says_its_devices(net):
    cap, proj, body, boundary, dot = net
    page = proj.bodies(boundary)
    (item,) = page["items"]
    assert page["bodies"][0]["executed"] is True and item["body"]["executed"] is True  # every device runs it
    assert item["cost"]["flops"] == cap.cost.flops[dot]
    assert "template" not in item["cost"]  # not "per iteration"
    assert item["cost"]["scope"] == "per device" and item["cost"]["devices"] == 8
    op = next(it for it in proj.children(body)["items"] if it["type"] == "node" and it["label"] == "dot_general")
    assert op["cost"]["scope"] == "per device" and op["cost"]["devices"] == 8
    top = next(it for it in proj.children(ROOT)["items"] if it.get("label") == "shard_map")
    assert top["cost"]["scope"] == "global" and "devices" not in top["cost"]
    assert "template" not in proj.group(body)["cost"]  # api/group's
    # a cond branch stays a template: one branch as traced, no devices
    cond = next(n.id for n in cap.nodes if n.op == "cond")
    assert [b["executed"] for b in proj.bodies(cond)["bodies"]] == [False, False]
    for branch in proj.bodies(cond)["items"]:
        assert branch["body"]["executed"] is False
        assert branch["cost"]["template"] is True and branch["cost"]["scope"] == "global"
        assert proj.group(branch["id"])["cost"]["template"] is True


def test_a_shard_map_bodys_share_is_its_flops_times_its_devices_of_the_global_total(net):
    cap, _, body, boundary, dot = net
    total = sum(f for n, f in zip(cap.nodes, cap.cost.flops) if n.group is None)
    rows = {r["id"]: r for r in layer_rows(Analysis(cap), all_groups=True)}
    row = rows[body]
    assert "template" not in row
    assert row["share"] == pytest.approx(cap.cost.flops[dot] * 8 / total)
    assert row["share"] == pytest.approx(cap.cost.flops[boundary] / total)  # its boundary node's
    summary = Projection(cap).cost_summary()  # api/cost: the total the shares are of, named global
    assert summary["flops"] == total and summary["flops_scope"] == "global"
    branches = [r for g, r in rows.items() if g != body]
    assert branches and all(r["share"] is None and r["template"].startswith("branch") for r in branches)


def test_the_capture_counts_template_and_shard_map_bodies_apart(net):
    cap, proj, body, _, _ = net
    counts = proj.summary()["counts"]
    assert counts["template_bodies"] == 2 and counts["per_device_bodies"] == 1
    assert counts["template_nodes"] == 2 and counts["per_device_nodes"] == 2  # tanh, sub; dot, psum
    assert cap.meta["bodies"]["converted"] == 3  # the capture's own count holds both kinds


def test_a_shard_map_inside_a_branch_is_a_template_with_no_share():
    cap = _capture(_in_branch)
    proj = Projection(cap)
    (body,) = [g.id for g in cap.groups if g.kind == "body" and g.attrs["role"] == "shard_map body"]
    assert proj.group(body)["cost"]["template"] is True
    smap = next(n.id for n in cap.nodes if n.op == "shard_map")
    assert proj.bodies(smap)["bodies"][0]["executed"] is False  # as unexecuted as the branch
    counts = proj.summary()["counts"]
    assert counts["template_bodies"] == 3 and "per_device_bodies" not in counts
    rows = {r["id"]: r for r in layer_rows(Analysis(cap), all_groups=True)}
    assert rows[body]["share"] is None and rows[body]["template"] == "shard_map body"


def test_a_shard_map_in_a_shard_map_runs_on_the_product_of_their_devices():
    from capture.analysis.scope import devices_running

    mesh = _mesh((2, 4), ("i", "j"))

    def inner(a, b):
        return lax.psum(jnp.dot(a, b), "j")

    def outer(a, b):
        return jax.shard_map(inner, in_specs=(P(None, "j"), P("j", None)), out_specs=P(), axis_names={"j"})(a, b)

    def nested(a, b):
        return jax.shard_map(outer, mesh=mesh, in_specs=(P("i", None), P()), out_specs=P("i"), axis_names={"i"})(a, b)

    cap = _capture(nested)
    bodies = {g.name: g.id for g in cap.groups if g.kind == "body"}
    outer_body, inner_body = bodies["shard_map body: outer"], bodies["shard_map body: inner"]
    assert cap.groups[inner_body].parent == outer_body
    outer_devices = cap.groups[outer_body].attrs["devices"]
    inner_devices = cap.groups[inner_body].attrs["devices"]
    assert devices_running(cap, inner_body) == outer_devices * inner_devices
    assert devices_running(cap, outer_body) == outer_devices and devices_running(cap, None) is None
    # whatever the boundaries count, the inner body's share is its outer boundary's part
    total = sum(f for n, f in zip(cap.nodes, cap.cost.flops) if n.group is None)
    (dot,) = [n.id for n in cap.nodes if n.op == "dot_general"]
    rows = {r["id"]: r for r in layer_rows(Analysis(cap), all_groups=True)}
    assert rows[inner_body]["share"] == pytest.approx(cap.cost.flops[dot] * outer_devices * inner_devices / total)
