"""The jaxpr converter on small programs, one per rule of the spec's "Graph evidence
and limits". Each program is traced once (module scope) and checked against an
independent walk of its jaxpr and against ``jax.eval_shape``."""

from __future__ import annotations

import functools
import json
from collections import namedtuple
from pathlib import Path

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from jax import lax  # noqa: E402

from capture.graph import graphfile  # noqa: E402
from capture.jax.convert import convert  # noqa: E402
from capture.jax.structures import structure_of  # noqa: E402
from capture.worker.errors import LimitExceeded  # noqa: E402
from capture.worker.limits import Limits  # noqa: E402
from capture.graph.model import to_json, tree_leaves  # noqa: E402

from jaxpr_walk import eval_shape_avals, in_body, node_counts, output_avals, primitive_counts  # noqa: E402

pytestmark = pytest.mark.jax

HERE = Path(__file__).resolve().parent
WORKSPACE = HERE.parents[1]


# --------------------------------------------------------------------------- programs


@jax.jit
def net(x):
    return jax.nn.relu(x @ jnp.ones((3, 4)))


def cond_prog(p, x):
    return lax.cond(p, lambda v: v + 1.0, lambda v: v * 2.0, x)


def scan_prog(xs):
    return lax.scan(lambda c, y: (c + y, c * y), xs[0], xs)


def while_prog(x):
    return lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))[1]


def remat_prog(x):
    def block(v):
        return jnp.sin(v) * 2.0

    return jax.checkpoint(block)(x) + 1.0


@jax.custom_vjp
def clipped(x):
    return jnp.clip(x, -1.0, 1.0)


clipped.defvjp(lambda x: (clipped(x), x), lambda r, g: (g * (jnp.abs(r) <= 1.0),))


def custom_vjp_prog(x):
    return clipped(x) * 3.0


def conv_prog(x, w):
    return lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), precision=lax.Precision.HIGHEST
    )


def gather_prog(table, idx):
    return table.at[idx].get(mode="fill", fill_value=0.0)


def scatter_add_prog(a, idx, upd):
    return a.at[idx].add(upd)


def ragged_prog(lhs, rhs, sizes):
    return lax.ragged_dot(lhs, rhs, sizes)


def moe_prog(x, router, experts):
    """A tiny mixture of experts: route each token to its top expert, run the experts
    as one ragged matmul over tokens sorted by expert, scatter-add the results back."""
    n_experts = experts.shape[0]
    logits = x @ router
    top = jnp.argmax(logits, axis=-1)
    order = jnp.argsort(top)
    sizes = jnp.bincount(top, length=n_experts).astype(jnp.int32)
    y = lax.ragged_dot(x[order], experts, sizes)
    gate = jax.nn.softmax(logits, axis=-1)[jnp.arange(x.shape[0]), top][order]
    return jnp.zeros((x.shape[0], experts.shape[-1]), x.dtype).at[order].add(y * gate[:, None])


def debug_prog(x):
    jax.debug.print("x = {}", x)
    return x + 1.0


def reuse_prog(a, b):
    return (a - b, b - a, a * a)


def scoped_prog(x):
    with jax.named_scope("outer"):
        y = x * 2.0
        with jax.named_scope("inner"):
            y = jnp.tanh(y)
    return y + 1.0


def literal_out_prog(x):
    return x, 2.0


Pair = namedtuple("Pair", "left right")


def nested_out_prog(x):
    return {"pair": Pair(x, x * 2.0), "items": [x.sum(), (x.T,)]}


W_CLOSED = jnp.full((3, 3), 2.0)


def closure_prog(x):
    return x @ W_CLOSED


f32 = jnp.float32
PROGRAMS = {
    "net": (net, (jnp.ones((2, 3), f32),)),
    "cond": (cond_prog, (True, jnp.ones(3, f32))),
    "scan": (scan_prog, (jnp.ones((4, 3), f32),)),
    "while": (while_prog, (jnp.ones(3, f32),)),
    "remat": (remat_prog, (jnp.ones(3, f32),)),
    "custom_vjp": (custom_vjp_prog, (jnp.ones(3, f32),)),
    "conv": (conv_prog, (jnp.ones((1, 8, 8, 3), f32), jnp.ones((3, 3, 3, 4), f32))),
    "gather": (gather_prog, (jnp.ones((5, 3), f32), jnp.array([1, 2], jnp.int32))),
    "scatter_add": (scatter_add_prog, (jnp.ones((5, 3), f32), jnp.array([1, 2], jnp.int32), jnp.ones((2, 3), f32))),
    "ragged_dot": (ragged_prog, (jnp.ones((6, 4), f32), jnp.ones((2, 4, 5), f32), jnp.array([3, 3], jnp.int32))),
    "moe": (moe_prog, (jnp.ones((8, 4), f32), jnp.ones((4, 3), f32), jnp.ones((3, 4, 5), f32))),
    "debug": (debug_prog, (jnp.ones(3, f32),)),
    "reuse": (reuse_prog, (jnp.ones(3, f32), jnp.ones(3, f32))),
    "scoped": (scoped_prog, (jnp.ones(3, f32),)),
    "literal_out": (literal_out_prog, (jnp.ones(3, f32),)),
    "nested_out": (nested_out_prog, (jnp.ones((2, 3), f32),)),
    "closure": (closure_prog, (jnp.ones((2, 3), f32),)),
}


@pytest.fixture(scope="module")
def traced():
    """name -> (closed jaxpr, capture); each program traced and converted once."""
    out = {}
    for name, (fn, args) in PROGRAMS.items():
        closed, shapes = jax.make_jaxpr(fn, return_shape=True)(*args)
        outputs = structure_of(shapes)
        out[name] = (closed, convert(closed, outputs=outputs, workspace=WORKSPACE))
    return out


def nodes_of(capture, op):
    return [n for n in capture.nodes if n.op == op]


# --------------------------------------------------------------------------- every program


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_counts_match_an_independent_walk(traced, name):
    closed, cap = traced[name]
    assert node_counts(cap) == primitive_counts(closed)
    assert node_counts(cap, executed=False) == primitive_counts(closed, bodies=True)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_output_shapes_equal_eval_shape(traced, name):
    fn, args = PROGRAMS[name]
    _, cap = traced[name]
    assert output_avals(cap) == eval_shape_avals(fn, *args)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_capture_metadata_and_round_trip(traced, name, tmp_path):
    _, cap = traced[name]
    assert cap.backend == "jaxpr" and cap.framework == "jax"
    assert cap.framework_version == jax.__version__
    assert cap.coverage.scope == "traced_program"
    assert all(v.measured is None for v in cap.values)
    assert all("measured" not in v for v in to_json(cap)["values"])
    assert [v.id for v in cap.values] == list(range(len(cap.values)))
    json.dumps(to_json(cap))  # plain data throughout
    graphfile.write(cap, tmp_path / "g.tvg")
    back = graphfile.read(tmp_path / "g.tvg")
    assert to_json(back) == to_json(cap)


# --------------------------------------------------------------------------- the spec's net


def test_net_is_the_spec_example(traced):
    _, cap = traced["net"]
    ops = {n.op for n in cap.nodes}
    assert {"broadcast_in_dim", "dot_general", "max"} <= ops
    jit = [g for g in cap.groups if g.kind == "jit" and g.name == "net"]
    assert len(jit) == 1 and jit[0].parent is None
    relu = [g for g in cap.groups if g.kind == "custom_jvp"]
    assert [g.name for g in relu] == ["relu"]
    assert relu[0].parent == jit[0].id
    assert "tracing scope" in jit[0].attrs["note"] and "not a recovered" in relu[0].attrs["note"]
    # placement params of the call are named, not dropped silently
    assert {"in_shardings", "out_shardings", "donated_invars"} <= set(jit[0].attrs["omitted_params"])
    assert "jvp_jaxpr_fun" in relu[0].attrs["omitted_params"]
    (out,) = tree_leaves(cap.outputs)
    assert (cap.values[out].shape, cap.values[out].dtype) == ([2, 4], "float32")
    assert cap.coverage.status == "complete" and cap.coverage.effects == "none"
    # max's second operand is the literal 0.0; the matmul's first operand is the input.
    (mx,) = nodes_of(cap, "max")
    assert mx.inputs[1].is_literal and mx.inputs[1].literal == 0.0
    (dot,) = nodes_of(cap, "dot_general")
    assert dot.inputs[0].value == 0 and dot.inputs[0].position == 0
    assert dot.params["dimension_numbers"] == [[[1], [0]], [[], []]]
    (bcast,) = nodes_of(cap, "broadcast_in_dim")
    assert bcast.inputs[0].literal == 1.0 and bcast.params["shape"] == [3, 4]
    # the relu body is nested: max sits in the custom_jvp group's inner jit
    assert cap.groups[mx.group].parent == relu[0].id


def test_net_frames_point_at_this_file(traced):
    _, cap = traced["net"]
    here = HERE.relative_to(WORKSPACE).as_posix() + "/test_jaxpr_convert.py"
    (dot,) = nodes_of(cap, "dot_general")
    frame = cap.frames[dot.frame]
    assert frame.file == here and frame.function == "net"
    src = (HERE / "test_jaxpr_convert.py").read_text().splitlines()
    assert "x @ jnp.ones" in src[frame.line - 1]
    # relu's body has no user frame of its own: it points at the call site.
    (mx,) = nodes_of(cap, "max")
    assert cap.frames[mx.frame].function == "net"


# --------------------------------------------------------------------------- opaque subprograms


@pytest.mark.parametrize("name, op", [("cond", "cond"), ("scan", "scan"), ("while", "while")])
def test_control_flow_is_one_opaque_node(traced, name, op):
    closed, cap = traced[name]
    (node,) = nodes_of(cap, op)
    assert node.opaque
    assert cap.coverage.status == "partial" and cap.coverage.reasons == ["opaque_kernel"]
    assert cap.coverage.effects == "incomplete"
    assert cap.meta["opaque_primitives"] == {op: 1}
    # the boundary keeps its output shapes, and nothing from inside the body leaks out
    eqn = next(e for e in closed.jaxpr.eqns if e.primitive.name == op)
    assert [cap.values[v].shape for v in node.outputs] == [list(o.aval.shape) for o in eqn.outvars]
    # (the body's equations are templates in body groups: see test_jaxpr_bodies.py)
    assert all(in_body(cap, n.group) for n in cap.nodes if n.op in ("add", "mul", "lt"))
    made_in_body = {v for n in cap.nodes if in_body(cap, n.group) for v in n.outputs}
    assert not any(o.value in made_in_body for n in cap.nodes if not in_body(cap, n.group) for o in n.inputs)
    assert not made_in_body & set(tree_leaves(cap.outputs))


def test_cond_branches_stay_named_and_counted(traced):
    _, cap = traced["cond"]
    (node,) = nodes_of(cap, "cond")
    assert node.params["branches"] == [
        {"opaque": "ClosedJaxpr", "equations": 1},
        {"opaque": "ClosedJaxpr", "equations": 1},
    ]


def test_scan_keeps_its_plain_params(traced):
    _, cap = traced["scan"]
    (node,) = nodes_of(cap, "scan")
    assert node.params["length"] == 4 and node.params["num_carry"] == 1 and node.params["reverse"] is False
    assert node.params["jaxpr"]["opaque"] == "ClosedJaxpr"


def test_scatter_add_reducer_is_an_opaque_boundary(traced):
    _, cap = traced["scatter_add"]
    (node,) = nodes_of(cap, "scatter-add")
    assert node.opaque
    assert node.params["update_jaxpr"] == {"opaque": "Jaxpr", "equations": 1}
    assert node.params["dimension_numbers"]["scatter_dims_to_operand_dims"] == [0]
    assert node.params["mode"] == "FILL_OR_DROP"
    assert cap.coverage.status == "partial" and "opaque_kernel" in cap.coverage.reasons
    assert not nodes_of(cap, "add") or all(n.group is None for n in nodes_of(cap, "add"))


def test_moe_keeps_scatter_reducer_opaque_and_ragged_dot(traced):
    closed, cap = traced["moe"]
    scatters = [n for n in cap.nodes if n.op.startswith("scatter")]
    assert scatters and all(n.opaque for n in scatters if n.params.get("update_jaxpr") is not None)
    assert any(n.opaque for n in scatters)
    assert cap.coverage.status == "partial"
    (rd,) = nodes_of(cap, "ragged_dot_general")
    assert not rd.opaque


# --------------------------------------------------------------------------- expanded calls


def test_remat_is_a_group(traced):
    _, cap = traced["remat"]
    (g,) = [g for g in cap.groups if g.kind == "remat"]
    assert g.name == "block" and g.attrs["primitive"] == "remat2"
    assert g.attrs["prevent_cse"] is True and g.attrs["policy"] is None
    assert {n.op for n in cap.nodes if n.group == g.id} == {"sin", "mul"}
    assert cap.coverage.status == "complete"


def test_custom_vjp_is_a_group(traced):
    _, cap = traced["custom_vjp"]
    (g,) = [g for g in cap.groups if g.kind == "custom_vjp"]
    assert g.name == "clipped"
    inside = [n for n in cap.nodes if n.group is not None and _under(cap, n.group, g.id)]
    assert inside and "mul" not in {n.op for n in inside}
    assert cap.coverage.status == "complete"


def _under(cap, gid, ancestor):
    while gid is not None:
        if gid == ancestor:
            return True
        gid = cap.groups[gid].parent
    return False


def test_call_boundaries_bind_values_without_copies(traced):
    """The jit body's input is the caller's value itself: one value, many uses."""
    _, cap = traced["net"]
    (jit,) = [g for g in cap.groups if g.name == "net"]
    assert jit.attrs["inputs"] == [0]
    (dot,) = nodes_of(cap, "dot_general")
    assert dot.inputs[0].value == 0


# --------------------------------------------------------------------------- params


def test_conv_dimension_numbers_and_precision(traced):
    _, cap = traced["conv"]
    (node,) = nodes_of(cap, "conv_general_dilated")
    dn = node.params["dimension_numbers"]
    assert set(dn) == {"lhs_spec", "rhs_spec", "out_spec"}
    assert dn["lhs_spec"] == [0, 3, 1, 2] and dn["rhs_spec"] == [3, 2, 0, 1]
    assert node.params["precision"] == ["HIGHEST", "HIGHEST"]
    assert node.params["padding"] == [[1, 1], [1, 1]]
    assert node.params["window_strides"] == [1, 1]


def test_gather_dimension_numbers_and_mode(traced):
    _, cap = traced["gather"]
    (node,) = nodes_of(cap, "gather")
    dn = node.params["dimension_numbers"]
    assert dn["offset_dims"] == [1] and dn["collapsed_slice_dims"] == [0] and dn["start_index_map"] == [0]
    assert node.params["mode"] == "FILL_OR_DROP"
    assert node.params["fill_value"] == 0.0
    assert node.params["slice_sizes"] == [1, 3]


def test_ragged_dot_dimension_metadata(traced):
    _, cap = traced["ragged_dot"]
    (node,) = nodes_of(cap, "ragged_dot_general")
    dn = node.params["ragged_dot_dimension_numbers"]
    assert dn == {
        "dot_dimension_numbers": [[[1], [1]], [[], []]],
        "lhs_ragged_dimensions": [0],
        "rhs_group_dimensions": [0],
    }


def test_unsupported_params_are_named_opaque_and_effects_incomplete(traced):
    _, cap = traced["debug"]
    (node,) = nodes_of(cap, "debug_print")
    assert node.params["in_tree"] == {"opaque": "PyTreeDef"}
    assert node.params["fmt"] == "x = {}"
    assert not node.opaque  # a callback is not a subprogram boundary
    assert cap.coverage.effects == "incomplete"
    assert cap.meta["effects"] == ["DebugEffect"]
    assert cap.coverage.status == "complete"


def test_no_param_is_a_repr_of_a_live_object(traced):
    for _, cap in traced.values():
        text = json.dumps([n.params for n in cap.nodes] + [g.attrs for g in cap.groups])
        assert " at 0x" not in text and "<function" not in text and "object at" not in text


# --------------------------------------------------------------------------- values and structure


def test_repeated_uses_and_argument_positions(traced):
    _, cap = traced["reuse"]
    subs = nodes_of(cap, "sub")
    assert [[(o.position, o.value) for o in n.inputs] for n in subs] == [[(0, 0), (1, 1)], [(0, 1), (1, 0)]]
    (mul,) = nodes_of(cap, "mul")
    assert [o.value for o in mul.inputs] == [0, 0]
    assert len(cap.values) == 5  # two inputs, three results


def test_name_stack_becomes_scope_groups(traced):
    _, cap = traced["scoped"]
    scopes = {g.name: g for g in cap.groups if g.kind == "scope"}
    assert set(scopes) == {"outer", "inner"}
    assert scopes["inner"].parent == scopes["outer"].id and scopes["outer"].parent is None
    assert scopes["inner"].attrs["name_stack"] == "outer/inner"
    assert "not a recovered layer hierarchy" in scopes["inner"].attrs["note"]
    (tanh,) = nodes_of(cap, "tanh")
    assert tanh.group == scopes["inner"].id
    (add,) = nodes_of(cap, "add")
    assert add.group is None


def test_literal_outputs_are_constants(traced):
    _, cap = traced["literal_out"]
    leaves = list(tree_leaves(cap.outputs))
    assert leaves[0] == 0
    const = [c for c in cap.meta["constants"] if c["value"] == leaves[1]]
    assert const and const[0]["origin"] == "literal" and const[0]["literal"] == 2.0


def test_closed_over_arrays_are_constant_values(traced):
    _, cap = traced["closure"]
    (dot,) = nodes_of(cap, "dot_general")
    const = dot.inputs[1].value
    assert cap.values[const].shape == [3, 3]
    assert cap.meta["constants"] == [{"value": const, "origin": "closure"}]
    assert const not in set(tree_leaves(cap.inputs))
    assert not any(const in n.outputs for n in cap.nodes)


def test_nested_output_structure(traced):
    _, cap = traced["nested_out"]
    out = cap.outputs
    assert list(out) == ["dict"]
    keys = [k for k, _ in out["dict"]]
    assert keys == ["items", "pair"]  # JAX's flattening order (sorted keys)
    items = dict(out["dict"])["items"]
    assert list(items) == ["list"] and list(items["list"][1]) == ["tuple"]
    pair = dict(out["dict"])["pair"]
    assert [k for k, _ in pair["dict"]] == ["left", "right"]  # a named tuple: its field names
    assert dict(pair["dict"])["left"] == {"value": 0}


def test_structure_of_keeps_static_leaves_and_none():
    s = structure_of(((jnp.ones(2), 3, None), {"flag": True, "x": jnp.ones(1)}))
    assert s == {
        "tuple": [
            {"tuple": [{"value": 0}, {"static": 3}, {"static": None}]},
            {"dict": [["flag", {"static": True}], ["x", {"value": 1}]]},
        ]
    }


# --------------------------------------------------------------------------- limits


def test_node_limit(traced):
    closed, _ = traced["moe"]
    with pytest.raises(LimitExceeded) as exc:
        convert(closed, limits=Limits(max_ops=3))
    assert exc.value.limit == "max_ops" and exc.value.maximum == 3 and exc.value.stage == "limit"


def test_value_limit(traced):
    closed, _ = traced["reuse"]
    with pytest.raises(LimitExceeded) as exc:
        convert(closed, limits=Limits(max_values=4))
    assert exc.value.limit == "max_values"


def test_group_limit(traced):
    closed, _ = traced["net"]
    with pytest.raises(LimitExceeded) as exc:
        convert(closed, limits=Limits(max_groups=2))
    assert exc.value.limit == "max_groups"


def test_partial_callables_trace_like_functions():
    fn = functools.partial(lambda scale, x: x * scale, 3.0)
    closed = jax.make_jaxpr(fn)(jnp.ones(2))
    cap = convert(closed)
    (mul,) = nodes_of(cap, "mul")
    assert mul.inputs[1].literal == 3.0
