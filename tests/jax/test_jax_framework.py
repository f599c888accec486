"""The JAX framework capture (``capture.jax.framework``) in this process, following the
worker's order: one small workspace model per rule of the spec."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
flax = pytest.importorskip("flax")

from capture.graph.model import tree_leaves  # noqa: E402
from capture.recipe import RecipeError  # noqa: E402
from capture.worker.errors import CaptureError, LimitExceeded  # noqa: E402
from capture.worker.limits import Limits  # noqa: E402

from jax_workspace import (  # noqa: E402
    SPEC_INPUT,
    capture_in_process,
    cuda_device_count,
    forget_workspace_modules,
    profile,
    skip_if_cuda,
    tensor,
    write,
)
from jaxpr_walk import eval_shape_avals, node_counts, output_avals, primitive_counts  # noqa: E402

from spec_examples import SPEC_MLP, SPEC_NET  # noqa: E402

pytestmark = pytest.mark.jax


@pytest.fixture
def ws(tmp_path):
    yield tmp_path
    forget_workspace_modules(tmp_path)


def run(ws, files, table, **kw):
    write(ws, files)
    return capture_in_process(ws, table, **kw)[0]


def fails(ws, files, table, stage):
    """The capture fails at ``stage``; a recipe the recipe layer already refuses counts
    as a ``recipe`` failure (the worker reports a RecipeError with that stage)."""
    write(ws, files)
    with pytest.raises((CaptureError, RecipeError)) as exc:
        capture_in_process(ws, table)
    err = exc.value
    if isinstance(err, RecipeError):
        err = CaptureError("recipe", str(err), err.to_dict())
    assert err.stage == stage, err.message
    return err


def groups_named(cap, kind):
    return [g for g in cap.groups if g.kind == kind]


def input_tree(cap, key):
    return dict(cap.inputs["dict"])[key]


def x23():
    return jnp.ones((2, 3), jnp.float32)


# --------------------------------------------------------------------------- the spec's examples


def test_spec_net(ws):
    cap = run(ws, {"model.py": SPEC_NET}, profile("model:net", args=[SPEC_INPUT]))
    assert {"broadcast_in_dim", "dot_general", "max"} <= {n.op for n in cap.nodes}
    assert [g.name for g in groups_named(cap, "jit") if g.parent is None] == ["net"]
    assert [g.name for g in groups_named(cap, "custom_jvp")] == ["relu"]
    (out,) = tree_leaves(cap.outputs)
    assert (cap.values[out].shape, cap.values[out].dtype) == ([2, 4], "float32")
    assert input_tree(cap, "args") == {"tuple": [{"value": 0}]}
    assert cap.backend == "jaxpr" and cap.coverage.scope == "traced_program"
    assert cap.meta["model_kind"] == "function" and "state" not in cap.meta
    assert cap.meta["state_key"] is None  # no input key holds model state
    assert {f.file for f in cap.frames} == {"model.py"}
    # independent checks: the same callable traced here
    from model import net  # noqa: PLC0415  (the workspace module, on sys.path for this test)

    assert node_counts(cap) == primitive_counts(jax.make_jaxpr(net)(x23()))
    assert output_avals(cap) == eval_shape_avals(net, x23())


def test_spec_mlp(ws):
    cap = run(ws, {"mlp.py": SPEC_MLP}, profile("mlp:MLP", args=[SPEC_INPUT]))
    # Linen's module calls (nn.intercept_methods) are module groups in place of its name scopes
    modules = {g.attrs["path"]: g for g in groups_named(cap, "module")}
    assert set(modules) == {"", "Dense_0", "Dense_1"} and not groups_named(cap, "scope")
    assert [modules[p].name for p in ("", "Dense_0", "Dense_1")] == ["MLP", "Dense_0", "Dense_1"]
    assert modules["Dense_0"].parent == modules[""].id and modules["Dense_0"].attrs["class"] == "Dense"
    assert all("recorded while tracing" in g.attrs["note"] for g in modules.values())
    assert all("not a recovered layer hierarchy" in g.attrs["note"] for g in cap.groups if g.kind != "module")
    (out,) = tree_leaves(cap.outputs)
    assert (cap.values[out].shape, cap.values[out].dtype) == ([2, 4], "float32")
    assert cap.meta["state"] == "fresh_init" and "not trained" in cap.meta["state_note"]
    assert cap.meta["state_key"] == "variables"  # the input key holding the Linen variables
    assert cap.meta["flax_version"] == flax.__version__
    variables = input_tree(cap, "variables")
    kernels = sorted(cap.values[v].shape for v in tree_leaves(variables) if len(cap.values[v].shape) == 2)
    assert kernels == [[3, 8], [8, 4]]  # width 8
    (x,) = tree_leaves(input_tree(cap, "args"))
    assert cap.values[x].shape == [2, 3]

    from flax import linen as nn  # noqa: F401
    from mlp import MLP

    m = MLP()
    v = jax.eval_shape(m.init, jax.random.key(0), x23())
    assert node_counts(cap) == primitive_counts(jax.make_jaxpr(m.apply)(v, x23()))
    assert output_avals(cap) == eval_shape_avals(m.apply, v, x23())


def test_linen_fields_from_init_kwargs(ws):
    cap = run(ws, {"mlp.py": SPEC_MLP}, profile("mlp:MLP", args=[SPEC_INPUT], init={"args": [], "kwargs": {"width": 16}}))
    shapes = [cap.values[v].shape for v in tree_leaves(input_tree(cap, "variables"))]
    assert [3, 16] in shapes and [16, 4] in shapes


# --------------------------------------------------------------------------- control flow, static inputs


CONTROL = """
import jax
import jax.numpy as jnp
from jax import lax

def step(x, use_scan):
    if use_scan:   # a configured static boolean selects Python control flow
        _, ys = lax.scan(lambda c, r: (c + r, c * r), x[0], x)
        return ys
    y = lax.cond(x.sum() > 0, lambda v: v + 1.0, lambda v: v * 2.0, x)
    return lax.while_loop(lambda v: v.sum() < 100.0, lambda v: v * 2.0, y)
"""


@pytest.mark.parametrize("use_scan, opaque", [(True, {"scan": 1}), (False, {"cond": 1, "while": 1})])
def test_control_flow_is_opaque_and_partial(ws, use_scan, opaque):
    cap = run(ws, {"ctl.py": CONTROL}, profile("ctl:step", args=[tensor([4, 3]), use_scan]))
    assert cap.meta["opaque_primitives"] == opaque
    assert all(n.opaque for n in cap.nodes if n.op in opaque)
    assert cap.coverage.status == "partial" and cap.coverage.reasons == ["opaque_kernel"]
    assert cap.coverage.effects == "incomplete"
    assert input_tree(cap, "args") == {"tuple": [{"value": 0}, {"static": use_scan}]}
    (out,) = tree_leaves(cap.outputs)
    assert cap.values[out].shape == [4, 3]


# --------------------------------------------------------------------------- PyTree inputs


PYTREES = """
from collections import namedtuple

import jax
import jax.numpy as jnp
from flax import struct
from flax.core import FrozenDict

Pair = namedtuple("Pair", "left right")

@struct.dataclass
class Batch:
    x: jax.Array
    mask: jax.Array
    label: str = struct.field(pytree_node=False, default="train")

@jax.tree_util.register_pytree_node_class
class Checked:
    \"\"\"A container whose constructor insists on 2-D arrays.\"\"\"
    def __init__(self, a):
        assert a.ndim == 2, "Checked holds 2-D arrays"
        self.a = a
    def tree_flatten(self):
        return (self.a,), None
    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)

def inputs():
    return {
        "args": (
            Batch(jnp.ones((2, 3)), jnp.ones((2,), bool)),
            Pair(jnp.zeros(3), [jnp.zeros(1), 2]),
            FrozenDict({"w": jnp.ones((3, 3)), "b": jnp.zeros(3)}),
            Checked(jnp.ones((2, 2))),
        ),
        "kwargs": {"scale": 0.5, "nothing": None},
    }

def f(batch, pair, params, checked, scale, nothing):
    y = (batch.x @ params["w"] + params["b"]) * scale
    return {"y": jnp.where(batch.mask[:, None], y, 0.0) + pair.left, "c": checked.a.sum() + pair.right[0]}
"""


def test_pytree_inputs_normalise_to_dicts(ws):
    cap = run(ws, {"trees.py": PYTREES}, profile("trees:f", inputs={"factory": "trees:inputs"}))
    args = input_tree(cap, "args")["tuple"]
    batch, pair, params, checked = args
    assert [k for k, _ in batch["dict"]] == ["x", "mask"]  # the static label is not serialised
    assert [k for k, _ in pair["dict"]] == ["left", "right"]
    assert dict(pair["dict"])["right"] == {"list": [{"value": 3}, {"static": 2}]}
    assert [k for k, _ in params["dict"]] == ["b", "w"]
    assert list(checked) == ["dict"] and len(checked["dict"]) == 1
    assert input_tree(cap, "kwargs") == {"dict": [["nothing", {"static": None}], ["scale", {"static": 0.5}]]}
    ids = list(tree_leaves(input_tree(cap, "args")))
    assert ids == list(range(7))
    assert cap.values[ids[1]].dtype == "bool"
    assert [k for k, _ in cap.outputs["dict"]] == ["c", "y"]
    mul = [n for n in cap.nodes if n.op == "mul"]
    assert any(o.literal == 0.5 for n in mul for o in n.inputs)  # the static scale is closed over


# --------------------------------------------------------------------------- Linen factories


BOUND = """
import jax
import jax.numpy as jnp
from flax import linen as nn

class MLP(nn.Module):
    width: int = 8

    @nn.compact
    def __call__(self, x):
        return nn.Dense(4)(nn.relu(nn.Dense(self.width)(x)))

class Other(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2)(x)

def weights(m):
    # concrete "saved" variables (zeros: no initializer is compiled for the test)
    shapes = jax.eval_shape(m.init, jax.random.key(42), jnp.ones((1, 3)))
    return jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

def saved():
    m = MLP(width=5)
    return m.bind(weights(m))

def wrong_class():
    m = Other()
    return m.bind(weights(m))

def unbound():
    return MLP()
"""


def test_bound_linen_factory_traces_saved_variables(ws):
    cap = run(ws, {"bound.py": BOUND}, profile("bound:MLP", args=[SPEC_INPUT], init={"factory": "bound:saved"}))
    assert cap.meta["state"] == "factory_variables" and "bind" in cap.meta["state_note"]
    shapes = [cap.values[v].shape for v in tree_leaves(input_tree(cap, "variables"))]
    assert [3, 5] in shapes and [5, 4] in shapes
    (out,) = tree_leaves(cap.outputs)
    assert cap.values[out].shape == [2, 4]


@pytest.mark.parametrize("factory, words", [("wrong_class", "expected the selected Linen class MLP"),
                                            ("unbound", "unbound MLP")])
def test_bad_linen_factories_are_clear_errors(ws, factory, words):
    err = fails(ws, {"bound.py": BOUND}, profile("bound:MLP", args=[SPEC_INPUT], init={"factory": f"bound:{factory}"}), "recipe")
    assert words in err.message and "model.bind(variables)" in err.message


# --------------------------------------------------------------------------- NNX


NNX = """
import functools

import jax
import jax.numpy as jnp
from flax import nnx

class Net(nnx.Module):
    def __init__(self, rngs):
        self.lin = nnx.Linear(3, 4, rngs=rngs)
        self.bn = nnx.BatchNorm(4, rngs=rngs)
        self.drop = nnx.Dropout(0.5, rngs=rngs)

    @nnx.jit   # updates batch statistics and RNG counts: temporary state inside the trace
    def __call__(self, x):
        return self.drop(self.bn(self.lin(x)))

    def head(self, x, scale):
        return self.lin(x) * scale

    def double(self, x):
        return self.lin(x) * 2.0

BUILT = []

def build():
    m = Net(nnx.Rngs(0, dropout=1))
    BUILT.append(m)
    return m

def forward(model, x):
    return model.head(x, 2.0)

def bound_method():
    return build().double

def partial_method():
    return functools.partial(build().head, scale=2.0)

def partial_forward():
    return functools.partial(forward, build())
"""


def test_nnx_factory_with_nnx_jit(ws):
    cap = run(ws, {"nnxm.py": NNX}, profile("nnxm:Net", args=[SPEC_INPUT], init={"factory": "nnxm:build"}))
    assert cap.meta["model_kind"] == "nnx" and cap.meta["state"] == "factory_state"
    assert cap.meta["state_key"] == "state"
    state = input_tree(cap, "state")
    assert list(state) == ["dict"]
    assert any(g.kind == "jit" for g in cap.groups)  # nnx.jit's body expanded
    (out,) = tree_leaves(cap.outputs)
    assert cap.values[out].shape == [2, 4]
    import nnxm

    (m,) = nnxm.BUILT
    # the live module is untouched by the trace: its statistics are still concrete zeros
    assert not isinstance(m.bn.mean[...], jax.core.Tracer)
    assert float(jnp.abs(m.bn.mean[...]).sum()) == 0.0


@pytest.mark.parametrize("factory", ["bound_method", "partial_method", "partial_forward"])
def test_nnx_bound_methods_and_partials(ws, factory):
    cap = run(ws, {"nnxm.py": NNX}, profile("nnxm:forward", args=[SPEC_INPUT], init={"factory": f"nnxm:{factory}"}))
    assert cap.meta["state"] == "callable_state"
    assert {"dot_general", "mul"} <= {n.op for n in cap.nodes}
    (out,) = tree_leaves(cap.outputs)
    assert cap.values[out].shape == [2, 4]


@pytest.mark.slow
def test_nnx_state_arrays_are_shared_not_copied(ws):
    write(ws, {"nnxm.py": NNX})
    import sys

    sys.path.insert(0, str(ws))
    import nnxm
    from flax import nnx

    from capture.jax.framework import _nnx_plan

    m = nnxm.build()
    plan = _nnx_plan(nnx, m.head, "function", "callable_state")
    mine = {id(x) for x in jax.tree_util.tree_leaves(nnx.state(m))}
    assert {id(x) for x in jax.tree_util.tree_leaves(plan.state)} == mine


def test_nnx_wrong_factory_class(ws):
    files = {"nnxm.py": NNX + "\ndef not_net():\n    return nnx.Linear(3, 4, rngs=nnx.Rngs(0))\n"}
    err = fails(ws, files, profile("nnxm:Net", args=[SPEC_INPUT], init={"factory": "nnxm:not_net"}), "recipe")
    assert "expected an instance of the selected NNX class Net" in err.message


# --------------------------------------------------------------------------- callables and keys


FUNCS = """
import functools

import jax
import jax.numpy as jnp

def scaled(x, scale, *, bias):
    return x * scale + bias

def configured():
    return functools.partial(scaled, scale=3.0, bias=1.0)

def noise(key, x):
    return x + jax.random.normal(key, x.shape)

def key_inputs():
    return {"args": (jax.random.key(7), jnp.ones((2, 3)))}

def identity(x):
    return x

def broken(x):
    return x @ jnp.ones((4, 4))
"""


def test_function_factory_returns_a_partial(ws):
    cap = run(ws, {"funcs.py": FUNCS}, profile("funcs:scaled", args=[SPEC_INPUT], init={"factory": "funcs:configured"}))
    lits = sorted(o.literal for n in cap.nodes for o in n.inputs if o.is_literal)
    assert lits == [1.0, 3.0]
    assert cap.meta["model_kind"] == "function"


def test_typed_prng_key_from_an_inputs_factory(ws):
    cap = run(ws, {"funcs.py": FUNCS}, profile("funcs:noise", inputs={"factory": "funcs:key_inputs"}))
    key, x = (cap.values[v] for v in tree_leaves(input_tree(cap, "args")))
    assert key.dtype == "key<fry>" and key.shape == []
    assert x.shape == [2, 3]
    assert any(n.op == "random_bits" for n in cap.nodes)


def test_identity_is_a_failure_not_an_empty_graph(ws):
    err = fails(ws, {"funcs.py": FUNCS}, profile("funcs:identity", args=[SPEC_INPUT]), "trace")
    assert "no operations" in err.message


def test_trace_errors_propagate_from_user_code(ws):
    write(ws, {"funcs.py": FUNCS})
    with pytest.raises(TypeError):
        capture_in_process(ws, profile("funcs:broken", args=[SPEC_INPUT]))


def test_plain_function_with_literal_init_is_refused(ws):
    err = fails(ws, {"funcs.py": FUNCS}, profile("funcs:identity", args=[SPEC_INPUT],
                                                 init={"args": [1], "kwargs": {}}), "recipe")
    assert "empty init" in err.message


# --------------------------------------------------------------------------- refusals


MARKER = """
import pathlib
pathlib.Path(__file__).with_name("IMPORTED").write_text("the model was imported")
import jax.numpy as jnp

def f(x):
    return x * 2.0
"""


def test_requires_grad_is_refused(ws):
    err = fails(ws, {"mark.py": MARKER}, profile("mark:f", args=[tensor([2, 3], requires_grad=True)]), "recipe")
    assert "JAX has no per-array requires_grad" in err.message and "express grad in the" in err.message
    assert not (ws / "IMPORTED").exists()


def test_unknown_dims_are_requested_not_guessed(ws):
    err = fails(ws, {"mark.py": MARKER}, profile("mark:f", args=[tensor(["batch", 3])]), "recipe")
    (need,) = err.details["needs"]
    assert need["axis"] == 0 and need["name"] == "batch"
    assert not (ws / "IMPORTED").exists()


def test_x64_descriptions_are_refused_without_the_environment(ws):
    assert not jax.config.read("jax_enable_x64")
    err = fails(ws, {"mark.py": MARKER}, profile("mark:f", args=[tensor([2], "float64")]), "recipe")
    assert "JAX_ENABLE_X64=1" in err.message and "narrow" in err.message
    assert not (ws / "IMPORTED").exists()


X64_FACTORIES = """
import numpy as np
import jax.numpy as jnp

def f(x):
    return x * 2

def numpy_wide():
    return {"args": (np.ones(3, np.float64),)}

def jax_narrowed():
    return {"args": (jnp.asarray(np.ones(3), dtype=jnp.float64),)}
"""


@pytest.mark.parametrize("factory", ["numpy_wide", "jax_narrowed"])
def test_x64_from_factories_is_refused(ws, factory):
    err = fails(ws, {"wide.py": X64_FACTORIES}, profile("wide:f", inputs={"factory": f"wide:{factory}"}), "recipe")
    assert "JAX_ENABLE_X64=1" in err.message


X64_IN_THE_MODEL = """
import jax.numpy as jnp
from flax import linen as nn


class Wide(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(4, param_dtype=jnp.float64)(x)


def widen(x):
    return x + jnp.ones(3, dtype=jnp.float64)
"""


@pytest.mark.parametrize(("model", "where"), [
    pytest.param("wide:Wide", "the Linen module's initialisation", id="linen-param-dtype"),
    pytest.param("wide:widen", "the traced program (wide.py:12)", id="traced-array"),
])
def test_x64_asked_for_by_the_model_is_refused_not_narrowed(ws, model, where):
    """Issue 36 item 8: a Linen ``param_dtype=jnp.float64`` and a traced ``jnp.ones(3,
    dtype=jnp.float64)`` were narrowed to float32 with exit 0 and no note."""
    err = fails(ws, {"wide.py": X64_IN_THE_MODEL}, profile(model, args=[tensor([2, 3])]), "recipe")
    assert err.message.startswith(f"{where}: float64 needs JAX_ENABLE_X64=1"), err.message
    assert err.details["environment"] == {"JAX_ENABLE_X64": "1"}


def test_cuda_device_is_refused_before_the_model_is_imported(ws):
    skip_if_cuda("cuda:0 is available here, so it cannot be refused")
    err = fails(ws, {"mark.py": MARKER}, profile("mark:f", args=[SPEC_INPUT], device="cuda:0"), "device")
    assert "cuda:0" in err.message and "does not fall back" in err.message
    assert not (ws / "IMPORTED").exists()


def test_cuda_index_out_of_range_is_refused_before_the_model_is_imported(ws):
    # Meaningful with and without CUDA: without it the backend is missing; with it, no
    # machine has 10,000 GPUs, so the index is out of range. Either way nothing is imported.
    err = fails(ws, {"mark.py": MARKER}, profile("mark:f", args=[SPEC_INPUT], device="cuda:9999"), "device")
    assert err.error_type == "DeviceUnavailable" and "cuda:9999" in err.message and "does not fall back" in err.message
    n = cuda_device_count()
    if n:
        assert "index 9999" in err.message and f"JAX sees {n} cuda device(s)" in err.message
    assert not (ws / "IMPORTED").exists()


class _FakeDevice:
    def __init__(self, i):
        self.i = i

    def __str__(self):
        return f"cuda:{self.i}"


class _FakeJax:
    """Just enough of ``jax`` for :func:`_device`: a CUDA backend with two devices."""

    __version__ = "0.0-fake"

    @staticmethod
    def devices(platform=None):
        return [_FakeDevice(0), _FakeDevice(1)]


def test_device_index_out_of_range_names_the_index_and_the_count():
    from capture.jax.framework import _device

    assert str(_device(_FakeJax, "cuda:1")) == "cuda:1"
    with pytest.raises(CaptureError) as exc:
        _device(_FakeJax, "cuda:9999")
    err = exc.value
    assert err.stage == "device" and err.error_type == "DeviceUnavailable"
    assert "cuda:9999" in err.message and "index 9999" in err.message
    assert "JAX sees 2 cuda device(s)" in err.message and "cuda:0, cuda:1" in err.message
    assert "does not fall back" in err.message
    assert err.details["available"] == ["cuda:0", "cuda:1"]


@pytest.mark.parametrize("field, value", [("mode", "train"), ("grad_enabled", True)])
def test_eval_without_grad_only(ws, field, value):
    fails(ws, {"mark.py": MARKER}, profile("mark:f", args=[SPEC_INPUT], **{field: value}), "recipe")
    assert not (ws / "IMPORTED").exists()


def test_limits_apply(ws):
    write(ws, {"model.py": SPEC_NET})
    with pytest.raises(LimitExceeded) as exc:
        capture_in_process(ws, profile("model:net", args=[SPEC_INPUT]), limits=Limits(max_ops=2))
    assert exc.value.limit == "max_ops"


def test_inputs_are_deterministic_from_the_seed(ws):
    from capture.jax.framework import _tensor_maker
    from capture.recipe import parse_profile
    from capture.worker.context import CaptureContext

    table = profile("mark:f", args=[tensor([3, 2]), tensor([4], "int32", generator={"kind": "randint", "low": 0, "high": 9})])
    ctx = CaptureContext(parse_profile("p", table), ws)
    a1, _ = ctx.materialize("inputs", _tensor_maker(ctx))
    a2, _ = ctx.materialize("inputs", _tensor_maker(ctx))
    assert all(bool((x == y).all()) for x, y in zip(a1, a2))
    assert a1[0].dtype == jnp.float32 and a1[1].dtype == jnp.int32


@pytest.mark.parametrize(
    "change, words",
    [
        ({"mode": "train"}, 'mode = "eval"'),
        ({"grad_enabled": True}, "grad_enabled = false"),
        ({"kind": "training_step"}, "unavailable for JAX"),
    ],
)
def test_framework_refusals_hold_without_the_recipe_layer(ws, change, words):
    """Recipes built in code skip parse-time checks; the capture still refuses."""
    import dataclasses

    from capture.jax.framework import _check_recipe
    from capture.recipe import parse_profile
    from capture.worker.context import CaptureContext

    recipe = dataclasses.replace(parse_profile("p", profile("mark:f", args=[SPEC_INPUT])), **change)
    with pytest.raises(CaptureError) as exc:
        _check_recipe(CaptureContext(recipe, ws), jax)
    assert exc.value.stage == "recipe" and words in exc.value.message


def test_requires_grad_refusal_without_the_recipe_layer(ws):
    import dataclasses

    from capture.jax.framework import NO_REQUIRES_GRAD, _check_recipe
    from capture.recipe import parse_profile
    from capture.worker.context import CaptureContext

    recipe = parse_profile("p", profile("mark:f", args=[SPEC_INPUT]))
    desc = dataclasses.replace(recipe.inputs.args[0], requires_grad=True)
    recipe = dataclasses.replace(recipe, inputs=dataclasses.replace(recipe.inputs, args=(desc,)))
    with pytest.raises(CaptureError) as exc:
        _check_recipe(CaptureContext(recipe, ws), jax)
    assert NO_REQUIRES_GRAD in exc.value.message
    assert NO_REQUIRES_GRAD.startswith("JAX has no per-array requires_grad; express grad in the callable")


def test_nnx_class_taking_rngs_from_an_empty_literal_init(ws):
    # Net(rngs) with nnx.jit, BatchNorm and Dropout: TensorViz supplies rngs=nnx.Rngs(seed)
    cap = run(ws, {"nnxm.py": NNX}, profile("nnxm:Net", args=[SPEC_INPUT]))
    assert cap.meta["model_kind"] == "nnx" and cap.meta["state"] == "fresh_init"
    assert "freshly initialized state, not trained weights" in cap.meta["state_note"]
    assert any(g.kind == "jit" for g in cap.groups)
    (out,) = tree_leaves(cap.outputs)
    assert cap.values[out].shape == [2, 4]


NNX_FORWARDED_RNGS = """
from flax import nnx

class Fwd(nnx.Module):
    def __init__(self, din, **layer_options):   # rngs reaches nnx.Linear through **kwargs
        self.lin = nnx.Linear(din, 4, **layer_options)

    def __call__(self, x):
        return self.lin(x)
"""


def test_nnx_rngs_that_cannot_be_supplied_is_a_clear_error(ws):
    err = fails(ws, {"fwd.py": NNX_FORWARDED_RNGS},
                profile("fwd:Fwd", args=[SPEC_INPUT], init={"args": [], "kwargs": {"din": 3}}), "recipe")
    assert "init factory" in err.message
    # the suggested factory keeps the required init arguments
    assert "return Fwd(din=3, rngs=nnx.Rngs(0))" in err.message


DEVICE_SCOPE = """
import jax
import jax.numpy as jnp

AT_IMPORT = jax.config.jax_default_device
SEEN = {}

def inputs():
    SEEN["inputs"] = jax.config.jax_default_device
    return {"args": (jnp.ones(3),)}

def configured():
    SEEN["init"] = jax.config.jax_default_device
    return f

def f(x):
    SEEN["trace"] = jax.config.jax_default_device
    return x * 2.0
"""


def test_device_scopes_import_factories_and_tracing(ws):
    run(ws, {"dev.py": DEVICE_SCOPE},
        profile("dev:f", init={"factory": "dev:configured"}, inputs={"factory": "dev:inputs"}))
    import dev

    cpu = jax.devices("cpu")[0]
    assert dev.AT_IMPORT == cpu
    assert dev.SEEN == {"init": cpu, "inputs": cpu, "trace": cpu}
    assert jax.config.jax_default_device is None  # the scope ends with the capture


NNX_PLAIN = """
import jax.numpy as jnp
from flax import nnx

class Small(nnx.Module):
    def __init__(self, width, seed=0):
        self.lin = nnx.Linear(3, width, rngs=nnx.Rngs(seed))

    def __call__(self, x):
        return self.lin(x)
"""


def test_nnx_class_from_literal_init(ws):
    cap = run(ws, {"small.py": NNX_PLAIN}, profile("small:Small", args=[SPEC_INPUT], init={"args": [5], "kwargs": {}}))
    assert cap.meta["model_kind"] == "nnx" and cap.meta["state"] == "constructed"
    (out,) = tree_leaves(cap.outputs)
    assert cap.values[out].shape == [2, 5]


# The ordinary NNX pattern: TensorViz supplies rngs (discovery marks it supplied_by
# "tensorviz", so the setup form omits it) unless the recipe sets it.
NNX_RNGS = """
import jax
from flax import nnx

SEEN = []

class N(nnx.Module):
    def __init__(self, din, dout, *, rngs: nnx.Rngs):
        SEEN.append(rngs)
        self.lin = nnx.Linear(din, dout, rngs=rngs)

    def __call__(self, x):
        return self.lin(x)

class Either(nnx.Module):   # rngs positional-or-keyword, recorded whatever it is
    def __init__(self, din, dout, rngs):
        SEEN.append(rngs)
        self.lin = nnx.Linear(din, dout, rngs=rngs if isinstance(rngs, nnx.Rngs) else nnx.Rngs(rngs))

    def __call__(self, x):
        return self.lin(x)

class Keyed(nnx.Module):   # an nnx.Rngs parameter under another name
    def __init__(self, din, dout, key: nnx.Rngs):
        SEEN.append(key)
        self.lin = nnx.Linear(din, dout, rngs=key)

    def __call__(self, x):
        return self.lin(x)

def build():
    return N(3, 4, rngs=nnx.Rngs(1))
"""


def _supplied_key(rngs):
    return jax.random.key_data(rngs.params.key[...]).tolist()


@pytest.mark.parametrize(
    "model, init",
    [
        ("N", {"args": [], "kwargs": {"din": 3, "dout": 4}}),
        ("N", {"args": [3], "kwargs": {"dout": 4}}),
        ("Either", {"args": [], "kwargs": {"din": 3, "dout": 4}}),
        ("Either", {"args": [3, 4], "kwargs": {}}),
        ("Keyed", {"args": [3, 4], "kwargs": {}}),
    ],
)
def test_nnx_literal_init_supplies_rngs_from_the_seed(ws, model, init, monkeypatch):
    from flax import nnx

    made = []

    class Rngs(nnx.Rngs):  # records what TensorViz builds
        def __init__(self, *a, **k):
            made.append(self)
            super().__init__(*a, **k)

    monkeypatch.setattr(nnx, "Rngs", Rngs)
    cap = run(ws, {"nr.py": NNX_RNGS}, profile(f"nr:{model}", args=[SPEC_INPUT], init=init, seed=7))
    import nr

    (rngs,) = nr.SEEN  # the constructor's (built abstractly: nnx.eval_shape's copy of the one supplied)
    assert isinstance(rngs, flax.nnx.Rngs)
    assert len(made) == 1 and _supplied_key(made[0]) == _supplied_key(flax.nnx.Rngs(7))  # nnx.Rngs(recipe.seed)
    assert cap.meta["model_kind"] == "nnx" and cap.meta["state"] == "fresh_init"
    assert cap.meta["state_note"].startswith("freshly initialized state, not trained weights")
    assert "nnx.Rngs(seed)" in cap.meta["state_note"]
    state = input_tree(cap, "state")
    assert list(state) == ["dict"]
    (out,) = tree_leaves(cap.outputs)
    assert cap.values[out].shape == [2, 4]


@pytest.mark.parametrize(
    "init", [{"args": [], "kwargs": {"din": 3, "dout": 4, "rngs": 5}}, {"args": [3, 4, 5], "kwargs": {}}]
)
def test_nnx_rngs_set_by_the_recipe_is_passed_as_saved(ws, init):
    cap = run(ws, {"nr.py": NNX_RNGS}, profile("nr:Either", args=[SPEC_INPUT], init=init))
    import nr

    assert nr.SEEN == [5]
    assert cap.meta["state"] == "constructed"


def test_nnx_factory_with_rngs_still_traces_its_state(ws):
    cap = run(ws, {"nr.py": NNX_RNGS}, profile("nr:N", args=[SPEC_INPUT], init={"factory": "nr:build"}))
    import nr

    (rngs,) = nr.SEEN
    assert _supplied_key(rngs) == _supplied_key(flax.nnx.Rngs(1))  # the factory's own, untouched
    assert cap.meta["state"] == "factory_state"


# --------------------------------------------------------------------------- placement

PLACED = """
import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

MADE = {}

def f(x, y):
    return x @ jnp.ones((3, 4)) + y.sum()

def inputs():
    cpu = jax.devices("cpu")
    MADE["default"] = jnp.zeros(()).devices()   # the profile's device, in force here
    MADE["x"] = jax.device_put(jnp.ones((2, 3)), cpu[1])   # explicitly placed
    MADE["y"] = jax.device_put(jnp.ones((2, 3)), NamedSharding(Mesh(cpu[:2], ("d",)), P("d")))   # sharded
    return {"args": (MADE["x"], MADE["y"])}
"""

# Runs in a fresh interpreter: XLA_FLAGS must be set before JAX starts its CPU backend.
# The arrays JAX is handed to trace are recorded by wrapping jax.make_jaxpr outside the
# trace (inside it the callable only sees abstract tracers, which carry no placement).
PLACEMENT_SCRIPT = """
import json, sys
from pathlib import Path
import jax

sys.path[:0] = [sys.argv[2], str(Path(sys.argv[2]).parent)]  # tests/jax and the shared tests/ helpers
from jax_workspace import capture_in_process, profile

handed = []
real_make_jaxpr = jax.make_jaxpr

def spy(fun, *a, **k):
    traced = real_make_jaxpr(fun, *a, **k)
    def call(*args, **kwargs):
        handed.extend(jax.tree_util.tree_leaves((args, kwargs)))
        return traced(*args, **kwargs)
    return call

jax.make_jaxpr = spy
cap, _ = capture_in_process(sys.argv[1], profile("placed:f", inputs={"factory": "placed:inputs"}, device="cpu"))
import placed

x, y = placed.MADE["x"], placed.MADE["y"]
devs = lambda a: sorted(d.id for d in a.devices())
print(json.dumps({
    "cpu_devices": len(jax.devices("cpu")),
    "default": sorted(d.id for d in placed.MADE["default"]),
    "failure": None if cap.failure is None else cap.failure.message,
    "out_shapes": [cap.values[o["value"]].shape for o in [cap.outputs]] if "value" in cap.outputs else None,
    "handed_x_is_x": any(h is x for h in handed),
    "handed_y_is_y": any(h is y for h in handed),
    "handed_devices": [devs(h) for h in handed],
    "handed_committed": [bool(h.committed) for h in handed],
    "y_sharding_kept": [h.sharding == y.sharding for h in handed if h is y],
}))
"""


@pytest.mark.slow
def test_factory_placed_and_sharded_arrays_keep_their_placement(ws):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    write(ws, {"placed.py": PLACED})
    here = Path(__file__).resolve().parent
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [sys.executable, "-c", PLACEMENT_SCRIPT, str(ws), str(here)],
        cwd=here.parents[1], env=env, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["cpu_devices"] == 2
    assert seen["default"] == [0]  # device = "cpu" is CPU device 0 for the factory...
    assert seen["failure"] is None and seen["out_shapes"] == [[2, 4]]
    # ...yet the arrays it placed reach the trace as they were: x on device 1, y on both
    assert seen["handed_x_is_x"] and seen["handed_y_is_y"]
    assert seen["handed_devices"] == [[1], [0, 1]]
    assert seen["handed_committed"] == [True, True]
    assert seen["y_sharding_kept"] == [True]


# --------------------------------------------------------------------------- abstract state

ABSTRACT_FACTORIES = """
import jax
import jax.numpy as jnp
import flax.linen as nn
from flax import nnx

class Net(nnx.Module):
    def __init__(self, rngs):
        self.lin = nnx.Linear(3, 4, rngs=rngs)

    def __call__(self, x):
        return self.lin(x)

def abstract_nnx():
    return nnx.eval_shape(lambda: Net(nnx.Rngs(0)))

def concrete_nnx():
    return Net(nnx.Rngs(0))

class Mlp(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(4)(x)

def abstract_linen():
    return Mlp().bind(jax.eval_shape(Mlp().init, jax.random.key(0), jnp.ones((2, 3))))
"""


@pytest.mark.parametrize("model, factory, label", [("fa:Net", "fa:abstract_nnx", "factory_state"),
                                                   ("fa:Mlp", "fa:abstract_linen", "factory_variables")])
def test_a_factory_state_built_abstractly_is_called_abstract(ws, model, factory, label):
    """Issue 25 item 3: a JAX capture whose state is abstract (nnx.eval_shape,
    jax.eval_shape) says so, never "the state of the module it built" as if it had weights."""
    cap = run(ws, {"fa.py": ABSTRACT_FACTORIES}, profile(model, args=[SPEC_INPUT], init={"factory": factory}))
    assert cap.meta["state"] == label
    assert cap.meta["state_abstract"] is True
    assert cap.meta["state_note"].startswith("abstract: no weights;")
    assert "nothing was computed" in cap.meta["state_note"]
    (out,) = tree_leaves(cap.outputs)
    assert cap.values[out].shape == [2, 4]


def test_a_factory_state_with_arrays_is_not_called_abstract(ws):
    cap = run(ws, {"fa.py": ABSTRACT_FACTORIES}, profile("fa:Net", args=[SPEC_INPUT], init={"factory": "fa:concrete_nnx"}))
    assert cap.meta["state"] == "factory_state" and "state_abstract" not in cap.meta
    assert cap.meta["state_note"] == "the state of the module the init factory built"
