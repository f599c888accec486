"""Regenerate the captures the diff tests compare (``captures/*.tvg``).

    python tests/diff/models/make_captures.py            # all
    python tests/diff/models/make_captures.py mlp flax_mlp_16

Each profile of this folder's ``.tensorviz/recipes.toml`` is captured as
``tensorviz capture --workspace DIR --profile NAME -o captures/NAME.tvg`` does (the
CLI's ``run_capture`` in an isolated worker, then ``graphfile.write``), with one thread
in the worker and wall-clock timings dropped, like ``tests/viewer/real_models``. Needs
``torch``, ``transformers``, ``jax`` and ``flax``. Exit status: 0 done, 1 a capture failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO))

from capture.graph import graphfile  # noqa: E402
from capture.session.runner import run_capture  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))
from snapshots import write_snapshot  # noqa: E402

PROFILES = ("gpt2_2_layers", "gpt2_3_layers", "gpt2_wider", "mlp", "mlp_edited", "flax_mlp_16", "flax_mlp_32")
CAPTURES = HERE / "captures"
TIMING_META = ("elapsed_s", "capture_s")
WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("profiles", nargs="*", metavar="PROFILE")
    args = ap.parse_args(argv)
    unknown = [p for p in args.profiles if p not in PROFILES]
    if unknown:
        ap.error(f"unknown profile {', '.join(unknown)} (choose from {', '.join(PROFILES)})")
    status = 0
    for name in args.profiles or PROFILES:
        capture = run_capture(HERE, name, timeout=300.0, env=WORKER_ENV)
        if capture.failure is not None:
            f = capture.failure
            print(f"FAILED {name}: [{f.stage}] {f.type}: {f.message}", file=sys.stderr)
            status = 1
            continue
        for key in TIMING_META:
            capture.meta.pop(key, None)
        CAPTURES.mkdir(exist_ok=True)
        graphfile.write(capture, CAPTURES / f"{name}.tvg")
        write_snapshot(CAPTURES / f"{name}.tvg")  # its text beside it, for review
        print(f"wrote captures/{name}.tvg: {len(capture.nodes)} nodes, {len(capture.groups)} groups")
    return status


if __name__ == "__main__":
    sys.exit(main())
