"""Programs split across devices, JAX and Flax (issue 34): each case of the issue captured
with the recipe's mesh on 8 simulated CPU devices, every known sharding recorded as data,
shard_map bodies opened with their collectives, and Flax's FSDP train step (the pattern
of ``examples/nnx_toy_examples/10_fsdp_and_optimizer.py``) matching ``jax.make_jaxpr``
equation for equation. The captures run together in one fresh interpreter
(``tests/sharded_captures.py``: about half a minute, so those tests are ``slow``); one
more goes through the real worker."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("jax")
pytest.importorskip("flax")

from capture.graph.model import tree_leaves  # noqa: E402
from capture.graph.sharding import check_sharding  # noqa: E402

from jax_workspace import profile, tensor, write  # noqa: E402
from sharded_captures import capture_all, read  # noqa: E402

pytestmark = pytest.mark.jax

MESH = {"data": 4, "model": 2}
AUTO_MESH = {"data": {"size": 4, "type": "auto"}, "model": {"size": 2, "type": "auto"}}

MODEL = '''
import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P


def net(x, w):
    h = x @ w
    h = lax.with_sharding_constraint(h, P("data", "model"))
    return jnp.sum(h)


jnet = jax.jit(net, in_shardings=(P("data", None), P(None, "model")), out_shardings=P())


def local(x):
    y = lax.psum(x, "model")
    z = lax.all_gather(y, "data", tiled=True)
    i = lax.axis_index("data")
    w = lax.psum_scatter(x, "data", scatter_dimension=1, tiled=True)
    p = lax.ppermute(x, "data", [(j, (j + 1) % 4) for j in range(4)])
    q = lax.all_to_all(x, "model", 0, 0, tiled=True)
    return z, w, p + i, q


def smap(x):
    return jax.shard_map(local, in_specs=P("data", "model"),
                         out_specs=(P(None, None), P("model", "data"), P("data", "model"), P("data", "model")),
                         check_vma=False)(x)


def explicit(x, w):
    h = jax.sharding.reshard(x, P("data", None)) @ w
    return jnp.sum(jax.sharding.reshard(h, P(None, "model")), axis=0)


def pm(x):
    return jax.pmap(lambda a: lax.psum(a, "i"), axis_name="i")(x)
'''

PARTITIONED = '''
from flax import linen as nn
from flax import nnx


class Annotated(nnx.Module):
    """Parameters annotated with nnx.with_partitioning: they build only under a mesh."""

    def __init__(self, din: int, dout: int, rngs: nnx.Rngs):
        init = nnx.with_partitioning(nnx.initializers.lecun_normal(), (None, "model"))
        self.lin = nnx.Linear(din, dout, kernel_init=init, rngs=rngs)

    def __call__(self, x):
        return nnx.relu(self.lin(x))


class LinenAnnotated(nn.Module):
    width: int = 32

    @nn.compact
    def __call__(self, x):
        k = nn.with_partitioning(nn.initializers.lecun_normal(), ("data", "model"))
        return nn.Dense(self.width, kernel_init=k)(x)
'''

# The pattern of Flax's examples/nnx_toy_examples/10_fsdp_and_optimizer.py (its MeshRules,
# MLP with out_sharding parameters, SGD optimizer and nnx.jit train step), without its
# module-level mesh and training loop: the recipe's mesh is in force while the factory runs.
FSDP = '''
import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import PartitionSpec as P


@dataclasses.dataclass(unsafe_hash=True)
class MeshRules:
    embed: str | None = None
    mlp: str | None = None
    data: str | None = None

    def __call__(self, *keys):
        return tuple(getattr(self, key) for key in keys)


mesh_rules = MeshRules(embed=None, mlp="model", data="data")


class MLP(nnx.Module):
    def __init__(self, din, dmid, dout, rngs: nnx.Rngs):
        self.w1 = nnx.Param(nnx.initializers.lecun_normal()(rngs.params(), (din, dmid)),
                            out_sharding=mesh_rules("embed", "mlp"))
        self.b1 = nnx.Param(jnp.zeros((dmid,)), out_sharding=mesh_rules("mlp"))
        self.w2 = nnx.Param(nnx.initializers.lecun_normal()(rngs.params(), (dmid, dout)),
                            out_sharding=mesh_rules("embed", "mlp"))

    def __call__(self, x):
        return nnx.relu(x @ self.w1 + self.b1) @ self.w2


class SGDState(nnx.Variable):
    pass


class SGD(nnx.Pytree):
    def __init__(self, params, lr, decay=0.9):
        def init_optimizer_state(variable):
            return SGDState(jnp.zeros_like(variable[...]), **variable.get_metadata())

        self.lr = lr
        self.params = nnx.data(params)
        self.momentum = nnx.data(jax.tree.map(init_optimizer_state, self.params,
                                              is_leaf=lambda x: isinstance(x, nnx.Variable)))
        self.decay = decay

    def update(self, grads):
        def update_fn(params, momentum, grad):
            momentum[...] = self.decay * momentum[...] + (1 - self.decay) * grad[...]
            params[...] -= self.lr * momentum[...]

        jax.tree.map(update_fn, self.params, self.momentum, grads, is_leaf=lambda x: isinstance(x, nnx.Variable))


@nnx.jit
def create_model():
    model = MLP(1, 32, 1, rngs=nnx.Rngs(0))
    optimizer = SGD(nnx.variables(model, nnx.Param), 0.01, decay=0.9)
    return model, optimizer


@nnx.jit
def train_step(model: MLP, optimizer: SGD, x, y):
    def loss_fn(model):
        y_pred = model(x)
        return jnp.mean((y - y_pred) ** 2)

    loss, grad = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(grad)
    return loss


def batch():
    model, optimizer = create_model()
    x = jax.device_put(jnp.linspace(-2, 2, 32)[:, None], P("data"))
    y = jax.device_put(0.8 * x ** 2 + 0.1, P("data"))
    return {"args": (model, optimizer, x, y)}
'''

FSDP_MESH = {"data": 2, "model": 4}
EXPLICIT = {"data": {"size": 4, "type": "explicit"}, "model": {"size": 2, "type": "explicit"}}


@pytest.fixture(scope="module")
def caps(tmp_path_factory):
    root = write(tmp_path_factory.mktemp("ws"), {"model.py": MODEL, "part.py": PARTITIONED, "fsdp.py": FSDP})

    def case(model, *, args=(), mesh=MESH, **fields):
        # these programs are written for automatic axes (an axis given by its size alone is
        # Explicit, as jax.make_mesh makes it): the type is written
        typed = {k: {"size": v, "type": "auto"} if type(v) is int else v for k, v in mesh.items()}
        return {"framework": "jax", "root": str(root),
                "table": profile(model, args=[tensor(a) for a in args], mesh=typed, **fields)}

    cases = {
        "jit": case("model:jnet", args=[[8, 16], [16, 32]]),
        "smap": case("model:smap", args=[[8, 16]]),
        "explicit": case("model:explicit", args=[[8, 16], [16, 32]], mesh=EXPLICIT),
        "pmap": case("model:pm", args=[[8, 3]], mesh={"i": 8}),
        "nnx": case("part:Annotated", args=[[4, 16]], init={"kwargs": {"din": 16, "dout": 32}}),
        "linen": case("part:LinenAnnotated", args=[[4, 16]]),
        "fsdp": case("fsdp:train_step", mesh=FSDP_MESH, inputs={"factory": "fsdp:batch"}),
        "extra": {"function": "jaxpr_primitives", "kwargs": {
            "root": str(root), "module": "fsdp", "function": "train_step", "inputs": "batch", "mesh": FSDP_MESH}},
    }
    files = capture_all(cases, tmp_path_factory.mktemp("out"))
    extra = json.loads((next(iter(files.values())).parent / "extra.json").read_text())
    return {**{k: v for k, v in files.items()}, "_jaxpr": extra}


def cap_of(caps, name):
    return read(caps[name])


def nodes(cap):
    return list(cap.nodes)


def sharding_opaques(obj, path=""):
    """``{"opaque": ...}`` markers left for a mesh, a sharding or a spec anywhere in ``obj``."""
    out = []
    if isinstance(obj, dict):
        if "opaque" in obj and any(w in str(obj["opaque"]) for w in ("Sharding", "Mesh", "Spec", "P", "AUTO")):
            out.append((path, obj["opaque"]))
        for k, v in obj.items():
            out += sharding_opaques(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += sharding_opaques(v, f"{path}[{i}]")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["jit", "smap", "explicit", "pmap", "nnx", "linen", "fsdp"])
def test_every_case_records_its_mesh_and_no_opaque_sharding(caps, name):
    cap = cap_of(caps, name)
    assert cap.failure is None
    recipe_meshes = [m for m in cap.meshes if m["origin"] == "recipe"]
    assert len(recipe_meshes) == 1
    assert cap.devices == {**cap.devices, "platform": "cpu", "count": 8, "simulated": True}
    assert "simulated" in cap.devices["note"]
    left = [o for n in nodes(cap) for o in sharding_opaques(n.params, f"nodes[{n.id}].params")]
    left += [o for g in cap.groups for o in sharding_opaques(g.attrs, f"groups[{g.id}].attrs")]
    assert left == []
    for v in cap.values:  # every recorded sharding holds together (as the file reader checks)
        if v.sharding is not None:
            check_sharding(v.sharding, v.shape, cap.meshes, f"values[{v.id}]")


@pytest.mark.slow
def test_jit_in_out_shardings_and_a_constraint(caps):
    cap = cap_of(caps, "jit")
    assert [(a["name"], a["size"], a["type"]) for a in cap.meshes[0]["axes"]] == [("data", 4, "auto"), ("model", 2, "auto")]
    (jit,) = [g for g in cap.groups if g.kind == "jit"]
    assert jit.attrs["in_shardings"] == [
        {"type": "NamedSharding", "mesh": 0, "spec": [["data"], []]},
        {"type": "NamedSharding", "mesh": 0, "spec": [[], ["model"]]},
    ]
    assert jit.attrs["out_shardings"] == [{"type": "NamedSharding", "mesh": 0, "spec": []}]
    x, w = jit.attrs["inputs"]
    assert cap.values[x].sharding["spec"] == [["data"], []] and cap.values[x].sharding["per_device_shape"] == [2, 16]
    assert cap.values[w].sharding["per_device_shape"] == [16, 16]
    (constraint,) = [n for n in nodes(cap) if n.op == "sharding_constraint"]
    assert constraint.params["sharding"] == {"type": "NamedSharding", "mesh": 0, "spec": [["data"], ["model"]]}
    assert constraint.params["context_mesh"] == {"type": "Mesh", "mesh": 0}
    out = cap.values[constraint.outputs[0]].sharding
    assert (out["spec"], out["per_device_shape"], out["source"]) == ([["data"], ["model"]], [2, 16], "sharding_constraint")


@pytest.mark.slow
def test_shard_map_opens_with_per_device_shapes_and_named_collectives(caps):
    cap = cap_of(caps, "smap")
    (boundary,) = [n for n in nodes(cap) if n.op == "shard_map"]
    assert not boundary.opaque and cap.coverage.status == "complete"
    assert boundary.params["in_specs"] == [{"type": "PartitionSpec", "spec": [["data"], ["model"]]}]
    outer = cap.values[boundary.inputs[0].value]
    assert outer.shape == [8, 16] and outer.sharding["per_device_shape"] == [2, 8]
    (body,) = [g for g in cap.groups if g.kind == "body" and g.attrs["node"] == boundary.id]
    assert body.attrs["role"] == "shard_map body" and body.attrs["devices"] == 8
    (param,) = body.attrs["parameters"]
    inner = cap.values[param["value"]]
    assert inner.shape == [2, 8]  # one device's shard
    assert inner.sharding["local"] is True and inner.sharding["global_shape"] == [8, 16]
    inside = [n for n in nodes(cap) if n.group == body.id]
    collectives = {n.op: n.params["collective"] for n in inside if "collective" in n.params}
    assert set(collectives) == {"psum", "all_gather", "axis_index", "reduce_scatter", "ppermute", "all_to_all"}
    assert collectives["psum"] == {"op": "all_reduce", "axes": ["model"], "devices": 2, "operand_bytes": 64,
                                   "bytes_sent_per_device": 64}
    assert collectives["all_gather"]["axes"] == ["data"] and collectives["all_gather"]["bytes_sent_per_device"] == 3 * 64
    assert collectives["reduce_scatter"]["bytes_sent_per_device"] == 3 * 64 // 4
    assert collectives["ppermute"]["bytes_sent_per_device"] == 64
    assert collectives["all_to_all"]["axes"] == ["model"] and collectives["axis_index"]["bytes_sent_per_device"] == 0
    # connected to the values they move: each reads the shard or what a collective made
    psum = next(n for n in inside if n.op == "psum")
    assert psum.inputs[0].value == param["value"]
    gather = next(n for n in inside if n.op == "all_gather")
    assert gather.inputs[0].value == psum.outputs[0]
    assert all(cap.values[o].sharding["local"] for n in inside for o in n.outputs)


@pytest.mark.slow
def test_pmap_lowers_to_an_open_shard_map(caps):
    cap = cap_of(caps, "pmap")
    (boundary,) = [n for n in nodes(cap) if n.op == "shard_map"]
    (psum,) = [n for n in nodes(cap) if n.op == "psum"]
    assert psum.params["collective"]["axes"] == ["i"] and psum.params["collective"]["devices"] == 8
    assert cap.values[boundary.inputs[0].value].sharding["per_device_shape"] == [1, 3]


@pytest.mark.slow
def test_explicit_axes_put_the_sharding_in_the_types(caps):
    cap = cap_of(caps, "explicit")
    assert [a["type"] for a in cap.meshes[0]["axes"]] == ["explicit", "explicit"]
    reshards = [n for n in nodes(cap) if n.op == "reshard"]
    assert len(reshards) == 2
    first = cap.values[reshards[0].outputs[0]].sharding
    assert first["spec"] == [["data"], []] and first["per_device_shape"] == [2, 16]
    (dot,) = [n for n in nodes(cap) if n.op == "dot_general"]
    typed = cap.values[dot.outputs[0]].sharding  # f32[8@data,32]: the type says it
    assert typed["source"] == "type" and typed["spec"] == [["data"], []] and typed["per_device_shape"] == [2, 32]


@pytest.mark.slow
def test_nnx_partitioning_from_a_literal_setup(caps):
    cap = cap_of(caps, "nnx")
    assert cap.meta["state"] == "fresh_init"
    names = dict(cap.meta["input_names"])
    kernel = next(v for v, n in names.items() if n.endswith("kernel"))
    sh = cap.values[kernel].sharding
    assert sh["spec"] == [[], ["model"]] and sh["per_device_shape"] == [16, 16]


@pytest.mark.slow
def test_linen_partitioned_boxes(caps):
    cap = cap_of(caps, "linen")
    kernels = [v for v in cap.values if v.shape == [16, 32] and v.sharding is not None]
    assert kernels and kernels[0].sharding["spec"] == [["data"], ["model"]]
    assert kernels[0].sharding["per_device_shape"] == [4, 16]


@pytest.mark.slow
def test_flax_fsdp_train_step_matches_make_jaxpr_with_shardings(caps):
    cap = cap_of(caps, "fsdp")
    expected = caps["_jaxpr"]["primitives"]
    assert [n.op for n in nodes(cap)] == expected  # equation for equation
    names = dict(cap.meta["input_names"])
    by_name = {n: cap.values[v] for v, n in names.items()}
    w1 = next(v for n, v in by_name.items() if n.endswith("model.w1"))
    assert w1.sharding["spec"] == [[], ["model"]] and w1.sharding["per_device_shape"] == [1, 8]
    momentum = [v for n, v in by_name.items() if "momentum" in n and n.endswith("w1")]
    assert momentum and momentum[0].sharding["spec"] == [[], ["model"]]
    x = next(v for n, v in by_name.items() if n == "x")
    assert x.sharding["spec"] == [["data"], []] and x.sharding["per_device_shape"] == [16, 1]


@pytest.mark.slow
def test_per_device_memory_of_the_fsdp_step(caps):
    cap = cap_of(caps, "fsdp")
    memory = cap.meta["per_device_memory"]
    assert memory["devices"] == 8
    state = dict(cap.inputs["dict"])["state"]
    expected = 0
    for v in tree_leaves(state):
        sh = cap.values[v].sharding
        n = 1
        for d in (sh["per_device_shape"] if sh else cap.values[v].shape):
            n *= d
        expected += 4 * n
    assert memory["param_bytes"] == expected
    assert memory["input_bytes"] == 2 * 16 * 4  # x and y, each split over data
    (model_group,) = [g for g in cap.groups if g.kind == "module" and g.attrs.get("class") == "MLP"]
    figures = model_group.attrs["per_device_memory"]
    assert figures["param_bytes"] == (8 + 8 + 32) * 4  # w1 and b1 split over model (4), w2 whole


@pytest.mark.slow
def test_a_mesh_capture_through_the_real_worker(tmp_path):
    """The worker simulates the devices (no XLA flag in the environment), and the graph
    file carries the mesh, the devices and per-device memory."""
    from capture.session.runner import run_capture

    write(tmp_path, {"model.py": MODEL})
    cap = run_capture(tmp_path, {"name": "jit", **profile("model:jnet", args=[tensor([8, 16]), tensor([16, 32])],
                                                          mesh=AUTO_MESH)}, timeout=240)
    assert cap.failure is None, cap.failure
    assert cap.devices["count"] == 8 and cap.devices["simulated"] is True
    assert cap.recipe["mesh"] == AUTO_MESH
    assert cap.meta["per_device_memory"]["param_bytes"] == 0
    assert cap.meta["per_device_memory"]["input_bytes"] == (2 * 16 + 16 * 16) * 4


def test_a_mesh_needing_more_devices_than_a_started_backend_fails_clearly(tmp_path):
    """In a process whose JAX backend already started (this test process), a mesh larger
    than its CPU devices is refused naming both counts; nothing falls back."""
    import jax

    from capture.worker.errors import CaptureError
    from jax_workspace import capture_in_process

    have = len(jax.devices("cpu"))
    write(tmp_path, {"model.py": MODEL})
    with pytest.raises(CaptureError) as err:
        capture_in_process(tmp_path, profile("model:net", args=[tensor([8, 16]), tensor([16, 32])],
                                             mesh={"data": have + 1}))
    assert err.value.stage == "device"
    assert f"needs {have + 1} CPU devices" in str(err.value) and f"started with {have}" in str(err.value)
