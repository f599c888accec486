"""Issue 48's figures, side by side with the reference tools:

    python benchmarks/bench_memory_fit.py [--only torch,gpt2,jax,convs]

* ``torch``: a training step (forward, sum loss, backward, Adam) of a 2-layer MLP
  (256 → 1024 → 256, batch 8) on the CPU: TensorViz's memory plan (parameters, gradients,
  optimizer state, peak with what outlives the step kept) beside torch's own memory tracker
  (``torch.distributed._tools.mem_tracker.MemTracker``) on the same step;
* ``gpt2``: the same for a GPT-2 (``transformers``, 4 layers, width 256, 64 tokens) with AdamW;
* ``jax``: an Adam training step of a 512-1024-1024-512 MLP (batch 16) in JAX: the plan
  beside ``jax.jit(step).lower(...).compile().memory_analysis()`` (arguments + outputs +
  temporaries − aliased);
* ``convs``: an EfficientNet-B0-shaped training step (batch 2, 96²) counted by
  ``FlopCounterMode`` as it is, by TensorViz, and analytically (convolutions and the
  classifier: 2·(3·MACs − the stem's MACs)).

Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "torch")]

MLP = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(256, 1024)
        self.b = nn.Linear(1024, 256)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def adam(params):
    return torch.optim.Adam(params, lr=1e-3)


def adamw(params):
    return torch.optim.AdamW(params, lr=1e-3)


def gpt2_config():
    from transformers import GPT2Config

    return GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=1024, n_positions=128)


try:
    from transformers import GPT2LMHeadModel

    class Gpt2(GPT2LMHeadModel):
        def __init__(self):
            super().__init__(gpt2_config())
except ImportError:
    pass


def logits_sum(output, inputs):
    return output.logits.sum()
'''


def mib(b: float) -> str:
    return f"{b / 2**20:9.3f} MiB"


def plan_of(cap) -> dict:
    from capture.analysis.analysis import Analysis
    from capture.analysis.fit import input_bytes, memory_plan

    analysis = Analysis(cap)
    return memory_plan(analysis.costs().totals(), input_bytes(analysis))


def show_plan(plan: dict) -> None:
    for k in ("parameters", "inputs", "gradients", "optimizer_state", "saved_for_backward", "peak"):
        print(f"    {k:20} {mib(plan[k])}")


def tracked(step) -> dict:
    import torch
    from torch.distributed._tools.mem_tracker import MemTracker

    tracker, things = MemTracker(), step(None)
    tracker.track_external(*things)
    with tracker:
        step(things)
    return {str(k.value if hasattr(k, "value") else k): v
            for k, v in tracker.get_tracker_snapshot("peak")[torch.device("cpu")].items()}


def bench_torch(root: Path) -> None:
    from torch_workspace import capture_in_process, profile, tensor

    print("\ntorch: MLP 256-1024-256, batch 8, sum loss, Adam, CPU")
    cap = capture_in_process(root, profile("fitm:Net", args=[tensor([8, 256])], kind="training_step",
                                           grad_enabled=True, mode="train",
                                           step={"loss": "sum", "optimizer": {"factory": "fitm:adam"}}))[0]
    plan = plan_of(cap)
    show_plan(plan)
    import torch

    mod = sys.modules["fitm"]

    def step(things):
        if things is None:
            net = mod.Net()
            return net, mod.adam(net.parameters()), torch.randn(8, 256)
        net, opt, x = things
        net(x).sum().backward()
        opt.step()

    got = tracked(step)
    print(f"  MemTracker peak: {mib(got['Total'])}  ({', '.join(f'{k} {v / 2**20:.3f}' for k, v in got.items() if k != 'Total')} MiB)")
    print(f"  TensorViz / MemTracker: {plan['peak'] / got['Total']:.4f}")


def bench_gpt2(root: Path) -> None:
    from torch_workspace import capture_in_process, profile

    print("\ngpt2: GPT-2 (4 layers, width 256, vocab 1024), 64 tokens, logits.sum() loss, AdamW, CPU")
    ids = {"kind": "tensor", "dtype": "int64", "shape": [1, 64], "generator": {"kind": "zeros"}}
    cap = capture_in_process(root, profile("fitm:Gpt2", args=[ids], kind="training_step", grad_enabled=True,
                                           mode="train", step={"loss": {"factory": "fitm:logits_sum"},
                                                               "optimizer": {"factory": "fitm:adamw"}}))[0]
    plan = plan_of(cap)
    show_plan(plan)
    import torch

    mod = sys.modules["fitm"]

    def step(things):
        if things is None:
            net = mod.Gpt2()
            net.train()
            return net, mod.adamw(net.parameters()), torch.zeros(1, 64, dtype=torch.int64)
        net, opt, x = things
        net(x).logits.sum().backward()
        opt.step()

    got = tracked(step)
    print(f"  MemTracker peak: {mib(got['Total'])}")
    print(f"  TensorViz / MemTracker: {plan['peak'] / got['Total']:.4f}")


def bench_jax() -> None:
    import jax
    import jax.numpy as jnp

    from capture.jax.convert import convert

    print("\njax: Adam step of an MLP 512-1024-1024-512, batch 16, float32, CPU")

    def loss(ps, x, y):
        h = x
        for i, p in enumerate(ps):
            h = h @ p["w"] + p["b"]
            h = jax.nn.relu(h) if i < len(ps) - 1 else h
        return jnp.mean((h - y) ** 2)

    def step(ps, m, v, t, x, y):
        g = jax.grad(loss)(ps, x, y)
        t = t + 1
        m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        ps = jax.tree.map(lambda p, m, v: p - 1e-3 * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8),
                          ps, m, v)
        return ps, m, v, t

    sizes = [512, 1024, 1024, 512]
    ps = [{"w": jnp.ones((a, b)) * 0.01, "b": jnp.zeros(b)} for a, b in zip(sizes[:-1], sizes[1:])]
    args = (ps, jax.tree.map(jnp.zeros_like, ps), jax.tree.map(jnp.zeros_like, ps), jnp.zeros((), jnp.int32),
            jnp.ones((16, 512)), jnp.ones((16, 512)))
    ma = jax.jit(step).lower(*args).compile().memory_analysis()
    xla = ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes - ma.alias_size_in_bytes
    plan = plan_of(convert(jax.make_jaxpr(step)(*args)))
    show_plan(plan)
    print(f"  memory_analysis: arguments {mib(ma.argument_size_in_bytes)}, outputs {mib(ma.output_size_in_bytes)}, "
          f"temporaries {mib(ma.temp_size_in_bytes)}, aliased {mib(ma.alias_size_in_bytes)}: {mib(xla)}")
    print(f"  TensorViz / memory_analysis: {plan['peak'] / xla:.4f}")


def bench_convs(root: Path) -> None:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from test_torch_conv_rules import EFFNET, b0_forward_macs
    from torch_workspace import capture_in_process, profile, tensor, write

    print("\nconvs: EfficientNet-B0-shaped training step (sum loss), batch 2, 96x96")
    write(root, {"effnet.py": EFFNET})
    cap = capture_in_process(root, profile("effnet:EfficientNetB0Like", args=[tensor([2, 3, 96, 96])],
                                           kind="training_step", grad_enabled=True, mode="train",
                                           step={"loss": "sum"}))[0]
    dense = {"aten::convolution", "aten::convolution_backward", "aten::addmm", "aten::mm"}
    ours = sum(f for n, f in zip(cap.nodes, cap.cost.flops) if n.op in dense)
    net = sys.modules["effnet"].EfficientNetB0Like()
    with FlopCounterMode(display=False) as counter:
        net(torch.randn(2, 3, 96, 96)).sum().backward()
    macs, stem = b0_forward_macs(2, 96)
    want = 2 * (3 * macs - stem)
    print(f"  analytic (convolutions + classifier): {want / 1e9:8.3f} GFLOPs")
    print(f"  TensorViz:                            {ours / 1e9:8.3f} GFLOPs ({100 * (ours / want - 1):+.2f} %)")
    theirs = counter.get_total_flops()
    print(f"  FlopCounterMode:                      {theirs / 1e9:8.3f} GFLOPs ({theirs / want:.1f}x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="torch,gpt2,jax,convs")
    args = ap.parse_args()
    wanted = set(args.only.split(","))
    from torch_workspace import make_workspace, write

    root = make_workspace(Path(tempfile.mkdtemp(prefix="tv-fit-")))
    write(root, {"fitm.py": MLP})
    if "torch" in wanted:
        bench_torch(root)
    if "gpt2" in wanted:
        bench_gpt2(root)
    if "jax" in wanted:
        bench_jax()
    if "convs" in wanted:
        bench_convs(root)


if __name__ == "__main__":
    main()
