"""The projection of unexecuted control-flow bodies: a boundary node opens into its
bodies (``bodies(node)``), body groups are never children of the executed program,
their nodes do not count in it, and search and paths reach them through the node."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from jax import lax  # noqa: E402

from capture.graph import graphfile  # noqa: E402
from capture.jax.convert import convert  # noqa: E402
from capture.analysis.body_templates import BRANCH_TEMPLATE, LOOP_TEMPLATE  # noqa: E402
from viewer.projection.projection import ROOT, NotFound, Projection  # noqa: E402

f32 = jnp.float32


def prog(w, xs):
    def step(carry, x):
        h = jnp.tanh(carry @ w + x)
        inner, _ = lax.scan(lambda a, y: (a * y, None), h, xs)
        return inner, h.sum()

    c, ys = lax.scan(step, jnp.zeros(3, f32), xs)
    return lax.cond(c.sum() > 0, lambda v: v + 1.0, lambda v: jnp.cos(v) * 2.0, c), ys


@pytest.fixture(scope="module", params=["memory", "file"])
def proj(request, tmp_path_factory):
    cap = convert(jax.make_jaxpr(prog)(jnp.ones((3, 3), f32), jnp.ones((5, 3), f32)))
    if request.param == "file":
        path = tmp_path_factory.mktemp("g") / "bodies.tvg"
        graphfile.write(cap, path)
        cap = graphfile.read(path)
    return Projection(cap)


def node_of(proj, op, executed=True):
    for it in proj.children(ROOT)["items"]:
        if it["type"] == "node" and it["label"] == op:
            return it
    raise AssertionError(op)


def test_root_shows_boundaries_with_bodies_and_no_body_groups(proj):
    root = proj.children(ROOT)
    assert not [it for it in root["items"] if it["type"] == "group"]
    scan = node_of(proj, "scan")
    cond = node_of(proj, "cond")
    assert scan["opaque"] and [b["role"] for b in scan["bodies"]] == ["scan body"]
    assert scan["bodies"][0]["iterations"] == 5 and scan["bodies"][0]["executed"] is False
    assert [b["role"] for b in cond["bodies"]] == ["branch 0", "branch 1"]
    # the executed program's counts leave templates out
    executed = sum(1 for it in root["items"] if it["type"] == "node")
    assert proj.node_count[0] == executed and root["opaque_count"] == 2
    summary = proj.summary()["counts"]
    assert summary["template_nodes"] == summary["nodes"] - executed > 0


def test_opening_a_scan_shows_its_template(proj):
    scan = node_of(proj, "scan")
    view = proj.bodies(scan["id"])
    (body,) = view["items"]
    assert view["node"] == scan["id"] and view["edges"] == [] and view["side_by_side"]
    assert body["type"] == "group" and body["kind"] == "body" and body["honest"] == "not executed"
    assert body["template"] == LOOP_TEMPLATE + " · 5 iterations (static)"
    inside = proj.children(body["id"])
    ops = [it["label"] for it in inside["items"]]
    assert {"dot_general", "tanh", "scan"} <= set(ops)
    # the parameters are named by what they stand for, with the outer value's name
    names = {b["name"] for b in inside["inputs"]}
    assert {"const 0 ← args[0]", "carry 0", "xs 0 (one slice) ← args[1]"} <= names
    assert {b["role"] for b in inside["inputs"]} == {"body"}
    # the results leave the template as out pills, named by what they stand for
    assert [(b["name"], b["role"]) for b in inside["outputs"]] == [
        ("carry 0 (next iteration)", "body_result"), ("ys 0 (one slice)", "body_result")]
    # the inner scan is a boundary with its own body, inside the template
    (inner,) = [it for it in inside["items"] if it["label"] == "scan"]
    (inner_body,) = proj.bodies(inner["id"])["items"]
    assert inner_body["body"]["iterations"] == 5


def test_branches_sit_side_by_side(proj):
    cond = node_of(proj, "cond")
    view = proj.bodies(cond["id"])
    assert [it["label"] for it in view["items"]] == ["branch 0", "branch 1"]
    assert all(BRANCH_TEMPLATE in it["template"] for it in view["items"])
    assert "false" in view["items"][0]["template"] and "true" in view["items"][1]["template"]
    assert view["edges"] == []


def test_search_and_paths_reach_template_nodes_through_the_boundary(proj):
    scan = node_of(proj, "scan")
    (body,) = proj.bodies(scan["id"])["items"]
    found = proj.search("tanh")["results"]
    (hit,) = [r for r in found if r["type"] == "node"]
    assert hit["item_path"] == [scan["key"], body["key"], hit["key"]]
    assert hit["sublabel"].endswith("in a body, not executed")
    (executed,) = [r for r in proj.search("reduce_sum")["results"] if r["type"] == "node" and r["path"] == []]
    assert "not executed" not in executed["sublabel"]
    assert proj.node(hit["id"])["template"] == scan["id"]
    node = proj.node(scan["id"])
    assert "template" not in node
    assert [b["role"] for b in node["bodies"]] == ["scan body"]
    g = proj.group(body["id"])
    assert g["attrs"]["executed"] is False and g["honest"].startswith("unexecuted body")
    groups = [r for r in proj.search("branch")["results"] if r["type"] == "group"]
    assert groups and all(r["item_path"][0] == node_of(proj, "cond")["key"] for r in groups)


def test_a_node_without_bodies_cannot_be_opened(proj):
    tanh_free = [it for it in proj.children(ROOT)["items"] if it["type"] == "node" and not it.get("bodies")]
    with pytest.raises(NotFound):
        proj.bodies(tanh_free[0]["id"])


def test_a_closed_body_says_why_on_its_card():
    from capture.worker.limits import Limits

    cap = convert(jax.make_jaxpr(prog)(jnp.ones((3, 3), f32), jnp.ones((5, 3), f32)), limits=Limits(max_body_ops=3))
    proj = Projection(cap)
    scan = node_of(proj, "scan")
    (body,) = proj.bodies(scan["id"])["items"]
    assert "max_body_ops" in body["body"]["closed"] and body["child_count"] == 0
    assert proj.children(body["id"])["items"] == []
    cond = node_of(proj, "cond")
    assert all("closed" not in b for b in cond["bodies"])  # small branches still convert


def test_scanned_layer_weights_are_drawn_inside_the_template_ops():
    nn = pytest.importorskip("flax.linen")
    from capture.jax.structures import structure_of

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, _):
            return x + nn.Dense(8)(nn.LayerNorm()(x)), None

    class Stack(nn.Module):
        @nn.compact
        def __call__(self, x):
            stack = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=6)
            return stack(name="layers")(x, None)[0]

    x = jnp.ones((2, 8), f32)
    variables = jax.eval_shape(Stack().init, jax.random.key(0), x)
    closed, shapes = jax.make_jaxpr(Stack().apply, return_shape=True)(variables, x)
    n = len(jax.tree_util.tree_leaves(variables))
    inputs = {"dict": [["variables", structure_of(variables, static_leaves=False)],
                       ["args", {"tuple": [{"value": n}]}]]}
    proj = Projection(convert(closed, inputs=inputs, outputs=structure_of(shapes, static_leaves=False)))
    scan = next(i.id for i in proj.capture.nodes if i.op == "scan")
    (body,) = proj.bodies(scan)["items"]
    # only the carry enters the template as a pill; the kernel slices are card lines
    layers = proj.children(body["id"])
    assert [(b["name"], b["role"]) for b in layers["inputs"] if not b.get("weight")] == [("carry 0 ← args[0]", "body")]
    dense = next(it for it in layers["items"] if it["label"] == "layers")
    inner = proj.children(dense["id"])
    dense_group = next(it for it in inner["items"] if it["label"] == "Dense_0")
    (dot,) = [it for it in proj.children(dense_group["id"])["items"] if it["label"] == "dot_general"]
    (w,) = dot["weights"]
    assert w["name"] == "variables.params.layers.Dense_0.kernel (one slice)" and w["role"] == "variable"
    assert w["shape"] == [8, 8]
