"""What each ATen op costs (capture/torch/cost.py): PyTorch's own formulas from what the
capture recorded, in eager and abstract captures alike; an op no rule counts is listed,
never a zero."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from capture.graph.model import UNCOUNTED
from torch_workspace import capture_in_process, profile, tensor, write

pytestmark = pytest.mark.torch


def _by_op(cap) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, n in enumerate(cap.nodes):
        out.setdefault(n.op, []).append(i)
    return out


def _rule(cap, i: int) -> str:
    return cap.cost.rules[cap.cost.rule[i]]


def test_matmuls_count_what_flop_counter_mode_counts_and_every_op_has_a_figure(ws):
    cap, _ = capture_in_process(ws, profile("models:Block", args=[tensor([2, 5, 16])]))
    c = cap.cost
    assert c is not None and len(c.flops) == len(cap.nodes)
    assert UNCOUNTED not in c.flops, c.notes.get("uncounted")
    registry = sum(f for i, f in enumerate(c.flops) if _rule(cap, i) == "flop_counter")
    import sys

    block = sys.modules["models"].Block()
    with FlopCounterMode(display=False) as counter:
        block(torch.randn(2, 5, 16))
    assert registry == counter.get_total_flops() > 0
    # a multiply-add counts 2: the first projection (qkv: 10 rows, 16 -> 48) is 2·10·16·48
    addmm = _by_op(cap)["aten::addmm"][0]
    assert c.flops[addmm] == 2 * 10 * 16 * 48
    assert "multiply-add counts 2" in c.notes["flops"]


@pytest.mark.parametrize("op, rule", [
    pytest.param("aten::view", "view", id="view"),
    pytest.param("aten::t", "view", id="transpose-view"),
    pytest.param("aten::add.Tensor", "pointwise", id="pointwise"),
    pytest.param("aten::native_layer_norm", "decomposed", id="decomposed"),
    pytest.param("aten::_softmax", "decomposed", id="softmax"),
])
def test_rules_by_op(ws, op, rule):
    cap, _ = capture_in_process(ws, profile("models:Block", args=[tensor([2, 5, 16])]))
    nodes = _by_op(cap)[op]
    for i in nodes:
        assert _rule(cap, i) == rule
        if rule == "view":
            assert (cap.cost.flops[i], cap.cost.bytes_read[i], cap.cost.bytes_written[i]) == (0, 0, 0)
        else:
            assert cap.cost.flops[i] > 0 and cap.cost.bytes_written[i] > 0


def test_softmax_is_counted_by_its_decomposition(ws):
    """_softmax has no formula of its own: torch._decomp's decomposition (amax, sub, exp,
    sum, div) counted on meta tensors: two reductions and three pointwise ops over the scores."""
    cap, _ = capture_in_process(ws, profile("models:Block", args=[tensor([2, 5, 16])]))
    i = _by_op(cap)["aten::_softmax"][0]
    n = 2 * 2 * 5 * 5  # batch, heads, rows, columns of the scores
    rows = n // 5
    assert cap.cost.flops[i] == 3 * n + 2 * (n - rows)


def test_an_op_without_a_rule_is_listed_not_counted_as_zero(ws):
    write(ws, {"mystery.py": '''
        import torch
        from torch import nn

        @torch.library.custom_op("tvcost::mystery", mutates_args=())
        def mystery(x: torch.Tensor) -> torch.Tensor:
            return x.clone()

        @mystery.register_fake
        def _(x):
            return torch.empty_like(x)

        class Mystery(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return mystery(self.fc(x))
    '''})
    for evidence in ("eager", "abstract"):
        cap, _ = capture_in_process(ws, profile("mystery:Mystery", args=[tensor([2, 4])], evidence=evidence))
        i = _by_op(cap)["tvcost::mystery"][0]
        assert cap.cost.flops[i] == UNCOUNTED
        assert cap.cost.bytes_written[i] == 2 * 4 * 4  # bytes are still known from the shapes
        assert "tvcost::mystery" in cap.cost.notes["uncounted"]
        assert cap.cost.flops[_by_op(cap)["aten::addmm"][0]] == 2 * 2 * 4 * 4


def test_experts_in_one_grouped_matmul_are_counted_per_group(ws):
    """aten._grouped_mm (transformers' experts in one call) has no flop_counter formula:
    the mm formula summed over the groups, eager and abstract alike."""
    write(ws, {"grouped.py": '''
        import torch
        from torch import nn

        class Experts(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(4, 16, 8))

            def forward(self, x, a):
                offs = torch.tensor([3, 6, 9, 12], dtype=torch.int32)  # rows per expert, cumulated
                return torch._grouped_mm(x, self.w, offs=offs), torch._grouped_mm(a, self.w)
    '''})
    for evidence in ("eager", "abstract"):
        cap, _ = capture_in_process(ws, profile("grouped:Experts", args=[tensor([12, 16]), tensor([4, 3, 16])],
                                                evidence=evidence))
        rows, batched = _by_op(cap)["aten::_grouped_mm"]
        assert cap.cost.flops[rows] == 2 * 12 * 16 * 8  # every row through its expert's 16 x 8 matrix
        assert cap.cost.flops[batched] == 2 * 4 * 3 * 16 * 8
        assert _rule(cap, rows) == "grouped matmul" and "aten::_grouped_mm" not in cap.cost.notes.get("uncounted", {})
        # bytes: 12 rows can reach all 4 experts' 16 x 8 matrices; the batched call reads them all too
        assert cap.cost.bytes_read[rows] == 4 * (12 * 16 + 4 * 16 * 8) + 4 * 4


def test_a_grouped_matmul_reads_only_the_experts_its_rows_can_reach(ws):
    """One token routed top-2 through 8 experts: at most 2 experts' weights are read."""
    write(ws, {"onetoken.py": '''
        import torch
        from torch import nn

        class Experts(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(8, 16, 8))

            def forward(self, x):
                offs = torch.tensor([0, 1, 2, 2, 2, 2, 2, 2], dtype=torch.int32)
                return torch._grouped_mm(x, self.w, offs=offs)
    '''})
    cap, _ = capture_in_process(ws, profile("onetoken:Experts", args=[tensor([2, 16])], evidence="abstract"))
    (i,) = _by_op(cap)["aten::_grouped_mm"]
    assert cap.cost.bytes_read[i] == 4 * (2 * 16 + 2 * 16 * 8) + 8 * 4


def test_abstract_and_eager_captures_count_the_same(ws):
    eager, _ = capture_in_process(ws, profile("models:SmallCNN", args=[tensor([2, 3, 16, 16])]))
    abstract, _ = capture_in_process(ws, profile("models:SmallCNN", args=[tensor([2, 3, 16, 16])],
                                                 evidence="abstract"))
    assert [n.op for n in eager.nodes] == [n.op for n in abstract.nodes]
    assert eager.cost.flops == abstract.cost.flops
    assert eager.cost.bytes_read == abstract.cost.bytes_read
    assert eager.cost.bytes_written == abstract.cost.bytes_written
    conv = _by_op(eager)["aten::convolution"][0]
    assert eager.cost.flops[conv] == 2 * 2 * 8 * 16 * 16 * 3 * 3 * 3  # output elements × (3·3·3 MACs)
    assert UNCOUNTED not in eager.cost.flops, eager.cost.notes.get("uncounted")


def test_a_training_step_counts_its_backward_and_optimizer(ws):
    cap, _ = capture_in_process(ws, profile("models:MLP", args=[tensor([4, 4])], kind="training_step",
                                            grad_enabled=True, mode="train",
                                            step={"loss": "sum", "optimizer": {"factory": "models:make_sgd"}}))
    assert UNCOUNTED not in cap.cost.flops, cap.cost.notes.get("uncounted")
    backward = {g.id for g in cap.groups if g.kind == "backward"}
    back_flops = sum(f for n, f in zip(cap.nodes, cap.cost.flops) if n.group in backward)
    assert back_flops > 0


def test_flop_counter_mode_s_total_is_matched_by_its_kinds(ws):
    """FlopCounterMode counts matmuls, convolutions and attention: those kinds of the split add
    up to its total exactly; the rest (pointwise, norms, softmax) is named by kind."""
    import sys

    from viewer.projection.projection import Projection

    for model, shape in (("models:Block", [2, 5, 16]), ("models:SmallCNN", [2, 3, 16, 16])):
        cap, _ = capture_in_process(ws, profile(model, args=[tensor(shape)]))
        kinds = Projection(cap).costs().totals()["flops_by_kind"]
        module = getattr(sys.modules["models"], model.split(":")[1])()
        with FlopCounterMode(display=False) as counter:
            module(torch.randn(*shape))
        assert kinds.get("matmul", 0) + kinds.get("convolution", 0) + kinds.get("attention", 0) \
            == counter.get_total_flops() > 0
        assert kinds.get("pointwise", 0) > 0 and kinds.get("reduction/norm", 0) > 0, kinds
        assert cap.cost.notes["kinds"]["aten::addmm"] == "matmul"


_NO_DYNAMO = r'''
import sys, torch
from capture.torch import cost
from capture.torch.trace import TorchTrace
from capture.worker.workspace_files import WorkspaceFiles

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.Softmax(-1)).eval()
trace = TorchTrace(WorkspaceFiles(sys.argv[1]), stats=False)
trace.label_module(model)
with torch.no_grad(), trace.recording():
    model(torch.randn(2, 8))
trace.finish()
capture = trace.build(scope="eager_forward", inputs=None, outputs=None)
assert "torch._dynamo" not in sys.modules
first = cost.count(capture)
print("after the cost pass:", "torch._dynamo" in sys.modules, "_dynamo" in torch.__dict__)
import torch._dynamo  # the real one: the references' wrappers work as before
second = cost.count(capture)
print("same flops:", first.flops == second.flops, "decomposed:", [capture.nodes[i].op for i, r in
      enumerate(first.rule) if first.rules[r] == "decomposed"])
a = torch.randn(3)
print("a reference after:", bool(torch.equal(torch._refs.div(a, 2.0), a / 2.0)))
'''


@pytest.mark.slow
def test_counting_a_decomposition_does_not_import_dynamo(tmp_path):
    """A plain Torch model's first capture: counting ``layer_norm`` and ``softmax`` by
    their decompositions runs ``torch._refs``, whose wrappers would import
    ``torch._dynamo`` (1.5-2 s) on their first call. Nothing is imported, the figures are
    those counted with Dynamo loaded, and the references work as before afterwards."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", _NO_DYNAMO, str(tmp_path)], capture_output=True, text=True,
                          timeout=300, cwd=str(root), env={**os.environ, "PYTHONPATH": str(root),
                                                          "TENSORVIZ_TORCH_RECORDER": "python"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "after the cost pass: False False"
    assert lines[1] == "same flops: True decomposed: ['aten::native_layer_norm', 'aten::_softmax']"
    assert lines[2] == "a reference after: True"
