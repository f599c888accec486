"""The program as XLA compiles it for the recipe's devices (issue 46, items 1-3): the
collectives the compiler runs, each drawn on the node it came from or counted as
unattributed, XLA's per-device FLOPs and memory beside TensorViz's, the compile's
setting and deadline. Programs of our own in the patterns of Flax NNX's multi-device
guide (a sharded Adam train step), JAX's shard_map documentation (``loss_tp``) and a
Flax Linen train step with logical axis rules, captured on 8 simulated CPU devices in
one fresh interpreter (``tests/sharded_captures.py``; those tests are ``slow``). The
HLO reading and the attribution rules are table-driven tests of their own (fast)."""

from __future__ import annotations

import pytest

pytest.importorskip("jax")
pytest.importorskip("flax")
pytest.importorskip("optax")

from jax_workspace import profile, write  # noqa: E402
from sharded_captures import capture_all, read  # noqa: E402

pytestmark = pytest.mark.jax

NNX_GUIDE = '''
"""Our own program in the pattern of Flax NNX's multi-device guide: a two-layer model whose
kernels are annotated for a ("data", "model") mesh, Adam (optax) in an nnx.Optimizer, and a
jitted train step over a batch split on "data"."""
import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P


class TwoLayers(nnx.Module):
    def __init__(self, width: int, hidden: int, rngs: nnx.Rngs):
        up = nnx.with_partitioning(nnx.initializers.xavier_uniform(), (None, "model"))
        down = nnx.with_partitioning(nnx.initializers.xavier_uniform(), ("model", None))
        self.up = nnx.Linear(width, hidden, kernel_init=up, use_bias=False, rngs=rngs)
        self.down = nnx.Linear(hidden, width, kernel_init=down, use_bias=False, rngs=rngs)

    def __call__(self, x):
        return self.down(nnx.relu(self.up(x)))


@nnx.jit
def build():
    model = TwoLayers(64, 256, rngs=nnx.Rngs(0))
    state = nnx.state(model)
    nnx.update(model, jax.lax.with_sharding_constraint(state, nnx.get_partition_spec(state)))
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    return model, optimizer


@nnx.jit
def train_step(model, optimizer, x, y):
    def loss_fn(model):
        return jnp.mean((model(x) - y) ** 2)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def batch():
    model, optimizer = build()
    mesh = jax.sharding.get_abstract_mesh()
    x = jax.device_put(jnp.ones((32, 64)), P("data", None))
    y = jax.device_put(jnp.zeros((32, 64)), P("data", None))
    return {"args": (model, optimizer, x, y)}
'''

SMAP_DOCS = '''
"""Our own programs in the pattern of JAX's shard_map documentation (tensor-parallel loss)."""
from functools import partial

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def predict_tp(w1, w2, x):
    h = jnp.maximum(x @ w1, 0)                    # columns of w1 split on "model"
    out = h @ w2                                  # rows of w2 split: a partial sum
    return jax.lax.psum(out, "model")


def loss_tp(w1, w2, x, y):
    pred = jax.shard_map(predict_tp, in_specs=(P(None, "model"), P("model", None), P("data", None)),
                         out_specs=P("data", None))(w1, w2, x)
    return jnp.sum((pred - y) ** 2)               # reduce_sum over a dimension split on "data"


def grad_tp(w1, w2, x, y):
    return jax.grad(loss_tp, argnums=(0, 1))(w1, w2, x, y)


def inputs():
    w1 = jax.device_put(jnp.ones((64, 128)), P(None, "model"))
    w2 = jax.device_put(jnp.ones((128, 64)), P("model", None))
    x = jax.device_put(jnp.ones((32, 64)), P("data", None))
    y = jax.device_put(jnp.ones((32, 64)), P("data", None))
    return {"args": (w1, w2, x, y)}


def gather_all(x, w):
    """An explicit-axes program: the split activations gathered to every device (a reshard
    to replicated), then a matmul with a weight split on "model"."""
    full = jax.sharding.reshard(x @ w, P())
    return jnp.tanh(full).sum()


def scanned(ws, x):
    """Layers stacked on a leading axis and run by lax.scan (a scanned model)."""
    def layer(h, w):
        return jnp.tanh(h @ w), None

    h, _ = jax.lax.scan(layer, x, ws)
    return jnp.mean(h ** 2)


def scanned_grad(ws, x):
    return jax.grad(scanned)(ws, x)


def scan_inputs():
    ws = jax.device_put(jnp.ones((3, 64, 64)) * 0.01, P(None, None, "model"))
    x = jax.device_put(jnp.ones((32, 64)), P("data", None))
    return {"args": (ws, x)}


def single_inputs():
    return {"args": (jnp.ones((3, 64, 64)) * 0.01, jnp.ones((32, 64)))}


def explicit_inputs():
    x = jax.device_put(jnp.ones((32, 64)), P("data", None))
    w = jax.device_put(jnp.ones((64, 128)), P(None, "model"))
    return {"args": (x, w)}
'''

NNX_SCAN = '''
"""Our own program in the pattern of the NNX guide's scanned model: layers made by nnx.vmap
(the stacked axis unsplit), kernels annotated for ("data", "model"), an activation constraint,
run by jax.lax.scan; Adam in an nnx.Optimizer; a jax.jit train step that returns the model."""
import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import PartitionSpec as P


class Block(nnx.Module):
    def __init__(self, width: int, rngs: nnx.Rngs):
        init = nnx.initializers.lecun_normal()
        self.up = nnx.Linear(width, width, kernel_init=nnx.with_partitioning(init, (None, "model")), use_bias=False,
                             rngs=rngs)
        self.down = nnx.Param(init(rngs.params(), (width, width)), sharding=("model", None))

    def __call__(self, x):
        h = jax.lax.with_sharding_constraint(jax.nn.relu(self.up(x)), P("data", "model"))
        return h @ self.down[...]


class Stack(nnx.Module):
    def __init__(self, width: int, depth: int, rngs: nnx.Rngs):
        @nnx.vmap(transform_metadata={nnx.PARTITION_NAME: None})
        def make(r):
            return Block(width, r)
        self.blocks = make(rngs.fork(split=depth))

    def __call__(self, x):
        x, _ = jax.lax.scan(lambda h, block: (block(h), None), x, self.blocks)
        return x


@jax.jit
def train_step(model, optimizer, x, y):
    loss, grads = jax.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
    optimizer.update(model, grads)
    return model, loss


def batch():
    x = jax.device_put(jnp.ones((8, 256)), P("data", None))
    model = Stack(256, 2, rngs=nnx.Rngs(0))
    return {"args": (model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param), x, x)}
'''

SMAP_FSDP = '''
"""Our own program in the pattern of the shard_map notes' FSDP loss: each weight's shard
gathered just before its matmul (and not saved for the backward), the loss averaged over "batch"."""
from functools import partial

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


@partial(jax.remat, policy=lambda op, *_, **__: str(op) != "all_gather")
def predict(params, x):
    for w_shard in params:
        x = jnp.tanh(x @ jax.lax.all_gather(w_shard, "batch", tiled=True))
    return x


@jax.shard_map(out_specs=P())
def loss_fsdp(params, x):
    return jax.lax.pmean(jnp.mean(predict(params, x) ** 2), "batch")


def inputs():
    params = [jax.device_put(jnp.ones((128, 128)) * 0.01, P("batch")) for _ in range(3)]
    return {"args": (params, jax.device_put(jnp.ones((32, 128)), P("batch")))}
'''

RULES = '''
"""Our own Linen train step with logical axis names mapped to the mesh by rules."""
import jax
import jax.numpy as jnp
import optax
from flax import linen as nn
from jax.sharding import NamedSharding, PartitionSpec as P

RULES = (("batch", "data"), ("embed", None), ("mlp", "model"), ("vocab", "model"))


class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        k1 = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        k2 = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("mlp", "embed"))
        h = nn.Dense(256, kernel_init=k1, use_bias=False)(x)
        h = nn.with_logical_constraint(nn.gelu(h), ("batch", "mlp"))
        return x + nn.Dense(64, kernel_init=k2, use_bias=False)(h)


class Net(nn.Module):
    @nn.compact
    def __call__(self, x):
        for _ in range(2):
            x = Block()(x)
        return nn.Dense(10, kernel_init=nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "vocab")))(x)


TX = optax.adam(1e-3)


def train_step(params, opt_state, x, labels):
    def loss_fn(p):
        logits = Net().apply({"params": p}, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    with nn.logical_axis_rules(RULES):
        loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = TX.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def inputs():
    x = jnp.ones((32, 64))
    with nn.logical_axis_rules(RULES):
        abstract = jax.eval_shape(Net().init, jax.random.key(0), x)
        specs = nn.logical_to_mesh(nn.get_partition_spec(abstract), RULES)
    params = jax.jit(lambda: nn.meta.unbox(Net().init(jax.random.key(0), x)), out_shardings=specs)()["params"]
    opt_state = jax.jit(TX.init)(params)
    x = jax.device_put(x, P("data", None))
    labels = jax.device_put(jnp.zeros((32,), jnp.int32), P("data"))
    return {"args": (params, opt_state, x, labels)}
'''

# Written for automatic axes (the compiler's propagation): what XLA adds is the point.
SCANNED_LINEN = '''
import flax.linen as nn


class Layer(nn.Module):
    @nn.compact
    def __call__(self, h, _):
        return nn.tanh(nn.Dense(64)(h)), None


class Stack(nn.Module):
    @nn.compact
    def __call__(self, x):
        scanned = nn.scan(Layer, variable_axes={"params": 0}, split_rngs={"params": True}, length=4)
        h, _ = scanned()(x, None)
        return h
'''

MESH = {"data": {"size": 4, "type": "auto"}, "model": {"size": 2, "type": "auto"}}
EXPLICIT = {"data": {"size": 4, "type": "explicit"}, "model": {"size": 2, "type": "explicit"}}


@pytest.fixture(scope="module")
def caps(tmp_path_factory):
    root = write(tmp_path_factory.mktemp("ws"), {"nnx_guide.py": NNX_GUIDE, "smap_docs.py": SMAP_DOCS,
                                                 "rules.py": RULES, "scanned_linen.py": SCANNED_LINEN,
                                                 "nnx_scan.py": NNX_SCAN, "smap_fsdp.py": SMAP_FSDP})

    def case(model, factory, mesh=MESH, limits=None, **fields):
        out = {"framework": "jax", "root": str(root),
               "table": profile(model, inputs={"factory": factory}, **({"mesh": mesh} if mesh else {}), **fields)}
        if limits:
            out["limits"] = limits
        return out

    cases = {
        "nnx": case("nnx_guide:train_step", "nnx_guide:batch"),
        "loss_tp": case("smap_docs:loss_tp", "smap_docs:inputs"),
        "grad_tp": case("smap_docs:grad_tp", "smap_docs:inputs"),
        "rules": case("rules:train_step", "rules:inputs"),
        "gather": case("smap_docs:gather_all", "smap_docs:explicit_inputs", mesh=EXPLICIT),
        "scan": case("smap_docs:scanned_grad", "smap_docs:scan_inputs"),
        "off": case("smap_docs:loss_tp", "smap_docs:inputs", compile="off"),
        "single": case("smap_docs:scanned", "smap_docs:single_inputs", mesh=None, compile="on"),
        "linen_scan": {"framework": "jax", "root": str(root),
                       "table": profile("scanned_linen:Stack", args=[{"kind": "tensor", "shape": [2, 64],
                                                                      "dtype": "float32"}])},
        "late": case("rules:train_step", "rules:inputs", limits={"compile_seconds": 0.001}),
        "nnx_scan": case("nnx_scan:train_step", "nnx_scan:batch", mesh={"data": {"size": 2, "type": "auto"},
                                                                       "model": {"size": 4, "type": "auto"}}),
        "fsdp": case("smap_fsdp:loss_fsdp", "smap_fsdp:inputs", mesh={"batch": {"size": 4, "type": "explicit"}}),
    }
    return capture_all(cases, tmp_path_factory.mktemp("out"))


PROGRAMS = ["nnx", "loss_tp", "grad_tp", "rules", "gather", "scan"]


def collectives(cap):
    return cap.compiled["collectives"]


@pytest.mark.slow
@pytest.mark.parametrize("name", PROGRAMS)
def test_every_compiled_collective_is_on_its_node_or_counted(caps, name):
    cap = read(caps[name])
    c = cap.compiled
    assert c["status"] == "compiled" and c["devices"] == 8 and c["scope"] == "per device"
    items = collectives(cap)
    assert items, "each of these programs communicates once compiled"
    on_nodes = [x for x in items if x["node"] is not None]
    assert c["attributed"] == len(on_nodes) and c["unattributed"] == len(items) - len(on_nodes)
    assert len(on_nodes) >= 0.9 * len(items)
    for x in items:
        assert x["kind"] in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
        assert set(x["axes"]) <= {"data", "model"} and x["axes"], x
        assert x["devices"] in (2, 4, 8) and x["operand_bytes"] > 0
    assert c["seconds"] > 0
    assert c["memory"]["peak"] == (c["memory"]["arguments"] + c["memory"]["outputs"] + c["memory"]["temporaries"]
                                   - c["memory"]["aliases"])
    assert c["cost"]["flops"] > 0


def _on(cap, op, kind, axes):
    nodes = {n.id: n for n in cap.nodes}
    return [x for x in collectives(cap) if x["kind"] == kind and x["axes"] == axes and x["node"] is not None
            and any(nodes[i].op == op for i in x.get("nodes") or [x["node"]])]


@pytest.mark.slow
def test_loss_tp_the_reduction_over_a_split_dimension_is_an_all_reduce_the_compiler_adds(caps):
    cap = read(caps["loss_tp"])
    # the program's own psum inside the shard_map body: an all-reduce over "model"
    (own,) = _on(cap, "psum_invariant", "all-reduce", ["model"])
    assert own["operand_bytes"] == 8 * 64 * 4  # one device's [8,64] f32 block
    # jnp.sum over the batch split on "data": the all-reduce the program does not write
    (added,) = _on(cap, "reduce_sum", "all-reduce", ["data"])
    assert cap.frames[cap.nodes[added["node"]].frame].line == 18
    # the shard_map's FLOPs are its body's × its devices: a total with nothing uncounted
    sm = next(n for n in cap.nodes if n.op == "shard_map")
    assert cap.cost.of(sm.id)["rule"] == "shard_map body × devices" and cap.cost.flops[sm.id] > 0
    per_device = cap.cost.flops[sm.id] / 8  # the body: the program one device runs
    assert abs(per_device / cap.compiled["cost"]["flops"] - 1) < 0.05  # XLA's cost_analysis, per device


@pytest.mark.slow
def test_nnx_train_step_gradients_reduce_over_data_on_the_backward_matmuls(caps):
    cap = read(caps["nnx"])
    assert cap.compiled.get("kept_results", 0) > 0  # the updated state compiled as outputs, not dropped
    forward = _on(cap, "dot_general", "all-reduce", ["model"])
    assert forward  # the down projection contracts the split hidden dimension
    grads = [x for x in collectives(cap) if x["axes"] == ["data"] and x["kind"] == "all-reduce"]
    assert grads and any(len(x.get("nodes") or []) > 1 for x in grads)  # XLA's combiner merged them
    ops = {cap.nodes[i].op for x in grads for i in x.get("nodes") or [x["node"]]}
    assert "dot_general" in ops


@pytest.mark.slow
def test_logical_rules_train_step(caps):
    cap = read(caps["rules"])
    kinds = {(x["kind"], tuple(x["axes"])) for x in collectives(cap)}
    assert ("all-reduce", ("model",)) in kinds and ("all-reduce", ("data",)) in kinds
    assert cap.compiled["unattributed"] == 0


@pytest.mark.slow
def test_a_reshard_to_replicated_is_communication_on_the_reshard(caps):
    cap = read(caps["gather"])
    gathers = [x for x in collectives(cap) if x["kind"] == "all-gather"]
    assert gathers and all(cap.nodes[x["node"]].op == "reshard" for x in gathers)
    assert {a for x in gathers for a in x["axes"]} == {"data", "model"}


@pytest.mark.slow
def test_a_scanned_layer_forward_and_backward_map_onto_their_own_bodies(caps):
    cap = read(caps["scan"])
    dots = [x for x in collectives(cap) if cap.nodes[x["node"]].op == "dot_general"]
    assert len({x["node"] for x in dots}) >= 2  # the forward body's matmul apart from the backward's
    for x in dots:
        g = cap.groups[cap.nodes[x["node"]].group]
        assert g.kind == "body" or cap.groups[g.parent].kind == "body"


@pytest.mark.slow
def test_the_setting_and_the_deadline(caps):
    assert read(caps["off"]).compiled is None  # compile = "off": nothing compiled
    single = read(caps["single"]).compiled  # compile = "on" without a mesh: one device, no communication
    assert single["status"] == "compiled" and single["devices"] == 1 and single["collectives"] == []
    late = read(caps["late"])
    assert late.failure is None and late.nodes  # the graph stands
    assert late.compiled["status"] == "timeout" and "compile_seconds" in late.compiled["reason"]


@pytest.mark.slow
def test_an_opened_scan_body_keeps_the_split_of_its_weights(caps):
    cap = read(caps["scan"])
    slices = [cap.values[p["value"]] for g in cap.groups if g.kind == "body"
              for p in g.attrs.get("parameters") or [] if p["stands_for"].startswith("xs 0")]
    assert slices
    for v in slices:  # ws: [3, 64, 64] split [-, -, model]; one layer's slice [64, 64@model]
        assert v.sharding["spec"] == [[], ["model"]] and v.sharding["per_device_shape"] == [64, 32]


@pytest.mark.slow
def test_a_scanned_models_parameters_are_counted_once(caps):
    from viewer.projection.projection import Projection

    cap = read(caps["linen_scan"])
    params = Projection(cap).costs().totals()["params"]
    assert params["count"] == 4 * (64 * 64 + 64) and params["tensors"] == 2  # the stacked kernel and bias


PER_DEVICE = ["nnx", "nnx_scan", "loss_tp", "grad_tp", "rules", "gather", "scan", "fsdp"]


@pytest.mark.slow
@pytest.mark.parametrize("name", PER_DEVICE)
def test_per_device_flops_and_peak_agree_with_xla(caps, name):
    """TensorViz's own per-node figures, summed, against XLA's for the program one device runs:
    FLOPs within 5 % of cost_analysis() (its flops + transcendentals: TensorViz counts a sqrt
    or a tanh as one FLOP; a loop's body once, as XLA counts a while), the memory plan's peak
    within 10 % of memory_analysis()'s (arguments + outputs + temporaries - aliases)."""
    from capture.analysis.fit import per_device
    from capture.graph.per_device import flops_total
    from viewer.projection.projection import Projection

    cap = read(caps[name])
    cost = cap.compiled["cost"]
    xla = cost["flops"] + cost.get("transcendentals", 0)
    ours = flops_total(cap, loops_once=True)
    assert abs(ours / xla - 1) < 0.05, (ours, xla)
    peak = per_device(Projection(cap))["peak"]
    assert abs(peak / cap.compiled["memory"]["peak"] - 1) < 0.10, (peak, cap.compiled["memory"])
    # XLA's own per-instruction FLOPs, on the nodes their op_name names (capture.jax.xla_flops)
    assert cap.cost.notes["flops_per_device"].startswith("XLA's own FLOPs for each compiled instruction")


@pytest.mark.slow
def test_values_the_compiler_splits_carry_its_split(caps):
    """Under automatic axes the traced values carry no split; each the compiled program splits
    takes XLA's (source ``compiled``), so one device's figures read one device's shapes: the
    gradients of the NNX step's kernels are split as the kernels are, and the scanned model's
    body keeps its weights' split."""
    cap = read(caps["nnx_scan"])
    sources = {v.sharding.get("source") for v in cap.values if v.sharding}
    assert "compiled" in sources
    body = [cap.values[p["value"]] for g in cap.groups if g.kind == "body"
            for p in g.attrs.get("parameters") or [] if cap.values[p["value"]].shape == [256, 256]]
    assert body and all(v.sharding and v.sharding["per_device_shape"] in ([256, 64], [64, 256]) for v in body)
    # the matmuls in the bodies: each device computes a quarter or an eighth of them
    column = cap.cost.flops_per_device
    for n in cap.nodes:
        if n.op == "dot_general" and cap.cost.flops[n.id] > 0:
            assert column[n.id] <= cap.cost.flops[n.id] // 4, (n.id, column[n.id], cap.cost.flops[n.id])


@pytest.mark.slow
def test_without_the_compiled_program_the_figure_says_it_is_an_unfused_estimate(caps):
    cap = read(caps["off"])
    assert cap.compiled is None and cap.cost.flops_per_device is not None
    assert cap.cost.notes["flops_per_device"].startswith("TensorViz's unfused estimate")
    sm = next(n for n in cap.nodes if n.op == "shard_map")
    body = [n.id for n in cap.nodes if n.group is not None and cap.groups[n.group].kind == "body"]
    # its body's figures, one device's (the psum's additions counted: each device combines the others' blocks)
    assert cap.cost.flops_per_device[sm.id] == sum(cap.cost.flops_per_device[i] for i in body if
                                                   cap.cost.flops_per_device[i] > 0)
    assert cap.cost.flops[sm.id] // 8 <= cap.cost.flops_per_device[sm.id] < cap.cost.flops[sm.id] // 4


@pytest.mark.slow
def test_a_scanned_nnx_models_state_is_counted_once(caps):
    """The scanned weights are parameters once, at the top level (a body's slice of them is
    not counted again): the model's 2 × 2 kernels and Adam's two moments of each."""
    from viewer.projection.projection import Projection

    cap = read(caps["nnx_scan"])
    count = Projection(cap).costs().totals()["params"]["count"]
    assert 3 * 2 * 2 * 256 * 256 <= count <= 3 * 2 * 2 * 256 * 256 + 4  # + Adam's step count
