"""Worker start-to-result overhead, beside a bare interpreter start, in one run.

    python benchmarks/bench_worker.py [--runs N] [--python PATH]

Measures, for the same interpreter, interleaved so that machine load affects all alike:

* ``python -c pass``: the floor any isolated worker pays;
* the dependency probe (``find_spec`` for the worker's packages, no imports);
* ``run_capture`` of a trivial fake-framework capture: worker start, request, import,
  trace, encode, decode (everything but a real framework's own import), once with the
  probe answer cached (as in a running language server) and once cold (probe included).

Prints medians and the ratio of a whole capture to a bare interpreter start.

Then the warm worker's preload (tests/worker/test_warm_preload.py checks the behaviour,
these are its figures), with a workspace library that takes ``--import-s`` seconds (2) to
import: how long ``start_preload`` keeps its caller (it should not wait for the import),
the first capture that comes during the import (it waits for the rest only), and a
capture cancelled 0.5 s into the import: cancel to failure (it should not wait for the
import either).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# The fake framework is TensorViz's own test framework (tests/fake_framework.py, not
# shipped): named here as a test plug-in, which the worker inherits.
os.environ.setdefault("TENSORVIZ_TEST_PLUGINS", f"fake={ROOT / 'tests' / 'fake_framework.py'}")

from capture.recipe import Recipe  # noqa: E402
from capture.session.probe import forget_probes  # noqa: E402
from capture.session.launcher import kept, launcher_script  # noqa: E402
from capture.session.runner import run_capture  # noqa: E402

MODEL = "def net(x, w):\n    return (x @ w).relu()\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--import-s", type=float, default=2.0)
    args = parser.parse_args()
    overhead(args)
    preload(args)


SLOW_LIBRARY = "import time, os\ntime.sleep(float(os.environ['TV_SLOW_S']))\nSCALE = 2.0\n"
USES = "import tvslow\n\ndef net(x, w):\n    return (x @ w) * tvslow.SCALE\n"


def preload(args: argparse.Namespace) -> None:
    import threading

    from capture.session.preload import start_preload
    from capture.session.warm import WarmPool

    workspace = Path(tempfile.mkdtemp(prefix="tv-bench-preload-"))
    libs = Path(tempfile.mkdtemp(prefix="tv-bench-libs-"))  # an installed library: outside the workspace
    (libs / "tvslow.py").write_text(SLOW_LIBRARY)
    (workspace / "uses.py").write_text(USES)
    env = {"PYTHONPATH": str(libs), "TV_SLOW_S": str(args.import_s)}
    recipe = Recipe.from_dict({
        "name": "bench", "framework": "fake", "model": "uses:net",
        "inputs": {"args": [{"kind": "tensor", "shape": [2, 3], "dtype": "float32"},
                            {"kind": "tensor", "shape": [3, 4], "dtype": "float32"}]},
    })
    returned, first, cancelled = [], [], []
    for _ in range(max(1, args.runs // 5)):
        pool = WarmPool(idle_seconds=600)
        try:
            t = time.perf_counter()
            start_preload(pool, workspace, args.python, env, ["tvslow"])
            returned.append(time.perf_counter() - t)
            c = run_capture(workspace, recipe, python=args.python, warm=pool, env=env)
            first.append(time.perf_counter() - t)
            assert c.failure is None, c.failure
        finally:
            pool.close()
        pool = WarmPool(idle_seconds=600)
        try:
            start_preload(pool, workspace, args.python, env, ["tvslow"])
            cancel = threading.Event()
            threading.Timer(0.5, cancel.set).start()
            t = time.perf_counter()
            c = run_capture(workspace, recipe, python=args.python, warm=pool, env=env, cancel=cancel, timeout=60)
            cancelled.append(time.perf_counter() - t - 0.5)
            assert c.failure is not None and c.failure.stage == "cancelled", c.failure
        finally:
            pool.close()
    print(f"warm preload, a library that takes {args.import_s:g} s to import ({len(returned)} runs; median [max] ms)")
    for label, xs in (("start_preload returns", returned),
                      ("preload start to the first capture's result", first),
                      ("cancel during the import to the failure", cancelled)):
        print(f"  {label:46s} {statistics.median(xs) * 1000:8.1f}   [{max(xs) * 1000:.1f}]")
    print(f"  start_preload / the import                     {statistics.median(returned) / args.import_s:8.3f}x")


def overhead(args: argparse.Namespace) -> None:

    workspace = Path(tempfile.mkdtemp(prefix="tv-bench-"))
    (workspace / "model.py").write_text(MODEL)
    recipe = Recipe.from_dict({
        "name": "bench", "framework": "fake", "model": "model:net",
        "inputs": {"args": [{"kind": "tensor", "shape": [2, 3], "dtype": "float32"},
                            {"kind": "tensor", "shape": [3, 4], "dtype": "float32"}]},
    })
    probe_source = (ROOT / "capture" / "worker" / "probe_script.py").read_text()
    launcher_script()  # created once per process, as in the server

    bare, kept_bare, probe, warm, cold = [], [], [], [], []
    for _ in range(args.runs):
        t = time.perf_counter()
        subprocess.run([args.python, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - t)

        t = time.perf_counter()
        subprocess.run(kept([args.python, "-c", "pass"]), check=True)
        kept_bare.append(time.perf_counter() - t)

        t = time.perf_counter()
        subprocess.run([args.python, "-c", probe_source, '["msgpack"]'], check=True, capture_output=True)
        probe.append(time.perf_counter() - t)

        forget_probes()
        t = time.perf_counter()
        c = run_capture(workspace, recipe, python=args.python)
        cold.append(time.perf_counter() - t)
        assert c.failure is None, c.failure

        t = time.perf_counter()
        c = run_capture(workspace, recipe, python=args.python)
        warm.append(time.perf_counter() - t)
        assert c.failure is None, c.failure

    series = {"bare": bare, "kept": kept_bare, "probe": probe, "warm": warm, "cold": cold}
    med = {name: statistics.median(xs) * 1000 for name, xs in series.items()}
    print(f"interpreter: {args.python} ({args.runs} runs each, interleaved; median [min-max] ms)")
    for name, label in (
        ("bare", "python -c pass"),
        ("kept", "python -c pass under a keeper"),
        ("probe", "dependency probe alone"),
        ("warm", "trivial capture (probe cached)"),
        ("cold", "trivial capture (probe included)"),
    ):
        xs = series[name]
        print(f"  {label:36s} {med[name]:8.1f}   [{min(xs) * 1000:.1f}-{max(xs) * 1000:.1f}]")
    print(f"  ratio capture (cached) / bare start  {med['warm'] / med['bare']:8.2f}x")
    print(f"  ratio capture (cold) / bare start    {med['cold'] / med['bare']:8.2f}x")
    print(f"  worker overhead beyond a bare start  {med['warm'] - med['bare']:8.1f} ms")
    print(f"  a keeper's cost (launcher.kept)      {med['kept'] - med['bare']:8.1f} ms "
          "(paid by the probe, each one-shot worker, each warm resident and each install)")


if __name__ == "__main__":
    main()
