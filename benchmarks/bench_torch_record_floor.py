"""Which recording mechanism can capture a Torch forward within the targets? (issue 51)

    python benchmarks/bench_torch_record_floor.py [--nanogpt PATH] [--seq 128] [--repeat 5]
                                                  [--only nanogpt,llama,resnet50] [--no-cpp]
                                                  [--fresh-build] [--no-compare]

The targets (batch 1, one thread, process CPU time against the plain forward): statistics
off <= 1.10x and <= 30 us per recorded op; statistics on <= 1.25x and <= 60 us per op. This
is not TensorViz's capture: each row is one recording mechanism alone, recording what a
graph needs where it can (op name, input/output tensor identities for the edges, shapes and
dtypes), on the three models of ``bench_torch_capture.py`` (imported from it: nanoGPT 124 M
from ``--nanogpt PATH``, ``transformers`` Llama 4x256, the ResNet-50 written there; eval
mode, ``torch.no_grad``). The rows:

* Python floor (reference): a ``TorchDispatchMode`` calling straight through, the same
  recording names, tensor identities, shapes and dtypes into lists ("dispatch mode,
  recording"), a ``TorchFunctionMode`` calling straight through, global module pre/post hooks
  doing nothing.
* ``torch.profiler`` (Kineto, C++ ``RecordFunction`` callbacks), CPU activity:
  ``record_shapes=True``; with ``profile_memory=True`` too (the only way its events get tensor
  ids) and the event tree read back (``experimental_event_tree``: names and input ids; it
  records no outputs); with ``with_stack=True`` (Python stacks for go-to-source, by its
  Python tracer); with ``with_modules=True`` too (module scopes).
* ``torch.profiler.ExecutionTraceObserver``: per op the input/output tensor ids, storage ids,
  shapes, dtypes and the parent op, written as JSON; its file read back (``+ read``).
* A C++ ``RecordFunction`` global callback (``bench_torch_record_floor.cpp``, built with
  ``torch.utils.cpp_extension.load_inline``; ``--no-cpp`` skips it). It keeps the graph ops
  only, deciding in the callback (an event is a graph op when every event above it is
  ``CompositeImplicitAutograd`` and it is not one itself: what a ``TorchDispatchMode`` sees;
  the ops a kernel calls inside are not). Per graph op the name with overload and depth, and
  per tensor the identity (a fresh id for each produced tensor, kept through in-place ops),
  storage, dtype and shape, appended to C++ vectors and handed back as tensors (the
  hand-back is in the time). "records nothing": the callback returns at once (the cost of
  ``RecordFunction`` boxing every event's inputs and outputs). With frames: the innermost Python frame (code
  object, ``f_lasti``) of each top-level op, and the first frame outside the libraries
  (``site-packages``/stdlib) for go-to-source. With module scopes: Python's global module
  hooks pushing and popping a scope into the same recorder. "+ op list in Python": the
  columns then read into the dispatch mode's op list (a minimal graph build in Python).
  "+ output moments": statistics on, in the callback: min, max, sum and sum of squares of
  every floating output in one pass over its data as the op ends (a view over as many
  elements of an input's storage shares that input's), parameters left for later.
* A tiny-op model (``bench_torch_capture``'s deep ``ModuleList``, ``--blocks``): ops so
  cheap that the cost per op stands out of a shared machine's noise; no targets there.

Then the op lists compared (``--no-compare`` skips it): what a ``TorchDispatchMode`` sees
(ops after autograd and after ``CompositeImplicitAutograd`` decomposition) against the C++
callback's graph ops and the execution trace's nodes (filtered here by the same rule),
names (with overload) and edges (each op's inputs' producers). Last, the fixed cost of a
statistics call on a tiny tensor at one thread (``aminmax``, ``var_mean``, ``sum``,
TensorViz's ``stats_now``, the C++ one-pass moments called from Python) and the C++
moments' largest relative difference from float64 reductions.

Per op: the median of the pairs' CPU differences over the graph's op count (the dispatch
mode's ops). The load average is printed before and after: the machine may be shared, so
figures are CPU time in A/B-interleaved pairs (``pairs`` of ``bench_torch_capture``).
Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import bench_torch_capture as btc  # noqa: E402

TARGET_OFF, TARGET_ON, US_OFF, US_ON = btc.TARGET_OFF, btc.TARGET_ON, btc.TARGET_US_OFF, btc.TARGET_US_ON

CFLAGS = ["-O2", "-DNDEBUG"]  # NDEBUG: as torch is built (its headers' debug-only checks off)
CPP_SOURCE = (Path(__file__).resolve().parent / "bench_torch_record_floor.cpp").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- the C++ recorder

def build_cpp(fresh: bool, build_dir: Path | None = None) -> tuple[object | None, str, Path]:
    """The C++ recorder, compiled (or loaded from its build folder), and what that cost."""
    from torch.utils.cpp_extension import load_inline

    if build_dir is None and fresh:
        build_dir = Path(tempfile.mkdtemp(prefix="tv-record-floor-"))
    elif build_dir is None:
        build_dir = Path.home() / ".cache" / "tensorviz-bench" / f"record_floor-torch{torch.__version__}"
        build_dir.mkdir(parents=True, exist_ok=True)
    marker = build_dir / "tv_source.sha256"
    digest = hashlib.sha256((CPP_SOURCE + " ".join(CFLAGS)).encode()).hexdigest()
    had = marker.is_file() and marker.read_text() == digest
    w = time.perf_counter()
    try:
        ext = load_inline("tv_record_floor", cpp_sources=[CPP_SOURCE], extra_cflags=CFLAGS,
                          build_directory=str(build_dir), verbose=False)
    except Exception as exc:  # noqa: BLE001 - no compiler here: say so and go on without it
        return None, f"C++ recorder not built: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", build_dir
    wall = time.perf_counter() - w
    marker.write_text(digest)
    # the compiler runs in child processes: their CPU is not this process's
    how = "loaded from its build folder (cached)" if had else "compiled (g++ through ninja) and loaded"
    return ext, f"C++ recorder {how} in {wall:.1f} s wall ({build_dir})", build_dir


_LOAD_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
import torch
import bench_torch_record_floor as b
from pathlib import Path
t = time.perf_counter()
b.build_cpp(False, Path(sys.argv[2]))
print(time.perf_counter() - t)
"""


def cached_load_seconds(build_dir: Path) -> float:
    """``load_inline`` of the built recorder in a fresh process (hash check, then dlopen)."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _LOAD_CHILD, str(Path(__file__).resolve().parent), str(build_dir)],
                          capture_output=True, text=True, check=False)
    try:
        return float(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return float("nan")


def cpp_record(ext, model, x, frames: int = 0, scopes: bool = False, reserve: int = 4096,
               stats: bool = False) -> dict:
    handles = []
    if scopes:
        mm = torch.nn.modules.module
        push, pop = ext.push_scope, ext.pop_scope
        handles = [mm.register_module_forward_pre_hook(lambda m, a: push(id(m))),
                   mm.register_module_forward_hook(lambda m, a, o: pop(), always_call=True)]
    ext.start(frames, reserve, stats)
    try:
        model(x)
    finally:
        cols = ext.stop()
        for h in handles:
            h.remove()
    return cols


# --------------------------------------------------------------------------- Python floor

class RecordingDispatch(TorchDispatchMode):
    """The least a Python dispatch mode records for a graph: names, identities, shapes, dtypes."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # as capture.torch.trace chooses
        return "torch._dynamo" in sys.modules

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.ins: list[tuple] = []
        self.outs: list[tuple] = []
        self.meta: list[tuple] = []
        self.ids: dict[int, int] = {}
        self.keep: list = []  # every tensor seen stays alive: id() is never reused

    def _ident(self, t, fresh: bool) -> int:
        key = id(t)
        got = self.ids.get(key)
        if got is None or fresh:
            got = len(self.keep)
            self.ids[key] = got
            self.keep.append(t)
        self.meta.append((tuple(t.shape), t.dtype))
        return got

    def _tensors(self, values):
        for v in values:
            if isinstance(v, torch.Tensor):
                yield v
            elif isinstance(v, (list, tuple)):
                yield from (e for e in v if isinstance(e, torch.Tensor))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        ins = tuple(self._ident(t, False) for t in self._tensors((*args, *kwargs.values())))
        inputs = {id(t) for t in self._tensors((*args, *kwargs.values()))}
        outs = tuple(self._ident(t, id(t) not in inputs) for t in self._tensors((out,)))
        self.names.append(f"{func._schema.name}.{func._overloadname}")
        self.ins.append(ins)
        self.outs.append(outs)
        return out


def dispatch_record(model, x) -> RecordingDispatch:
    mode = RecordingDispatch()
    with mode:
        model(x)
    return mode


def function_mode(model, x):
    with btc._PassFunction():
        return model(x)


def dispatch_mode(model, x):
    with btc._PassDispatch():
        return model(x)


def module_hooks(model, x):
    mm = torch.nn.modules.module
    handles = [mm.register_module_forward_pre_hook(btc._no_hook),
               mm.register_module_forward_hook(btc._no_hook, always_call=True)]
    try:
        return model(x)
    finally:
        for h in handles:
            h.remove()


# --------------------------------------------------------------------------- torch.profiler

def profiler_run(model, x, **kw):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], **kw) as prof:
        model(x)
    return prof


def profiler_tree(model, x) -> list[tuple[str, tuple]]:
    """Profiler with tensor ids (profile_memory), its event tree read back: per op
    event, its name and its inputs' ids (no outputs: the profiler records none)."""
    prof = profiler_run(model, x, record_shapes=True, profile_memory=True)
    out = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        e = stack.pop()
        ins = getattr(e.extra_fields, "inputs", None)
        if ins is not None:
            out.append((e.name, tuple(getattr(i, "id", None) for i in ins)))
        stack.extend(e.children)
    return out


def execution_trace(model, x, read: bool):
    from torch.profiler import ExecutionTraceObserver

    fd, path = tempfile.mkstemp(suffix=".json", prefix="tv-et-")
    os.close(fd)
    et = ExecutionTraceObserver().register_callback(path)
    try:
        et.start()
        model(x)
        et.stop()
    finally:
        et.unregister_callback()
    try:
        if read:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        return None
    finally:
        os.unlink(path)


# --------------------------------------------------------------------------- op lists

_COMPOSITE: dict[str, bool] = {}


def composite(name: str) -> bool:
    """Whether an op decomposes above the Python key (a CompositeImplicitAutograd kernel),
    so a dispatch mode never sees it, only what it calls."""
    got = _COMPOSITE.get(name)
    if got is None:
        base = name[:-len(".default")] if name.endswith(".default") else name
        try:
            got = torch._C._dispatch_has_kernel_for_dispatch_key(base, "CompositeImplicitAutograd")
        except RuntimeError:
            got = False
        _COMPOSITE[name] = got
    return got


def visible(names: list[str], parents: list[int]) -> list[int]:
    """The events a dispatch mode would see: every op above is composite, and not itself."""
    shown, ok = [], {}
    for i, (name, parent) in enumerate(zip(names, parents)):
        above_ok = parent < 0 or (ok[parent] and composite(names[parent]))
        ok[i] = above_ok
        if above_ok and not composite(name):
            shown.append(i)
    return shown


def cpp_ops(cols: dict) -> list[tuple[str, tuple, tuple]]:
    names = [cols["names"][i] for i in cols["op_name"].tolist()]
    parents = cols["op_parent"].tolist()
    t_op, t_role, t_id = cols["t_op"].tolist(), cols["t_role"].tolist(), cols["t_id"].tolist()
    ins: dict[int, list[int]] = {}
    outs: dict[int, list[int]] = {}
    for op, role, ident in zip(t_op, t_role, t_id):
        (outs if role else ins).setdefault(op, []).append(ident)
    return [(names[i], tuple(ins.get(i, ())), tuple(outs.get(i, ()))) for i in visible(names, parents)]


def et_ops(trace: dict) -> tuple[list[tuple[str, tuple, tuple]], int]:
    """The execution trace's op nodes in call order (its ids grow with the call), filtered
    like the C++ events; tensor identity as ET gives it (tensor id, storage id)."""
    nodes = sorted((n for n in trace["nodes"] if not n["name"].startswith("[")), key=lambda n: n["id"])
    by_id = {n["id"]: n for n in nodes}
    names, parents = [], []
    index = {n["id"]: i for i, n in enumerate(nodes)}
    for n in nodes:
        schema = next((a["value"] for a in n.get("attrs", ()) if a["name"] == "op_schema"), "")
        full = schema.split("(")[0] if schema else n["name"]
        names.append(full if "." in full.split("::")[-1] else f"{full}.default")
        parent = by_id.get(n.get("ctrl_deps"))
        parents.append(index[parent["id"]] if parent is not None else -1)

    def tensors(values, types):
        out = []
        for v, t in zip(values, types):
            if t.startswith("Tensor(") and isinstance(v, list) and v:
                out.append((v[0], v[1]))
            elif t.startswith("GenericList[Tensor") and isinstance(v, list):
                out.extend((e[0], e[1]) for e in v if isinstance(e, list) and e)
        return tuple(out)

    shown = visible(names, parents)
    ops = [(names[i], tensors(nodes[i]["inputs"]["values"], nodes[i]["inputs"]["types"]),
            tensors(nodes[i]["outputs"]["values"], nodes[i]["outputs"]["types"])) for i in shown]
    return ops, len(nodes)


def edges(ops: list[tuple[str, tuple, tuple]]) -> list[tuple]:
    """Per op, its inputs' producers (op index, or -1 from outside)."""
    producer: dict = {}
    got = []
    for i, (_, ins, outs) in enumerate(ops):
        got.append(tuple(producer.get(v, -1) for v in ins))
        for v in outs:
            producer[v] = i
    return got


def compare(label: str, ref: list[tuple[str, tuple, tuple]], other: list[tuple[str, tuple, tuple]]) -> None:
    a, b = [o[0] for o in ref], [o[0] for o in other]
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    pairs_ab = {}
    for blk in matcher.get_matching_blocks():
        for k in range(blk.size):
            pairs_ab[blk.a + k] = blk.b + k
    only_ref = Counter(a[i] for i in range(len(a)) if i not in pairs_ab)
    matched_b = set(pairs_ab.values())
    only_other = Counter(b[j] for j in range(len(b)) if j not in matched_b)
    ea, eb = edges(ref), edges(other)
    kinds: Counter = Counter()
    for i, j in pairs_ab.items():
        mapped = tuple(pairs_ab.get(p, -2) if p >= 0 else -1 for p in ea[i])
        if mapped == eb[j]:
            kinds["equal"] += 1
        elif -2 in mapped or any(p >= 0 and p not in matched_b for p in eb[j]):
            kinds["a producer is an op only one side has"] += 1
        elif len(mapped) != len(eb[j]):
            kinds["a different number of tensor inputs"] += 1
        else:
            kinds["another producer"] += 1
    print(f"  {label}: {len(b)} ops vs the dispatch mode's {len(a)}; {len(pairs_ab)} in the same order; "
          f"inputs' producers of those: {dict(kinds)}")
    if only_ref:
        print(f"    only the dispatch mode: {dict(only_ref.most_common(8))}")
    if only_other:
        print(f"    only {label}: {dict(only_other.most_common(8))}")


def compare_lists(name: str, model, x, ext, with_et: bool) -> None:
    ref = dispatch_record(model, x)
    ref_ops = list(zip(ref.names, ref.ins, ref.outs))
    print(f"\n{name}: op lists against a TorchDispatchMode ({len(ref_ops)} ops)")
    if ext is not None:
        cols = cpp_record(ext, model, x)
        print(f"  (C++ callback: {cols['events']} RecordFunction events, all depths; {len(cols['op_name'])} graph ops "
              "kept by the callback)")
        compare("C++ RecordFunction, filtered", ref_ops, cpp_ops(cols))
        measured, shared, copied, elements = cpp_record(ext, model, x, 0, False, 4096, True)["stats"]
        print(f"  statistics in the callback: {measured} outputs measured ({elements:,} elements; {copied} not "
              f"contiguous, copied first), {shared} views sharing an input's")
    if with_et:
        ops, n_nodes = et_ops(execution_trace(model, x, True))
        print(f"  (execution trace: {n_nodes} op nodes, all depths)")
        compare("ExecutionTraceObserver, filtered", ref_ops, ops)


# --------------------------------------------------------------------------- the table

# mechanism key: (label, edges, frames, module scopes)
ROWS = {
    "dispatch": ("TorchDispatchMode, pass-through", "-", "-", "-"),
    "dispatch_rec": ("TorchDispatchMode, recording", "yes", "-", "-"),
    "function": ("TorchFunctionMode, pass-through", "-", "-", "-"),
    "hooks": ("global module hooks, no-op", "-", "-", "yes"),
    "prof_shapes": ("profiler record_shapes", "no ids", "-", "-"),
    "prof_ids": ("profiler +profile_memory +tree", "inputs", "-", "-"),
    "prof_stack": ("profiler +with_stack", "no ids", "yes", "-"),
    "prof_modules": ("profiler +with_stack +modules", "no ids", "yes", "yes"),
    "et": ("ExecutionTraceObserver", "yes*", "-", "-"),
    "et_read": ("ExecutionTraceObserver + read", "yes*", "-", "-"),
    "cpp_empty": ("C++ RF, callback records nothing", "-", "-", "-"),
    "cpp": ("C++ RecordFunction", "yes", "-", "-"),
    "cpp_frame": ("C++ RF + innermost frame", "yes", "inner", "-"),
    "cpp_user": ("C++ RF + user frame", "yes", "yes", "-"),
    "cpp_all": ("C++ RF + user frame + scopes", "yes", "yes", "yes"),
    "cpp_all_ops": ("  ... + op list in Python", "yes", "yes", "yes"),
    "cpp_all_stats": ("C++ RF, all + output moments", "yes", "yes", "yes"),
}


def variants(model, x, ext, n_ops: int) -> dict:
    v = {
        "dispatch": lambda: dispatch_mode(model, x),
        "dispatch_rec": lambda: dispatch_record(model, x),
        "function": lambda: function_mode(model, x),
        "hooks": lambda: module_hooks(model, x),
        "prof_shapes": lambda: profiler_run(model, x, record_shapes=True),
        "prof_ids": lambda: profiler_tree(model, x),
        "prof_stack": lambda: profiler_run(model, x, record_shapes=True, with_stack=True),
        "prof_modules": lambda: profiler_run(model, x, record_shapes=True, with_stack=True, with_modules=True),
        "et": lambda: execution_trace(model, x, False),
        "et_read": lambda: execution_trace(model, x, True),
    }
    if ext is not None:
        reserve = 8 * n_ops
        v.update({
            "cpp_empty": lambda: cpp_record(ext, model, x, -1, False, reserve),
            "cpp": lambda: cpp_record(ext, model, x, 0, False, reserve),
            "cpp_frame": lambda: cpp_record(ext, model, x, 1, False, reserve),
            "cpp_user": lambda: cpp_record(ext, model, x, 2, False, reserve),
            "cpp_all": lambda: cpp_record(ext, model, x, 2, True, reserve),
            "cpp_all_ops": lambda: cpp_ops(cpp_record(ext, model, x, 2, True, reserve)),
            "cpp_all_stats": lambda: cpp_record(ext, model, x, 2, True, reserve, True),
        })
    return v


STATS_ROWS = {"cpp_all_stats"}


def verdict(ratio: float, per_op: float, stats: bool = False) -> str:
    """Under both budgets, under the statistics-on one only, or neither (a row measuring
    statistics: under the statistics-on budget or not)."""
    off = ratio <= TARGET_OFF and per_op <= US_OFF
    on = ratio <= TARGET_ON and per_op <= US_ON
    if stats:
        return "on" if on else "-"
    return "both" if off else ("on only" if on else "-")


def print_table(results: list[tuple[str, int, float, dict, bool]]) -> None:
    names = [r[0] for r in results]
    print(f"\nmechanism alone: x plain (median of pairs) and us per graph op; 'fits': under both budgets "
          f"(off: <= {TARGET_OFF}x and <= {US_OFF:.0f} us/op), under the statistics-on one only, or neither")
    head = "".join(f"{n[:18]:>26}" for n in names)
    print(f"{'':34}{head}{'edges':>8}{'frames':>8}{'scopes':>8}")
    print(f"{'':34}" + "".join(f"{'x':>8}{'us/op':>8}{'fits':>10}" for _ in names))
    for key, (label, e, fr, sc) in ROWS.items():
        cells = ""
        present = False
        for _, n_ops, _, got, targeted in results:
            row = got.get(key)
            if row is None or row.get("error") or not row.get("ratios"):
                cells += f"{'n/a':>26}"
                continue
            present = True
            per_op = row["diff"] / n_ops * 1e6
            fits = verdict(row["ratio"], per_op, key in STATS_ROWS) if targeted else ""
            cells += f"{row['ratio']:8.3f}{per_op:8.1f}{fits:>10}"
        if present:
            print(f"{label:34}{cells}{e:>8}{fr:>8}{sc:>8}")
    print("  ... + op list in Python: the row above, then its columns read into a dispatch mode's op list "
          "(the filter below, per op its name and input/output ids): a minimal graph build")
    print("  tiny ops: the targets are for the three models; this row is for the cost per op alone")
    print("  edges: yes = input and output identities; inputs = input ids only (outputs to be inferred from "
          "allocations); no ids = shapes only; yes* = ids are TensorImpl addresses' (reused after a free: "
          "(tensor, storage) pairs, see the comparison)")
    for name, n_ops, plain, got, _ in results:
        errors = {k: r["error"] for k, r in got.items() if r.get("error")}
        print(f"{name}: {n_ops} graph ops, plain forward {plain * 1e3:.1f} ms CPU"
              + (f"; failed: {errors}" if errors else ""))


def deep_stack(blocks: int) -> torch.nn.Module:
    """``bench_torch_capture``'s deep ``ModuleList`` of small blocks (layer norm, linear,
    GELU, add on [1, 8, 16]): ops so cheap that a mechanism's cost per op stands out of the
    noise of a shared machine, where 1 % of nanoGPT's forward is 6 us per op."""
    torch.manual_seed(0)
    return btc.DeepStack(blocks).eval()


# --------------------------------------------------------------------------- statistics calls

def four_read_back(t: torch.Tensor) -> list[float]:
    mn, mx = torch.aminmax(t)
    return torch.stack([mn, mx, t.sum(), t.square().sum()]).tolist()


def stats_calls(repeat: int, ext) -> None:
    """The fixed cost of a statistics call on a tiny tensor at one thread, and the C++
    one-pass moments (what the callback runs per output) beside torch's, with their
    largest relative difference from float64 reductions."""
    from capture.torch import stats as stats_module

    t = torch.randn(16)
    big = torch.randn(256, 256)
    calls = {
        "torch.aminmax(t)": lambda: torch.aminmax(t),
        "torch.var_mean(t)": lambda: torch.var_mean(t),
        "t.sum()": lambda: t.sum(),
        "aminmax, sum, sum of squares, read back": lambda: four_read_back(t),
        "TensorViz stats_now(t)": lambda: stats_module.stats_now(t),
        "TensorViz stats_now(256x256)": lambda: stats_module.stats_now(big),
        "aminmax, sum, sum of squares (256x256)": lambda: four_read_back(big),
    }
    if ext is not None:
        calls["C++ one-pass moments(t), from Python"] = lambda: ext.moments(t)
        calls["C++ one-pass moments(256x256), from Python"] = lambda: ext.moments(big)
    n = 2000
    print(f"\nstatistics: CPU per call at one thread, t = [16] float32 (best of {repeat} x {n} calls)")
    for label, fn in calls.items():
        best = min(btc.cpu_of(lambda fn=fn: [fn() for _ in range(n)])[0] for _ in range(repeat))
        print(f"  {label:46}{best / n * 1e6:8.2f} us")
    if ext is None:
        return
    worst = 0.0
    for size in (1, 17, 2048, 5000, 1 << 20):
        for dtype in (torch.float32, torch.bfloat16, torch.float64):
            x = (torch.randn(size) * 3 + 1).to(dtype)
            d = x.double()
            ref = [d.min().item(), d.max().item(), d.sum().item(), d.square().sum().item()]
            got = ext.moments(x)
            worst = max(worst, max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(got, ref)))
    print(f"  C++ one-pass moments against float64 reductions (1 to 1M elements; float32, bfloat16, float64): "
          f"largest relative difference {worst:.1e}")


# --------------------------------------------------------------------------- main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nanogpt", default="", help="nanoGPT's model.py (read at run time; skipped when not given)")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--repeat", type=int, default=5, help="A/B pairs per mechanism and model")
    ap.add_argument("--only", default="", help="comma-separated: nanogpt,llama,resnet50,deep (default: all)")
    ap.add_argument("--blocks", type=int, default=200, help="deep: blocks of the tiny-op model (about 10 ops each)")
    ap.add_argument("--no-cpp", action="store_true", help="skip the C++ RecordFunction recorder")
    ap.add_argument("--fresh-build", action="store_true", help="compile the C++ recorder in a new folder (first-build time)")
    ap.add_argument("--no-compare", action="store_true", help="skip the op-list comparison")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread; {btc.load_line()}")
    ext = None
    if not args.no_cpp:
        ext, note, build_dir = build_cpp(args.fresh_build)
        print(note)
        if ext is not None:
            print(f"C++ recorder: loaded from its build folder in a new process (torch already imported): "
                  f"{cached_load_seconds(build_dir) * 1e3:.0f} ms wall")
    print(f"CPU time in A/B-interleaved pairs, {args.repeat} pairs per mechanism; batch 1")
    results = []
    models = [(name, build, make_input, args.repeat) for name, build, make_input, _ in btc.suite_models(args)]
    if not args.only or "deep" in args.only.split(","):
        models.append((f"tiny ops, {args.blocks} blocks", lambda: deep_stack(args.blocks),
                       lambda b: torch.randn(b, 8, 16), 3 * args.repeat))  # per-op cost only: no targets
    for name, build, make_input, repeat in models:
        model, x = build(), make_input(1)
        with torch.no_grad():
            model(x)  # the first forward in a process pays kernel set-up
            n_ops = len(dispatch_record(model, x).names)
            fns = variants(model, x, ext, n_ops)
            for fn in fns.values():  # each mechanism's own first-use set-up, outside the pairs
                fn()
            got = btc.pairs(lambda: model(x), fns, repeat)
            plain = statistics.median(p for row in got.values() for p in row.get("plain", []))
            results.append((name, n_ops, plain, got, not name.startswith("tiny")))
            print(f"{name}: done ({btc.load_line()})", flush=True)
            if not args.no_compare:
                compare_lists(name, model, x, ext, with_et=name.startswith("Llama"))
    print_table(results)
    stats_calls(args.repeat, ext)
    print(f"after: {btc.load_line()}")


if __name__ == "__main__":
    main()
