"""Dump Torch captures as plain data, and compare two dumps: the check that a change to
the per-op recording path (``capture/torch/trace*.py``) leaves every graph the same.

    python tools/torch_graph_dump.py dump DIR [--nanogpt PATH] [--only NAME,...]
    python tools/torch_graph_dump.py compare DIR_BEFORE DIR_AFTER

``dump`` captures, in this process and on one thread:

* the benchmark's models (``benchmarks/bench_torch_capture.py``): nanoGPT (``--nanogpt``,
  nanoGPT's own ``model.py``, read at run time), ``transformers``' Llama 4x256 and GPT-2
  (2 layers, library frames only), the ResNet-50 and the deep ``ModuleList``, each
  with statistics off and on (every parameter measured in the forward), through
  ``TorchTrace`` as the worker drives it;
* the real models of ``tests/viewer/real_models`` (GPT-2, Llama, ResNet-18, ResNet-50,
  T5) through the worker's own path (``framework.capture``), parameters' statistics merged;
* the test workspace's models (``tests/torch/torch_workspace.py``: a CNN, attention, an
  aliasing model, a model called twice, an MLP) and a training step of its MLP (loss,
  backward groups, optimizer).

Each capture goes through the graph file (``graphfile.encode`` then ``decode``) and is
written as JSON: every node, value, group and frame, the inputs and outputs, and ``meta``
without what differs between two runs of the same code (times, memory of the machine).
``compare`` reports, per capture, the first differences (statistics within a
hundred-thousandth of the data's scale count as equal: float sums in another order),
and exits 1 when any capture differs.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import sys
import warnings
from pathlib import Path
from collections.abc import Sequence
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "benchmarks", ROOT / "tests" / "torch", ROOT / "tests"):
    sys.path.insert(0, str(extra))

# meta keys that differ between two runs of the same code ("recorder": which recorder
# made the graph, capture.torch.native: the graphs are compared, not how they were made).
_VOLATILE = ("time", "seconds", "_s", "memory", "rss", "wall", "cpu", "elapsed", "host", "pid")
STATS_TOLERANCE = 1e-5


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, Sequence)) and not isinstance(obj, (str, bytes)):
        return [_plain(x) for x in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return repr(obj)
    return obj


def _library_path(path: str) -> str:
    return "site-packages/" + path.split("site-packages/", 1)[1] if "site-packages/" in path else path


def as_data(capture: Any) -> dict[str, Any]:
    """A capture, read back through the graph file, as JSON-able data without volatile fields."""
    from capture.graph import graphfile

    cap = graphfile.decode(graphfile.encode(capture))
    data = _plain(cap)
    data["meta"] = {k: v for k, v in (data.get("meta") or {}).items()
                    if not any(word in k.lower() for word in _VOLATILE) and k != "recorder"}
    data.pop("recipe", None)
    for frame in data.get("frames", []):
        if isinstance(frame, dict) and frame.get("library"):
            frame["file"] = _library_path(frame["file"])
    return dict(data)


# --------------------------------------------------------------------------- models


def _bench_models(args: argparse.Namespace) -> dict[str, Callable[[], list[tuple[str, Any]]]]:
    import torch
    import bench_torch_capture as bench
    from capture.worker.workspace_files import WorkspaceFiles

    def traced(build: Callable[[], Any], make_input: Callable[[], Any], workspace: Path) -> Callable[[], list[tuple[str, Any]]]:
        def run() -> list[tuple[str, Any]]:
            model, x = build(), make_input()
            files = WorkspaceFiles(workspace)
            with torch.no_grad():
                return [("off", bench.capture_once(model, x, False, files)),
                        ("on", bench.capture_once(model, x, True, files, parameters="now"))]
        return run

    def seeded(fn: Callable[[], Any]) -> Callable[[], Any]:
        def make() -> Any:
            torch.manual_seed(1)
            return fn()
        return make

    empty = ROOT / "tools" / "__empty_workspace__"  # no such folder: library frames only
    out: dict[str, Callable[[], list[tuple[str, Any]]]] = {}
    if args.nanogpt:
        out["nanogpt"] = traced(lambda: bench.build_nanogpt(args.nanogpt),
                                seeded(lambda: torch.randint(0, 50304, (1, 64))), Path(args.nanogpt).resolve().parent)
    out["llama"] = traced(bench.build_llama, seeded(lambda: torch.randint(0, 32000, (1, 64))), empty)
    out["gpt2"] = traced(lambda: bench.build_gpt2(2, 128, 4, 32), seeded(lambda: torch.randint(0, 1024, (1, 32))), empty)

    def resnet() -> Any:
        torch.manual_seed(0)
        return bench.ResNet50().eval()

    out["resnet50"] = traced(resnet, seeded(lambda: torch.randn(1, 3, 64, 64)), ROOT / "benchmarks")

    def deep() -> Any:
        torch.manual_seed(0)
        return bench.DeepStack(20, 16).eval()

    out["deep"] = traced(deep, seeded(lambda: torch.randn(2, 16)), ROOT / "benchmarks")
    return out


def _real_models() -> dict[str, Callable[[], list[tuple[str, Any]]]]:
    real = ROOT / "tests" / "viewer" / "real_models"

    def run(name: str) -> list[tuple[str, Any]]:
        from capture.graph import later_stats
        from capture.recipe import load_profile
        from capture.torch import framework
        from capture.worker.context import CaptureContext
        from torch_workspace import forget_workspace_modules

        ctx = CaptureContext(load_profile(real / ".tensorviz" / "recipes.toml", name), real)
        framework.probe_device(ctx)
        try:
            cap = framework.capture(ctx)
            if ctx.after_result is not None:
                rows, skipped = ctx.after_result()
                cap = later_stats.complete(cap, rows, skipped)
        finally:
            forget_workspace_modules(real)
        return [("worker", cap)]

    names = ("gpt2_torch", "llama_torch", "resnet18_torch", "resnet50_torch", "t5_torch")
    return {f"real_{n}": functools.partial(run, n) for n in names}


def _workspace_models(tmp: Path) -> dict[str, Callable[[], list[tuple[str, Any]]]]:
    from torch_workspace import capture_in_process, forget_workspace_modules, make_workspace, profile, tensor

    ws = make_workspace(tmp / "ws")

    def run(table: dict[str, Any]) -> list[tuple[str, Any]]:
        try:
            cap, _ = capture_in_process(ws, table)
        finally:
            forget_workspace_modules(ws)
        return [("worker", cap)]

    tables = {
        "ws_cnn": profile("models:SmallCNN", init={"args": [], "kwargs": {"classes": 4}},
                          args=[tensor([1, 3, 16, 16])]),
        "ws_block": profile("models:Block", args=[tensor([2, 5, 16])]),
        "ws_aliasing": profile("models:Aliasing", args=[tensor([4, 6])]),
        "ws_twice": profile("models:Twice", args=[tensor([3, 4])]),
        "ws_mlp_train": profile("models:MLP", args=[tensor([6, 4])], kind="training_step", mode="train",
                                grad_enabled=True, step={"loss": "mean"}),
    }
    return {name: functools.partial(run, table) for name, table in tables.items()}


def dump(args: argparse.Namespace) -> None:
    import tempfile

    import torch

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    want = set(args.only.split(",")) if args.only else None
    with tempfile.TemporaryDirectory() as tmp:
        models = {**_bench_models(args), **_real_models(), **_workspace_models(Path(tmp))}
        for name, run in models.items():
            if want is not None and name not in want:
                continue
            try:
                captures = run()
            except Exception as exc:  # noqa: BLE001 - a model that cannot run here says why
                print(f"{name}: failed: {type(exc).__name__}: {exc}")
                continue
            for variant, cap in captures:
                data = as_data(cap)
                path = out / f"{name}.{variant}.json"
                path.write_text(json.dumps(data, sort_keys=True, indent=0))
                print(f"{name}.{variant}: {len(data['nodes'])} nodes, {len(data['values'])} values, "
                      f"{len(data['groups'])} groups -> {path}")


# --------------------------------------------------------------------------- compare


def _stats_equal(a: Any, b: Any) -> bool:
    if not isinstance(a, dict) or not isinstance(b, dict) or set(a) != set(b):
        return False
    if any(a.get(k) != b.get(k) for k in ("nan", "inf")):
        return False
    nums: list[float] = [a[k] for k in ("min", "max") if isinstance(a.get(k), (int, float))]
    scale = max([abs(x) for x in nums] + [1e-30])
    for k in set(a) - {"nan", "inf"}:
        x, y = a[k], b[k]
        if isinstance(x, (int, float)) and isinstance(y, (int, float)):
            if abs(x - y) > STATS_TOLERANCE * scale:
                return False
        elif x != y:
            return False
    return True


def differences(a: Any, b: Any, path: str = "", out: list[str] | None = None, limit: int = 10) -> list[str]:
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if path.endswith(".stats") and _stats_equal(a, b):
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'after' if k not in a else 'before'}")
            else:
                differences(a[k], b[k], f"{path}.{k}", out, limit)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items before, {len(b)} after")
        for i, (x, y) in enumerate(zip(a, b)):
            differences(x, y, f"{path}[{i}]", out, limit)
    elif a != b:
        out.append(f"{path}: {a!r} before, {b!r} after")
    return out


def compare(args: argparse.Namespace) -> int:
    before, after = Path(args.before), Path(args.after)
    names = sorted({p.name for p in before.glob("*.json")} | {p.name for p in after.glob("*.json")})
    failed = 0
    for name in names:
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            print(f"{name}: only {'after' if not a.exists() else 'before'}")
            failed += 1
            continue
        diff = differences(json.loads(a.read_text()), json.loads(b.read_text()))
        if diff:
            failed += 1
            print(f"{name}: DIFFERS")
            for line in diff:
                print(f"  {line}")
        else:
            print(f"{name}: same")
    print(f"{len(names) - failed} of {len(names)} captures the same")
    return 1 if failed else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("dir")
    d.add_argument("--nanogpt", default="")
    d.add_argument("--only", default="")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    args = ap.parse_args()
    if args.command == "dump":
        dump(args)
    else:
        sys.exit(compare(args))


if __name__ == "__main__":
    main()
