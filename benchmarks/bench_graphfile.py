"""Portable graph file vs JSON, side by side in one run.

    python benchmarks/bench_graphfile.py [--nodes 200000] [--repeat 3]

Builds one synthetic capture (grouped, with params, literals, frames and opaque
nodes), then measures for the same content:
  * .tvg: size, write (encode + atomic file write), read (file read + full
    validation into a Capture) and every Node and Value row built from it; the same
    read for a version-1 file (the previous format, still read) of the same capture;
  * JSON: size, json.dumps + write, read + json.loads (the row-form content of
    `tensorviz inspect --json`; its rows are dicts, built by the parse).
The headline compares like with like: the cyclic garbage collector paused on both
sides (the .tvg reader pauses it itself) and every node and value row built on both
sides (the JSON parse builds them all), each side timed whole (read, rows, release).
The reads are timed in rounds, every contender once per round, so that a busy machine
slows them alike. The figures as a reader without those care would see them are
printed below the headline.
Prints figures and ratios; asserts nothing.
Targets: .tvg at most half the JSON's size, read (like for like) at least 2x faster.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))  # synthetic.py: test-only, not shipped

from capture.graph import graphfile  # noqa: E402
from capture.graph.model import to_json  # noqa: E402
from synthetic import synthetic_capture  # noqa: E402


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    capture = synthetic_capture(args.nodes, opaque_every=97)
    with tempfile.TemporaryDirectory() as tmp:
        tvg = Path(tmp) / "g.tvg"
        tvg1 = Path(tmp) / "g1.tvg"
        js = Path(tmp) / "g.json"
        tvg1.write_bytes(graphfile.encode(capture, version=1))

        t_tvg_write = best(lambda: graphfile.write(capture, tvg), args.repeat)
        t_json_write = best(lambda: js.write_text(json.dumps(to_json(capture))), args.repeat)

        def no_gc(fn):
            def run():
                gc.disable()
                try:
                    fn()
                finally:
                    gc.enable()
            return run

        def every_row(path, tables=("nodes", "values")):
            def run():
                cap = graphfile.read(path)
                for table in tables:
                    for _ in getattr(cap, table):
                        pass
            return run

        # Each round times every contender once, one after another, so that a busy machine
        # slows all of them alike; each figure is the best of its rounds.
        contenders = {
            "json": no_gc(lambda: json.loads(js.read_text())),
            "json_gc": lambda: json.loads(js.read_text()),
            "tvg_full": no_gc(every_row(tvg)),
            "tvg1_full": no_gc(every_row(tvg1)),
            "tvg_read": lambda: graphfile.read(tvg),
            "tvg_nodes": no_gc(every_row(tvg, ("nodes",))),
        }
        wall = {name: [] for name in contenders}
        cpu = {name: [] for name in contenders}
        for _ in range(args.repeat):
            for name, fn in contenders.items():
                t, c = time.perf_counter(), time.process_time()
                fn()
                wall[name].append(time.perf_counter() - t)
                cpu[name].append(time.process_time() - c)
        fig = {name: min(ts) for name, ts in cpu.items()}
        wall_fig = {name: min(ts) for name, ts in wall.items()}
        size_tvg, size_tvg1, size_json = tvg.stat().st_size, tvg1.stat().st_size, js.stat().st_size

    n = len(capture.nodes)
    json_nogc = fig["json"]

    def row(label: str, tvg_s: float, json_s: float, note: str = "") -> None:
        print(f"{label:34}{tvg_s:10.3f}{json_s:10.3f}{json_s / tvg_s:9.1f}x faster{note}")

    print(f"synthetic capture: {n:,} nodes, {len(capture.values):,} values, {len(capture.groups)} groups")
    print(f"{'':34}{'.tvg':>10}{'JSON':>10}{'ratio':>10}")
    print(f"{'size (MB)':34}{size_tvg / 1e6:10.2f}{size_json / 1e6:10.2f}{size_json / size_tvg:9.1f}x smaller")
    row("write (s)", t_tvg_write, t_json_write)
    print("reads, in CPU seconds (single-threaded both sides; steadier than the wall clock on a busy machine):")
    row("read, like for like", fig["tvg_full"], json_nogc, "   <- headline")
    print(f"  (GC paused on both sides; every node and value row built on both sides; of the .tvg's, about "
          f"{fig['tvg_read']:.3f} s read, {fig['tvg_nodes'] - fig['tvg_read']:.3f} s node rows, the rest value rows;"
          f" wall clock {wall_fig['tvg_full']:.3f} s vs {wall_fig['json']:.3f} s,"
          f" {wall_fig['json'] / wall_fig['tvg_full']:.1f}x)")
    row("  the same, node rows only", fig["tvg_nodes"], json_nogc, "   (value rows not built: this line's old footing)")
    row("  the same, version-1 .tvg", fig["tvg1_full"], json_nogc,
        f"   ({size_tvg1 / 1e6:.2f} MB; the previous format)")
    row("read, .tvg rows on access", fig["tvg_read"], json_nogc)
    row("read, JSON with GC on", fig["tvg_full"], fig["json_gc"])
    ok_size = size_tvg * 2 <= size_json
    ok_read = fig["tvg_full"] * 2 <= json_nogc
    print(f"targets: size <= 1/2 JSON: {'met' if ok_size else 'MISSED'}; "
          f"read >= 2x JSON, like for like: {'met' if ok_read else 'MISSED'}")


if __name__ == "__main__":
    main()
