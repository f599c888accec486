"""A ``shard_map`` body is executed, not a template: every device of its mesh runs it once
(the spec's unconditional call bodies, as a ``jit``'s), where a ``cond`` branch or a
``while`` body is one branch or iteration as traced ("neither a branch nor an iteration
is reported as executed"). So its nodes are not counted "in unexecuted bodies" (the
capture's ``meta["bodies"]``, the viewer's header count), its lines ran (per device), and
its FLOPs are in the executed program's per-device total; a ``shard_map`` inside a
``cond`` branch is as unexecuted as the branch.

The program is in the style of JAX's shard_map documentation (a jitted ``shard_map`` of a
blocked matmul and its ``psum`` over a 1-d mesh), captured on 8 simulated CPU devices in
a fresh interpreter (``tests/sharded_captures.py``)."""

from __future__ import annotations

import pytest

pytest.importorskip("jax")

from capture.analysis.analysis import Analysis  # noqa: E402
from capture.analysis.lines import LineIndex  # noqa: E402
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


def matmul_block(a_block, b_block):
    c_partial = jnp.dot(a_block, b_block)  # LINE dot
    return lax.psum(c_partial, "i")


@jax.jit
def net(a, b):
    c = jax.shard_map(matmul_block, in_specs=(P(None, "i"), P("i", None)), out_specs=P())(a, b)
    c = lax.cond(c.sum() > 0, lambda v: jnp.tanh(v) * 2.0, lambda v: v - 1.0, c)  # LINE cond
    _, c = lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * 1.5), (0, c))
    return c


def in_branch(a, b):
    inner = jax.shard_map(matmul_block, in_specs=(P(None, "i"), P("i", None)), out_specs=P())
    return lax.cond(a.sum() > 0, lambda x, y: inner(x, y), lambda x, y: jnp.zeros((8, 4), x.dtype), a, b)
'''


def _line(marker: str) -> int:
    # the file as written (capture_workspace.write: dedented, leading blank lines stripped)
    return next(i for i, text in enumerate(MODEL.lstrip().splitlines(), 1) if f"# LINE {marker}" in text)


@pytest.fixture(scope="module")
def caps(tmp_path_factory):
    root = write(tmp_path_factory.mktemp("ws"), {"model.py": MODEL})
    mesh = {"i": {"size": 8, "type": "auto"}}

    def case(model):
        return {"framework": "jax", "root": str(root),
                "table": profile(model, args=[tensor([8, 16]), tensor([16, 4])], mesh=mesh)}

    files = capture_all({"net": case("model:net"), "in_branch": case("model:in_branch")},
                        tmp_path_factory.mktemp("out"))
    return {name: read(path) for name, path in files.items()}


def _body_nodes(cap, role_test) -> int:
    bodies = {g.id for g in cap.groups if g.kind == "body" and role_test(g.attrs.get("role"))}
    # a body's nodes, nested groups included (no body nests in another here but in_branch's)
    def inside(g):
        while g is not None:
            if g in bodies:
                return True
            grp = cap.groups[g]
            if grp.kind == "body":
                return False
            g = grp.parent
        return False
    return sum(1 for n in cap.nodes if inside(n.group))


def test_a_shard_map_body_is_not_counted_among_unexecuted_bodies(caps):
    cap = caps["net"]
    assert cap.failure is None, cap.failure
    smap = _body_nodes(cap, lambda r: r == "shard_map body")
    control = _body_nodes(cap, lambda r: r != "shard_map body")
    assert smap >= 2 and control >= 3  # dot + psum; tanh, mul, sub, the while's cond and body
    bodies = cap.meta["bodies"]
    assert bodies["template_nodes"] == control
    assert bodies["shard_map_nodes"] == smap and bodies["shard_map"] == 1
    proj = Projection(cap)
    counts = proj.summary()["counts"]
    assert counts["template_nodes"] == control  # the header's "N in unexecuted bodies"
    assert counts["per_device_nodes"] == smap
    # the inspector's "Inside an unexecuted body of n…" note: a branch's op, not the shard_map's
    (dot,) = [n for n in cap.nodes if n.op == "dot_general"]
    (tanh,) = [n for n in cap.nodes if n.op == "tanh"]
    (cond,) = [n for n in cap.nodes if n.op == "cond"]
    assert "template" not in proj.node(dot.id)
    assert proj.node(tanh.id)["template"] == cond.id
    # search says which ran: the branch's op is "in a body, not executed", the shard_map's is not
    (found,) = [r for r in proj.search("dot_general")["results"] if r["type"] == "node"]
    assert "not executed" not in found["where"]
    (branch_op,) = [r for r in proj.search("tanh")["results"] if r["type"] == "node"]
    assert "in a body, not executed" in branch_op["where"]


def test_a_shard_map_bodys_lines_ran_and_a_branchs_did_not(caps):
    cap = caps["net"]
    index = LineIndex.build(Analysis(cap))
    (file,) = [f for f in index.files if f.endswith("model.py")]
    dot = index.files[file][_line("dot")]
    assert not dot.traced_body and dot.ran and dot.first.body == -1
    assert {cap.nodes[i].op for c in dot.ran for i in c.nodes} == {"dot_general"}
    cond = index.files[file][_line("cond")]
    inside = [c for c in cond.calls if c.body >= 0]  # the branch lambdas, as traced
    assert inside and all(cap.groups[c.body].attrs["role"].startswith("branch") for c in inside)
    assert all(c.body < 0 for c in cond.ran)  # what ran on the line: the cond itself


def test_a_shard_map_bodys_flops_are_in_the_per_device_total(caps):
    cap = caps["net"]
    # One device: a [8, 2] block times a [2, 4] block (2·8·2·4 FLOPs), then the psum's adds.
    (dot,) = [n for n in cap.nodes if n.op == "dot_general"]
    assert cap.cost.flops_per_device[dot.id] == 2 * 8 * 2 * 4
    (boundary,) = [n for n in cap.nodes if n.op == "shard_map"]
    assert cap.cost.flops_per_device[boundary.id] >= 2 * 8 * 2 * 4
    total = flops_total(cap)
    assert total is not None and total >= cap.cost.flops_per_device[boundary.id]


def test_a_shard_map_inside_a_branch_is_as_unexecuted_as_the_branch(caps):
    cap = caps["in_branch"]
    assert cap.failure is None, cap.failure
    every = _body_nodes(cap, lambda r: True)
    bodies = cap.meta["bodies"]
    assert bodies["template_nodes"] == every and "shard_map_nodes" not in bodies
    counts = Projection(cap).summary()["counts"]
    assert counts["template_nodes"] == every and "per_device_nodes" not in counts
    index = LineIndex.build(Analysis(cap))
    (file,) = [f for f in index.files if f.endswith("model.py")]
    assert index.files[file][_line("dot")].traced_body
