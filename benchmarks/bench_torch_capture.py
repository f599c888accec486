"""PyTorch eager capture vs a plain forward, side by side in one run.

    python benchmarks/bench_torch_capture.py [--nanogpt PATH] [--seq 128] [--repeat 5]
                                             [--no-peers] [--no-existing]
    python benchmarks/bench_torch_capture.py --scaling [--sizes 1000,10000,100000]
    python benchmarks/bench_torch_capture.py --model encoder|gpt2|resnet50|nanogpt|llama
                                             [--layers 12] [--width 256] [--seq 128]
                                             [--batch 8] [--threads 2] [--repeat 5]

**What users run** (the default): three models at batch 1 and one thread (what a person
opening a model gets), and beside them at the earlier headline setting (batch 8, two
threads): nanoGPT 124 M (``--nanogpt PATH``: nanoGPT's own ``model.py``, read at run
time and never copied here; skipped without it), a ``transformers`` ``LlamaForCausalLM``
from a config (4 layers, width 256, 4 heads, MLP 688, vocabulary 32,000; ``--seq``
token ids) and a torchvision-style ResNet-50 written here (input [1, 3, 224, 224]). All
in eval mode under ``torch.no_grad``, as the worker runs a ``mode = "eval"`` recipe.
Each capture is what the worker does: a ``TorchTrace`` recording the forward, then
``finish()`` and ``build()``. Measured by process CPU time in A/B-interleaved pairs
(each pair a plain forward and the variant, in alternating order; the ratio is the
median of the pairs' ratios): statistics on, statistics off, and, when installed,
torchview (``draw_graph``, every depth), torchinfo (``summary``, modules only, no op
graph), TorchLens (``trace``, its defaults) and ``torch.export``, each beside its own
plain forwards. Beside them, the hook floor: the same forward under what any op-level
capture needs and nothing else (global module pre/post hooks, a ``TorchFunctionMode`` and
a ``TorchDispatchMode``, each calling straight through, the dispatch mode with the same
Dynamo guard as TensorViz's: its code marked for Dynamo to skip), so the rows say how much of the cost per op is the
hooks themselves and how much is TensorViz's own recording; under it, each of the three
mechanisms alone (module hooks alone, function mode alone, dispatch mode alone), so the
floor is explained. Beside TensorViz's rows (the Python recorder, a ``TorchDispatchMode``),
the native recorder's (``capture.torch.native``, statistics on and off; built first,
outside the pairs; ``--recorder python`` leaves them out), and its own floor: the module
hooks, the function mode and the recorder's ATen callbacks (each top-level op's inputs and
outputs boxed, nothing recorded), all calling straight through, with the callbacks alone
beneath it. ``--off-only``: only statistics off, the floor and its mechanisms. Per recorded op: the median
of the pairs' CPU differences over the op count. Targets printed beside each figure (issues 40
and 51): statistics on <= 1.25x, off <= 1.10x; <= 30 us per op off, <= 60 us on. "Stats on"
is the graph the user first sees, as the worker sends it: every activation's statistics
exact and measured within the forward, the parameters' measured after the graph is sent
(issue 51), the file's encode not included; the suite prints exactly what each row times
(``WHAT_IS_TIMED``). Beside it: the graph and its encode ("+ encode"), the graph and the
parameters' statistics together ("+ parameters after"), and every parameter measured in
the forward as before ("parameters in forward"). Last, the native recorder with statistics
off as a user's capture runs: each capture and each plain forward in a child freshly
forked from the benchmark (the warm worker forks one child per capture), where every page
either writes is a first touch or a copy-on-write; in one long-lived process the heap is
warm but glibc gives its top back and faults it in again from run to run. The load
average is printed before and after (the machine is shared: quote figures with their
load).

**Scaling** (``--scaling``): a deep ``ModuleList`` of small blocks (written here)
captured at about 1k, 10k and 100k ops (``--sizes``, ops wanted), statistics on: the
Python recorder's capture CPU and the graph-file encode CPU per op, and their exponents
in the op count (least squares over log-log; target <= 1.05, linear); beside them the
native recorder's capture (what a user gets where it is built; ``--recorder python``
leaves it out) and its CPU per op over the plain forward (issue 51's per-op target,
<= 60 us with statistics on: tiny ops, so the cost per op is what shows); then the whole
CLI (``tensorviz capture`` of the same model at the largest size) beside a plain script
running the same forward.

**One model in detail** (``--model``, the earlier report): ``encoder`` is
``torch.nn.TransformerEncoder`` (``--layers`` post-norm layers, ``batch_first``, GELU,
feed-forward 4x width; its fused fast path off unless ``--fastpath``); ``gpt2`` a
``transformers`` ``GPT2Model`` from a config (GPT-2 small is ``--layers 12 --width 768
--heads 12``), captured with an empty workspace so every op walks to a library frame;
``resnet50`` the ResNet-50 above (``--image``); ``nanogpt`` and ``llama`` as above.
Best of ``--repeat`` alternating rounds, wall and CPU: plain, statistics on, statistics
computed the way they were before their one-pass reduction ("stats, 3 passes"),
statistics off; the first capture in the process; the graph file's encode time and size;
for ``encoder``, a checkpoint-loaded run (``init.checkpoint`` through
``capture.torch.saved.load_checkpoint``, timed alone, then captured; ``--no-checkpoint``
skips it).

Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import importlib.util
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from capture.graph import gc_pause, graphfile  # noqa: E402
from capture.recipe import parse_profile  # noqa: E402
from capture.torch import stats as stats_module  # noqa: E402
from capture.torch.saved import load_checkpoint  # noqa: E402
from capture.torch.trace import TorchTrace, _skip_dynamo_below  # noqa: E402
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


LLAMA_CONFIG = dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4,
                    num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048, use_cache=False)


def build_llama() -> torch.nn.Module:
    """``transformers``' Llama from a config: 4 layers of width 256 (LLAMA_CONFIG)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**LLAMA_CONFIG)).eval()


def load_nanogpt(path: str):
    """nanoGPT's ``model.py`` (given at run time, never copied into this repository)."""
    spec = importlib.util.spec_from_file_location("nanogpt_model", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["nanogpt_model"] = module
    spec.loader.exec_module(module)
    return module


def build_nanogpt(path: str) -> torch.nn.Module:
    """nanoGPT at GPT-2 small's size (its ``GPTConfig`` defaults: 12 layers, width 768,
    12 heads, block 1024, vocabulary 50,304: 124 M parameters)."""
    module = load_nanogpt(path)
    torch.manual_seed(0)
    with contextlib.redirect_stdout(io.StringIO()):  # it prints its parameter count
        return module.GPT(module.GPTConfig(dropout=0.0)).eval()


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


def capture_once(model: torch.nn.Module, x: torch.Tensor, stats: bool, files: WorkspaceFiles,
                 parameters: str = "later", after: bool = False, recorder: str = "python"):
    """The graph as the worker sends it (``parameters="later"``: the parameters'
    statistics measured after it; ``after``: those measured too, as the worker then
    does); ``parameters="now"`` measures them in the forward, as before issue 51.
    ``recorder``: ``python`` (the dispatch mode) or ``native`` (``capture.torch.native``)."""
    before = os.environ.get(RECORDER_ENV)
    os.environ[RECORDER_ENV] = recorder
    try:
        return _capture_once(model, x, stats, files, parameters, after)
    finally:
        if before is None:
            os.environ.pop(RECORDER_ENV, None)
        else:
            os.environ[RECORDER_ENV] = before


RECORDER_ENV = "TENSORVIZ_TORCH_RECORDER"


def _capture_once(model: torch.nn.Module, x: torch.Tensor, stats: bool, files: WorkspaceFiles,
                  parameters: str, after: bool):
    trace = TorchTrace(files, stats=stats, parameters=parameters)
    trace.label_module(model)
    inputs = {"dict": [["args", {"tuple": [trace.structure(x, label="args[0]")]}], ["kwargs", {"dict": []}]]}
    with trace.recording():
        out = model(x)
    outputs = trace.structure(out)
    trace.finish()
    capture = trace.build(scope="eager_forward", inputs=inputs, outputs=outputs)
    if after:
        trace.measure_later()
    return capture


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


# --------------------------------------------------------------------------- what users run

TARGET_ON, TARGET_OFF, TARGET_US_OFF, TARGET_US_ON, TARGET_EXPONENT = 1.25, 1.10, 30.0, 60.0, 1.05


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} CPUs"


def cpu_of(fn) -> tuple[float, object]:
    c = time.process_time()
    result = fn()
    return time.process_time() - c, result


def in_child(fn) -> tuple[float, object]:
    """``fn``'s CPU seconds in a child forked from this process, as the warm worker runs
    each capture (capture.worker.zygote): its heap and its Python objects as the fork
    left them, so each page it writes is a first touch or a copy, and the objects made
    before the fork frozen, as that parent freezes them. The result stays in the child
    (None here)."""
    r, w = os.pipe()
    gc.freeze()  # as the warm worker's parent does before each fork
    pid = os.fork()
    if pid == 0:  # the child: time fn, report, leave without running the parent's exit
        code = 1
        try:
            gc_pause.freeze_for_fork()  # this child keeps them frozen, as the worker's does
            os.close(r)
            c = time.process_time()
            fn()
            os.write(w, repr(time.process_time() - c).encode())
            code = 0
        finally:
            os._exit(code)
    gc.unfreeze()  # this process as it was
    os.close(w)
    data = b""
    while chunk := os.read(r, 64):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if not data or os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"the forked child failed (exit status {os.waitstatus_to_exitcode(status)})")
    return float(data), None


def pairs(plain, variants: dict, repeat: int, measure=None) -> dict:
    """Each variant against its own plain forwards, A/B-interleaved: ``repeat`` pairs per
    variant (plain then variant, or variant then plain, alternately), all variants
    taking turns in every round so that load from elsewhere hits them alike. Per variant:
    the median of the pairs' CPU ratios and differences, the least CPU seconds of both,
    its last result (or the exception it raised). ``measure`` times one call (default:
    in this process; :func:`in_child`: each call in a forked child)."""
    measure = measure or cpu_of
    out = {k: {"ratios": [], "diffs": [], "cpu": [], "plain": [], "result": None, "error": None} for k in variants}
    for r in range(repeat):
        for key, fn in variants.items():
            row = out[key]
            if row["error"] is not None:
                continue
            try:
                if (r + len(row["cpu"])) % 2:
                    c_v, res = measure(fn)
                    c_p, _ = measure(plain)
                else:
                    c_p, _ = measure(plain)
                    c_v, res = measure(fn)
            except Exception as exc:  # noqa: BLE001 - a peer that cannot run this model says why
                row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:120]
                continue
            row["result"] = res
            row["cpu"].append(c_v)
            row["plain"].append(c_p)
            row["ratios"].append(c_v / c_p)
            row["diffs"].append(c_v - c_p)
    for row in out.values():
        if row["cpu"]:
            row["ratio"] = statistics.median(row["ratios"])
            row["diff"] = statistics.median(row["diffs"])
            row["cpu_best"], row["plain_best"] = min(row["cpu"]), min(row["plain"])
    return out


class _PassFunction(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class _PassDispatch(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # as capture.torch.trace chooses: its code is marked instead
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _no_hook(*args) -> None:
    return None


def hook_floor(model: torch.nn.Module, x: torch.Tensor, mechanisms: tuple[str, ...] = ("module", "function", "dispatch")):
    """``model(x)`` under the hooks an op-level capture cannot do without, each doing
    nothing: global module pre/post hooks (``module``), a function mode (``function``) and
    a dispatch mode (``dispatch``), the native recorder's ATen callbacks (``aten``: every
    top-level op's inputs and outputs boxed, nothing recorded); ``mechanisms`` picks some of
    them (the rows that explain the floor)."""
    mm = torch.nn.modules.module
    probe = _native_module() if "aten" in mechanisms else None
    if "torch._dynamo" in sys.modules:  # Dynamo skips the mode's frames, as it does TensorViz's
        _skip_dynamo_below(_PassDispatch.__torch_dispatch__.__code__)
    handles = [mm.register_module_forward_pre_hook(_no_hook),
               mm.register_module_forward_hook(_no_hook, always_call=True)] if "module" in mechanisms else []
    try:
        if probe is not None:
            probe.callbacks_alone(True)
        with (_PassFunction() if "function" in mechanisms else contextlib.nullcontext()), \
                (_PassDispatch() if "dispatch" in mechanisms else contextlib.nullcontext()):
            return model(x)
    finally:
        if probe is not None:
            probe.callbacks_alone(False)
        for handle in handles:
            handle.remove()


def _native_module():
    from capture.torch.native import load

    return load(wait=True)


# The floor's mechanisms, each alone: (key, label, what hook_floor installs).
MECHANISMS = (("floor:module", "  module hooks alone", ("module",)),
              ("floor:function", "  function mode alone", ("function",)),
              ("floor:dispatch", "  dispatch mode alone", ("dispatch",)))
# What the native recorder cannot do without (it has no dispatch mode): the module hooks,
# the function mode and its ATen callbacks, each calling straight through.
NATIVE_FLOOR = ("floor:native", "native floor (no recording)", ("module", "function", "aten"))
NATIVE_ALONE = ("floor:aten", "  ATen callbacks alone", ("aten",))


def peer_variants(model: torch.nn.Module, x: torch.Tensor) -> dict:
    """The peers that are installed, each a callable capturing ``model(x)`` its own way."""
    out = {}
    try:
        import torchview

        out["torchview"] = lambda: torchview.draw_graph(model, input_data=x, depth=math.inf, device="cpu",
                                                        save_graph=False)
    except ImportError:
        pass
    try:
        import torchinfo

        out["torchinfo"] = lambda: torchinfo.summary(model, input_data=x, depth=100, verbose=0)
    except ImportError:
        pass
    try:
        import torchlens
        from torchlens.options import CaptureOptions

        # unwrap_when_done: TorchLens otherwise leaves torch's functions wrapped, which
        # would slow every plain forward measured after it.
        out["torchlens"] = lambda: torchlens.trace(model, x, capture=CaptureOptions(unwrap_when_done=True))
    except ImportError:
        pass
    return out


def suite_models(args) -> list[tuple[str, object, object, object]]:
    """(name, build, make input(batch), workspace) of the three models users run."""
    models = []
    want = set(args.only.split(",")) if args.only else {"nanogpt", "llama", "resnet50"}
    if "nanogpt" in want:
        if args.nanogpt:
            models.append(("nanoGPT 124M", lambda: build_nanogpt(args.nanogpt),
                           lambda b: torch.randint(0, 50304, (b, args.seq)),
                           Path(args.nanogpt).resolve().parent))
        else:
            print("nanoGPT: skipped (no --nanogpt PATH to its model.py)")
    if "llama" in want:
        models.append(("Llama 4x256", build_llama, lambda b: torch.randint(0, LLAMA_CONFIG["vocab_size"], (b, args.seq)),
                       Path(tempfile.mkdtemp(prefix="tv-bench-ws-"))))  # library code only: library frames
    if "resnet50" in want:
        def build_resnet() -> torch.nn.Module:
            torch.manual_seed(0)
            return ResNet50().eval()

        models.append(("ResNet-50", build_resnet, lambda b: torch.randn(b, 3, args.image, args.image),
                       Path(__file__).resolve().parent))
    return models


WHAT_IS_TIMED = """\
What each row times (process CPU, from the trace's creation to the Capture object in memory):
  stats on   the graph the user first sees, as the worker sends it: TorchTrace set up (labels), the
             forward recorded (every ATen op, value, module and function call, frame), each floating
             activation's statistics exact and of the data it had (measured within the forward; small
             ones batched and flushed before any write to their storage and at finish()), finish()
             (aliases, output bytes) and build(). Not in it: the parameters' statistics (they follow the
             graph in a second message: "+ parameters after") and the graph file's encode ("+ encode").
  stats off  the same with no statistics at all.
  + encode   stats on, then graphfile.encode of the capture (the bytes the worker writes).
  + parameters after  stats on, then every parameter measured (the worker's whole work).
  parameters in forward  every parameter measured when first read, before the graph (before issue 51)."""


def native_ready(args) -> bool:
    """Whether the native recorder's rows are measured (built first, outside the pairs)."""
    if args.recorder == "python":
        return False
    try:
        from capture.torch.native import load

        load(wait=True)
    except Exception as exc:  # noqa: BLE001 - no compiler here: the Python rows only
        print(f"native recorder: not measured ({exc})")
        return False
    return True


def suite(args) -> None:
    warnings.filterwarnings("ignore")
    print(f"torch {torch.__version__}; {load_line()}")
    print(f"CPU time in A/B-interleaved pairs, {args.repeat} pairs per variant; ratio: median of the pairs' "
          "CPU ratios to their own plain forward")
    print(WHAT_IS_TIMED)
    settings = [(1, 1)] + ([] if args.no_existing else [(8, 2)])
    rows = []
    for name, build, make_input, workspace in suite_models(args):
        model = build()
        files = WorkspaceFiles(workspace)
        for batch, threads in settings:
            torch.set_num_threads(threads)
            x = make_input(batch)
            with torch.no_grad():
                model(x)  # the first forward in a process pays kernel set-up: not the capture's cost
                capture_once(model, x, True, files)
                variants = {} if args.off_only else {
                    "on": lambda: capture_once(model, x, True, files),
                    "on+encode": lambda: graphfile.encode(capture_once(model, x, True, files)),
                    "on+after": lambda: capture_once(model, x, True, files, after=True),
                    "on, now": lambda: capture_once(model, x, True, files, parameters="now")}
                variants.update({"off": lambda: capture_once(model, x, False, files),
                                 "floor": lambda: hook_floor(model, x)})
                if native_ready(args):
                    capture_once(model, x, True, files, recorder="native")
                    if not args.off_only:
                        variants["native on"] = lambda: capture_once(model, x, True, files, recorder="native")
                    variants["native off"] = lambda: capture_once(model, x, False, files, recorder="native")
                    for key, _, mechanisms in (NATIVE_FLOOR, NATIVE_ALONE):
                        variants[key] = lambda mechanisms=mechanisms: hook_floor(model, x, mechanisms)
                for key, _, mechanisms in MECHANISMS:
                    variants[key] = lambda mechanisms=mechanisms: hook_floor(model, x, mechanisms)
                if batch == 1 and not args.no_peers and not args.off_only:
                    variants.update(peer_variants(model, x))
                got = pairs(lambda: model(x), variants, args.repeat)
                if batch == 1 and not args.no_peers and not args.off_only:
                    got.update(export_pairs(model, x, args.repeat))
                if batch == 1 and "native off" in variants and hasattr(os, "fork"):
                    got.update(pairs(lambda: model(x), {"native off, forked": variants["native off"]}, args.repeat,
                                     measure=in_child))
            n_ops = len(got["off"]["result"].nodes)
            rows.append((name, batch, threads, n_ops, got))
            print_row(name, batch, threads, n_ops, got)
    print(f"after: {load_line()}")


def export_pairs(model: torch.nn.Module, x: torch.Tensor, repeat: int) -> dict:
    """``torch.export`` against plain forwards (after a warm-up export: Dynamo's first
    run in a process pays its set-up)."""
    try:
        torch.export.export(model, (x,))
    except Exception as exc:  # noqa: BLE001
        return {"torch.export": {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"[:120]}}
    return pairs(lambda: model(x), {"torch.export": lambda: torch.export.export(model, (x,))},
                 max(2, repeat // 2))


def print_row(name: str, batch: int, threads: int, n_ops: int, got: dict) -> None:
    plain = got["off"]["plain_best"]
    print(f"\n{name}, batch {batch}, {threads} thread(s): {n_ops:,} ops; plain forward {plain:.4f} s CPU")
    print(f"  {'':26}{'x plain':>9}{'us/op':>9}{'cpu s':>9}   target")
    for key, label, target, us_target in (("on", "TensorViz, stats on", TARGET_ON, TARGET_US_ON),
                                          ("off", "TensorViz, stats off", TARGET_OFF, TARGET_US_OFF),
                                          ("native on", "  native recorder, on", TARGET_ON, TARGET_US_ON),
                                          ("native off", "  native recorder, off", TARGET_OFF, TARGET_US_OFF)):
        if key not in got:
            continue
        row = got[key]
        per_op = row["diff"] / n_ops * 1e6
        verdict = "meets" if row["ratio"] <= target and per_op <= us_target else "misses"
        note = f"<= {target:.2f}x, <= {us_target:.0f} us/op ({verdict})" if batch == 1 else f"(batch {batch})"
        print(f"  {label:26}{row['ratio']:9.2f}{per_op:9.1f}{row['cpu_best']:9.4f}   {note}")
    floor = got["floor"]
    if floor.get("error"):
        print(f"  {'hook floor':26}   failed: {floor['error']}")
    else:
        print(f"  {'hook floor (no recording)':26}{floor['ratio']:9.2f}{floor['diff'] / n_ops * 1e6:9.1f}"
              f"{floor['cpu_best']:9.4f}   hooks and modes that call straight through")
        for key, label, _ in MECHANISMS:
            row = got.get(key)
            if row and not row.get("error"):
                print(f"  {label:26}{row['ratio']:9.2f}{row['diff'] / n_ops * 1e6:9.1f}{row['cpu_best']:9.4f}   "
                      "(per op of the capture's count; noise on a shared machine is a few us/op)")
        own = {key: (got[key]["diff"] - floor["diff"]) / n_ops * 1e6 for key in ("on", "off") if key in got}
        if "on" in own:
            print(f"  {'TensorViz above the floor':26}{'':9}{own['on']:9.1f}{'':9}   us/op stats on; "
                  f"{own['off']:.1f} us/op stats off")
        else:
            print(f"  {'TensorViz above the floor':26}{'':9}{own['off']:9.1f}{'':9}   us/op stats off")
    print_native_floor(got, n_ops)
    forked = got.get("native off, forked")
    if forked and forked.get("error"):
        print(f"  {'native off, forked child':26}   failed: {forked['error']}")
    elif forked:
        print(f"  {'native off, forked child':26}{forked['ratio']:9.2f}{forked['diff'] / n_ops * 1e6:9.1f}"
              f"{forked['cpu_best']:9.4f}   each capture and plain forward in a fresh child of this process, as the "
              f"worker runs a capture (plain {forked['plain_best']:.4f} s there)")
    extra = {"on+encode": ("stats on + encode", "the graph, then its file's bytes (graphfile.encode)"),
             "on+after": ("stats on + parameters after", "the graph, then the parameters' statistics (the worker's whole work)"),
             "on, now": ("stats on, parameters in forward", "every parameter measured before the graph (before issue 51)")}
    for key, (label, what) in extra.items():
        row = got.get(key)
        if row and not row.get("error"):
            print(f"  {label:26}{row['ratio']:9.2f}{row['diff'] / n_ops * 1e6:9.1f}{row['cpu_best']:9.4f}   {what}")
    for key, row in got.items():
        if key in ("on", "off", "native on", "native off", "native off, forked", "floor", *extra) \
                or key.startswith("floor:"):
            continue
        if row.get("error"):
            print(f"  {key:26}   failed: {row['error']}")
            continue
        what = {"torchinfo": "modules only, no op graph", "torch.export": "an exported program",
                "torchview": "op graph, no measurements", "torchlens": "its defaults"}.get(key, "")
        print(f"  {key:26}{row['ratio']:9.2f}{'':9}{row['cpu_best']:9.4f}   {what}")


def print_native_floor(got: dict, n_ops: int) -> None:
    """The native recorder's floor (module hooks, function mode, ATen callbacks, all calling
    straight through), the callbacks alone, and the native rows above that floor."""
    floor = got.get(NATIVE_FLOOR[0])
    if not floor:
        return
    if floor.get("error"):
        print(f"  {NATIVE_FLOOR[1]:26}   failed: {floor['error']}")
        return
    print(f"  {NATIVE_FLOOR[1]:26}{floor['ratio']:9.2f}{floor['diff'] / n_ops * 1e6:9.1f}{floor['cpu_best']:9.4f}   "
          "module hooks, function mode and the native recorder's ATen callbacks, calling straight through")
    alone = got.get(NATIVE_ALONE[0])
    if alone and not alone.get("error"):
        print(f"  {NATIVE_ALONE[1]:26}{alone['ratio']:9.2f}{alone['diff'] / n_ops * 1e6:9.1f}{alone['cpu_best']:9.4f}   "
              "(every top-level op boxed; noise on a shared machine is a few us/op)")
    own = {key: (got[key]["diff"] - floor["diff"]) / n_ops * 1e6 for key in ("native on", "native off") if key in got}
    if own:
        said = "; ".join(f"{v:.1f} us/op stats {k.split()[1]}" for k, v in own.items())
        print(f"  {'native above its floor':26}{'':9}{'':9}{'':9}   {said}")


# --------------------------------------------------------------------------- scaling

class Step(torch.nn.Module):
    """A small block: about ten ops (linear, layer norm, GELU, a residual add)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.nn.functional.gelu(self.fc(self.norm(x)))


class DeepStack(torch.nn.Module):
    """A deep ``ModuleList`` of :class:`Step` blocks."""

    def __init__(self, blocks: int, width: int = 16) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(Step(width) for _ in range(blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


DEEP_MODEL = '''
import torch


class Step(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x):
        return x + torch.nn.functional.gelu(self.fc(self.norm(x)))


class DeepStack(torch.nn.Module):
    def __init__(self, blocks, width=16):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Step(width) for _ in range(blocks))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
'''

PLAIN_SCRIPT = '''
import sys
import torch
sys.path.insert(0, sys.argv[1])
from deep import DeepStack
torch.manual_seed(0)
model = DeepStack(int(sys.argv[2])).eval()
with torch.no_grad():
    model(torch.randn(1, 8, 16))
'''


def ops_per_block() -> int:
    files = WorkspaceFiles(Path(__file__).resolve().parent)
    with torch.no_grad():
        return len(capture_once(DeepStack(4).eval(), torch.randn(1, 8, 16), True, files).nodes) // 4


def exponent(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log y against log x."""
    lx, ly = [math.log(v) for v in xs], [math.log(v) for v in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def scaling(args) -> None:
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread; {load_line()}")
    native = native_ready(args)
    per_block = ops_per_block()
    files = WorkspaceFiles(Path(__file__).resolve().parent)
    sizes, cap_s, enc_s, plain_s, nat_s = [], [], [], [], []
    print(f"deep ModuleList of blocks ({per_block} ops each), input [1, 8, 16], statistics on (the graph as the "
          f"worker sends it); best of {args.repeat} (CPU). Python recorder: capture s and its us/op; native "
          f"recorder (what a user gets where it is built): capture s and us/op over the plain forward (target "
          f"<= {TARGET_US_ON:.0f})")
    print(f"{'ops':>9}{'plain s':>10}{'capture s':>11}{'us/op':>8}{'encode s':>10}{'us/op':>8}{'file MB':>9}"
          f"{'native s':>10}{'over us/op':>12}")
    for wanted in (int(n) for n in args.sizes.split(",")):
        blocks = max(1, wanted // per_block)
        torch.manual_seed(0)
        model = DeepStack(blocks).eval()
        x = torch.randn(1, 8, 16)
        repeat = args.repeat if wanted <= 10_000 else max(2, args.repeat // 2)
        with torch.no_grad():
            model(x)
            wall, cpu, results = interleaved({"plain": lambda: model(x),
                                              "capture": lambda: capture_once(model, x, True, files)}, repeat)
        cap = results.pop("capture")
        best_enc = min(cpu_of(lambda: graphfile.encode(cap))[0] for _ in range(repeat))
        data = graphfile.encode(cap)
        n = len(cap.nodes)
        cap = None  # no graph alive while the native recorder is measured
        if native:  # on its own, with no other graph alive (the Python recorder's: millions of objects)
            with torch.no_grad():
                _, nat, _ = interleaved({"plain": lambda: model(x),
                                         "native": lambda: len(capture_once(model, x, True, files,
                                                                            recorder="native").nodes)}, repeat)
            cpu["native"], cpu["native plain"] = nat["native"], nat["plain"]
        sizes.append(n)
        cap_s.append(cpu["capture"])
        enc_s.append(best_enc)
        plain_s.append(cpu["plain"])
        line = (f"{n:9,}{cpu['plain']:10.3f}{cpu['capture']:11.3f}{cpu['capture'] / n * 1e6:8.1f}{best_enc:10.3f}"
                f"{best_enc / n * 1e6:8.1f}{len(data) / 1e6:9.1f}")
        if native:
            nat_s.append(cpu["native"])
            over = (cpu["native"] - cpu["native plain"]) / n * 1e6
            line += f"{cpu['native']:10.3f}{over:12.1f}  ({'meets' if over <= TARGET_US_ON else 'misses'})"
        print(line)
    if len(sizes) > 1:
        ce, ee = exponent(sizes, cap_s), exponent(sizes, enc_s)
        print(f"exponent in ops: capture {ce:.3f}, encode {ee:.3f}   (target <= {TARGET_EXPONENT}: "
              f"{'meets' if ce <= TARGET_EXPONENT else 'misses'} / {'meets' if ee <= TARGET_EXPONENT else 'misses'})")
        if nat_s:
            ne = exponent(sizes, nat_s)
            print(f"exponent in ops, native recorder: capture {ne:.3f}   "
                  f"({'meets' if ne <= TARGET_EXPONENT else 'misses'})")
    cli_run(max(1, sizes[-1] // per_block) if sizes else 1000)
    print(f"after: {load_line()}")


_CHILD_CPU = '''
import json, resource, subprocess, sys, time
t = time.perf_counter()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": rc, "wall": wall, "cpu": ru.ru_utime + ru.ru_stime}))
'''


def cli_run(blocks: int) -> None:
    """The whole CLI (``tensorviz capture``, one thread) beside a plain script doing the
    same forward, each in fresh processes, alternately."""
    import json

    with tempfile.TemporaryDirectory(prefix="tv-bench-deep-") as tmp:
        root = Path(tmp)
        (root / "deep.py").write_text(DEEP_MODEL)
        (root / "plain.py").write_text(PLAIN_SCRIPT)
        (root / ".tensorviz").mkdir()
        (root / ".tensorviz" / "recipes.toml").write_text(
            'version = 1\n\n[profiles.deep]\nmodel = "deep:DeepStack"\n'
            f'init = {{ args = [{blocks}] }}\n'
            'inputs = { args = [{ kind = "tensor", shape = [1, 8, 16], dtype = "float32" }] }\n')
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        out = root / "deep.tvg"
        cmds = {
            "plain script": [sys.executable, str(root / "plain.py"), str(root), str(blocks)],
            "tensorviz capture": [sys.executable, "-m", "tensorviz_lsp", "capture", "--workspace", str(root),
                                  "--profile", "deep", "-o", str(out), "--timeout", "900"],
        }
        got: dict[str, list[dict]] = {k: [] for k in cmds}
        for _ in range(2):
            for key, cmd in cmds.items():
                done = subprocess.run([sys.executable, "-c", _CHILD_CPU, *cmd], capture_output=True, text=True, env=env)
                got[key].append(json.loads(done.stdout.strip().splitlines()[-1]))
        plain = min(r["cpu"] for r in got["plain script"])
        cli = min(r["cpu"] for r in got["tensorviz capture"])
        cap = graphfile.read(out)
        capture_s = cap.meta.get("capture_s", float("nan"))
        print(f"whole CLI at {len(cap.nodes):,} ops: plain script {plain:.2f} s CPU, tensorviz capture {cli:.2f} s CPU "
              f"({cli - plain:.2f} s over the script; the recorded forward {capture_s:.2f} s wall of it; "
              f"file {out.stat().st_size / 1e6:.1f} MB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=("encoder", "gpt2", "resnet50", "nanogpt", "llama"),
                    help="one model in detail (the earlier report) instead of the three models users run")
    ap.add_argument("--nanogpt", default="", help="nanoGPT's model.py (read at run time; skipped when not given)")
    ap.add_argument("--recorder", default="both", choices=("both", "python"),
                    help="both: the native recorder's rows (capture.torch.native) beside the Python path's")
    ap.add_argument("--scaling", action="store_true", help="capture and encode vs op count, and the whole CLI")
    ap.add_argument("--sizes", default="1000,10000,100000", help="--scaling: op counts wanted")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8, help="--model: batch size")
    ap.add_argument("--threads", type=int, default=2, help="--model: threads")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--fastpath", action="store_true", help="keep the fused encoder-layer fast path on")
    ap.add_argument("--image", type=int, default=224, help="resnet50: image size")
    ap.add_argument("--no-checkpoint", action="store_true", help="skip the checkpoint-loaded run")
    ap.add_argument("--no-peers", action="store_true", help="skip torchview, torchinfo, TorchLens and torch.export")
    ap.add_argument("--no-existing", action="store_true", help="skip the batch 8, two-thread columns")
    ap.add_argument("--off-only", action="store_true", help="only statistics off, the hook floor and its mechanisms")
    ap.add_argument("--only", default="", help="comma-separated: nanogpt,llama,resnet50 (default: all)")
    args = ap.parse_args()
    if args.model:
        detail(args)
    elif args.scaling:
        scaling(args)
    else:
        suite(args)


def detail(args) -> None:
    """One model in detail (``--model``): the earlier report."""
    torch.set_num_threads(args.threads)
    torch.backends.mha.set_fastpath_enabled(args.fastpath)
    if args.model == "nanogpt":
        if not args.nanogpt:
            raise SystemExit("--model nanogpt needs --nanogpt PATH (nanoGPT's model.py)")
        model = build_nanogpt(args.nanogpt)
        x = torch.randint(0, 50304, (args.batch, args.seq))
        files = WorkspaceFiles(Path(args.nanogpt).resolve().parent)
        print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); nanoGPT 124M, idx [{args.batch},{args.seq}]")
    elif args.model == "llama":
        model = build_llama()
        x = torch.randint(0, LLAMA_CONFIG["vocab_size"], (args.batch, args.seq))
        files = WorkspaceFiles(tempfile.mkdtemp(prefix="tv-bench-ws-"))
        print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); transformers Llama 4x256, "
              f"input ids [{args.batch},{args.seq}]")
    elif args.model == "resnet50":
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
