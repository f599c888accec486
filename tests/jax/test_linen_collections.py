"""Linen modules that update collections while they run, traced with ``mutable=``; and a
freshly initialised module whose parameter initializers run once per capture.

The ResNet here is written the way Flax's ImageNet example (``examples/imagenet/models.py``)
writes its ResNet V1.5: bottleneck blocks taking ``conv``/``norm`` factories built with
``functools.partial``, ``nn.BatchNorm(use_running_average=not train, axis_name="batch")``
(the example trains under ``pmap``), and ``ResNet50 = partial(ResNet, stage_sizes=[3, 4, 6, 3],
block_cls=...)``; opened in training mode through an init factory.
"""

from __future__ import annotations

from collections import Counter

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
flax = pytest.importorskip("flax")

from capture.graph.model import tree_leaves  # noqa: E402

from jax_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write  # noqa: E402
from jaxpr_walk import node_counts, primitive_counts  # noqa: E402

pytestmark = pytest.mark.jax

RESNET = """
from functools import partial
from typing import Any, Callable, Sequence

import jax.numpy as jnp
from flax import linen as nn


class Bottleneck(nn.Module):
    filters: int
    conv: Any
    norm: Any
    act: Callable
    strides: tuple = (1, 1)

    @nn.compact
    def __call__(self, x):
        shortcut = x
        y = self.act(self.norm()(self.conv(self.filters, (1, 1))(x)))
        y = self.act(self.norm()(self.conv(self.filters, (3, 3), self.strides)(y)))
        y = self.norm(scale_init=nn.initializers.zeros_init())(self.conv(self.filters * 4, (1, 1))(y))
        if shortcut.shape != y.shape:
            shortcut = self.conv(self.filters * 4, (1, 1), self.strides, name="conv_proj")(shortcut)
            shortcut = self.norm(name="norm_proj")(shortcut)
        return self.act(shortcut + y)


class ResNet(nn.Module):
    stage_sizes: Sequence[int]
    block_cls: Any
    num_classes: int
    num_filters: int = 64
    act: Callable = nn.relu

    @nn.compact
    def __call__(self, x, train: bool = True):
        conv = partial(nn.Conv, use_bias=False)
        norm = partial(nn.BatchNorm, use_running_average=not train, momentum=0.9, epsilon=1e-5, axis_name="batch")
        x = conv(self.num_filters, (7, 7), (2, 2), padding=[(3, 3), (3, 3)], name="conv_init")(x)
        x = nn.relu(norm(name="bn_init")(x))
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
        for i, size in enumerate(self.stage_sizes):
            for j in range(size):
                x = self.block_cls(self.num_filters * 2 ** i, strides=(2, 2) if i > 0 and j == 0 else (1, 1),
                                   conv=conv, norm=norm, act=self.act)(x)
        return nn.Dense(self.num_classes)(jnp.mean(x, axis=(1, 2)))


ResNet50 = partial(ResNet, stage_sizes=[3, 4, 6, 3], block_cls=Bottleneck)


def resnet50():
    return ResNet50(num_classes=10, num_filters=4)
"""

SOWING = """
import jax.numpy as jnp
from flax import linen as nn

CALLS = []


def counted_init(key, shape, dtype=jnp.float32):
    CALLS.append(shape)
    return jnp.zeros(shape, dtype)


class Probe(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.Dense(4, kernel_init=counted_init)(x)
        self.sow("losses", "activity", jnp.mean(h ** 2))
        self.sow("intermediates", "hidden", h)
        return nn.Dense(2, kernel_init=counted_init)(nn.relu(h))


def bound_probe():
    import jax

    module = Probe()
    variables = module.init(jax.random.key(0), jnp.ones((1, 3)))
    CALLS.clear()
    return module.bind(variables)
"""

IMAGE = tensor([2, 32, 32, 3])
BATCH_NORMS = 1 + 16 * 3 + 4  # bn_init, three per bottleneck block, one projection per stage


@pytest.fixture
def ws(tmp_path):
    write(tmp_path, {"resnet.py": RESNET, "probe.py": SOWING})
    yield tmp_path
    forget_workspace_modules(tmp_path)


def _resnet(ws, train):
    table = profile("resnet:ResNet50", init={"factory": "resnet:resnet50"}, args=[IMAGE], kwargs={"train": train})
    return capture_in_process(ws, table)[0]


@pytest.mark.slow
def test_resnet50_in_training_mode_updates_batch_stats_among_its_outputs(ws):
    """JAX graphs describe a traced program from jax.make_jaxpr, for the saved input
    shapes, dtypes and static Python values. [...] This permits an explicitly configured
    boolean to select Python control flow.

    ``train = true`` selects BatchNorm's batch statistics: ``apply`` runs with
    ``mutable=["batch_stats"]`` (the collection init produced besides params), and the
    updated statistics are outputs named as such."""
    cap = _resnet(ws, True)
    fields = dict(cap.outputs["dict"])
    assert list(fields) == ["output", "updated"]
    assert cap.values[fields["output"]["value"]].shape == [2, 10]
    updated = dict(fields["updated"]["dict"])
    assert list(updated) == ["batch_stats"]
    assert cap.meta["updated_collections"] == ["batch_stats"] and "mutable" in cap.meta["updated_note"]
    leaves = list(tree_leaves(fields["updated"]))
    assert len(leaves) == 2 * BATCH_NORMS  # every BatchNorm's mean and var
    stem = dict(dict(updated["batch_stats"]["dict"])["bn_init"]["dict"])
    assert list(stem) == ["mean", "var"] and cap.values[stem["mean"]["value"]].shape == [4]
    produced = {v for n in cap.nodes for v in n.outputs}
    assert set(leaves) <= produced  # computed by the program, not handed back
    # "batch" is pmean'd over: bound at size 1, recorded
    assert [(a["name"], a["size"]) for a in cap.meta["axis_env"]] == [("batch", 1)]
    assert node_counts(cap)["psum"] == BATCH_NORMS


@pytest.mark.slow
def test_resnet50_training_program_is_the_one_make_jaxpr_traces(ws):
    """JAX graphs describe a traced program from jax.make_jaxpr, for the saved input
    shapes, dtypes and static Python values."""
    cap = _resnet(ws, True)
    import resnet

    model = resnet.resnet50()
    x = jnp.ones((2, 32, 32, 3))
    variables = jax.eval_shape(lambda k: model.init(k, x, train=True), jax.random.key(0))
    closed = jax.make_jaxpr(lambda v, x: model.apply(v, x, train=True, mutable=["batch_stats"]),
                            axis_env=[("batch", 1)])(variables, x)
    assert node_counts(cap) == primitive_counts(closed)


@pytest.mark.slow
def test_resnet50_in_eval_mode_has_no_updates(ws):
    """[...] an explicitly configured boolean to select Python control flow. Changing any
    such value requires another trace.

    With ``train = false`` the running averages are read, never written: the outputs are
    the logits alone, as without ``mutable``, and no axis is bound."""
    cap = _resnet(ws, False)
    assert cap.values[cap.outputs["value"]].shape == [2, 10]
    assert "updated_collections" not in cap.meta and "axis_env" not in cap.meta
    assert "psum" not in node_counts(cap)


def test_a_sown_collection_init_produced_is_updated(ws):
    """Linen: ``sow`` into a collection ``init`` produced (``losses``) appends to it under
    ``mutable``; ``intermediates``, which ``init`` leaves out, stays out as in a plain
    ``apply``."""
    cap, _ = capture_in_process(ws, profile("probe:Probe", args=[tensor([2, 3])]))
    fields = dict(cap.outputs["dict"])
    updated = dict(fields["updated"]["dict"])
    assert list(updated) == ["losses"]
    (activity,) = [t for k, t in updated["losses"]["dict"] if k == "activity"]
    first, second = activity["tuple"]
    # init's own sown value comes back as given; this call's is computed
    assert first["value"] in {leaf for leaf in tree_leaves(dict(cap.inputs["dict"])["variables"])}
    assert any(second["value"] in n.outputs for n in cap.nodes if n.op == "div")


def test_a_fresh_linen_modules_initializers_run_once(ws):
    """An unbound Linen module is initialized with jax.random.key(seed) and the saved
    inputs. This is freshly initialized state, not trained weights. Its __call__ is then
    traced.

    The initializers run in that initialization, once each: tracing ``__call__`` on the
    module's own variables does not run them again."""
    from flax.core import scope

    before = scope.Scope.param
    cap, _ = capture_in_process(ws, profile("probe:Probe", args=[tensor([2, 3])]))
    import probe

    assert Counter(probe.CALLS) == Counter({(3, 4): 1, (4, 2): 1})
    assert scope.Scope.param is before
    assert cap.meta["state"] == "fresh_init"


def test_bound_variables_keep_flaxs_shape_check(ws):
    """For saved variables, replace init with a workspace factory returning the exact
    selected Linen class bound with model.bind(variables).

    Saved variables are not the module's own fresh ones: Flax's check of each parameter
    against its initializer runs (abstractly, once per parameter)."""
    capture_in_process(ws, profile("probe:Probe", args=[tensor([2, 3])], init={"factory": "probe:bound_probe"}))
    import probe

    assert Counter(probe.CALLS) == Counter({(3, 4): 1, (4, 2): 1})


def test_a_failed_trace_restores_flaxs_param(ws):
    """Tracing that fails (a wrong input shape) leaves Flax's ``Scope.param`` as it was."""
    from flax.core import scope

    before = scope.Scope.param
    write(ws, {"bad.py": "from flax import linen as nn\n\n"
                         "class Bad(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n"
                         "        y = nn.Dense(3)(x)\n        return y @ x\n"})
    with pytest.raises(TypeError, match="dot_general"):
        capture_in_process(ws, profile("bad:Bad", args=[tensor([2, 5])]))
    assert scope.Scope.param is before
