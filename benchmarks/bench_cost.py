"""What each layer costs, checked on real models against independent counts, side by side.

    python benchmarks/bench_cost.py [--only gpt2,llama,vit,flax,saved,70b] [--seq 1024] [--repeat 3]

For each model, the capture's own totals (``Capture.cost``, summed over the executed
program: what ``tensorviz summary`` prints) beside independent counts:

* ``gpt2``: ``transformers``' GPT-2 124M (``GPT2Config()``), batch 1, ``--seq`` tokens,
  captured abstractly (and eagerly at 128 tokens, whose cost columns must equal the
  abstract capture's at the same length), against ``torch.utils.flop_counter.FlopCounterMode``
  (as it is: it counts the CPU attention kernel as 0; and with that kernel mapped to its
  own ``sdpa_flop_count``), and against the analytic count 2·N·tokens (N: the weights of
  every matmul, the LM head included) plus attention 4·layers·tokens²·width;
* ``llama``: ``transformers``' ``LlamaForCausalLM`` from Llama-3.2-1B's published config,
  the same two comparisons (attention with grouped-query heads: 4·layers·tokens²·width);
* ``vit``: a ViT-B/16 written as vit-pytorch writes it (``tests/viewer/real_models/vit_torch.py``
  at 224×224, patch 16, width 768, 12 layers, 12 heads, MLP 3072) against FlopCounterMode and
  the analytic count;
* ``flax``: Flax Linen models captured with ``jax.make_jaxpr`` (the ViT of
  ``tests/viewer/real_models/vit_linen.py`` at B/16 size, and the ResNet-18 of
  ``resnet18_linen.py`` in the style of Flax's ImageNet example at 224×224, 64 filters)
  against XLA's ``compiled.cost_analysis()`` on this CPU, op by op: the capture's FLOPs
  per primitive beside what XLA's count leaves out (it counts transcendental functions
  apart, under ``transcendentals``);
* ``saved``: a GPT-2 124M training step captured eagerly (128 tokens): what the capture
  counts as saved for backward beside what PyTorch's autograd packs (``saved_tensors_hooks``:
  the tensors that are neither parameters nor inputs, distinct storages);
* ``70b``: an abstract capture of Llama-3-70B (``transformers``, bfloat16, 80 layers) and
  the time ``tensorviz summary FILE`` takes on it, the whole command in a fresh process
  (median of ``--repeat``), beside the time of the summary's own work in this process.

Every count here uses a multiply-add = 2 FLOPs. Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REAL = ROOT / "tests" / "viewer" / "real_models"

from capture.graph import graphfile  # noqa: E402
from capture.recipe import parse_profile  # noqa: E402
from capture.worker.context import CaptureContext  # noqa: E402
from capture.worker.limits import Limits  # noqa: E402

FACTORIES = '''
import jax
import jax.numpy as jnp
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

LLAMA_1B = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072, rms_norm_eps=1e-5,
                rope_theta=500000.0, tie_word_embeddings=True, head_dim=64)
LLAMA3_70B = dict(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64,
                  num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192, rms_norm_eps=1e-5,
                  rope_theta=500000.0)
VIT_B16 = dict(image=224, patch=16, classes=1000, dim=768, depth=12, heads=12, hidden=3072)


def gpt2_124m():
    return GPT2LMHeadModel(GPT2Config()).eval()


def llama_1b():
    return LlamaForCausalLM(LlamaConfig(**LLAMA_1B)).eval()


def llama3_70b():
    return LlamaForCausalLM(LlamaConfig(**LLAMA3_70B)).to(torch.bfloat16).eval()


def vit_b16():
    import vit_torch

    return vit_torch.ViT(**VIT_B16).eval()


def vit_b16_linen():
    import vit_linen

    model = vit_linen.VisionTransformer(num_classes=1000, patch=16, hidden=768, num_layers=12, mlp_dim=3072,
                                        num_heads=12)
    return model.bind(model.init(jax.random.key(0), jnp.zeros((1, 224, 224, 3), jnp.float32)))


def resnet18_linen():
    import resnet18_linen as r

    model = r.ResNet18(num_classes=1000, num_filters=64)
    return model.bind(model.init(jax.random.key(0), jnp.zeros((1, 224, 224, 3), jnp.float32), train=False))
'''


def workspace() -> Path:
    root = Path(tempfile.mkdtemp(prefix="bench_cost_"))
    (root / "bench_models.py").write_text(textwrap.dedent(FACTORIES))
    for name in ("vit_torch.py", "vit_linen.py", "resnet18_linen.py"):
        shutil.copy(REAL / name, root / name)
    return root


def table(model: str, factory: str, inputs: list, *, framework: str = "torch", abstract: bool = False,
          kwargs: dict | None = None) -> dict:
    t = {"kind": "model", "model": model, "mode": "eval", "device": "cpu", "grad_enabled": False, "seed": 0,
         "init": {"factory": f"bench_models:{factory}"}, "inputs": {"args": inputs, "kwargs": kwargs or {}}}
    if framework != "torch":
        t["framework"] = framework
    if abstract:
        t["evidence"] = "abstract"
    return t


def tokens(n: int, vocab: int) -> dict:
    return {"kind": "tensor", "shape": [1, n], "dtype": "int64", "generator": {"kind": "randint", "low": 0, "high": vocab}}


def image(shape: list) -> dict:
    return {"kind": "tensor", "shape": shape, "dtype": "float32", "generator": {"kind": "normal", "mean": 0.0, "std": 1.0}}


def capture(root: Path, tbl: dict):
    if tbl.get("framework") == "jax":
        from capture.jax import framework as fw
    else:
        from capture.torch import framework as fw  # type: ignore[no-redef]
    limits = Limits(max_ops=2_000_000, max_values=4_000_000, max_groups=200_000, max_result_bytes=1 << 30)
    ctx = CaptureContext(parse_profile("p", tbl), root, limits)
    fw.probe_device(ctx)
    t0 = time.perf_counter()
    cap = fw.capture(ctx)
    return cap, time.perf_counter() - t0


def totals(cap) -> dict:
    """The executed program's totals, as the summary counts them."""
    from viewer.projection.projection import Projection

    proj = Projection(cap)
    costs = proj.costs()
    out = costs.totals()
    out["uncounted_ops"] = costs.uncounted_ops()
    by_rule: Counter = Counter()
    by_op: Counter = Counter()
    executed = [not costs.in_body[g + 1] for g in proj.index.cols.group]
    for i, (f, r) in enumerate(zip(cap.cost.flops, cap.cost.rule)):
        if f > 0 and executed[i]:
            by_rule[cap.cost.rules[r]] += f
            by_op[cap.nodes[i].op] += f
    out["by_rule"], out["by_op"] = by_rule, by_op
    return out


def ratio(a: float, b: float) -> str:
    return f"{a / b:.4f}" if b else "n/a"


def line(label: str, value: float, against: float | None = None) -> None:
    text = f"  {label:58} {value:>22,.0f}"
    if against is not None:
        text += f"   ×{ratio(value, against)} ({100 * (value - against) / against:+.2f} %)"
    print(text)


def flop_counter(build, make_input, sdpa_cpu: bool) -> tuple[int, dict]:
    """FlopCounterMode's total for one forward on fake tensors (nothing computed);
    ``sdpa_cpu``: the CPU attention kernel mapped to the registry's own sdpa formula."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils import flop_counter as fc

    mapping = None
    if sdpa_cpu:
        aten = torch.ops.aten

        def cpu_sdpa(query, key, value, *args, out_shape=None, **kwargs):
            return fc.sdpa_flop_count(query, key, value)

        mapping = {aten._scaled_dot_product_flash_attention_for_cpu: cpu_sdpa}  # shapes passed in by the mode
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = build()
        x = make_input()
        with fc.FlopCounterMode(display=False, custom_mapping=mapping) as counter, torch.no_grad():
            model(x)
    counts = {str(k): v for k, v in counter.get_flop_counts().get("Global", {}).items()}
    return counter.get_total_flops(), counts


def show_rules(t: dict) -> None:
    print("  by rule: " + ", ".join(f"{k} {v:,}" for k, v in t["by_rule"].most_common()))
    unc = t["uncounted_ops"]
    print("  uncounted: " + (", ".join(f"{u['op']}×{u['count'] + u['in_bodies']} ({u['reason']})" for u in unc)
                             if unc else "none"))


# --------------------------------------------------------------------------- models


def bench_gpt2(root: Path, seq: int) -> None:
    import torch

    print(f"\n== GPT-2 124M (transformers GPT2Config()), batch 1, {seq} tokens ==")
    cap, s = capture(root, table("bench_models:gpt2_124m", "gpt2_124m", [tokens(seq, 50257)], abstract=True))
    t = totals(cap)
    ns = __import__("bench_models")
    L, d, V = 12, 768, 50257
    matmul = L * (d * 3 * d + d * d + 2 * d * 4 * d) + d * V  # weights of every matmul (LM head tied to wte)
    analytic = 2 * matmul * seq + 4 * L * seq * seq * d
    raw, counts = flop_counter(ns.gpt2_124m, lambda: torch.zeros(1, seq, dtype=torch.long), False)
    mapped, _ = flop_counter(ns.gpt2_124m, lambda: torch.zeros(1, seq, dtype=torch.long), True)
    print(f"  abstract capture: {len(cap.nodes):,} ops in {s:.1f} s")
    line("TensorViz total (all ops)", t["flops"])
    line("TensorViz: flop_counter formulas (+ its sdpa for the CPU kernel)",
         t["by_rule"]["flop_counter"] + t["by_rule"]["flop_counter sdpa (CPU kernel)"])
    line("FlopCounterMode, CPU attention kernel mapped to sdpa_flop_count", mapped, t["flops"])
    line("FlopCounterMode as it is (CPU attention counted 0)", raw, t["flops"])
    line("analytic 2·N·tokens + 4·layers·tokens²·width", analytic, t["flops"])
    print(f"  FlopCounterMode by op: {counts}")
    show_rules(t)
    # the same model captured eagerly (measured) at a length this CPU runs quickly: equal costs
    short = min(seq, 128)
    eager, _ = capture(root, table("bench_models:gpt2_124m", "gpt2_124m", [tokens(short, 50257)]))
    abstract, _ = capture(root, table("bench_models:gpt2_124m", "gpt2_124m", [tokens(short, 50257)], abstract=True))
    same = (eager.cost.flops == abstract.cost.flops and eager.cost.bytes_read == abstract.cost.bytes_read
            and eager.cost.bytes_written == abstract.cost.bytes_written)
    print(f"  eager vs abstract capture at {short} tokens: {len(eager.nodes):,} / {len(abstract.nodes):,} ops, "
          f"cost columns {'identical' if same else 'DIFFER'} (total {sum(f for f in eager.cost.flops if f > 0):,} / "
          f"{sum(f for f in abstract.cost.flops if f > 0):,})")


def bench_llama(root: Path, seq: int) -> None:
    import torch

    print(f"\n== Llama 3.2 1B layout (transformers LlamaForCausalLM from its config), batch 1, {seq} tokens ==")
    cap, s = capture(root, table("bench_models:llama_1b", "llama_1b", [tokens(seq, 128256)], abstract=True))
    t = totals(cap)
    ns = __import__("bench_models")
    c = ns.LLAMA_1B
    L, d, ff, V = c["num_hidden_layers"], c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    kv = c["num_key_value_heads"] * c["head_dim"]
    matmul = L * (d * d + 2 * d * kv + d * d + 3 * d * ff) + d * V
    analytic = 2 * matmul * seq + 4 * L * seq * seq * d
    raw, counts = flop_counter(ns.llama_1b, lambda: torch.zeros(1, seq, dtype=torch.long), False)
    mapped, _ = flop_counter(ns.llama_1b, lambda: torch.zeros(1, seq, dtype=torch.long), True)
    print(f"  abstract capture: {len(cap.nodes):,} ops in {s:.1f} s")
    line("TensorViz total (all ops)", t["flops"])
    line("TensorViz: flop_counter formulas (+ its sdpa for the CPU kernel)",
         t["by_rule"]["flop_counter"] + t["by_rule"]["flop_counter sdpa (CPU kernel)"])
    line("FlopCounterMode, CPU attention kernel mapped to sdpa_flop_count", mapped, t["flops"])
    line("FlopCounterMode as it is (CPU attention counted 0)", raw, t["flops"])
    line("analytic 2·N·tokens + 4·layers·tokens²·width", analytic, t["flops"])
    print(f"  FlopCounterMode by op: {counts}")
    show_rules(t)


def bench_vit(root: Path) -> None:
    import torch

    print("\n== ViT-B/16 (vit-pytorch style, tests/viewer/real_models/vit_torch.py), 224×224, batch 1 ==")
    cap, s = capture(root, table("bench_models:vit_b16", "vit_b16", [image([1, 3, 224, 224])], abstract=True))
    t = totals(cap)
    ns = __import__("bench_models")
    c = ns.VIT_B16
    d, L, hidden = c["dim"], c["depth"], c["hidden"]
    patches = (c["image"] // c["patch"]) ** 2
    T = patches + 1
    analytic = (2 * patches * (3 * c["patch"] ** 2) * d           # patch embedding
                + 2 * T * L * (3 * d * d + d * d + 2 * d * hidden)  # qkv, out, MLP
                + 4 * L * T * T * d                               # q·kᵀ and attention·v
                + 2 * d * c["classes"])                           # head on the class token
    raw, counts = flop_counter(ns.vit_b16, lambda: torch.zeros(1, 3, 224, 224), False)
    print(f"  abstract capture: {len(cap.nodes):,} ops in {s:.1f} s")
    line("TensorViz total (all ops)", t["flops"])
    line("TensorViz: flop_counter formulas", t["by_rule"]["flop_counter"])
    line("FlopCounterMode", raw, t["flops"])
    line("analytic (patch embedding, 2·N·tokens, attention, head)", analytic, t["flops"])
    print(f"  FlopCounterMode by op: {counts}")
    show_rules(t)


# Primitives XLA's cost analysis counts under ``transcendentals``, not ``flops``.
TRANSCENDENTAL = {"exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "rsqrt", "sqrt", "cbrt", "sin", "cos",
                  "tan", "erf", "erfc", "erf_inv", "pow", "atan2", "asin", "acos", "atan", "sinh", "cosh", "lgamma",
                  "digamma"}


def bench_flax(root: Path) -> None:
    import jax
    import jax.numpy as jnp

    ns = __import__("bench_models")
    for label, factory, model, kwargs in (
            ("ViT-B/16 (Linen, vit_linen.py), 224×224", "vit_b16_linen", "vit_linen:VisionTransformer", {}),
            ("ResNet-18 (Linen, Flax ImageNet example style), 224×224, 64 filters", "resnet18_linen",
             "resnet18_linen:ResNet", {"train": {"kind": "static", "value": False}})):
        print(f"\n== {label}, batch 1: TensorViz vs XLA cost_analysis() on CPU ==")
        cap, s = capture(root, table(model, factory, [image([1, 224, 224, 3])], framework="jax", kwargs=kwargs))
        t = totals(cap)
        bound = getattr(ns, factory)()
        module, variables = bound.unbind()
        extra = {"train": False} if kwargs else {}
        compiled = jax.jit(lambda v, x: module.apply(v, x, **extra)).lower(
            variables, jnp.zeros((1, 224, 224, 3), jnp.float32)).compile()
        ca = compiled.cost_analysis()
        ca = ca[0] if isinstance(ca, (list, tuple)) else ca
        xla_flops, xla_trans = float(ca.get("flops", -1)), float(ca.get("transcendentals", 0))
        ours = t["flops"]
        trans = sum(v for op, v in t["by_op"].items() if op in TRANSCENDENTAL)
        print(f"  capture: {len(cap.nodes):,} equations in {s:.1f} s")
        line("TensorViz total (all equations)", ours)
        line("XLA flops", xla_flops, ours)
        line("XLA flops + transcendentals", xla_flops + xla_trans, ours)
        line("TensorViz without transcendental primitives", ours - trans, xla_flops)
        line("TensorViz transcendental primitives", trans, xla_trans if xla_trans else None)
        print("  TensorViz by primitive: " + ", ".join(f"{op} {v:,}" for op, v in t["by_op"].most_common(12)))
        show_rules(t)


def bench_saved(root: Path) -> None:
    """What a training step saves for backward: the capture's count beside PyTorch's own
    (the tensors autograd packs, through saved_tensors_hooks, that are neither parameters
    nor inputs: distinct storages, their bytes)."""
    import torch

    seq = 128
    print(f"\n== GPT-2 124M training step (loss: mean of the logits), batch 1, {seq} tokens: saved for backward ==")
    tbl = table("bench_models:gpt2_124m", "gpt2_124m", [tokens(seq, 50257)])
    tbl.update(kind="training_step", grad_enabled=True, mode="train", step={"loss": "mean"})
    cap, s = capture(root, tbl)
    t = totals(cap)
    ns = __import__("bench_models")
    torch.manual_seed(0)
    model = ns.gpt2_124m().train()
    ids = torch.randint(0, 50257, (1, seq))
    outside = {p.untyped_storage().data_ptr() for p in model.parameters()} | {ids.untyped_storage().data_ptr()}
    saved: dict[int, int] = {}

    def pack(x):
        st = x.untyped_storage()
        if st.data_ptr() not in outside:
            saved[st.data_ptr()] = st.nbytes()
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        out = model(ids).logits.mean()
    out.backward()
    theirs = sum(saved.values())
    print(f"  eager capture (training step): {len(cap.nodes):,} ops in {s:.1f} s")
    line("TensorViz saved for backward (bytes)", t["saved_for_backward"])
    line("PyTorch saved_tensors_hooks: packed activations (bytes)", theirs, t["saved_for_backward"])
    line("TensorViz peak of live activations (bytes)", t["peak_live"])
    show_rules(t)


def bench_70b(root: Path, seq: int, repeat: int) -> None:
    print(f"\n== Llama-3-70B (transformers, bfloat16), abstract, batch 1, {seq} tokens: tensorviz summary ==")
    cap, s = capture(root, table("bench_models:llama3_70b", "llama3_70b", [tokens(seq, 128256)], abstract=True))
    path = root / "llama3_70b.tvg"
    graphfile.write(cap, path)
    t = totals(cap)
    print(f"  abstract capture: {len(cap.nodes):,} ops, {len(cap.groups):,} groups in {s:.1f} s; "
          f"file {path.stat().st_size / 1e6:.1f} MB; {t['params']['count']:,} parameters")
    line("TensorViz total", t["flops"])
    line("analytic 2·N·tokens + 4·layers·tokens²·width",
         2 * (80 * (8192 * 8192 * 2 + 2 * 8192 * 1024 + 3 * 8192 * 28672) + 8192 * 128256) * seq
         + 4 * 80 * seq * seq * 8192, t["flops"])
    show_rules(t)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "tensorviz_lsp", "summary", str(path)], check=True, env=env,
                       stdout=subprocess.DEVNULL, cwd=ROOT)
        walls.append(time.perf_counter() - t0)
    from tensorviz_lsp.cli.commands import summary as cmd

    inner = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        args = argparse.Namespace(file=str(path), depth=3, sort="order", json=False, csv=False, device=None,
                                  devices=None, workspace=None, all_groups=False)
        with open(os.devnull, "w") as sink:
            old, sys.stdout = sys.stdout, sink
            try:
                cmd.run(args)
            finally:
                sys.stdout = old
        inner.append(time.perf_counter() - t0)
    print(f"  tensorviz summary, whole command (fresh process): median {statistics.median(walls):.2f} s "
          f"(runs {', '.join(f'{w:.2f}' for w in walls)}); target < 2 s")
    print(f"  the same in this process (read, project, sum, print): median {statistics.median(inner):.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="gpt2,llama,vit,flax,saved,70b")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    only = set(a.only.split(","))
    root = workspace()
    sys.path.insert(0, str(root))
    import torch

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    try:
        if "gpt2" in only:
            bench_gpt2(root, a.seq)
        if "llama" in only:
            bench_llama(root, a.seq)
        if "vit" in only:
            bench_vit(root)
        if "flax" in only:
            bench_flax(root)
        if "saved" in only:
            bench_saved(root)
        if "70b" in only:
            bench_70b(root, a.seq, a.repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
