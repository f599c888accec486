"""The op-list rule of ``benchmarks/bench_torch_record_floor.py``: the events of torch's
``RecordFunction`` (here through ``ExecutionTraceObserver``, which needs no compiler),
kept where every op above is ``CompositeImplicitAutograd`` and the op is not, are the ops
a ``TorchDispatchMode`` sees, with the same producers for every input. One known
difference is asserted as such: ``reshape`` of a viewable tensor calls ``_reshape_alias``,
but ``view`` when a Python mode is active (it counts as a tensor subclass)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
floor = pytest.importorskip("bench_torch_record_floor")


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(8)
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return x + torch.nn.functional.gelu(self.fc(self.norm(x)))


class Reshaping(torch.nn.Module):
    def forward(self, x):
        return torch.cat([x.reshape(2, 8), x.reshape(2, 8)], dim=0).softmax(-1)


CASES = [
    ("linear, layer norm, GELU, residual add", Block(), {}),
    ("reshape and cat", Reshaping(), {"aten::_reshape_alias.default": "aten::view.default"}),
]


@pytest.mark.parametrize("label,model,renamed", CASES, ids=[c[0] for c in CASES])
def test_filtered_events_are_the_dispatch_mode_ops(label, model, renamed):
    x = torch.randn(1, 2, 8)
    with torch.no_grad():
        model(x)
        ref = floor.dispatch_record(model, x)
        ops, n_events = floor.et_ops(floor.execution_trace(model, x, True))
    ref_ops = list(zip(ref.names, ref.ins, ref.outs))
    names = [renamed.get(name, name) for name, _, _ in ops]
    assert n_events > len(ops), "the trace has nested events the rule drops"
    assert names == ref.names
    assert floor.edges(ops) == floor.edges(ref_ops)
