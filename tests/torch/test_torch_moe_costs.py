"""Mixture-of-experts costs: a Python loop over the experts the routing hit (DBRX's
pattern) captured abstractly with its data-dependent choice stated, counted as the
active top-k; and each MoE layer's expert convention (sparse top-k of N, or all N
computed densely) stated from the captured ops."""

from __future__ import annotations

import pytest

from capture.graph.model import UNCOUNTED
from torch_workspace import capture_in_process, profile, tensor, write

pytestmark = pytest.mark.torch

MODEL = '''
import torch
from torch import nn
import torch.nn.functional as F


class Router(nn.Module):
    def __init__(self, d, e, k):
        super().__init__()
        self.k = k
        self.layer = nn.Linear(d, e, bias=False)

    def forward(self, x):
        weights, index = torch.topk(F.softmax(self.layer(x), dim=-1), self.k, dim=-1)
        return weights, index


class HitLoopExperts(nn.Module):
    """DBRX's experts: a loop over the hit set, one-hot of N + 1 classes, stacked weights."""

    def __init__(self, d, h, e):
        super().__init__()
        self.e, self.h, self.d = e, h, d
        self.w1 = nn.Parameter(torch.randn(e * h, d) * 0.1)
        self.w2 = nn.Parameter(torch.randn(e * h, d) * 0.1)

    def forward(self, x, index, weights):
        out = torch.zeros_like(x)
        with torch.no_grad():
            mask = F.one_hot(index, num_classes=self.e + 1).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in hit:
            expert_idx = expert_idx[0]
            slot, token = torch.where(mask[expert_idx])
            w1 = self.w1.view(-1, self.h, self.d)[expert_idx]
            w2 = self.w2.view(-1, self.h, self.d)[expert_idx]
            y = F.silu(x[token] @ w1.T) @ w2
            out.index_add_(0, token, y * weights[token, slot, None])
        return out


class DenseExperts(nn.Module):
    """Llama-4's experts: every expert on every token (a bmm over all N), scores zero elsewhere."""

    def __init__(self, d, h, e):
        super().__init__()
        self.e = e
        self.gate_up = nn.Parameter(torch.randn(e, d, 2 * h) * 0.1)
        self.down = nn.Parameter(torch.randn(e, h, d) * 0.1)

    def forward(self, x, index, weights):
        scores = torch.zeros(x.shape[0], self.e).scatter_(1, index, weights)
        h = x.repeat(self.e, 1).view(self.e, -1, x.shape[-1]) * scores.t()[..., None]
        gate, up = torch.bmm(h, self.gate_up).chunk(2, dim=-1)
        return torch.bmm(F.silu(gate) * up, self.down).sum(0)


class GroupRouter(Router):
    """DeepSeek-V3's group-limited routing: a first topk picks 2 of 4 groups of experts, the
    last picks the experts within them."""

    def forward(self, x):
        scores = F.softmax(self.layer(x), dim=-1)
        groups = scores.view(x.shape[0], 4, -1).max(-1).values
        keep = torch.zeros_like(groups).scatter_(1, torch.topk(groups, 2, dim=-1).indices, 1.0)
        masked = scores * keep.repeat_interleave(scores.shape[-1] // 4, dim=-1)
        weights, index = torch.topk(masked, self.k, dim=-1)
        return weights, index


class MoE(nn.Module):
    def __init__(self, d=16, h=32, e=8, k=2, experts="loop", router=Router):
        super().__init__()
        self.router = router(d, e, k)
        self.experts = (HitLoopExperts if experts == "loop" else DenseExperts)(d, h, e)

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        weights, index = self.router(flat)
        return self.experts(flat, index, weights).reshape(x.shape)


class DenseMoE(MoE):
    def __init__(self):
        super().__init__(experts="dense")


class GroupedMoE(MoE):
    def __init__(self):
        super().__init__(router=GroupRouter)
'''


@pytest.fixture
def mws(ws):
    write(ws, {"moes.py": MODEL})
    return ws


def _expert_matmuls(cap) -> int:
    groups = {g.id for g in cap.groups if (g.attrs or {}).get("path") == "experts"}
    mm = {"aten::mm", "aten::addmm", "aten::bmm", "aten::matmul"}
    return sum(f for n, f in zip(cap.nodes, cap.cost.flops) if n.op in mm and n.group in groups)


def test_a_loop_over_the_hit_experts_is_captured_abstractly_with_its_choice_stated(mws):
    """Every expert hit (8: what the router's top-k chooses from, though the one-hot has 9
    classes), the 2·10 routed rows spread evenly: the experts' FLOPs are the active top-2,
    the same as an eager run's whatever the routing (each routed row costs the same)."""
    t, d, h, k = 10, 16, 32, 2
    fake = capture_in_process(mws, profile("moes:MoE", args=[tensor([1, t, d])], evidence="abstract"))[0]
    eager = capture_in_process(mws, profile("moes:MoE", args=[tensor([1, t, d])]))[0]
    (choice,) = fake.meta["assumptions"]
    assert choice["iterations"] == 8 and "every one hit, an upper bound" in choice["text"]
    assert "20 rows in all, spread evenly (2 or 3 each)" in choice["text"]
    assert choice["loop"]["line"] and "for expert_idx in hit" in \
        (mws / "moes.py").read_text().splitlines()[choice["loop"]["line"] - 1]
    assert UNCOUNTED not in fake.cost.flops, fake.cost.notes.get("uncounted")
    active = t * k * 2 * (d * h + h * d)
    assert _expert_matmuls(fake) == _expert_matmuls(eager) == active


def _summary(cap, tmp_path):
    import json

    from capture.graph import graphfile
    from tensorviz_lsp.cli import main

    path = tmp_path / "moe.tvg"
    graphfile.write(cap, path)
    return path, main, json


@pytest.mark.parametrize("model, convention, words", [
    pytest.param("moes:MoE", "sparse", "sparse: the active top-2 of 8 experts per token", id="loop-sparse"),
    pytest.param("moes:DenseMoE", "dense", "dense: all 8 experts computed on every token (top-2 chosen)", id="dense"),
    pytest.param("moes:GroupedMoE", "sparse", "sparse: the active top-2 of 8 experts per token", id="group-limited"),
])
@pytest.mark.parametrize("evidence", ["eager", "abstract"])
def test_each_moe_layer_states_how_its_experts_ran(mws, tmp_path, capsys, model, convention, words, evidence):
    cap = capture_in_process(mws, profile(model, args=[tensor([2, 5, 16])], evidence=evidence))[0]
    path, main, json = _summary(cap, tmp_path)
    assert main(["summary", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (layer,) = doc["moe"]
    assert (layer["convention"], layer["experts"], layer["top_k"], layer["tokens"]) == (convention, 8, 2, 10)
    assert words in layer["text"]
    row = next(r for r in doc["rows"] if r.get("path") == "experts")
    assert row["experts"]["convention"] == convention
    assert main(["summary", str(path)]) == 0
    text = capsys.readouterr().out
    assert f"Experts:          1 MoE layer, {words}" in text
    if evidence == "abstract" and model != "moes:DenseMoE":
        assert "Assumed:          the loop at moes.py" in text
    # the experts' card says it too
    from viewer.projection.projection import Projection

    proj = Projection(cap)
    g = next(g.id for g in cap.groups if (g.attrs or {}).get("path") == "experts")
    (item,) = [it for it in proj.children(cap.groups[g].parent)["items"] if it["key"] == f"g{g}"]
    assert words in item["role"] and item["experts"]["convention"] == convention


def test_a_kernels_func_wrapper_with_two_closure_cells_takes_the_function_name():
    """kernels 0.19's ``Func`` closes over the function and a second cell (its name, or its
    own class for super()): still a wrapper of that one function, not an anonymous "Func"."""
    from torch import nn

    from capture.torch.trace import function_wrapped_by

    def rotate(x):
        return x

    def make(func, name):
        class Func(nn.Module):
            def forward(self, *args, **kwargs):
                assert name
                return func(*args, **kwargs)
        return Func

    def make_super(func):
        class Func(nn.Module):
            def forward(self, *args, **kwargs):
                super().forward  # noqa: B018  (a __class__ cell)
                return func(*args, **kwargs)
        return Func

    def make_two(f, g):
        class Func(nn.Module):
            def forward(self, x):
                return f(g(x))
        return Func

    assert function_wrapped_by(make(rotate, "rotate")) is rotate
    assert function_wrapped_by(make_super(rotate)) is rotate
    assert function_wrapped_by(make_two(rotate, rotate)) is None  # two functions: not a plain wrapper


@pytest.mark.parametrize("text, want", [
    ("u3", 5), ("2*u3 + 1", 11), ("u3*u4", 35), ("u3 - 1", 4), ("u3//2", 2), ("u9", "u9"),
    ("u3**2", "u3**2"), ("__import__('os')", "__import__('os')"), ("u3" + " + u3" * 100, "u3" + " + u3" * 100),
])
def test_a_fixed_symbol_reads_as_its_value(text, want):
    """Only +, -, *, // over known symbols and integers; anything else (or too long) is left as text."""
    from capture.graph.symbols import evaluate, fixed_symbols

    known = fixed_symbols({"symbols": [{"name": "u3", "min": 5, "max": 5}, {"name": "u4", "min": 7, "max": 7},
                                       {"name": "u9", "min": 0, "max": 9}]})
    assert known == {"u3": 5, "u4": 7}
    assert evaluate(text, known) == want
    assert fixed_symbols("not a map") == {} and fixed_symbols({"symbols": "no"}) == {}
