"""A zoo of ``transformers`` architectures opened as a new user opens them (issue 38).

    python benchmarks/bench_model_zoo.py [--only mixtral,deepseek_v3] [--no-eager] [--no-abstract]
                                         [--no-browser] [--shots DIR] [--seq 16] [--keep DIR]

Each model is written as a user writes it: a workspace file ``zoo.py`` holding
``class Mixtral(MixtralForCausalLM): pass`` and the like, captured by the command a
person types (``tensorviz capture zoo.py:Mixtral --input … --init 'config=MixtralConfig(…)'``),
twice: at a small width, eagerly (the real layer count, width 64), and at its real size,
abstractly (``--abstract``, the published configuration, no factory, no cast: the
config's own ``dtype``). Dense (Llama-3.1-70B, Gemma-3-27B, GPT-2 XL), mixture-of-experts
(Mixtral-8x22B, Qwen3-235B-A22B, DeepSeek-V3 671B), state-space (Mamba-2.8B), encoders
(ModernBERT-large, BERT-large), vision (ConvNeXt-large, ViT-large) and audio
(Whisper-large-v3).

Per model and capture it prints:

* **time / peak**: the whole command's wall time, its CPU time (the CLI and the worker:
  the figure to read on a loaded machine) and the peak RSS of its largest process (the
  CLI or the worker it started), in a fresh CLI each time;
* **ops**, and **folded**: the model's layers (its decoder / encoder block class) inside
  a stack the viewer folds, of all of them (``+1 unique``: a layer whose structure no
  other shares, ModernBERT's first, which has no attention norm); ``routing`` when a
  stack says that routing differs per layer;
* **unproduced**: values some op reads that are neither produced by an op nor an input,
  a parameter, a buffer or a constant (``capture.graph.invariants``; must be 0);
* **first view**: what the viewer opens on (the items of the innermost group the first
  view opens: embedding, the stack ``×n``, the head, the plumbing card), and, in
  Debian's Chromium at 1600 × 1000 (the real-size capture), whether the stack card is on
  screen without scrolling;
* **FLOPs, uncounted**: the forward's FLOPs as the capture counted them
  (``capture.torch.cost``, a multiply-add is 2) and how many ops no rule counts (listed,
  never counted as zero; a symbolic shape is one reason);
* **failed**: the failure, or the coverage reasons when partial;
* **experts** (mixtures of experts: Mixtral, Qwen3-MoE, DeepSeek-V3, Llama-4 Scout, DBRX,
  OLMoE, gpt-oss): each MoE layer's expert convention (sparse: the active top-k counted as
  executed; dense: every expert computed) and a loop's stated data-dependent choice, and the
  active matmul + attention FLOPs (a dense layer's idle experts left out) against an analytic
  count from the configuration (issue 48: within 2 %).

A row is green when both captures succeed, every layer is folded (or unique), nothing is
unproduced and the stack is on screen in the first view. ``--shots DIR`` saves each
real-size first view as ``DIR/NAME_first.png``. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capture.graph import graphfile  # noqa: E402
from capture.graph.invariants import values_without_producer  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1600, "height": 1000}
SMALL_WIDTH = 64

ZOO_FILE = '''
"""The zoo, as a user writes it: a subclass of each library model, built from a config."""
from transformers import DbrxForCausalLM, GptOssForCausalLM, Llama4ForCausalLM, OlmoeForCausalLM
from transformers import DbrxConfig, GptOssConfig, Llama4TextConfig, OlmoeConfig
from transformers import (BertForMaskedLM, ConvNextForImageClassification, DeepseekV3ForCausalLM, Gemma3ForCausalLM,
                          GPT2LMHeadModel, LlamaForCausalLM, MambaForCausalLM, MixtralForCausalLM,
                          ModernBertForMaskedLM, Qwen3MoeForCausalLM, ViTForImageClassification,
                          WhisperForConditionalGeneration)
from transformers import (BertConfig, ConvNextConfig, DeepseekV3Config, Gemma3TextConfig, GPT2Config, LlamaConfig,
                          MambaConfig, MixtralConfig, ModernBertConfig, Qwen3MoeConfig, ViTConfig, WhisperConfig)


class Llama(LlamaForCausalLM):
    pass


class Mixtral(MixtralForCausalLM):
    pass


class Qwen3Moe(Qwen3MoeForCausalLM):
    pass


class DeepSeekV3(DeepseekV3ForCausalLM):
    pass


class Gemma3(Gemma3ForCausalLM):
    pass


class Mamba(MambaForCausalLM):
    pass


class ModernBert(ModernBertForMaskedLM):
    pass


class Bert(BertForMaskedLM):
    pass


class GPT2(GPT2LMHeadModel):
    pass


class ConvNext(ConvNextForImageClassification):
    pass


class ViT(ViTForImageClassification):
    pass


class Whisper(WhisperForConditionalGeneration):
    pass


class Llama4(Llama4ForCausalLM):
    pass


class Dbrx(DbrxForCausalLM):
    pass


class Olmoe(OlmoeForCausalLM):
    pass


class GptOss(GptOssForCausalLM):
    pass
'''


@dataclass
class Model:
    name: str
    symbol: str
    family: str
    config: str
    real: dict
    small: dict
    inputs: list[str]
    blocks: tuple[str, ...]  # the class(es) of its repeated layer
    # a mixture of experts with a shared expert as wide as its experts (Llama-4) or none, for the analytic count
    moe: str | None = None


def _ids(seq: int) -> list[str]:
    return [f"input_ids=int64[1,{seq}]"]


def _masked(seq: int) -> list[str]:
    """Token ids with the attention mask a user passes to a BERT or a Gemma."""
    return [*_ids(seq), f"attention_mask=int64[1,{seq}]:ones"]


def zoo(seq: int) -> list[Model]:
    bf16 = {"dtype": "bfloat16"}
    return [
        Model("llama", "Llama", "dense", "LlamaConfig",
              dict(vocab_size=128256, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                   num_attention_heads=64, num_key_value_heads=8, max_position_embeddings=131072, rms_norm_eps=1e-5,
                   **bf16),
              dict(vocab_size=512, hidden_size=SMALL_WIDTH, intermediate_size=128, num_hidden_layers=80,
                   num_attention_heads=4, num_key_value_heads=2),
              _ids(seq), ("LlamaDecoderLayer",)),
        Model("mixtral", "Mixtral", "moe", "MixtralConfig",
              dict(vocab_size=32768, hidden_size=6144, intermediate_size=16384, num_hidden_layers=56,
                   num_attention_heads=48, num_key_value_heads=8, num_local_experts=8, num_experts_per_tok=2,
                   max_position_embeddings=65536, rms_norm_eps=1e-5, **bf16),
              dict(vocab_size=512, hidden_size=SMALL_WIDTH, intermediate_size=128, num_hidden_layers=56,
                   num_attention_heads=4, num_key_value_heads=2, num_local_experts=8, num_experts_per_tok=2),
              _ids(seq), ("MixtralDecoderLayer",), moe="routed"),
        Model("qwen3_moe", "Qwen3Moe", "moe", "Qwen3MoeConfig",
              dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288, moe_intermediate_size=1536,
                   num_hidden_layers=94, num_attention_heads=64, num_key_value_heads=4, head_dim=128,
                   num_experts=128, num_experts_per_tok=8, norm_topk_prob=True, max_position_embeddings=40960,
                   rms_norm_eps=1e-6, **bf16),
              dict(vocab_size=512, hidden_size=SMALL_WIDTH, intermediate_size=128, moe_intermediate_size=32,
                   num_hidden_layers=94, num_attention_heads=4, num_key_value_heads=2, num_experts=128,
                   num_experts_per_tok=8, norm_topk_prob=True),
              _ids(seq), ("Qwen3MoeDecoderLayer",), moe="routed"),
        Model("deepseek_v3", "DeepSeekV3", "moe", "DeepseekV3Config",
              dict(vocab_size=129280, hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048,
                   num_hidden_layers=61, num_attention_heads=128, num_key_value_heads=128, n_shared_experts=1,
                   n_routed_experts=256, routed_scaling_factor=2.5, kv_lora_rank=512, q_lora_rank=1536,
                   qk_rope_head_dim=64, v_head_dim=128, qk_nope_head_dim=128, n_group=8, topk_group=4,
                   num_experts_per_tok=8, first_k_dense_replace=3, norm_topk_prob=True,
                   max_position_embeddings=163840, **bf16),
              dict(vocab_size=512, hidden_size=SMALL_WIDTH, intermediate_size=128, moe_intermediate_size=32,
                   num_hidden_layers=61, num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1,
                   n_routed_experts=256, kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=8, v_head_dim=16,
                   qk_nope_head_dim=16, n_group=8, topk_group=4, num_experts_per_tok=8, first_k_dense_replace=3),
              _ids(seq), ("DeepseekV3DecoderLayer",), moe="deepseek"),
        Model("gemma3", "Gemma3", "dense", "Gemma3TextConfig",
              dict(vocab_size=262208, hidden_size=5376, intermediate_size=21504, num_hidden_layers=62,
                   num_attention_heads=32, num_key_value_heads=16, head_dim=128, query_pre_attn_scalar=168,
                   sliding_window=1024, max_position_embeddings=131072, **bf16),
              dict(vocab_size=512, hidden_size=SMALL_WIDTH, intermediate_size=128, num_hidden_layers=62,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=8),
              _masked(seq), ("Gemma3DecoderLayer",)),
        Model("mamba", "Mamba", "state-space", "MambaConfig",
              dict(vocab_size=50280, hidden_size=2560, state_size=16, num_hidden_layers=64, expand=2,
                   conv_kernel=4),
              dict(vocab_size=512, hidden_size=SMALL_WIDTH, state_size=8, num_hidden_layers=64, expand=2,
                   conv_kernel=4),
              _ids(seq), ("MambaBlock",)),
        Model("modernbert", "ModernBert", "encoder", "ModernBertConfig",
              dict(vocab_size=50368, hidden_size=1024, intermediate_size=2624, num_hidden_layers=28,
                   num_attention_heads=16),
              dict(vocab_size=50368, hidden_size=SMALL_WIDTH, intermediate_size=128, num_hidden_layers=28,
                   num_attention_heads=4),
              _masked(seq), ("ModernBertEncoderLayer",)),
        Model("bert", "Bert", "encoder", "BertConfig",
              dict(vocab_size=30522, hidden_size=1024, intermediate_size=4096, num_hidden_layers=24,
                   num_attention_heads=16),
              dict(vocab_size=512, hidden_size=SMALL_WIDTH, intermediate_size=128, num_hidden_layers=24,
                   num_attention_heads=4),
              _masked(seq), ("BertLayer",)),
        Model("gpt2", "GPT2", "dense", "GPT2Config",
              dict(vocab_size=50257, n_embd=1600, n_layer=48, n_head=25, n_positions=1024),
              dict(vocab_size=512, n_embd=SMALL_WIDTH, n_layer=48, n_head=4, n_positions=64),
              _ids(seq), ("GPT2Block",)),
        Model("convnext", "ConvNext", "vision", "ConvNextConfig",
              dict(depths=[3, 3, 27, 3], hidden_sizes=[192, 384, 768, 1536]),
              dict(depths=[3, 3, 27, 3], hidden_sizes=[8, 16, 32, 64]),
              ["pixel_values=float32[1,3,224,224]"], ("ConvNextLayer",)),
        Model("vit", "ViT", "vision", "ViTConfig",
              dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                   image_size=224, patch_size=16),
              dict(hidden_size=SMALL_WIDTH, num_hidden_layers=24, num_attention_heads=4, intermediate_size=128,
                   image_size=224, patch_size=16),
              ["pixel_values=float32[1,3,224,224]"], ("ViTLayer",)),
        Model("whisper", "Whisper", "audio", "WhisperConfig",
              dict(vocab_size=51866, num_mel_bins=128, d_model=1280, encoder_layers=32, decoder_layers=32,
                   encoder_attention_heads=20, decoder_attention_heads=20, encoder_ffn_dim=5120,
                   decoder_ffn_dim=5120, max_source_positions=1500, max_target_positions=448),
              dict(vocab_size=51866, num_mel_bins=128, d_model=SMALL_WIDTH, encoder_layers=32, decoder_layers=32,
                   encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                   max_source_positions=1500, max_target_positions=448),
              ["input_features=float32[1,128,3000]", "decoder_input_ids=int64[1,4]"],
              ("WhisperEncoderLayer", "WhisperDecoderLayer")),
        # issue 48: frontier MoE configurations, each with its expert convention and active FLOPs
        Model("llama4", "Llama4", "moe", "Llama4TextConfig",  # Llama-4 Scout (17B active, 16 experts)
              dict(vocab_size=202048, hidden_size=5120, intermediate_size=8192, intermediate_size_mlp=16384,
                   num_hidden_layers=48, num_attention_heads=40, num_key_value_heads=8, head_dim=128,
                   num_local_experts=16, num_experts_per_tok=1, interleave_moe_layer_step=1,
                   max_position_embeddings=10485760, **bf16),
              dict(vocab_size=512, hidden_size=SMALL_WIDTH, intermediate_size=128, intermediate_size_mlp=256,
                   num_hidden_layers=48, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                   num_local_experts=16, num_experts_per_tok=1, interleave_moe_layer_step=1),
              _ids(seq), ("Llama4TextDecoderLayer",), moe="shared"),
        Model("dbrx", "Dbrx", "moe", "DbrxConfig",  # DBRX (132B, 16 experts, top-4)
              dict(vocab_size=100352, d_model=6144, n_heads=48, n_layers=40, max_seq_len=32768,
                   attn_config={"kv_n_heads": 8, "clip_qkv": 8, "rope_theta": 500000},
                   ffn_config={"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4}, **bf16),
              dict(vocab_size=512, d_model=SMALL_WIDTH, n_heads=4, n_layers=40,
                   attn_config={"kv_n_heads": 2, "clip_qkv": 8, "rope_theta": 500000}, ffn_config={"ffn_hidden_size": 128, "moe_num_experts": 16,
                                                             "moe_top_k": 4}),
              _ids(seq), ("DbrxBlock",), moe="routed"),
        Model("olmoe", "Olmoe", "moe", "OlmoeConfig",  # OLMoE-1B-7B (64 experts, top-8)
              dict(vocab_size=50304, hidden_size=2048, intermediate_size=1024, num_hidden_layers=16,
                   num_attention_heads=16, num_key_value_heads=16, num_experts=64, num_experts_per_tok=8,
                   max_position_embeddings=4096, **bf16),
              dict(vocab_size=512, hidden_size=SMALL_WIDTH, intermediate_size=32, num_hidden_layers=16,
                   num_attention_heads=4, num_key_value_heads=4, num_experts=64, num_experts_per_tok=8),
              _ids(seq), ("OlmoeDecoderLayer",), moe="routed"),
        Model("gpt_oss", "GptOss", "moe", "GptOssConfig",  # gpt-oss-20b (32 experts, top-4)
              dict(vocab_size=201088, hidden_size=2880, intermediate_size=2880, num_hidden_layers=24,
                   num_attention_heads=64, num_key_value_heads=8, head_dim=64, num_local_experts=32,
                   num_experts_per_tok=4, sliding_window=128, max_position_embeddings=131072, **bf16),
              dict(vocab_size=512, hidden_size=SMALL_WIDTH, intermediate_size=64, num_hidden_layers=24,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=32,
                   num_experts_per_tok=4, sliding_window=8),
              _ids(seq), ("GptOssDecoderLayer",), moe="routed"),
    ]


def analytic_active(m: Model, kw: dict, seq: int) -> int | None:
    """The forward's matmul and attention FLOPs with only the active top-k experts, from the
    configuration (batch 1): attention projections and SDPA (2 FLOPs per multiply-add of
    Q·Kᵀ and of the weights·V, over the full seq², as FlopCounterMode counts), the router,
    k experts' gate, up and down projections per token, a shared expert, the LM head."""
    if m.moe is None:
        return None
    if m.moe == "deepseek":
        return _deepseek_active(kw, seq)
    ffn = kw.get("ffn_config") or {}
    experts = kw.get("num_local_experts") or kw.get("num_experts") or ffn["moe_num_experts"]
    k = kw.get("num_experts_per_tok") or ffn["moe_top_k"]
    hidden = ffn.get("ffn_hidden_size") or kw.get("moe_intermediate_size") or kw["intermediate_size"]
    shared = hidden if m.moe == "shared" else 0
    d = kw.get("hidden_size") or kw.get("d_model")
    heads = kw.get("num_attention_heads") or kw.get("n_heads")
    kv = kw.get("num_key_value_heads") or (kw.get("attn_config") or {}).get("kv_n_heads") or heads
    hd = kw.get("head_dim") or d // heads
    layers = kw.get("num_hidden_layers") or kw.get("n_layers")
    q, s = heads * hd, seq
    attention = 2 * s * d * (q + 2 * kv * hd) + 2 * s * q * d + 2 * 2 * s * s * hd * heads
    router = 2 * s * d * experts
    ffn = 2 * s * k * 3 * d * hidden + 2 * s * 3 * d * shared
    return layers * (attention + router + ffn) + 2 * s * d * kw["vocab_size"]


def _deepseek_active(kw: dict, s: int) -> int:
    """DeepSeek-V3: multi-head latent attention (queries and keys/values through low-rank
    projections; Q·Kᵀ over the nope + rope head width, weights·V over the value width), the
    first ``first_k_dense_replace`` layers dense, the rest a router over the routed experts,
    the top-k of them and the shared experts, and the LM head."""
    d, heads, layers = kw["hidden_size"], kw["num_attention_heads"], kw["num_hidden_layers"]
    qk = kw["qk_nope_head_dim"] + kw["qk_rope_head_dim"]
    q = 2 * s * (d * kw["q_lora_rank"] + kw["q_lora_rank"] * heads * qk) if kw.get("q_lora_rank") \
        else 2 * s * d * heads * qk
    kv = 2 * s * (d * (kw["kv_lora_rank"] + kw["qk_rope_head_dim"])
                  + kw["kv_lora_rank"] * heads * (kw["qk_nope_head_dim"] + kw["v_head_dim"]))
    attention = q + kv + 2 * s * heads * kw["v_head_dim"] * d + 2 * s * s * heads * (qk + kw["v_head_dim"])
    dense = kw.get("first_k_dense_replace", 0)
    h = kw["moe_intermediate_size"]
    moe = 2 * s * d * kw["n_routed_experts"] + 2 * s * 3 * d * h * (kw["num_experts_per_tok"] + kw["n_shared_experts"])
    return layers * attention + dense * 2 * s * 3 * d * kw["intermediate_size"] + (layers - dense) * moe \
        + 2 * s * d * kw["vocab_size"]


def call_text(config: str, kwargs: dict) -> str:
    return f"config={config}(" + ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) + ")"


# Runs a command; prints its wall time and the peak RSS of its largest process.
_WRAPPER = textwrap.dedent('''
    import json, resource, subprocess, sys, time
    t = time.perf_counter()
    done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"rc": done.returncode, "wall": wall, "cpu": ru.ru_utime + ru.ru_stime,
                      "rss": ru.ru_maxrss * 1024, "err": done.stderr[-2000:]}))
''')


@dataclass
class Result:
    wall: float = 0.0
    cpu: float = 0.0
    rss: int = 0
    ops: int = 0
    folded: int = 0
    blocks: int = 0
    unique: int = 0
    routing: bool = False
    unproduced: int = 0
    uncounted: int = 0  # ops no FLOP rule counts (-1: the capture has no costs)
    flops: int = 0
    active: int = 0  # matmul + attention FLOPs with each MoE layer's experts at their active top-k
    convention: str = ""  # each MoE layer's expert convention, in words
    first: list[str] = field(default_factory=list)
    on_screen: bool | None = None
    failed: str = ""
    dtype: str = ""
    path: Path | None = None

    @property
    def ok(self) -> bool:
        return (not self.failed and self.blocks > 0 and self.folded + self.unique == self.blocks
                and self.unproduced == 0)


def capture(ws: Path, m: Model, abstract: bool, timeout: int, reuse: bool = False) -> Result:
    out = ws / f"{m.name}_{'abstract' if abstract else 'eager'}.tvg"
    if reuse and out.exists():
        return read(out, m, Result(path=out))
    cmd = [sys.executable, "-m", "tensorviz_lsp", "capture", f"zoo.py:{m.symbol}", "--profile",
           f"{m.name}_{'abstract' if abstract else 'eager'}", "-o", str(out), "--timeout", str(timeout),
           "--init", call_text(m.config, m.real if abstract else m.small)]
    for i in m.inputs:
        cmd += ["--input", i]
    if abstract:
        cmd.append("--abstract")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _WRAPPER, *cmd], capture_output=True, text=True, env=env, cwd=ws)
    stats = json.loads(done.stdout.strip().splitlines()[-1])
    r = Result(wall=stats["wall"], cpu=stats["cpu"], rss=stats["rss"], path=out)
    if not out.exists():
        r.failed = (stats["err"].strip().splitlines() or ["no graph file"])[-1][:300]
        return r
    return read(out, m, r)


def read(out: Path, m: Model, r: Result) -> Result:
    cap = graphfile.decode(out.read_bytes())
    if cap.failure is not None:
        r.failed = f"{cap.failure.type}: {cap.failure.message}"[:300]
        return r
    r.ops = len(cap.nodes)
    r.dtype = (cap.meta.get("dtype") or {}).get("dtype", "")
    if cap.coverage.status != "complete":
        r.failed = "partial: " + ", ".join(cap.coverage.reasons)
    r.unproduced = len(values_without_producer(cap))
    if cap.cost is not None:  # ops no FLOP rule counts (capture.torch.cost): listed, never zero
        flops = cap.cost.flops
        r.uncounted = sum(1 for f in flops if f < 0)
        r.flops = sum(f for f in flops if f > 0)
    else:
        r.uncounted = -1
    fold(cap, m, r)
    experts(cap, r)
    return r


def experts(cap, r: Result) -> None:
    """Each MoE layer's expert convention, and the active matmul + attention FLOPs."""
    from viewer.projection.projection import Projection

    proj = Projection(cap)
    costs = proj.costs()
    if not costs.available:
        return
    kinds = costs.totals().get("flops_by_kind") or {}
    layers = proj.analysis.moe_layers()
    idle = sum(e["flops"] - e["active_flops"] for e in layers)
    r.active = kinds.get("matmul", 0) + kinds.get("attention", 0) - idle
    texts: dict[str, int] = {}
    for e in layers:
        texts[e["text"]] = texts.get(e["text"], 0) + 1
    r.convention = "; ".join(f"{n} layers {t}" for t, n in texts.items())
    assumed = cap.meta.get("assumptions") if isinstance(cap.meta, dict) else None
    if assumed:
        r.convention += f"; assumed ({len(assumed)} loops): {assumed[0].get('text', '')[:160]}"


def fold(cap, m: Model, r: Result) -> None:
    """Layers inside a folded stack, and the first view's contents, from the projection."""
    from viewer.projection.projection import Projection

    proj = Projection(cap)
    blocks = {g.id for g in cap.groups if isinstance(g.attrs, dict) and g.attrs.get("class") in m.blocks}
    r.blocks = len(blocks)
    stacked: set[int] = set()
    for view in proj.subtree(-1)["views"].values():
        for st in view["stacks"]:
            if st.get("fold"):
                continue
            stacked.update(int(k[1:]) for rep in st["members"] for k in rep if k.startswith("g"))
            r.routing = r.routing or bool(st.get("routing"))
    r.folded = len(blocks & stacked)
    # a layer whose structure no other layer shares (ModernBERT's first layer has no
    # attention norm) has nothing to fold with: it counts as unique, not as unfolded
    signature = proj.structure().signature
    seen: dict[str, int] = {}
    for g in blocks:
        seen[signature[g]] = seen.get(signature[g], 0) + 1
    r.unique = sum(1 for g in blocks if seen[signature[g]] == 1 and g not in stacked)
    trunk = proj.trunk()
    page = proj.children(trunk[-1] if trunk else -1)
    member_of = {k: st for st in page["stacks"] for rep in st["members"] for k in rep}
    first: list[str] = []
    for it in page["items"]:
        st = member_of.get(it["key"])
        if st is None:
            first.append(it.get("title") or it["label"])
        else:
            text = f"[{st['label']}]" if st.get("fold") else f"[{st['label']} ×{st['count']}]"
            if text not in first:
                first.append(text)
    r.first = first


def on_screen(browser, path: Path, name: str, shots: Path | None) -> bool | None:
    """Whether a stack card is on screen in the first view (1600 × 1000), not scrolled to."""
    from viewer.server.app import ViewerServer

    cap = graphfile.decode(path.read_bytes())
    server = ViewerServer([(cap, name)])
    server.start()
    server.warm()
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    try:
        page.goto(server.url)
        page.wait_for_function("() => window.tensorviz && window.tensorviz.ready && window.tensorviz.firstPaintMs !== null",
                               timeout=180_000)
        page.wait_for_timeout(1500)
        rects = page.evaluate("""() => {
          const tv = window.tensorviz, out = [];
          for (const k of tv.keys()) { const i = tv.itemInfo(k); if (i && i.kind === "stack" && i.card === "stack") out.push(tv.itemRect(k)); }
          const c = document.querySelector("canvas").getBoundingClientRect();
          return { rects: out, w: c.width, h: c.height };
        }""")
        if shots is not None:
            page.screenshot(path=str(shots / f"{name}_first.png"))
        w, h = rects["w"], rects["h"]
        for rc in rects["rects"]:
            if rc and rc["x"] >= -1 and rc["y"] >= -1 and rc["x"] + min(rc["w"], 200) <= w and rc["y"] + 24 <= h:
                return True
        return False
    finally:
        context.close()
        server.stop()


def _flops(f: int) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if f >= scale:
            return f"{f / scale:,.1f} {unit}"
    return f"{f:,}"


def _mb(b: int) -> str:
    return f"{b / 2**20:,.0f} MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--no-eager", action="store_true")
    ap.add_argument("--no-abstract", action="store_true")
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--shots", type=Path)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--keep", type=Path, help="a folder for the workspace and its graph files (default: temporary)")
    ap.add_argument("--reuse", action="store_true",
                    help="with --keep: read a graph file already there instead of capturing again (no time, no peak)")
    args = ap.parse_args()
    models = zoo(args.seq)
    if args.only:
        wanted = set(args.only.split(","))
        models = [m for m in models if m.name in wanted]
    if args.shots:
        args.shots.mkdir(parents=True, exist_ok=True)
    ws = args.keep or Path(tempfile.mkdtemp(prefix="tv-zoo-"))
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "zoo.py").write_text(ZOO_FILE)
    print(f"workspace {ws}; load {os.getloadavg()[0]:.1f}; {len(models)} models, batch 1, seq {args.seq}")
    browser = None
    pw = None
    if not args.no_browser and not args.no_abstract:
        from playwright.sync_api import sync_playwright

        pw = sync_playwright().start()
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
    rows = []
    started = time.perf_counter()
    try:
        for m in models:
            eager = None if args.no_eager else capture(ws, m, False, args.timeout, args.reuse)
            fake = None if args.no_abstract else capture(ws, m, True, args.timeout, args.reuse)
            if fake is not None and browser is not None and not fake.failed and fake.path is not None:
                try:
                    fake.on_screen = on_screen(browser, fake.path, m.name, args.shots)
                except Exception as exc:  # a browser problem is a figure, not a crash of the benchmark
                    fake.failed = f"viewer: {type(exc).__name__}: {exc}"[:200]
            rows.append((m, eager, fake))
            report_row(m, eager, fake, args.seq)
    finally:
        if browser is not None:
            browser.close()
            pw.stop()
    print(f"\n{sum(1 for _, e, f in rows if green(e, f))} of {len(rows)} rows green "
          f"({time.perf_counter() - started:,.0f} s; load {os.getloadavg()[0]:.1f})")


def green(eager: Result | None, fake: Result | None) -> bool:
    return all(r is None or r.ok for r in (eager, fake)) and (fake is None or fake.on_screen in (True, None))


def report_row(m: Model, eager: Result | None, fake: Result | None, seq: int = 16) -> None:
    mark = "green" if green(eager, fake) else "RED"
    print(f"\n{m.name} ({m.family}, {m.symbol}({m.config}))  {mark}")
    for label, r in (("small eager", eager), ("real abstract", fake)):
        if r is None:
            continue
        if r.failed and not r.ops:
            print(f"  {label:14} {r.wall:6.1f} s ({r.cpu:5.1f} s CPU) {_mb(r.rss):>9}  FAILED {r.failed}")
            continue
        screen = "" if r.on_screen is None else ("  stack on screen" if r.on_screen else "  stack NOT on screen")
        print(f"  {label:14} {r.wall:6.1f} s ({r.cpu:5.1f} s CPU) {_mb(r.rss):>9}  {r.ops:>7,} ops  {r.dtype or '-':8} folded "
              f"{r.folded}/{r.blocks}{f' (+{r.unique} unique)' if r.unique else ''}"
              f"{' (routing differs per layer)' if r.routing else ''}  unproduced {r.unproduced}"
              f"  {_flops(r.flops)} FLOPs, uncounted {r.uncounted if r.uncounted >= 0 else '-'}"
              f"{screen}{'  ' + r.failed if r.failed else ''}")
        print(f"  {'':14} first view: {' | '.join(r.first)[:220]}")
        if r.convention:
            print(f"  {'':14} experts: {r.convention}")
        want = analytic_active(m, m.real if r is fake else m.small, seq)
        if want and r.active:
            print(f"  {'':14} active matmul+attention FLOPs {_flops(r.active)} against analytic {_flops(want)} "
                  f"({100 * (r.active / want - 1):+.2f} %)")


if __name__ == "__main__":
    main()
