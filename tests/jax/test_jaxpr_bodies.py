"""Control-flow bodies as unexecuted templates (issue 12, item 3).

``scan``, ``while`` and ``cond``/``switch`` stay one opaque boundary node with their
output shapes (coverage partial, opaque_kernel); their bodies become ``body`` groups
whose nodes are the body equations as traced once, with ``executed: false``. Each
program is checked against an independent walk of its jaxpr (``jaxpr_walk``)."""

from __future__ import annotations

from pathlib import Path

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from jax import lax  # noqa: E402

from capture.graph import graphfile  # noqa: E402
from capture.jax.control_flow import BODY_NOTE, BRANCH_NOTE  # noqa: E402
from capture.jax.convert import convert  # noqa: E402
from capture.jax.structures import structure_of  # noqa: E402
from capture.graph.model import to_json, tree_leaves  # noqa: E402
from capture.worker.limits import Limits  # noqa: E402

from jaxpr_walk import eval_shape_avals, in_body, node_counts, output_avals, primitive_counts  # noqa: E402

pytestmark = pytest.mark.jax

HERE = Path(__file__).resolve().parent
WORKSPACE = HERE.parents[1]
f32 = jnp.float32


# --------------------------------------------------------------------------- programs


def scan_prog(w, xs):
    def step(carry, x):
        h = jnp.tanh(carry @ w + x)
        return h, h.sum()

    return lax.scan(step, jnp.zeros(3, f32), xs)


def fori_static(x):
    return lax.fori_loop(0, 6, lambda i, c: c * 2.0 + i, x)


def fori_dynamic(x, n):
    return lax.fori_loop(0, n, lambda i, c: c * 2.0, x)


def while_prog(x):
    return lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, jnp.sin(c[1])), (0, x))[1]


def cond_prog(p, x):
    return lax.cond(p, lambda v: v + 1.0, lambda v: jnp.cos(v) * 2.0, x)


def switch_prog(i, x):
    return lax.switch(i, [lambda v: v + 1.0, lambda v: v * v, lambda v: jnp.exp(v)], x)


def nested_prog(xss):
    def outer(c, xs):
        inner_c, ys = lax.scan(lambda a, x: (a * x, a + x), c, xs)
        return inner_c, ys.sum()

    return lax.scan(outer, jnp.ones((), f32), xss)


def map_prog(xs):
    return lax.map(lambda v: jnp.dot(v, v), xs)


def scatter_prog(a, idx, upd):
    return a.at[idx].add(upd)


PROGRAMS = {
    "scan": (scan_prog, (jnp.ones((3, 3), f32), jnp.ones((5, 3), f32))),
    "fori_static": (fori_static, (jnp.ones(3, f32),)),
    "fori_dynamic": (fori_dynamic, (jnp.ones(3, f32), jnp.int32(4))),
    "while": (while_prog, (jnp.ones(3, f32),)),
    "cond": (cond_prog, (True, jnp.ones(3, f32))),
    "switch": (switch_prog, (jnp.int32(1), jnp.ones(3, f32))),
    "nested": (nested_prog, (jnp.ones((4, 6), f32),)),
    "map": (map_prog, (jnp.ones((7, 3), f32),)),
    "scatter": (scatter_prog, (jnp.ones((5, 3), f32), jnp.array([1, 2], jnp.int32), jnp.ones((2, 3), f32))),
}


@pytest.fixture(scope="module")
def traced():
    out = {}
    for name, (fn, args) in PROGRAMS.items():
        closed, shapes = jax.make_jaxpr(fn, return_shape=True)(*args)
        out[name] = (closed, convert(closed, outputs=structure_of(shapes), workspace=WORKSPACE))
    return out


def bodies(cap, node=None):
    return [g for g in cap.groups if g.kind == "body" and (node is None or g.attrs["node"] == node)]


def boundary(cap, op):
    (node,) = [n for n in cap.nodes if n.op == op and not in_body(cap, n.group)]
    return node


def members(cap, gid):
    return [n for n in cap.nodes if n.group == gid]


# --------------------------------------------------------------------------- every program


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_executed_program_unchanged_and_templates_counted(traced, name):
    closed, cap = traced[name]
    assert node_counts(cap) == primitive_counts(closed)
    assert node_counts(cap, executed=False) == primitive_counts(closed, bodies=True)
    fn, args = PROGRAMS[name]
    assert output_avals(cap) == eval_shape_avals(fn, *args)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_nothing_claims_execution(traced, name, tmp_path):
    _, cap = traced[name]
    assert cap.coverage.status == "partial" and cap.coverage.reasons == ["opaque_kernel"]
    assert cap.coverage.effects == "incomplete"
    for g in bodies(cap):
        assert g.attrs["executed"] is False
        assert g.attrs["note"] in (BODY_NOTE, BRANCH_NOTE)
        boundary_node = cap.nodes[g.attrs["node"]]
        assert boundary_node.opaque and boundary_node.op == g.attrs["primitive"]
        # the body sits where its boundary sits
        assert g.parent == boundary_node.group
    # no value made in a template reaches the executed program or the outputs
    made = {v for n in cap.nodes if in_body(cap, n.group) for v in n.outputs}
    assert not any(o.value in made for n in cap.nodes if not in_body(cap, n.group) for o in n.inputs)
    assert not made & set(tree_leaves(cap.outputs))
    graphfile.write(cap, tmp_path / "g.tvg")
    assert to_json(graphfile.read(tmp_path / "g.tvg")) == to_json(cap)


# --------------------------------------------------------------------------- scan


def test_scan_body_is_a_template_with_wired_parameters(traced):
    closed, cap = traced["scan"]
    node = boundary(cap, "scan")
    eqn = next(e for e in closed.jaxpr.eqns if e.primitive.name == "scan")
    assert [cap.values[v].shape for v in node.outputs] == [list(o.aval.shape) for o in eqn.outvars]
    assert cap.meta["opaque_primitives"] == {"scan": 1}
    (body,) = bodies(cap, node.id)
    a = body.attrs
    assert a["role"] == "scan body" and a["iterations"] == 5 and a["reverse"] is False
    assert body.name == "scan body: step"
    # one constant (w), one carry, one xs; each body input is a value of its own
    stands = [p["stands_for"] for p in a["parameters"]]
    assert stands == ["const 0", "carry 0", "xs 0 (one slice)"]
    for p in a["parameters"]:
        assert p["outer"] == node.inputs[p["operand"]].value
        assert p["value"] != p["outer"]
        assert not any(p["value"] in n.outputs for n in cap.nodes)  # no producer: a parameter
    assert cap.values[a["parameters"][0]["value"]].shape == [3, 3]
    assert cap.values[a["parameters"][2]["value"]].shape == [3]  # one slice of xs[5, 3]
    assert cap.nodes[node.id].inputs[a["parameters"][0]["operand"]].value == 0  # w is input 0
    assert [r["stands_for"] for r in a["results"]] == ["carry 0 (next iteration)", "ys 0 (one slice)"]
    assert [cap.values[r["value"]].shape for r in a["results"]] == [[3], []]
    ops = [n.op for n in members(cap, body.id)]
    assert "dot_general" in ops and "tanh" in ops
    assert a["equations"] == sum(1 for n in cap.nodes if in_body(cap, n.group)) == len(ops)
    # the dot in the body reads the body's own parameters
    (dot,) = [n for n in members(cap, body.id) if n.op == "dot_general"]
    param_ids = {p["value"] for p in a["parameters"]}
    assert {o.value for o in dot.inputs} <= param_ids
    # template frames point at the body's source line
    frame = cap.frames[dot.frame]
    assert frame.function.endswith("step") and "carry @ w" in (HERE / "test_jaxpr_bodies.py").read_text().splitlines()[frame.line - 1]
    assert cap.meta["bodies"]["converted"] == 1 and cap.meta["bodies"]["closed"] == 0
    assert "values of its own" in cap.meta["bodies"]["wiring"]


def test_fori_loop_with_static_bounds_is_a_scan_with_its_trip_count(traced):
    _, cap = traced["fori_static"]
    node = boundary(cap, "scan")
    (body,) = bodies(cap, node.id)
    assert body.attrs["iterations"] == 6
    counter, carry = body.attrs["parameters"]
    # the loop counter starts from the literal 0; the carry from the input x
    assert counter["outer"] is None and counter["literal"] == 0
    assert carry["outer"] == 0


def test_fori_loop_with_dynamic_bounds_is_a_while_with_no_trip_count(traced):
    _, cap = traced["fori_dynamic"]
    node = boundary(cap, "while")
    cond, body = bodies(cap, node.id)
    assert (cond.attrs["role"], body.attrs["role"]) == ("while cond", "while body")
    assert cond.attrs["iterations"] is None and body.attrs["iterations"] is None
    assert "run time" in body.attrs["trip_count"]
    (pred,) = cond.attrs["results"]
    assert cap.values[pred["value"]].dtype == "bool" and pred["output"] is None
    assert [n.op for n in members(cap, cond.id)] == ["lt"]
    assert "mul" in [n.op for n in members(cap, body.id)]


def test_while_loop_carries_stand_for_the_boundary_operands(traced):
    _, cap = traced["while"]
    node = boundary(cap, "while")
    cond, body = bodies(cap, node.id)
    assert [p["stands_for"] for p in body.attrs["parameters"]] == ["carry 0", "carry 1"]
    assert [r["output"] for r in body.attrs["results"]] == [0, 1]
    assert body.attrs["parameters"][1]["outer"] == 0  # x
    assert "sin" in [n.op for n in members(cap, body.id)]
    # cond and body have separate parameter values (two templates, not one)
    assert not {p["value"] for p in cond.attrs["parameters"]} & {p["value"] for p in body.attrs["parameters"]}


# --------------------------------------------------------------------------- cond / switch


def test_cond_branches_are_side_by_side_templates(traced):
    _, cap = traced["cond"]
    node = boundary(cap, "cond")
    b0, b1 = bodies(cap, node.id)
    assert (b0.attrs["role"], b1.attrs["role"]) == ("branch 0", "branch 1")
    assert "false" in b0.attrs["selected"] and "true" in b1.attrs["selected"]
    assert "iterations" not in b0.attrs  # a branch runs at most once, decided at run time
    assert b0.attrs["note"] == BRANCH_NOTE
    # branch 0 is the false branch (cos), branch 1 the true one (add)
    assert {n.op for n in members(cap, b0.id)} == {"cos", "mul"}
    assert {n.op for n in members(cap, b1.id)} == {"add"}
    # the predicate (operand 0) is not a branch input; operand 1 is x
    assert [p["operand"] for p in b0.attrs["parameters"]] == [1]
    assert b0.attrs["parameters"][0]["outer"] == node.inputs[1].value


def test_switch_has_one_body_per_branch(traced):
    _, cap = traced["switch"]
    node = boundary(cap, "cond")
    bs = bodies(cap, node.id)
    assert [b.attrs["role"] for b in bs] == ["branch 0", "branch 1", "branch 2"]
    assert [b.attrs["case"] for b in bs] == [0, 1, 2]
    assert [sorted({n.op for n in members(cap, b.id)}) for b in bs] == [["add"], ["mul"], ["exp"]]


# --------------------------------------------------------------------------- nesting, map, reducers


def test_scan_in_scan_converts_recursively(traced):
    _, cap = traced["nested"]
    outer = boundary(cap, "scan")
    (outer_body,) = bodies(cap, outer.id)
    (inner,) = [n for n in members(cap, outer_body.id) if n.op == "scan"]
    assert inner.opaque
    (inner_body,) = bodies(cap, inner.id)
    assert inner_body.parent == outer_body.id
    assert (outer_body.attrs["iterations"], inner_body.attrs["iterations"]) == (4, 6)
    assert {n.op for n in members(cap, inner_body.id)} == {"mul", "add"}
    # the executed program has one opaque boundary; the template one is counted apart
    assert cap.meta["opaque_primitives"] == {"scan": 1}
    assert cap.meta["bodies"]["opaque_primitives"] == {"scan": 1}
    assert cap.meta["bodies"]["converted"] == 2


def test_lax_map_is_a_scan_body(traced):
    _, cap = traced["map"]
    (body,) = bodies(cap, boundary(cap, "scan").id)
    assert body.attrs["iterations"] == 7
    assert [p["stands_for"] for p in body.attrs["parameters"]] == ["xs 0 (one slice)"]


def test_scatter_reducer_stays_an_opaque_boundary(traced):
    _, cap = traced["scatter"]
    (node,) = [n for n in cap.nodes if n.op == "scatter-add"]
    assert node.opaque and node.params["update_jaxpr"] == {"opaque": "Jaxpr", "equations": 1}
    assert not bodies(cap) and "bodies" not in cap.meta
    assert all(not in_body(cap, n.group) for n in cap.nodes)


# --------------------------------------------------------------------------- limits


def test_a_body_over_its_budget_stays_closed_and_says_why():
    closed = jax.make_jaxpr(scan_prog)(*PROGRAMS["scan"][1])
    cap = convert(closed, limits=Limits(max_body_ops=2))
    (body,) = bodies(cap)
    assert not members(cap, body.id)
    assert "max_body_ops" in body.attrs["closed"] and "equations" in body.attrs["closed"]
    assert body.attrs["closed_limit"] == "max_body_ops" and body.attrs["executed"] is False
    assert "parameters" not in body.attrs
    assert cap.meta["bodies"] == {**cap.meta["bodies"], "converted": 0, "closed": 1,
                                  "closed_reasons": {"max_body_ops": 1}}
    assert cap.coverage.status == "partial" and cap.nodes[body.attrs["node"]].opaque
    assert node_counts(cap, executed=False) == primitive_counts(closed)


def test_capture_limits_close_a_body_instead_of_failing():
    closed = jax.make_jaxpr(nested_prog)(*PROGRAMS["nested"][1])
    n_exec = sum(primitive_counts(closed).values())
    outer_only = sum(primitive_counts(closed, bodies=True).values()) - 2  # inner body: mul, add
    cap = convert(closed, limits=Limits(max_ops=outer_only))
    outer_body, inner_body = bodies(cap)
    assert members(cap, outer_body.id) and not members(cap, inner_body.id)
    assert inner_body.attrs["closed_limit"] == "max_ops"
    assert "max_ops" in inner_body.attrs["closed"]
    assert len(cap.nodes) == outer_only > n_exec
    # the same for values: only the executed program fits
    n_values = len(convert(closed, limits=Limits(max_body_ops=0)).values)
    cap = convert(closed, limits=Limits(max_values=n_values))
    assert [b.attrs.get("closed_limit") for b in bodies(cap)] == ["max_values"]


# --------------------------------------------------------------------------- Flax


def test_linen_nn_scan_body_holds_the_layer_scopes():
    nn = pytest.importorskip("flax.linen")

    class Block(nn.Module):
        features: int

        @nn.compact
        def __call__(self, x, _):
            x = x + nn.Dense(self.features)(nn.LayerNorm()(x))
            return x, None

    class ScanStack(nn.Module):
        features: int = 8
        n_layers: int = 4

        @nn.compact
        def __call__(self, x):
            ScanBlock = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True},
                                length=self.n_layers)
            x, _ = ScanBlock(self.features, name="layers")(x, None)
            return x

    model = ScanStack()
    x = jnp.ones((2, 8), f32)
    variables = jax.eval_shape(model.init, jax.random.key(0), x)
    closed = jax.make_jaxpr(model.apply)(variables, x)
    n_leaves = len(jax.tree_util.tree_leaves(variables))
    cap = convert(closed, workspace=WORKSPACE)
    node = boundary(cap, "scan")
    (body,) = bodies(cap, node.id)
    assert body.attrs["iterations"] == 4
    assert cap.groups[body.parent].name == "ScanStack"
    # the stacked parameters enter as slices, the activations as the carry
    stands = [p["stands_for"] for p in body.attrs["parameters"]]
    assert stands.count("carry 0") == 1 and sum(s.startswith("xs ") for s in stands) == n_leaves
    assert {p["outer"] for p in body.attrs["parameters"] if p["stands_for"].startswith("xs")} <= set(range(n_leaves))
    # Linen's name stack inside the body becomes scopes under the body group
    names = {g.name: g for g in cap.groups}
    assert names["layers"].parent == body.id
    assert names["Dense_0"].parent == names["layers"].id and names["LayerNorm_0"].parent == names["layers"].id
    dense_ops = {n.op for n in cap.nodes if n.group == names["Dense_0"].id}
    assert "dot_general" in dense_ops
    assert node_counts(cap) == primitive_counts(closed)


@pytest.mark.slow
def test_nnx_scan_over_vmapped_layer_stack():
    nnx = pytest.importorskip("flax.nnx")

    class Block(nnx.Module):
        def __init__(self, dim: int, *, rngs: nnx.Rngs):
            self.linear = nnx.Linear(dim, dim, rngs=rngs)
            self.norm = nnx.LayerNorm(dim, rngs=rngs)

        def __call__(self, x):
            return x + nnx.relu(self.linear(self.norm(x)))

    class ScanMLP(nnx.Module):
        def __init__(self, dim: int, n_layers: int, *, rngs: nnx.Rngs):
            @nnx.split_rngs(splits=n_layers)
            @nnx.vmap(in_axes=(0,), out_axes=0)
            def create_block(rngs: nnx.Rngs):
                return Block(dim, rngs=rngs)

            self.blocks = create_block(rngs)

        def __call__(self, x):
            @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
            def forward(x, block: Block):
                return block(x)

            return forward(x, self.blocks)

    graphdef, state = nnx.split(ScanMLP(8, 5, rngs=nnx.Rngs(0)))

    def apply(state, x):
        return nnx.merge(graphdef, state)(x)

    x = jnp.ones((2, 8), f32)
    closed = jax.make_jaxpr(apply)(state, x)
    cap = convert(closed, workspace=WORKSPACE)
    node = boundary(cap, "scan")
    assert [cap.values[v].shape for v in node.outputs][0] == [2, 8]
    (body,) = bodies(cap, node.id)
    assert body.attrs["iterations"] == 5 and body.name == "scan body: forward"
    ops = [n.op for n in cap.nodes if in_body(cap, n.group)]
    assert "dot_general" in ops and "rsqrt" in ops
    # the stacked (5, 8, 8) kernel enters the body as one (8, 8) slice
    shapes = [cap.values[p["value"]].shape for p in body.attrs["parameters"]]
    outer = [cap.values[p["outer"]].shape for p in body.attrs["parameters"] if p["outer"] is not None]
    assert [8, 8] in shapes and [5, 8, 8] in outer
    (res,) = body.attrs["results"]
    assert cap.values[res["value"]].shape == [2, 8]
    assert node_counts(cap) == primitive_counts(closed)
    assert node_counts(cap, executed=False) == primitive_counts(closed, bodies=True)


def test_inspect_summary_counts_templates_apart(traced):
    from tensorviz_lsp.cli.commands.inspect import summary

    _, cap = traced["switch"]
    text = summary(cap)
    assert "bodies:     3 control-flow bodies as templates (3 of the nodes; not executed)" in text
    closed = convert(jax.make_jaxpr(scan_prog)(*PROGRAMS["scan"][1]), limits=Limits(max_body_ops=1))
    assert "1 left closed (max_body_ops)" in summary(closed)


def test_a_limit_passed_while_converting_undoes_the_body(monkeypatch):
    """The group estimate is an upper bound for the converter's own scopes; a limit passed
    anyway (groups opened by something the estimate does not see) closes the body and
    leaves no trace of it, instead of failing the capture."""
    nn = pytest.importorskip("flax.linen")
    import capture.jax.control_flow as jb

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, _):
            return nn.Dense(4)(nn.LayerNorm()(x)), None

    class Stack(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=3)(name="layers")(x, None)[0]

    x = jnp.ones((2, 4), f32)
    closed = jax.make_jaxpr(Stack().apply)(jax.eval_shape(Stack().init, jax.random.key(0), x), x)
    full = convert(closed)
    n_exec_groups = sum(1 for g in full.groups if not in_body(full, g.id))
    monkeypatch.setattr(jb, "_scope_estimate", lambda jaxpr: 0)
    cap = convert(closed, limits=Limits(max_groups=n_exec_groups + 2))
    (body,) = bodies(cap)
    assert body.attrs["closed_limit"] == "max_groups" and "max_groups" in body.attrs["closed"]
    assert "parameters" not in body.attrs and len(cap.groups) == n_exec_groups + 1
    assert node_counts(cap, executed=False) == primitive_counts(closed)
    assert len(cap.values) == len(convert(closed, limits=Limits(max_body_ops=0)).values)
