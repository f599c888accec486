"""Abstract Torch captures (``evidence = "abstract"``) of models larger than memory,
side by side with eager captures of the same architectures at a small width.

    python benchmarks/bench_torch_abstract.py [--repeat 3] [--seq 16] [--only NAME,...]

Models (batch 1, ``--seq`` tokens, bfloat16 as published):
  * ``plain-7b``: a Llama-style transformer written here in plain Torch (RMSNorm,
    rotary embeddings, grouped-query attention through ``F.scaled_dot_product_attention``,
    SwiGLU), at Llama-2-7B's sizes;
  * ``llama2-7b``, ``llama3-70b``, ``mixtral-8x7b``: ``transformers`` models built from
    ``LlamaConfig`` / ``MixtralConfig`` with the published values (Mixtral with
    ``experts_implementation="batched_mm"``, whose routing has static shapes);
  * ``mixtral-8x7b-eager-experts``: Mixtral's default experts loop, which routes with
    ``nonzero``: an abstract capture must stop with a failure naming that op.

Measured, for each: the whole command ``tensorviz capture --workspace W --profile P``
(a fresh CLI and worker each time: median wall and CPU time of ``--repeat`` runs, the
abstract forward's own seconds (``meta.capture_s``), and the peak RSS of the largest
process; targets: 7B < 10 s and < 1.5 GB, 70B < 30 s and < 3 GB),
the graph's ops, groups and parameter count, and its equality to an eager capture of
the same architecture at a small width (same layers, width 64): the same op sequence
and groups (shapes aside), and for the abstract capture at that small width the same
ops, groups, shapes and dtypes as the eager one. For ``transformers`` models the ops
compared leave out those from the files the capture's ``meta.abstract_differences``
names. Beside each figure: the plain forward of the small config. Then the floor: each
model's abstract capture in this process (its own work: everything imported and run once
first) against a bare ``FakeTensorMode`` build and forward of the same model (built in
bfloat16 as the default dtype), by CPU time in A/B-interleaved pairs; target <= 1.5x.
Last, a small model
captured abstractly and eagerly in this process: the time ratio and the op-by-op
equality (shapes, dtypes, strides, parameters, frames).

Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from capture.graph import graphfile  # noqa: E402
from capture.torch import framework  # noqa: E402
from capture.worker.context import CaptureContext  # noqa: E402

PLAIN_MODEL = '''
import math

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotary(x, cos, sin):
    a, b = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-b, a), dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads)
        return self.o(y.transpose(1, 2).reshape(b, t, -1))


class Block(nn.Module):
    def __init__(self, dim, heads, kv_heads, hidden):
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = Attention(dim, heads, kv_heads)
        self.mlp_norm = RMSNorm(dim)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Transformer(nn.Module):
    def __init__(self, vocab=32000, dim=4096, layers=32, heads=32, kv_heads=32, hidden=11008, context=4096,
                 theta=10000.0):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([Block(dim, heads, kv_heads, hidden) for _ in range(layers)])
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        half = dim // heads // 2
        freqs = 1.0 / theta ** (torch.arange(half, dtype=torch.float32) / half)
        angles = torch.outer(torch.arange(context, dtype=torch.float32), freqs)
        self.register_buffer("cos", torch.cat((angles.cos(), angles.cos()), -1), persistent=False)
        self.register_buffer("sin", torch.cat((angles.sin(), angles.sin()), -1), persistent=False)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.embed(ids)
        cos, sin = self.cos[:t].to(x.dtype), self.sin[:t].to(x.dtype)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.head(self.norm(x))
'''

FACTORIES = '''
import torch
from transformers import LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM

from plain import Transformer

WIDTH_SMALL = 64


def _small(values):
    """The same architecture at a small width: every layer kept, heads kept in ratio."""
    out = dict(values)
    heads = max(out.get("num_attention_heads", 4) // 8, 2)
    kv = max(out.get("num_key_value_heads", heads) * heads // out.get("num_attention_heads", heads), 1)
    out.update(hidden_size=WIDTH_SMALL, intermediate_size=2 * WIDTH_SMALL, num_attention_heads=heads,
               num_key_value_heads=kv, vocab_size=512)
    return out


LLAMA2_7B = dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                 num_key_value_heads=32, vocab_size=32000, max_position_embeddings=4096, rms_norm_eps=1e-5,
                 rope_theta=10000.0)
LLAMA3_70B = dict(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64,
                  num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192, rms_norm_eps=1e-5,
                  rope_theta=500000.0)
MIXTRAL_8X7B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                    num_key_value_heads=8, vocab_size=32000, max_position_embeddings=32768, rms_norm_eps=1e-5,
                    rope_theta=1e6, num_local_experts=8, num_experts_per_tok=2, sliding_window=None)


def _llama(values):
    return LlamaForCausalLM(LlamaConfig(**values)).to(torch.bfloat16).eval()


def _mixtral(values, experts):
    return MixtralForCausalLM(MixtralConfig(**values, experts_implementation=experts)).to(torch.bfloat16).eval()


def llama2_7b():
    return _llama(LLAMA2_7B)


def llama2_7b_small():
    return _llama(_small(LLAMA2_7B))


def llama3_70b():
    return _llama(LLAMA3_70B)


def llama3_70b_small():
    return _llama(_small(LLAMA3_70B))


def mixtral_8x7b():
    return _mixtral(MIXTRAL_8X7B, "batched_mm")


def mixtral_8x7b_small():
    return _mixtral(_small(MIXTRAL_8X7B), "batched_mm")


def mixtral_8x7b_eager_experts():
    return _mixtral(MIXTRAL_8X7B, "eager")


def plain_7b():
    return Transformer().to(torch.bfloat16).eval()


def plain_7b_small():
    return Transformer(vocab=512, dim=WIDTH_SMALL, heads=4, kv_heads=4, hidden=2 * WIDTH_SMALL).to(torch.bfloat16).eval()


# The same models built as a bare FakeTensorMode build would: in the default dtype (the
# benchmark's floor sets bfloat16 around it; ``.to()`` cannot convert fake parameters).
BARE = {
    "plain_7b": lambda: Transformer(),
    "llama2_7b": lambda: LlamaForCausalLM(LlamaConfig(**LLAMA2_7B)),
    "llama3_70b": lambda: LlamaForCausalLM(LlamaConfig(**LLAMA3_70B)),
    "mixtral_8x7b": lambda: MixtralForCausalLM(MixtralConfig(**MIXTRAL_8X7B, experts_implementation="batched_mm")),
}
'''

# name -> (factory, small factory, model ref, target seconds, target GB)
MODELS = {
    "plain-7b": ("plain_7b", "plain_7b_small", "plain:Transformer", 10, 1.5),
    "llama2-7b": ("llama2_7b", "llama2_7b_small", "transformers:LlamaForCausalLM", 10, 1.5),
    "llama3-70b": ("llama3_70b", "llama3_70b_small", "transformers:LlamaForCausalLM", 30, 3.0),
    "mixtral-8x7b": ("mixtral_8x7b", "mixtral_8x7b_small", "transformers:MixtralForCausalLM", None, None),
    "mixtral-8x7b-eager-experts": ("mixtral_8x7b_eager_experts", None, "transformers:MixtralForCausalLM", None, None),
}

# Runs a command and prints its wall time, its CPU time and the peak RSS of its largest
# process (the children it waited for: the CLI and the worker it started).
_WRAPPER = textwrap.dedent('''
    import json, resource, subprocess, sys, time
    t = time.perf_counter()
    rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode
    wall = time.perf_counter() - t
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"rc": rc, "wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss": ru.ru_maxrss * 1024}))
''')


def write_workspace(root: Path, seq: int) -> None:
    (root / "plain.py").write_text(PLAIN_MODEL)
    (root / "factories.py").write_text(FACTORIES)
    lines = ["version = 1", ""]
    ids = f'{{ kind = "tensor", shape = [1, {seq}], dtype = "int64", generator = {{ kind = "randint", low = 0, high = 500 }} }}'
    for name, (factory, small, ref, _, _) in MODELS.items():
        for profile, fn, evidence in ((name, factory, "abstract"), (f"{name}-small", small, "eager"),
                                      (f"{name}-small-abstract", small, "abstract")):
            if fn is None:
                continue
            lines += [f"[profiles.{profile.replace('-', '_')}]", f'model = "{ref}"', f'evidence = "{evidence}"',
                      f'init = {{ factory = "factories:{fn}" }}', f"inputs = {{ args = [{ids}] }}", ""]
    (root / ".tensorviz").mkdir(exist_ok=True)
    (root / ".tensorviz" / "recipes.toml").write_text("\n".join(lines))


def cli(root: Path, profile: str, out: Path, env: dict) -> dict:
    cmd = [sys.executable, "-m", "tensorviz_lsp", "capture", "--workspace", str(root), "--profile", profile,
           "-o", str(out), "--timeout", "600"]
    done = subprocess.run([sys.executable, "-c", _WRAPPER, *cmd], capture_output=True, text=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def group_paths(cap) -> dict:
    out = {}
    for g in cap.groups:
        out[g.id] = f"{out.get(g.parent, '')}/{g.kind}:{g.name}:{g.attrs.get('class')}:{g.attrs.get('function')}"
    return out


def rows(cap, shapes: bool, skip_files: frozenset = frozenset()) -> list:
    paths, values = group_paths(cap), {v.id: v for v in cap.values}
    out = []
    for n in cap.nodes:
        if n.frame is not None and cap.frames[n.frame].file in skip_files:
            continue
        outs = tuple((tuple(values[o].shape), values[o].dtype) for o in n.outputs) if shapes else len(n.outputs)
        out.append((n.op, paths.get(n.group), outs))
    return out


def reported_files(cap) -> frozenset:
    return frozenset(f for d in cap.meta.get("abstract_differences", []) for f in d.get("files", []))


def parameters(cap) -> int:
    total = 0
    for v in cap.values:
        if (v.measured or {}).get("param"):
            n = 1
            for d in v.shape:
                n *= d
            total += n
    return total


def in_process(root: Path, profile_name: str) -> tuple:
    """(capture, seconds) of a profile captured in this process, as the worker would."""
    from capture.recipe import load_profile

    ctx = CaptureContext(load_profile(root / ".tensorviz" / "recipes.toml", profile_name), root)
    framework.probe_device(ctx)
    t = time.perf_counter()
    cap = framework.capture(ctx)
    return cap, time.perf_counter() - t


def plain_forward(root: Path, small: str, seq: int, repeat: int) -> float:
    sys.path.insert(0, str(root))
    import factories

    model = getattr(factories, small)()
    ids = torch.randint(0, 500, (1, seq))
    with torch.no_grad():
        model(ids)
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            model(ids)
            times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    ap.add_argument("--floor-only", action="store_true",
                    help="only the in-process capture against the bare FakeTensorMode floor (no CLI runs)")
    args = ap.parse_args()
    names = [n for n in MODELS if not args.only or n in args.only.split(",")]
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.get_num_threads()} thread(s), "
          f"{os.cpu_count()} CPU(s); batch 1, {args.seq} tokens, bfloat16; {load_line()}")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with tempfile.TemporaryDirectory(prefix="tv-bench-abstract-") as tmp:
        root = Path(tmp)
        write_workspace(root, args.seq)
        if args.floor_only:
            floor_vs_capture(root, names, args.seq, args.repeat)
            return
        print(f"{'model':28}{'params':>9}{'ops':>7}{'groups':>7}{'wall s':>8}{'target':>8}{'cpu s':>7}{'fwd s':>7}"
              f"{'peak GB':>9}{'target':>8}  {'small plain fwd s':>17}  equal to eager at width 64")
        for name in names:
            factory, small, _, target_s, target_gb = MODELS[name]
            profile = name.replace("-", "_")
            out = root / f"{profile}.tvg"
            runs = [cli(root, profile, out, env) for _ in range(args.repeat)]
            wall = statistics.median(r["wall"] for r in runs)
            cpu = statistics.median(r["cpu"] for r in runs)
            rss = max(r["rss"] for r in runs) / (1 << 30)
            cap = graphfile.read(out)
            plain_s = plain_forward(root, small, args.seq, args.repeat) if small else None
            if cap.failure is not None:
                f = cap.failure
                frame = f.details.get("frame") or {}
                print(f"{name:28}{'':9}{'':7}{'':7}{wall:8.2f}{'':8}{cpu:7.1f}{'':7}{rss:9.2f}{'':8}  {'':>17}  "
                      f"failed as it must: [{f.type}] {f.details.get('op')} at "
                      f"{str(frame.get('file', '?')).rsplit('/', 1)[-1]}:{frame.get('line')}")
                continue
            eager, _ = in_process(root, f"{profile}_small")
            small_abstract, _ = in_process(root, f"{profile}_small_abstract")
            skip = reported_files(cap) | reported_files(small_abstract)
            same_structure = rows(cap, False, skip) == rows(eager, False, skip)
            same_small = rows(small_abstract, True, skip) == rows(eager, True, skip)
            groups_equal = [(g.kind, g.name, g.parent) for g in cap.groups] == [
                (g.kind, g.name, g.parent) for g in eager.groups]
            note = (f"ops+groups {'yes' if same_structure and groups_equal else 'NO'}, "
                    f"shapes at width 64 {'yes' if same_small else 'NO'}"
                    + (f" (leaving out {len(skip)} reported file(s))" if skip else ""))
            print(f"{name:28}{parameters(cap) / 1e9:8.2f}B{len(cap.nodes):7,}{len(cap.groups):7,}{wall:8.2f}"
                  f"{('< %d' % target_s) if target_s else '':>8}{cpu:7.1f}{cap.meta['capture_s']:7.2f}"
                  f"{rss:9.2f}{('< %.1f' % target_gb) if target_gb else '':>8}"
                  f"  {plain_s:17.4f}  {note}")
        floor_vs_capture(root, names, args.seq, args.repeat)
        small_vs_eager(root, args.repeat)
        print(f"after: {load_line()}")


def fake_floor(bare, seq: int) -> None:
    """A bare FakeTensorMode build and forward of a model: the floor of an abstract capture."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    previous = torch.get_default_dtype()
    with FakeTensorMode(allow_non_fake_inputs=True):
        torch.set_default_dtype(torch.bfloat16)
        try:
            model = bare().eval()
        finally:
            torch.set_default_dtype(previous)
        ids = torch.randint(0, 500, (1, seq))
        with torch.no_grad():
            model(ids)


def cpu_seconds(fn) -> float:
    c = time.process_time()
    fn()
    return time.process_time() - c


def floor_vs_capture(root: Path, names: list[str], seq: int, repeat: int) -> None:
    """Own work (imports excluded: everything is imported and run once first) of the
    abstract capture in this process against the bare FakeTensorMode floor, by CPU time
    in A/B-interleaved pairs (alternating order); the ratio is the median of the pairs'."""
    sys.path.insert(0, str(root))
    import factories

    print(f"\nabstract capture, own work vs a bare FakeTensorMode build + forward of the same model (CPU, "
          f"{repeat} A/B-interleaved pairs, imports excluded); {load_line()}")
    print(f"{'model':28}{'floor s':>9}{'capture s':>11}{'x floor':>9}   target")
    for name in names:
        factory = MODELS[name][0]
        bare = factories.BARE.get(factory)
        if bare is None:
            continue
        profile = name.replace("-", "_")
        capture = lambda: in_process(root, profile)  # noqa: E731
        floor = lambda: fake_floor(bare, seq)  # noqa: E731
        capture()
        floor()  # warm: lazy imports and the fake mode's first-use caches
        ratios, floors, captures = [], [], []
        for r in range(repeat):
            if r % 2:
                c, f = cpu_seconds(capture), cpu_seconds(floor)
            else:
                f, c = cpu_seconds(floor), cpu_seconds(capture)
            ratios.append(c / f)
            floors.append(f)
            captures.append(c)
        ratio = statistics.median(ratios)
        print(f"{name:28}{min(floors):9.2f}{min(captures):11.2f}{ratio:9.2f}   <= 1.5x "
              f"({'meets' if ratio <= 1.5 else 'misses'})")


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} CPUs"


def small_vs_eager(root: Path, repeat: int) -> None:
    """A small model captured abstractly and eagerly in this process, alternately."""
    times = {"eager": [], "abstract": []}
    caps = {}
    for _ in range(repeat):
        for key, profile in (("eager", "plain_7b_small"), ("abstract", "plain_7b_small_abstract")):
            cap, seconds = in_process(root, profile)
            times[key].append(seconds)
            caps[key] = cap
    plain_s = plain_forward(root, "plain_7b_small", 16, repeat)

    def full(cap):
        paths, values = group_paths(cap), {v.id: v for v in cap.values}
        return [(n.op, paths.get(n.group),
                 tuple((tuple(values[o].shape), values[o].dtype, tuple(values[o].measured.get("strides", ())),
                        values[o].measured.get("param")) for o in n.outputs),
                 tuple(o.value is None for o in n.inputs), n.frame, json.dumps(n.params, sort_keys=True))
                for n in cap.nodes]

    a, e = full(caps["abstract"]), full(caps["eager"])
    same = sum(x == y for x, y in zip(a, e))
    ea, ab = min(times["eager"]), min(times["abstract"])
    print(f"small model (plain-7b architecture at width 64, {len(e)} ops): eager capture {ea:.3f} s, abstract "
          f"{ab:.3f} s ({ab / ea:.2f}x eager; plain forward {plain_s:.4f} s); op by op equal: {same}/{max(len(a), len(e))}")


if __name__ == "__main__":
    main()
