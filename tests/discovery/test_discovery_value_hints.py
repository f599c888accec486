"""What discovery reads about the values a model needs beyond annotations
(discovery.value_hints, issue 36 item 3): on the patterns of the five real repositories
(tests/real_patterns.py) and small snippets."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from discovery_helpers import discover_snippet

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from real_patterns import FASTISH, GEMMAISH, MINIISH, VITISH  # noqa: E402


def candidate(source: str, qualname: str):
    (c,) = [c for c in discover_snippet(source).candidates if c.qualname == qualname]
    return c.to_json()


def hints(items, name):
    return next(i for i in items if i["name"] == name)["hints"]


def test_a_method_the_forward_needs_called_first():
    c = candidate(FASTISH, "Transformer")
    assert c["preparations"] == [{"method": "setup_caches", "parameters": ["max_batch_size", "max_seq_length"],
                                  "attribute": "freqs_cis", "message": "Caches must be initialized first"}]
    assert hints(c["call_inputs"], "input_pos") == {
        "needed": "forward indexes with input_pos and never checks it for None"}


def test_a_config_built_by_the_models_builder():
    c = candidate(MINIISH, "GPT")
    h = hints(c["setup_fields"], "config")
    assert h["builder"] == "GPT.get_default_config"
    assert h["must_set"] == ["vocab_size", "block_size"]
    assert h["preset"] == ["model_type", "gpt-nano"]


def test_shape_comments_and_enum_fields():
    c = candidate(GEMMAISH, "Transformer")
    assert hints(c["call_inputs"], "last_tokens") == {"shape": ["B", "L"]}
    assert hints(c["call_inputs"], "attention_mask") == {"shape": ["B", "L", "L'"]}
    assert hints(c["call_inputs"], "cache") is None  # "(sequence length L')" is no shape
    fields = c["setup_fields"][0]["config_class"]["fields"]
    assert hints(fields, "attention_types") == {
        "enum": {"name": "AttentionType", "members": ["GLOBAL", "LOCAL_SLIDING"], "many": True}}


def test_attributes_read_and_flags():
    c = candidate(VITISH, "VisionTransformer")
    assert hints(c["setup_fields"], "patches") == {"reads": ["size"]}
    assert hints(c["call_inputs"], "train") == {"flag": True}


@pytest.mark.parametrize(("source", "name", "wanted"), [
    pytest.param("""
        from torch import nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(4, 8)
            def forward(self, x):
                return self.fc1(x)
        """, "x", {"rank": 2, "last_dim": "4", "first_layer": "self.fc1 = Linear(...)"}, id="linear"),
    pytest.param("""
        from torch import nn
        class Net(nn.Module):
            def __init__(self, width=3):
                super().__init__()
                self.conv = nn.Conv2d(width, 8, 3)
            def forward(self, x):
                return self.conv(x)
        """, "x", {"rank": 4, "last_dim": "width", "first_layer": "self.conv = Conv2d(...)"}, id="conv-from-field"),
    pytest.param("""
        import jax, jax.numpy as jnp
        @jax.jit
        def net(x):
            return jax.nn.relu(x @ jnp.ones((3, 4)))
        """, "x", {"rank": 2, "last_dim": "3", "first_layer": "x @ an array of 3 rows"}, id="matmul-literal"),
    pytest.param("""
        from torch import nn
        class Net(nn.Module):
            def forward(self, x, mask=None):
                if mask is not None:
                    x = x[mask]
                return x
        """, "mask", None, id="checked-optional-is-not-needed"),
])
def test_input_hints(source, name, wanted):
    (c,) = [c.to_json() for c in discover_snippet(source).candidates]
    assert hints(c["call_inputs"], name) == wanted
