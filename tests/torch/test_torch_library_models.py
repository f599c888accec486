"""A ``transformers`` model written as a user writes it (issue 38 item 2): a subclass in
a workspace file, its config given in the setup or built in its ``__init__``, traces as
the library's own class does (``capture.torch.library_models``), in the config's dtype."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from capture.graph.invariants import values_without_producer  # noqa: E402

from torch_workspace import capture_in_process, profile, tensor, write  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]

SMALL = dict(num_hidden_layers=3, hidden_size=32, intermediate_size=64, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=64, num_local_experts=4, num_experts_per_tok=2)

MODEL = f'''
from transformers import MixtralConfig, MixtralForCausalLM


class Mix(MixtralForCausalLM):
    pass


class MixInit(MixtralForCausalLM):
    def __init__(self, dtype=None):
        super().__init__(MixtralConfig(**{SMALL!r}, dtype=dtype))
'''


def config(**extra):
    kwargs = {**SMALL, **extra}
    return {"kind": "call", "target": "transformers:MixtralConfig", "kwargs": kwargs}


IDS = {"input_ids": tensor([1, 8], "int64", generator={"kind": "randint", "low": 0, "high": 64})}


@pytest.fixture
def lws(ws):
    write(ws, {"mix.py": MODEL})
    return ws


def capture(ws, model, init_kwargs=None, **fields):
    return capture_in_process(ws, profile(model, kwargs=IDS, init={"kwargs": init_kwargs or {}}, **fields))[0]


def ops(cap):
    return [n.op for n in cap.nodes]


def test_a_subclass_traces_as_the_library_class(lws):
    from transformers import MixtralForCausalLM, PreTrainedModel

    for cls in (MixtralForCausalLM, PreTrainedModel):  # as in a fresh worker: no answer cached yet
        if "_can_set_experts_implementation_cached_value" in cls.__dict__:
            delattr(cls, "_can_set_experts_implementation_cached_value")
    sub = capture(lws, "mix:Mix", {"config": config()})
    built_inside = capture(lws, "mix:MixInit")
    library = capture(lws, "transformers:MixtralForCausalLM", {"config": config()})
    assert ops(sub) == ops(library) == ops(built_inside)
    assert "aten::_grouped_mm" in ops(library) and "aten::nonzero" not in ops(sub)
    assert sub.meta["library_model"] == [{"class": "mix.Mix", "as": "MixtralForCausalLM",
                                          "checks": ["experts_implementation"]}]
    assert "library_model" not in library.meta
    for cap in (library, sub, built_inside):
        assert values_without_producer(cap) == {}


def test_the_config_dtype_is_the_model_dtype(lws):
    cap = capture(lws, "mix:Mix", {"config": config(dtype="bfloat16")}, evidence="abstract")
    assert cap.meta["dtype"] == {"dtype": "bfloat16", "source": "MixtralConfig.dtype"}
    params = {v.dtype for v in cap.values if v.measured and "param" in v.measured}
    assert params == {"bfloat16"}
    inside = capture(lws, "mix:MixInit", {"dtype": "bfloat16"}, evidence="abstract")
    assert ops(inside) == ops(cap) and inside.meta["dtype"]["source"] == "MixtralConfig.dtype"
    assert torch.get_default_dtype() == torch.float32
    # the recipe's dtype wins over the config's
    half = capture(lws, "mix:Mix", {"config": config(dtype="bfloat16")}, evidence="abstract", dtype="float16")
    assert {v.dtype for v in half.values if v.measured and "param" in v.measured} == {"float16"}


def test_a_float32_model_captures_abstractly_as_eager(lws):
    """transformers' grouped_mm path on the CPU in float32: PyTorch's shape rule is CUDA's
    (bfloat16 only), the CPU kernel takes float32; abstract gives what eager gives."""
    eager = capture(lws, "mix:Mix", {"config": config()})
    fake = capture(lws, "mix:Mix", {"config": config()}, evidence="abstract")
    grouped = [n for n in fake.nodes if n.op == "aten::_grouped_mm"]
    assert grouped and all(fake.values[n.outputs[0]].dtype == "float32" for n in grouped)
    eager_shapes = [[eager.values[o].shape for o in n.outputs] for n in eager.nodes if n.op == "aten::_grouped_mm"]
    assert [[fake.values[o].shape for o in n.outputs] for n in grouped] == eager_shapes
