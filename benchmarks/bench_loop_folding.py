"""Folding Python loops into steps (capture/analysis/loops.py): what it adds to opening a capture.

    python benchmarks/bench_loop_folding.py [--sizes 10000,100000] [--repeat 3]

For each size, side by side: ``fold_loops`` alone (on the capture's index), and what the
viewer server does before the first page (``Projection(capture)`` and its ``prepare``)
with the fold and without it, the fold's share of the latter, and the largest first
page (the root or the model's frame, in items: a loop folded into steps is one item a
step); on captures (their nodes as columns, as the viewer reads them from a file)
  * without loops: a Llama-style decoder (tests/viewer/layered_models.py), the synthetic layer stack and the flat 5,000-op-per-group jit
    (tests/synthetic.py), where the search finds nothing;
  * of one long loop: mamba's selective scan unrolled (tests/loop_models.py, 6 ops a
    step), all folded into steps; and the same with no carried value (a map: nothing folds);
  * of nested loops (each step runs an inner loop of 8 iterations);
  * the search's worst case: lines that almost repeat with a period of 500 ops.
Prints CPU times (best of --repeat) and the fitted exponent of fold time against ops
(1.0: linear); asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))  # test-only builders, not shipped
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests" / "viewer"))  # layered_models.py, likewise

from capture.graph import gc_pause  # noqa: E402
from capture.analysis.loops import STEP_KIND, fold_loops  # noqa: E402
from capture.graph.tables import NodeTable  # noqa: E402
from layered_models import decoder_capture  # noqa: E402
from loop_models import MAMBA_STEP, loop_capture, noise_capture  # noqa: E402
from synthetic import synthetic_capture  # noqa: E402
from viewer.projection import projection  # noqa: E402
from capture.analysis.index import GraphIndex  # noqa: E402
from viewer.projection.projection import Projection  # noqa: E402


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.process_time()
        out = fn()
        times.append(time.process_time() - t)
    return min(times), out


def cases(n: int) -> list[tuple[str, object]]:
    steps = n // len(MAMBA_STEP)
    return [
        ("Llama-style decoder", lambda: decoder_capture(max(1, (n - 17) // 51))),
        ("layer stack (no loop)", lambda: synthetic_capture(n)),
        ("flat jit (no loop)", lambda: synthetic_capture(n, grouped=False)),
        ("selective scan", lambda: loop_capture(steps)),
        ("map, no carry", lambda: loop_capture(steps, carry=False)),
        ("nested loops", lambda: loop_capture(n // (len(MAMBA_STEP) + 16), inner=8)),
        ("almost periodic", lambda: noise_capture(n)),
    ]


def opened(cap, fold: bool) -> Projection:
    """What the server does before the first page: the projection and its warm-up."""
    if not fold:
        projection.fold_loops = lambda capture, index: capture
    try:
        p = Projection(cap)
        p.prepare()
        return p
    finally:
        projection.fold_loops = fold_loops


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    fold_times: dict[str, list[tuple[int, float]]] = {}
    print(f"{'capture':<24}{'ops':>9}{'fold ms':>9}{'steps':>8}{'open ms':>9}{'unfolded':>10}{'fold/open':>11}"
          f"{'root items':>12}")
    for n in sizes:
        for name, make in cases(n):
            cap = make()
            cap = dataclasses.replace(cap, nodes=NodeTable.of(cap.nodes))  # columns, as a file read gives
            ops = len(cap.nodes)
            index = GraphIndex(cap)
            with gc_pause.paused():  # as the projection folds
                t_fold, folded = best(lambda: fold_loops(cap, index), args.repeat)
            steps = sum(1 for g in folded.groups if g.kind == STEP_KIND)
            t_open, p = best(lambda: opened(cap, True), args.repeat)
            t_plain, _ = best(lambda: opened(cap, False), args.repeat)
            items = max(len(p.children(g)["items"]) for g in [-1] + [g.id for g in p.capture.groups[:1]])
            fold_times.setdefault(name, []).append((ops, t_fold))
            print(f"{name:<24}{ops:>9,}{t_fold * 1e3:>9.1f}{steps:>8,}{t_open * 1e3:>9.0f}{t_plain * 1e3:>10.0f}"
                  f"{t_fold / t_plain:>11.0%}{items:>12,}")
    if len(sizes) > 1:
        print("\nfold time against ops (fitted exponent, 1.0: linear)")
        for name, pts in fold_times.items():
            (a, ta), (b, tb) = pts[0], pts[-1]
            if ta > 0 and tb > 0 and b > a:
                print(f"  {name:<24}{math.log(tb / ta) / math.log(b / a):.2f}")


if __name__ == "__main__":
    main()
