"""NNX graph nodes that are not the opened module: an ``nnx.Optimizer`` a partial binds,
Variables and dicts of modules among a partial's arguments, modules passed as inputs.
Each is split with the rest of the state outside the trace and merged inside it, and
the modules among them are intercepted like the callable's own.

The models are written the way Flax's ``examples/nnx_toy_examples`` write them:
``02_lifted_transforms.py`` (a counting MLP, ``nnx.Optimizer`` with ``wrt=nnx.Param``,
an ``@nnx.jit`` train step taking ``nnx.grad``) and ``05_vae.py`` (a VAE whose encoder
draws from its own ``nnx.Rngs`` stream and stores a ``Loss`` variable while it runs,
opened through ``@nnx.jit def forward(model, x)``).
"""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
flax = pytest.importorskip("flax")

from capture.graph.model import tree_leaves  # noqa: E402

from jax_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write  # noqa: E402
from jaxpr_walk import node_counts, primitive_counts  # noqa: E402

pytestmark = pytest.mark.jax

TRAIN_STEP = """
import functools

import jax
import jax.numpy as jnp
import optax
from flax import nnx


class Dense(nnx.Module):
    def __init__(self, din: int, dout: int, *, rngs: nnx.Rngs):
        self.w = nnx.Param(jax.random.uniform(rngs.params(), (din, dout)))
        self.b = nnx.Param(jnp.zeros((dout,)))

    def __call__(self, x):
        return x @ self.w.value + self.b.value


class Calls(nnx.Variable):
    pass


class Regressor(nnx.Module):
    def __init__(self, din, dhidden, dout, *, rngs: nnx.Rngs):
        self.calls = Calls(jnp.array(0))
        self.hidden = Dense(din, dhidden, rngs=rngs)
        self.out = Dense(dhidden, dout, rngs=rngs)

    def __call__(self, x):
        self.calls.value += 1
        return self.out(jax.nn.relu(self.hidden(x)))


@nnx.jit
def train_step(model: Regressor, optimizer: nnx.Optimizer, batch):
    x, y = batch

    def loss_fn(model: Regressor):
        return jnp.mean((y - model(x)) ** 2)

    grads = nnx.grad(loss_fn)(model)
    optimizer.update(model, grads)


BUILT = []


def step_partial():
    model = Regressor(1, 16, 1, rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.sgd(1e-3), wrt=nnx.Param)
    BUILT.append((model, optimizer))
    return functools.partial(train_step, model, optimizer)


def scaled(x, scale, models):
    return models["first"](x) * scale.value + models["second"](x)


def scaled_partial():
    models = {"first": Dense(1, 2, rngs=nnx.Rngs(1)), "second": Dense(1, 2, rngs=nnx.Rngs(2))}
    return functools.partial(scaled, scale=nnx.Param(jnp.full((2,), 3.0)), models=models)
"""

VAE = """
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx


class Penalty(nnx.Variable):
    pass


class Encoder(nnx.Module):
    def __init__(self, din: int, dmid: int, dout: int, *, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(din, dmid, rngs=rngs)
        self.mean = nnx.Linear(dmid, dout, rngs=rngs)
        self.log_std = nnx.Linear(dmid, dout, rngs=rngs)
        self.rngs = rngs

    def __call__(self, x: jax.Array) -> jax.Array:
        x = jax.nn.relu(self.hidden(x.reshape((x.shape[0], -1))))
        mean, std = self.mean(x), jnp.exp(self.log_std(x))
        self.penalty = Penalty(jnp.mean(std ** 2 + mean ** 2 - jnp.log(std ** 2)))
        return mean + std * jax.random.normal(self.rngs.noise(), mean.shape)


class Decoder(nnx.Module):
    def __init__(self, din: int, dmid: int, dout: int, *, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(din, dmid, rngs=rngs)
        self.logits = nnx.Linear(dmid, dout, rngs=rngs)

    def __call__(self, z: jax.Array) -> jax.Array:
        return self.logits(jax.nn.relu(self.hidden(z)))


class AutoEncoder(nnx.Module):
    def __init__(self, din: int, hidden: int, latent: int, image_shape, *, rngs: nnx.Rngs):
        self.image_shape = image_shape
        self.encoder = Encoder(din, hidden, latent, rngs=rngs)
        self.decoder = Decoder(latent, hidden, int(np.prod(image_shape)), rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return jnp.reshape(self.decoder(self.encoder(x)), (-1, *self.image_shape))


@nnx.jit
def forward(model: AutoEncoder, x: jax.Array) -> jax.Array:
    return jax.nn.sigmoid(model(x))


BUILT = []


def forward_inputs():
    model = AutoEncoder(din=49, hidden=32, latent=8, image_shape=(7, 7), rngs=nnx.Rngs(0, noise=1))
    BUILT.append(model)
    return {"args": (model, jnp.ones((3, 7, 7)))}
"""

PAIR = [tensor([8, 1]), tensor([8, 1])]


@pytest.fixture
def ws(tmp_path):
    write(tmp_path, {"steps.py": TRAIN_STEP, "vae.py": VAE})
    yield tmp_path
    forget_workspace_modules(tmp_path)


def _module_paths(cap):
    return sorted({g.attrs["path"] for g in cap.groups if g.kind == "module"})


def test_an_optimizer_step_as_a_partial_traces_in_the_trace_context(ws):
    """NNX modules, bound methods and partial callables clone their state wrappers inside
    the JAX trace context, allowing nnx.jit to update temporary state without crossing
    trace levels. Underlying arrays are shared rather than duplicated.

    ``functools.partial(train_step, model, optimizer)``: the optimizer's ``OptState``
    and step count are cloned with the model (before, ``optimizer.update`` raised
    ``TraceContextError: Cannot mutate OptState from a different trace level``)."""
    cap, _ = capture_in_process(ws, profile("steps:train_step", init={"factory": "steps:step_partial"}, args=[PAIR]))
    import steps
    from flax import nnx

    (model, optimizer), = steps.BUILT
    names = {name for _, name in cap.meta["input_names"]}
    assert {"model.calls", "model.hidden.w", "model.out.b", "optimizer.step", "batch[0]", "batch[1]"} <= names
    assert cap.meta["state"] == "callable_state" and cap.meta["state_key"] == "state"
    # the update ran on the clones: the live objects still hold their own concrete arrays
    assert int(optimizer.step[...]) == 0 and int(model.calls[...]) == 0
    # one split state for both, holding the very arrays the live objects hold
    graphdef, state = nnx.split((model, optimizer))
    ops = node_counts(cap)
    assert ops["dot_general"] >= 4 and ops["mul"] >= 1  # forward and backward matmuls, the SGD step
    assert cap.meta["input_names"] and len(jax.tree_util.tree_leaves(state)) == len(
        [v for v, n in cap.meta["input_names"] if not n.startswith("batch")])
    # the model's calls inside nnx.jit and nnx.grad are module groups under the partial's parameter
    assert {"model", "model.hidden", "model.out"} <= set(_module_paths(cap))


def test_the_optimizer_step_is_the_program_make_jaxpr_traces(ws):
    """NNX modules, bound methods and partial callables clone their state wrappers inside
    the JAX trace context, allowing nnx.jit to update temporary state without crossing
    trace levels."""
    from flax import nnx

    cap, _ = capture_in_process(ws, profile("steps:train_step", init={"factory": "steps:step_partial"}, args=[PAIR]))
    import steps

    model, optimizer = steps.BUILT[-1]
    graphdef, state = nnx.split((model, optimizer))
    batch = (jnp.ones((8, 1)), jnp.ones((8, 1)))

    def by_hand(state, batch):
        m, o = nnx.merge(graphdef, state)
        return steps.train_step(m, o, batch)

    assert node_counts(cap) == primitive_counts(jax.make_jaxpr(by_hand)(state, batch))


def test_variables_and_dicts_of_modules_among_partial_arguments_are_lifted(ws):
    """NNX modules, bound methods and partial callables clone their state wrappers inside
    the JAX trace context [...]. Underlying arrays are shared rather than duplicated."""
    cap, _ = capture_in_process(ws, profile("steps:scaled", init={"factory": "steps:scaled_partial"},
                                            args=[tensor([4, 1])]))
    names = {name for _, name in cap.meta["input_names"]}
    # a keyword's Variable and a dict of modules are state, named by where the partial holds them
    assert names == {"scale", "models.first.w", "models.first.b", "models.second.w", "models.second.b", "x"}
    # (state, not closed-over constants)
    assert not cap.meta.get("constants")
    assert _module_paths(cap) == ["models.first", "models.second"]
    (out,) = tree_leaves(cap.outputs)
    assert cap.values[out].shape == [4, 2]


@pytest.mark.slow
def test_a_module_passed_as_input_is_intercepted_like_the_callables_own(ws):
    """NNX modules, bound methods and partial callables clone their state wrappers inside
    the JAX trace context, allowing nnx.jit to update temporary state without crossing
    trace levels. Underlying arrays are shared rather than duplicated.

    ``forward(model, x)`` with the model from the inputs factory: its calls are module
    groups with attribute paths under the parameter that receives it, its state is
    traced as state (not as plain inputs), and the encoder's RNG stream and ``Penalty``
    variable update on the clone."""
    cap, _ = capture_in_process(ws, profile("vae:forward", inputs={"factory": "vae:forward_inputs"}))
    import vae

    (model,) = vae.BUILT
    paths = _module_paths(cap)
    assert paths == ["model", "model.decoder", "model.decoder.hidden", "model.decoder.logits", "model.encoder",
                     "model.encoder.hidden", "model.encoder.log_std", "model.encoder.mean"]
    # the module groups sit inside forward's nnx.jit body
    jit = next(g for g in cap.groups if g.kind == "jit" and g.name == "forward")
    top = next(g for g in cap.groups if g.kind == "module" and g.attrs["path"] == "model")
    assert top.parent == jit.id and top.attrs["class"] == "AutoEncoder"
    assert cap.meta["state_key"] == "state" and cap.meta["state"] == "input_state"
    names = dict((n, v) for v, n in cap.meta["input_names"])
    assert {"x", "model.encoder.hidden.kernel", "model.decoder.logits.bias", "model.encoder.rngs.noise.key"} <= set(names)
    args = dict(cap.inputs["dict"])["args"]["tuple"]
    assert args[0] == {"static": "<AutoEncoder>"} and "value" in args[1]
    # the encoder's streams are the input's (not reported twice, as a factory's too)
    assert sorted((e["name"], e["origin"], e["where"]) for e in cap.meta["rng_streams"]) == [
        ("default", "input", "model.encoder.rngs.default"), ("noise", "input", "model.encoder.rngs.noise")]
    (out,) = tree_leaves(cap.outputs)
    assert cap.values[out].shape == [3, 7, 7]
    # the live model is untouched: no penalty stored, its noise counter unchanged
    assert not hasattr(model.encoder, "penalty") and int(model.encoder.rngs.noise.count[...]) == 0
    assert {"random_bits", "exp", "logistic"} <= set(node_counts(cap))
