"""Regenerate the checked-in real-model captures (``captures/*.tvg``).

    python tests/viewer/real_models/make_captures.py            # all of them
    python tests/viewer/real_models/make_captures.py gpt2_torch # some
    python tests/viewer/real_models/make_captures.py --check    # compare, write nothing

Each profile in this folder's ``.tensorviz/recipes.toml`` is captured through the same
path as ``tensorviz capture --workspace DIR --profile NAME -o OUT.tvg``: the CLI's
``run_capture`` in an isolated worker, then ``graphfile.write``. The only change made to
what the worker returns is that wall-clock timings (``meta.elapsed_s``,
``meta.capture_s``) are dropped, so that running this again on the same library versions
writes byte-identical files (the worker also runs single-threaded for the same reason).

Run it again whenever the capture or the graph-file format changes; ``--check`` says
whether the checked-in files still match what the current code writes.
Exit status: 0 done (or all match), 1 a capture failed (or ``--check`` found a difference).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO))

from capture.graph import graphfile  # noqa: E402
from capture.graph.model import Capture  # noqa: E402
from capture.session.runner import run_capture  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))
from snapshots import write_snapshot  # noqa: E402

PROFILES = ("resnet18_torch", "gpt2_torch", "resnet18_linen", "llama_torch", "vit_torch", "t5_torch", "resnet50_torch",
            "vit_linen")
CAPTURES = HERE / "captures"
# Wall-clock figures differ on every run and say nothing about the graph.
TIMING_META = ("elapsed_s", "capture_s")
# One thread: the measured activation statistics then do not depend on how a
# reduction was split between threads.
WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}
MAX_BYTES = 1 << 20


def capture_profile(name: str, timeout: float = 300.0) -> Capture:
    """Capture ``name`` in the worker; a failed capture raises ``RuntimeError`` with its message."""
    capture = run_capture(HERE, name, timeout=timeout, env=WORKER_ENV)
    if capture.failure is not None:
        f = capture.failure
        raise RuntimeError(f"{name}: [{f.stage}] {f.type}: {f.message}")
    for key in TIMING_META:
        capture.meta.pop(key, None)
    return capture


def _same_budget(capture: Capture, checked_in: Capture) -> None:
    """``meta.memory_estimate.budget_bytes`` of ``capture`` set to the checked-in one's
    (what free memory allowed when each was made, the one figure a rerun on the same
    library versions does not reproduce)."""
    mine, theirs = capture.meta.get("memory_estimate"), checked_in.meta.get("memory_estimate")
    if isinstance(mine, dict) and isinstance(theirs, dict) and "budget_bytes" in mine and "budget_bytes" in theirs:
        mine["budget_bytes"] = theirs["budget_bytes"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("profiles", nargs="*", metavar="PROFILE",
                    help=f"which captures to make (default: all of {', '.join(PROFILES)})")
    ap.add_argument("--check", action="store_true", help="compare with the checked-in files; write nothing")
    args = ap.parse_args(argv)
    unknown = [p for p in args.profiles if p not in PROFILES]
    if unknown:
        ap.error(f"unknown profile {', '.join(unknown)} (choose from {', '.join(PROFILES)})")
    status = 0
    for name in args.profiles or PROFILES:
        target = CAPTURES / f"{name}.tvg"
        try:
            capture = capture_profile(name)
        except RuntimeError as exc:
            print(f"FAILED {exc}", file=sys.stderr)
            status = 1
            continue
        data = graphfile.encode(capture)
        summary = (f"{name}: {len(capture.nodes)} nodes, {len(capture.groups)} groups, "
                   f"{len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()[:16]}")
        if len(data) > MAX_BYTES:
            print(f"FAILED {summary}: larger than {MAX_BYTES:,} bytes", file=sys.stderr)
            status = 1
            continue
        if args.check:
            if target.exists():
                # The memory budget the build was checked against is this machine's free
                # memory: compared as the checked-in file has it.
                _same_budget(capture, graphfile.read(target))
                data = graphfile.encode(capture)
            same = target.exists() and target.read_bytes() == data
            print(f"{'same' if same else 'DIFFERS'}  {summary}")
            status |= 0 if same else 1
            continue
        CAPTURES.mkdir(exist_ok=True)
        graphfile.write(capture, target)
        write_snapshot(target)  # its text beside it, for review
        print(f"wrote {target.relative_to(REPO)} and its snapshot  {summary}")
    return status


if __name__ == "__main__":
    sys.exit(main())
