"""Steps after construction (issue 36, item 4): ``init.then`` on the model and a call's
``then`` on what it built, run by the Torch capture in this process.

The patterns are vendored in models of our own: gpt-fast's ``setup_caches`` (the forward
asserts the caches were set up, a ``KVCache`` module of buffers written in place), and
minGPT's documented set-up (``C = GPT.get_default_config(); C.model_type = "gpt-nano";
C.vocab_size = …``, a config node whose attributes are set one by one)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from capture.worker.errors import CaptureError  # noqa: E402

from torch_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write  # noqa: E402

pytestmark = pytest.mark.torch

CACHED = '''
from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn


@dataclass
class Args:
    n_layer: int = 2
    dim: int = 16
    vocab_size: int = 50


class KVCache(nn.Module):
    def __init__(self, max_batch_size, max_seq_length, dim):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(max_batch_size, max_seq_length, dim))

    def update(self, input_pos, k_val):
        k_out = self.k_cache
        k_out[:, input_pos] = k_val
        return k_out


class Layer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.kv_cache = None

    def forward(self, x, input_pos):
        k = self.kv_cache.update(input_pos, self.proj(x))
        return x + k[:, : x.shape[1]]


class Cached(nn.Module):
    def __init__(self, config: Args) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.dim)
        self.layers = nn.ModuleList(Layer(config.dim) for _ in range(config.n_layer))
        self.freqs: Optional[torch.Tensor] = None

    def setup_caches(self, max_batch_size, max_seq_length):
        for layer in self.layers:
            layer.kv_cache = KVCache(max_batch_size, max_seq_length, self.config.dim)
        self.freqs = torch.ones(max_seq_length)

    def forward(self, idx, input_pos):
        assert self.freqs is not None, "Caches must be initialized first"
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x, input_pos)
        return x * self.freqs[input_pos][None, :, None]


class Node:
    """minGPT's CfgNode: a bag of attributes."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class Mini(nn.Module):
    @staticmethod
    def get_default_config():
        C = Node()
        C.model_type = "gpt"
        C.vocab_size = None
        C.width = None
        return C

    def __init__(self, config):
        super().__init__()
        assert config.vocab_size is not None
        width = {"gpt-nano": 8, "gpt": 64}[config.model_type] if config.width is None else config.width
        self.embed = nn.Embedding(config.vocab_size, width)

    def forward(self, idx):
        return self.embed(idx).sum(-1)
'''

STEPS = [{"call": "setup_caches", "kwargs": {"max_batch_size": 1, "max_seq_length": 8}}]
INPUTS = {"args": [], "kwargs": {"idx": tensor([1, 4], "int64", generator={"kind": "randint", "high": 50}),
                                 "input_pos": tensor([4], "int64", generator={"kind": "arange"})}}


@pytest.fixture
def ws(tmp_path):
    # Another test file's workspace has a cached.py too: each test imports its own.
    yield write(tmp_path, {"cached.py": CACHED})
    forget_workspace_modules(tmp_path)


def config(**kwargs):
    return {"kind": "call", "target": "cached:Args", "kwargs": kwargs}


def test_a_method_called_on_the_built_model(ws):
    table = profile("cached:Cached", init={"kwargs": {"config": config()}, "then": STEPS}, inputs=INPUTS)
    cap, _ = capture_in_process(ws, table)
    assert cap.failure is None, cap.failure
    assert cap.recipe["init"]["then"] == STEPS
    # The caches the step made took part: each layer writes its cache in place.
    assert sum(n.op.startswith("aten::index_put") for n in cap.nodes) == 2, sorted({n.op for n in cap.nodes})


def test_without_the_step_the_models_own_assert_says_what_is_missing(ws):
    table = profile("cached:Cached", init={"kwargs": {"config": config()}}, inputs=INPUTS)
    with pytest.raises(AssertionError, match="Caches must be initialized first"):
        capture_in_process(ws, table)


def test_the_step_runs_abstractly_too(ws):
    table = profile("cached:Cached", init={"kwargs": {"config": config(dim=4096, vocab_size=32000)}, "then": STEPS},
                    inputs=INPUTS, evidence="abstract")
    cap, _ = capture_in_process(ws, table)
    assert cap.failure is None, cap.failure
    assert cap.coverage.scope == "abstract_forward"


def test_attributes_set_on_what_a_call_built(ws):
    node = {"kind": "call", "target": "cached:Mini.get_default_config",
            "then": [{"set": "model_type", "value": "gpt-nano"}, {"set": "vocab_size", "value": 20}]}
    table = profile("cached:Mini", init={"kwargs": {"config": node}},
                    inputs={"args": [tensor([1, 4], "int64", generator={"kind": "randint", "high": 20})]})
    cap, _ = capture_in_process(ws, table)
    assert cap.failure is None, cap.failure
    (embed,) = [v for v in cap.values if v.shape == [20, 8]]  # gpt-nano's width, the vocabulary set
    assert embed.dtype == "float32"


def test_a_standard_library_namespace_as_the_config(ws):
    node = {"kind": "call", "target": "types:SimpleNamespace",
            "kwargs": {"model_type": "gpt", "vocab_size": 20, "width": 4}}
    cap, _ = capture_in_process(ws, profile("cached:Mini", init={"kwargs": {"config": node}},
                                            inputs={"args": [tensor([1, 4], "int64")]}))
    assert cap.failure is None, cap.failure


@pytest.mark.parametrize(("steps", "stage", "message"), [
    pytest.param([{"call": "setup_cache", "kwargs": {"max_batch_size": 1, "max_seq_length": 8}}], "recipe",
                 "profiles.p.init.then[0]: Cached(…).setup_cache does not exist (Cached has no attribute "
                 "'setup_cache'); did you mean setup_caches?", id="misspelt-method"),
    pytest.param([{"call": "setup_caches", "kwargs": {"max_batch_size": 1}}], "recipe",
                 "profiles.p.init.then[0]: Cached(…).setup_caches does not take these arguments: missing a required "
                 "argument: 'max_seq_length'", id="missing-argument"),
    pytest.param([{"call": "config.n_layer"}], "recipe",
                 "profiles.p.init.then[0]: Cached(…).config.n_layer is a int, which cannot be called",
                 id="not-a-method"),
    pytest.param([{"call": "setup_caches", "kwargs": {"max_batch_size": 1, "max_seq_length": -1}}], "trace",
                 "profiles.p.init.then[0]: calling Cached(…).setup_caches raised RuntimeError", id="raises"),
])
def test_a_step_that_cannot_run_names_its_key_path(ws, steps, stage, message):
    table = profile("cached:Cached", init={"kwargs": {"config": config()}, "then": steps}, inputs=INPUTS)
    with pytest.raises(CaptureError) as info:
        capture_in_process(ws, table)
    assert info.value.stage == stage
    assert info.value.message.startswith(message), info.value.message
    assert info.value.details["key_path"] == "profiles.p.init.then[0]"


def test_a_plain_function_has_nothing_built_for_a_step(ws):
    write(ws, {"fn.py": "def f(x):\n    return x * 2\n"})
    table = profile("fn:f", init={"then": [{"call": "cuda"}]}, args=[tensor([2])])
    with pytest.raises(CaptureError, match="nothing is built, so init.then has nothing to act on"):
        capture_in_process(ws, table)
