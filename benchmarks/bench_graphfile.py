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
sides (the JSON parse builds them all). The
figures as a reader without those care would see them are printed below it.
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

from capture import graphfile  # noqa: E402
from capture.model import to_json  # noqa: E402
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
        t_tvg_read = best(lambda: graphfile.read(tvg), args.repeat)
        t_tvg1_read = best(lambda: graphfile.read(tvg1), args.repeat)
        t_json_read = best(lambda: json.loads(js.read_text()), args.repeat)

        def json_read_no_gc():
            gc.disable()
            try:
                json.loads(js.read_text())
            finally:
                gc.enable()

        t_json_read_nogc = best(json_read_no_gc, args.repeat)

        def rows_no_gc(cap, table):
            def run():
                gc.disable()
                try:
                    for _ in getattr(cap, table):
                        pass
                finally:
                    gc.enable()
            return run

        cap, cap1 = graphfile.read(tvg), graphfile.read(tvg1)
        t_node_rows = best(rows_no_gc(cap, "nodes"), args.repeat)
        t_value_rows = best(rows_no_gc(cap, "values"), args.repeat)
        t_rows1 = best(rows_no_gc(cap1, "nodes"), args.repeat) + best(rows_no_gc(cap1, "values"), args.repeat)
        size_tvg, size_tvg1, size_json = tvg.stat().st_size, tvg1.stat().st_size, js.stat().st_size

    n = len(capture.nodes)
    t_rows = t_node_rows + t_value_rows
    t_tvg_full = t_tvg_read + t_rows
    t_tvg1_full = t_tvg1_read + t_rows1
    print(f"synthetic capture: {n:,} nodes, {len(capture.values):,} values, {len(capture.groups)} groups")
    print(f"{'':34}{'.tvg':>10}{'JSON':>10}{'ratio':>10}")
    print(f"{'size (MB)':34}{size_tvg / 1e6:10.2f}{size_json / 1e6:10.2f}{size_json / size_tvg:9.1f}x smaller")
    print(f"{'write (s)':34}{t_tvg_write:10.3f}{t_json_write:10.3f}{t_json_write / t_tvg_write:9.1f}x faster")
    print(f"{'read, like for like (s)':34}{t_tvg_full:10.3f}{t_json_read_nogc:10.3f}"
          f"{t_json_read_nogc / t_tvg_full:9.1f}x faster   <- headline")
    print(f"  (GC paused on both sides; every row built on both sides: .tvg read {t_tvg_read:.3f} s"
          f" + node rows {t_node_rows:.3f} s + value rows {t_value_rows:.3f} s)")
    print(f"{'  the same, version-1 .tvg (s)':34}{t_tvg1_full:10.3f}{t_json_read_nogc:10.3f}"
          f"{t_json_read_nogc / t_tvg1_full:9.1f}x faster   ({size_tvg1 / 1e6:.2f} MB; the previous format)")
    print(f"{'read, .tvg rows on access (s)':34}{t_tvg_read:10.3f}{t_json_read_nogc:10.3f}"
          f"{t_json_read_nogc / t_tvg_read:9.1f}x faster")
    print(f"{'read, JSON with GC on (s)':34}{t_tvg_full:10.3f}{t_json_read:10.3f}"
          f"{t_json_read / t_tvg_full:9.1f}x faster")
    ok_size = size_tvg * 2 <= size_json
    ok_read = t_tvg_full * 2 <= t_json_read_nogc
    print(f"targets: size <= 1/2 JSON: {'met' if ok_size else 'MISSED'}; "
          f"read >= 2x JSON, like for like: {'met' if ok_read else 'MISSED'}")

if __name__ == "__main__":
    main()
