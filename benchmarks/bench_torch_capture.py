"""PyTorch eager capture vs a plain forward, side by side in one run.

    python benchmarks/bench_torch_capture.py [--layers 12] [--width 256] [--seq 128]
                                             [--batch 8] [--threads 2] [--repeat 5]

Model: ``torch.nn.TransformerEncoder`` (``--layers`` post-norm layers, ``batch_first``,
GELU, feed-forward 4x width), eval mode, ``torch.no_grad``. The fused "fast path" of
``nn.TransformerEncoderLayer`` (one ``_transformer_encoder_layer_fwd`` op per layer) is
switched off by default so that the capture records the real op-level graph (linear,
softmax, layer norm… ~30 ops a layer); ``--fastpath`` keeps it on. The plain forward
runs the same path as the captured one either way.

Measured (best of ``--repeat`` alternating rounds, wall and process CPU time, after a
warm-up forward and a warm-up capture, whose time is printed too):
  * plain: ``model(x)``;
  * capture, stats on / off: a ``TorchTrace`` recording the forward, plus ``finish()``
    (statistics fetch, aliases, per-group bytes) and ``build()`` into a ``Capture``;
  * the graph file: encode time and size, stats on and off;
  * a checkpoint-loaded run: the model's state dict, perturbed as training would, saved
    as ``.pt`` and ``.safetensors``; loading (``init.checkpoint`` through
    ``capture.torch.saved.load_checkpoint``: read, sha256, weights-only load, key and
    shape checks, ``load_state_dict``) is timed on its own, then a fresh model with the
    loaded weights is captured beside its own plain forward (stats on and off).
``--model gpt2``: a ``transformers`` ``GPT2Model`` built from a config of the same size
(input ids ``[batch, seq]``), captured with an empty workspace as the worker does for a
library model: no workspace frame exists, so every op walks to a *library frame*
(``capture.worker.libframes``), the costliest frame case. GPT-2 small is
``--model gpt2 --layers 12 --width 768 --heads 12``.
``--model resnet50``: a torchvision-style ResNet-50 written here (bottleneck blocks
3-4-6-3, batch norm, in-place ReLU), input ``[batch, 3, --image, --image]``.
Targets: capture at most 5x the plain forward with statistics on, at most 2x with
statistics off, for the checkpoint-loaded model too (loading is a one-time set-up cost,
reported separately); for GPT-2 small and ResNet-50, statistics on at most 1.25x.
Statistics are also measured the way they were computed before their one-pass
reduction (``aminmax``, a sum and a norm as separate passes, each read back on its own:
"stats, 3 passes"), side by side. ``--no-checkpoint`` skips the checkpoint-loaded run.
Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from capture.graph import graphfile  # noqa: E402
from capture.recipe import parse_profile  # noqa: E402
from capture.torch import stats as stats_module  # noqa: E402
from capture.torch.saved import load_checkpoint  # noqa: E402
from capture.torch.trace import TorchTrace  # noqa: E402
from capture.worker.context import CaptureContext  # noqa: E402
from capture.worker.workspace_files import WorkspaceFiles  # noqa: E402


def build_model(layers: int, width: int, heads: int) -> torch.nn.Module:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(
        width, heads, dim_feedforward=4 * width, dropout=0.1, activation="gelu", batch_first=True
    )
    return torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()


def build_gpt2(layers: int, width: int, heads: int, seq: int) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    config = GPT2Config(n_layer=layers, n_embd=width, n_head=heads, n_positions=max(seq, 16),
                        vocab_size=1024, use_cache=False)
    return GPT2Model(config).eval()


class Bottleneck(torch.nn.Module):
    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        nn = torch.nn
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, 4 * width, 1, bias=False), nn.BatchNorm2d(4 * width)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != 4 * width:
            self.downsample = nn.Sequential(nn.Conv2d(cin, 4 * width, 1, stride, bias=False), nn.BatchNorm2d(4 * width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += identity
        return self.relu(out)


class ResNet50(torch.nn.Module):
    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        nn = torch.nn
        self.conv1, self.bn1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64)
        self.relu, self.maxpool = nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
        stages, cin = [], 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            layer = []
            for i in range(blocks):
                layer.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = 4 * width
            stages.append(nn.Sequential(*layer))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(2048, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def three_pass_stats(t: torch.Tensor) -> dict:
    """Statistics as computed before the one-pass reduction: aminmax, a sum and a norm,
    each a pass of its own, each read back on its own (a reference for the figures)."""
    import math

    x = t if t.dtype in (torch.float32, torch.float64) else t.float()
    n = x.numel()
    mn_t, mx_t = torch.aminmax(x)
    mn, mx = mn_t.item(), mx_t.item()
    if not (math.isfinite(mn) and math.isfinite(mx)):
        return stats_module._masked_stats(x, n)
    s = x.sum().item()
    q = torch.linalg.vector_norm(x).item()
    mean = s / n
    var = q * q / n - mean * mean
    std = torch.std(x.double(), correction=0).item() if var < 1e-4 * mean * mean and n > 1 else math.sqrt(max(var, 0.0))
    return {"min": mn, "max": mx, "mean": mean, "std": std, "nan": 0, "inf": 0}


def capture_three_pass(model: torch.nn.Module, x: torch.Tensor, files: WorkspaceFiles):
    one_pass = stats_module.stats_now
    stats_module.stats_now = three_pass_stats
    try:
        return capture_once(model, x, True, files)
    finally:
        stats_module.stats_now = one_pass


def capture_once(model: torch.nn.Module, x: torch.Tensor, stats: bool, files: WorkspaceFiles):
    trace = TorchTrace(files, stats=stats)
    trace.label_module(model)
    inputs = {"dict": [["args", {"tuple": [trace.structure(x, label="args[0]")]}], ["kwargs", {"dict": []}]]}
    with trace.recording():
        out = model(x)
    outputs = trace.structure(out)
    trace.finish()
    return trace.build(scope="eager_forward", inputs=inputs, outputs=outputs)


def best(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return min(times), result


def interleaved(fns: dict, repeat: int) -> tuple[dict, dict, dict]:
    """Best wall and process-CPU seconds of each function, measured in alternating
    rounds so that load from elsewhere on a shared machine hits every variant alike."""
    wall = {k: [] for k in fns}
    cpu = {k: [] for k in fns}
    results = {}
    for _ in range(repeat):
        for k, fn in fns.items():
            w, c = time.perf_counter(), time.process_time()
            results[k] = fn()
            cpu[k].append(time.process_time() - c)
            wall[k].append(time.perf_counter() - w)
    return {k: min(v) for k, v in wall.items()}, {k: min(v) for k, v in cpu.items()}, results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--fastpath", action="store_true", help="keep the fused encoder-layer fast path on")
    ap.add_argument("--model", choices=("encoder", "gpt2", "resnet50"), default="encoder",
                    help="gpt2: transformers' GPT2Model from a config (library frames on every op); "
                         "resnet50: a torchvision-style ResNet-50")
    ap.add_argument("--image", type=int, default=224, help="resnet50: image size")
    ap.add_argument("--no-checkpoint", action="store_true", help="skip the checkpoint-loaded run")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.backends.mha.set_fastpath_enabled(args.fastpath)
    if args.model == "resnet50":
        torch.manual_seed(0)
        model = ResNet50().eval()
        x = torch.randn(args.batch, 3, args.image, args.image)
        files = WorkspaceFiles(Path(__file__).resolve().parent)
        print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); ResNet-50 (torchvision-style), "
              f"input [{args.batch},3,{args.image},{args.image}]")
    elif args.model == "gpt2":
        model = build_gpt2(args.layers, args.width, args.heads, args.seq)
        x = torch.randint(0, 1024, (args.batch, args.seq))
        files = WorkspaceFiles(tempfile.mkdtemp(prefix="tv-bench-ws-"))  # no workspace code runs
        print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); transformers GPT2Model: {args.layers} layers, "
              f"width {args.width}, {args.heads} heads, input ids [{args.batch},{args.seq}]")
    else:
        model = build_model(args.layers, args.width, args.heads)
        x = torch.randn(args.batch, args.seq, args.width)
        files = WorkspaceFiles(Path(__file__).resolve().parent)
        print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); TransformerEncoder: {args.layers} layers, "
              f"width {args.width}, {args.heads} heads, ff {4 * args.width}, input [{args.batch},{args.seq},{args.width}], "
              f"fast path {'on' if args.fastpath else 'off'}")

    with torch.no_grad():
        model(x)  # the first forward in a process pays kernel set-up: not the capture's cost
        t0 = time.perf_counter()
        first = capture_once(model, x, True, files)
        first_s = time.perf_counter() - t0
        wall, cpu, results = interleaved({
            "plain": lambda: model(x),
            "on": lambda: capture_once(model, x, True, files),
            "three": lambda: capture_three_pass(model, x, files),
            "off": lambda: capture_once(model, x, False, files),
        }, args.repeat)
    plain_s, on_s, off_s = wall["plain"], wall["on"], wall["off"]
    cap_on, cap_off = results["on"], results["off"]

    enc_on_s, data_on = best(lambda: graphfile.encode(cap_on), args.repeat)
    enc_off_s, data_off = best(lambda: graphfile.encode(cap_off), args.repeat)
    n_nodes, n_values, n_groups = len(cap_on.nodes), len(cap_on.values), len(cap_on.groups)
    per_op_us = (off_s - plain_s) / n_nodes * 1e6

    n_library = sum(f.library for f in cap_on.frames)
    print(f"graph: {n_nodes:,} ops, {n_values:,} values, {n_groups:,} module groups, {len(cap_on.frames)} frames "
          f"({n_library} library), {sum(n.frame is not None for n in cap_on.nodes):,} ops with a frame")
    print(f"{'':28}{'wall s':>10}{'x plain':>10}{'cpu s':>10}{'x plain':>10}")
    target = "   (target <= 1.25x for GPT-2 small and ResNet-50; <= 5x)"
    for label, key, note in (("plain forward", "plain", ""), ("capture, stats on", "on", target),
                             ("capture, stats, 3 passes", "three", "   (before the one-pass reduction)"),
                             ("capture, stats off", "off", "   (target <= 2x)")):
        print(f"{label:28}{wall[key]:10.4f}{wall[key] / plain_s:10.2f}{cpu[key]:10.4f}{cpu[key] / cpu['plain']:10.2f}{note}")
    same = [v.measured.get("stats") for v in results["on"].values] == [
        v.measured.get("stats") for v in results["three"].values]
    worst = 0.0
    for a, b in zip(results["on"].values, results["three"].values):
        sa, sb = a.measured.get("stats"), b.measured.get("stats")
        if sa and sb and sa["std"] is not None:
            for k in ("min", "max", "mean", "std"):
                worst = max(worst, abs(sa[k] - sb[k]) / max(abs(sb[k]), 1e-30))
    print(f"statistics, one pass vs 3 passes: {'identical' if same else f'largest relative difference {worst:.1e}'}"
          f"; stats cost per value: one pass {(on_s - off_s) / max(n_values, 1) * 1e6:.1f} us, "
          f"3 passes {(wall['three'] - off_s) / max(n_values, 1) * 1e6:.1f} us")
    print(f"{'first capture in process':28}{first_s:10.4f}{first_s / plain_s:10.2f}   (first in this process, after one plain forward)")
    print(f"overhead per op, stats off: {per_op_us:.1f} us; stats cost per op: {(on_s - off_s) / n_nodes * 1e6:.1f} us")
    print(f"graph file, stats on : {len(data_on):>10,} bytes ({len(data_on) / n_nodes:.0f} B/op), encode {enc_on_s:.4f} s")
    print(f"graph file, stats off: {len(data_off):>10,} bytes ({len(data_off) / n_nodes:.0f} B/op), encode {enc_off_s:.4f} s")
    assert len(first.nodes) == n_nodes
    if args.model == "encoder" and not args.no_checkpoint:
        checkpoint_run(model, x, args.layers, args.width, args.heads, args.repeat)


def checkpoint_run(model: torch.nn.Module, x: torch.Tensor, layers: int, width: int, heads: int, repeat: int) -> None:
    """Load a saved state dict into a fresh model (timed alone), then capture it."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "runs").mkdir()
        with torch.no_grad():
            trained = {k: v + 0.01 * torch.randn_like(v) if v.is_floating_point() else v
                       for k, v in model.state_dict().items()}
        torch.save(trained, root / "runs" / "best.pt")
        formats = ["runs/best.pt"]
        try:
            from safetensors.torch import save_file

            save_file({k: v.contiguous() for k, v in trained.items()}, str(root / "runs" / "best.safetensors"))
            formats.append("runs/best.safetensors")
        except ImportError:
            print("safetensors is not installed: .safetensors loading not measured")
        size = (root / "runs" / "best.pt").stat().st_size
        print(f"checkpoint-loaded run: state dict of {len(trained)} tensors, {size / (1 << 20):.1f} MiB")
        loaded = build_model(layers, width, heads)
        for rel in formats:
            recipe = parse_profile("bench", {"model": "bench:Model", "init": {"checkpoint": rel}})

            def load(rel=rel, recipe=recipe):
                ctx = CaptureContext(recipe, root)
                return load_checkpoint(ctx, torch, loaded, torch.device("cpu"))

            load_s, meta = best(load, repeat)
            print(f"  load {rel:24} {load_s:10.4f} s   ({size / load_s / (1 << 30):.2f} GiB/s; "
                  f"{meta['checkpoint_tensors']} tensors, strict)")
        with torch.no_grad():
            assert torch.equal(loaded.layers[0].linear1.weight, trained["layers.0.linear1.weight"])
            loaded(x)
            files = WorkspaceFiles(root)
            wall, cpu, results = interleaved({
                "plain": lambda: loaded(x),
                "on": lambda: capture_once(loaded, x, True, files),
                "off": lambda: capture_once(loaded, x, False, files),
            }, repeat)
        print(f"{'  (checkpoint-loaded model)':28}{'wall s':>10}{'x plain':>10}{'cpu s':>10}{'x plain':>10}")
        for label, key, note in (("  plain forward", "plain", ""), ("  capture, stats on", "on", "   (target <= 5x)"),
                                 ("  capture, stats off", "off", "   (target <= 2x)")):
            print(f"{label:28}{wall[key]:10.4f}{wall[key] / wall['plain']:10.2f}{cpu[key]:10.4f}"
                  f"{cpu[key] / cpu['plain']:10.2f}{note}")
        assert len(results["on"].nodes) > 0


if __name__ == "__main__":
    main()
