"""Smaller items of issue 36 item 7 on real Torch captures, with models of our own:

- "effects none" for a forward that writes its KV cache: a forward that writes the
  model's parameters or buffers says so (``coverage.effects == "writes_state"`` and
  ``meta["state_writes"]`` naming them; gpt-fast's ``KVCache.update`` pattern vendored
  in a few lines);
- ``⚠ Inf`` on an intended ``masked_fill(mask, -inf)``: an infinity the code writes on
  purpose (an op given a literal ``±inf``) is no warning, one an op makes is.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tensorviz_lsp.features.line_values import nonfinite  # noqa: E402

from torch_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write  # noqa: E402


@pytest.fixture(autouse=True)
def _own_modules(tmp_path):
    """Another test file's workspace has a cached.py too: each test imports its own."""
    yield
    forget_workspace_modules(tmp_path)

pytestmark = [pytest.mark.torch, pytest.mark.slow]

MODELS = '''
import torch
from torch import nn


class KVCache(nn.Module):
    """gpt-fast's pattern: cache buffers written in place by the forward."""

    def __init__(self, length=8, dim=4):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(1, length, dim))

    def update(self, input_pos, k):
        self.k_cache[:, input_pos] = k
        return self.k_cache


class Cached(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.kv_cache = KVCache()

    def forward(self, x, input_pos):
        return self.kv_cache.update(input_pos, self.proj(x)).sum(1)


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x)


class Masked(nn.Module):
    def forward(self, x):
        mask = torch.ones(x.shape[-1], x.shape[-1], dtype=torch.bool).triu(1)
        scores = (x.unsqueeze(-1) * x.unsqueeze(-2)).masked_fill(mask, float("-inf"))
        overflow = (x * 0).log()  # an infinity the code did not write: log(0)
        return scores.softmax(-1), overflow
'''


def _arange(n: int) -> dict:
    return {"kind": "tensor", "shape": [n], "dtype": "int64", "generator": {"kind": "arange"}}


def test_a_forward_that_writes_its_kv_cache_has_effects(tmp_path):
    write(tmp_path, {"cached.py": MODELS})
    cap, _ = capture_in_process(tmp_path, profile("cached:Cached", kwargs={"x": tensor([1, 3, 4]),
                                                                          "input_pos": _arange(3)}))
    assert cap.failure is None, cap.failure
    assert cap.coverage.effects == "writes_state"
    assert cap.meta["state_writes"] == ["kv_cache.k_cache"]


def test_a_forward_that_writes_nothing_has_none(tmp_path):
    write(tmp_path, {"cached.py": MODELS})
    cap, _ = capture_in_process(tmp_path, profile("cached:Plain", args=[tensor([2, 4])]))
    assert cap.failure is None, cap.failure
    assert cap.coverage.effects == "none" and "state_writes" not in cap.meta


def test_an_intended_minus_inf_is_no_warning_and_a_made_one_is(tmp_path):
    write(tmp_path, {"cached.py": MODELS})
    cap, _ = capture_in_process(tmp_path, profile("cached:Masked", args=[tensor([2, 4])]))
    assert cap.failure is None, cap.failure
    made = {cap.nodes[i].op: list(cap.nodes[i].outputs) for i in range(len(cap.nodes))}
    masked = next(v for op, v in made.items() if "masked_fill" in op)
    logged = next(v for op, v in made.items() if op.endswith("log") or "log." in op or op == "aten::log")
    assert nonfinite(cap, masked) is None, "masked_fill(mask, -inf) writes -inf on purpose"
    assert nonfinite(cap, logged) == "Inf", "log(0) is an infinity the code did not write"
