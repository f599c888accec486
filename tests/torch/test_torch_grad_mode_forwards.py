"""Forwards that switch autograd modes themselves (issue 49): ``@torch.inference_mode()``
on ``forward`` (Meta's llama3 does), the same as a ``with`` block, ``@torch.no_grad()``
and ``@torch.enable_grad()``, each captured eagerly and abstractly, on models of our own.

Inference mode stops version counters ("Inference tensors do not track version counter"),
which the trace reads to tell in-place writes; the capture runs it as grad-off instead,
with the same values, and says so in ``meta``."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from capture.graph.model import Capture  # noqa: E402

from torch_workspace import capture_in_process, profile, tensor, write  # noqa: E402

pytestmark = pytest.mark.torch

MODEL = '''
import torch
from torch import nn

GRAD_SEEN = []


class Cached(nn.Module):
    """A buffer written in place, then read: the write must be recorded."""

    def __init__(self, dim=8):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("cache", torch.zeros(2, dim))

    def body(self, x):
        GRAD_SEEN.append(torch.is_grad_enabled())
        self.cache[:, :] = x
        return self.proj(self.cache).relu() + 1


class InferenceDecorated(Cached):
    @torch.inference_mode()
    def forward(self, x):
        return self.body(x)


class InferenceBare(Cached):
    @torch.inference_mode
    def forward(self, x):
        return self.body(x)


class InferenceBlock(Cached):
    def forward(self, x):
        with torch.inference_mode():
            out = self.body(x)
            with torch.inference_mode(False):
                GRAD_SEEN.append(torch.is_grad_enabled())
        return out


class NoGradDecorated(Cached):
    @torch.no_grad()
    def forward(self, x):
        return self.body(x)


class EnableGradDecorated(Cached):
    @torch.enable_grad()
    def forward(self, x):
        return self.body(x)
'''

# model -> (grad modes seen inside, in order; whether meta says inference mode was entered)
CASES = {
    "InferenceDecorated": ([False], True),
    "InferenceBare": ([False], True),
    "InferenceBlock": ([False, True], True),
    "NoGradDecorated": ([False], False),
    "EnableGradDecorated": ([True], False),
}


@pytest.fixture
def gws(ws):
    write(ws, {"gradmodes.py": MODEL})
    return ws


def _ops(cap: Capture) -> list[str]:
    return [n.op for n in cap.nodes]


@pytest.mark.parametrize("evidence", ["eager", "abstract"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_forward_that_sets_its_grad_mode_is_captured(gws, name, evidence):
    import sys

    before = (torch.autograd.grad_mode.inference_mode.__enter__, torch.autograd.grad_mode.inference_mode.__exit__)
    cap = capture_in_process(gws, profile(f"gradmodes:{name}", args=[tensor([2, 8])], evidence=evidence))[0]
    assert cap.failure is None
    ops = _ops(cap)
    assert "aten::copy_" in ops and "aten::addmm" in ops and "aten::relu" in ops, ops
    # The in-place write to the buffer is a write (a new version of ``cache``), as without the mode.
    assert cap.coverage.effects == "writes_state"
    seen, inference = CASES[name]
    assert sys.modules["gradmodes"].GRAD_SEEN[-len(seen):] == seen
    assert ("inference_mode" in cap.meta) == inference
    if inference:
        assert "ran as torch.no_grad" in cap.meta["inference_mode"]
    # Nothing of the substitution outlives the capture.
    assert (torch.autograd.grad_mode.inference_mode.__enter__,
            torch.autograd.grad_mode.inference_mode.__exit__) == before
    with torch.inference_mode():
        assert torch.ones(1).is_inference()


def test_the_values_are_computed(gws):
    """Eagerly, the output is measured as computed: relu(...) + 1, so at least 1 and not constant."""
    cap = capture_in_process(gws, profile("gradmodes:InferenceDecorated", args=[tensor([2, 8])], seed=3))[0]
    out = next(v for v in cap.values if v.id == cap.outputs["value"])
    stats = out.measured["stats"]
    assert stats["min"] >= 1.0 and stats["max"] > stats["min"] and stats["nan"] == 0
