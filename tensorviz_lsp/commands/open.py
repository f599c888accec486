"""``tensorviz open FILE.py:SYMBOL [--input …]``: capture, then view, in one step.

    tensorviz open model.py:net --input x=float32[2,3]
    tensorviz open --profile jax_example            (a setup already saved)
    tensorviz open --profile x64 --env JAX_ENABLE_X64=1

The shorthand saves (or updates) the profile in ``.tensorviz/recipes.toml`` exactly as
``tensorviz capture`` does (the framework, without ``--framework``, is discovery's), captures it in the isolated worker, writes the graph file to
``.tensorviz/captures/NAME.tvg`` and serves it like ``tensorviz view`` (the URL alone on
standard output). A failed capture is shown too: the viewer carries its failure banner.
Exit status: 0 viewed, 1 the capture failed (after serving it), 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from capture.graph import graphfile
from capture.graph.model import Capture

from ..recipes_store import RecipeStoreError
from ..shorthand import ShorthandError
from .capture import (
    CAPTURES_DIR,
    add_setup_options,
    add_worker_options,
    describe_failure,
    keep_in_history,
    parse_env,
    resolve_profile,
    run_worker,
    write_graph,
)
from .view import add_serve_options, serve


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "open",
        help="capture FILE.py:SYMBOL (or a saved --profile) and serve it in the viewer",
        description=__doc__.split("\n\n")[0],
    )
    add_setup_options(p)
    add_worker_options(p, timeout_flag="--capture-timeout")
    add_serve_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        parse_env(args.env)
    except ShorthandError as exc:
        return _usage(str(exc))
    try:
        workspace, profile = resolve_profile(args)
    except ShorthandError as exc:
        return _usage(str(exc))
    except RecipeStoreError as exc:
        print(f"tensorviz open: cannot save the setup: {exc}", file=sys.stderr)
        return 1
    capture = capture_profile("open", workspace, profile, args)
    baseline = keep_in_history(workspace, profile, capture, "open") if capture.failure is None else None
    status = serve("open", capture, profile, workspace, args, trusted_sources=True, baseline=baseline)
    return 1 if capture.failure is not None and status == 0 else status


def capture_profile(command: str, workspace: Path, profile: str, args: argparse.Namespace) -> Capture:
    """Capture ``profile`` with progress on stderr, keep the graph file under
    ``.tensorviz/captures/`` and say why on stderr when it failed."""
    verbose = args.verbose

    def progress(message: str, fraction: float | None) -> None:
        pct = f" {fraction * 100:3.0f}%" if fraction is not None else ""
        print(f"tensorviz {command}:{pct} {message}", file=sys.stderr, flush=True)

    def log(line: str) -> None:
        if verbose:
            print(f"  worker| {line}", file=sys.stderr, flush=True)

    timeout = args.capture_timeout if args.capture_timeout and args.capture_timeout > 0 else None
    env = parse_env(getattr(args, "env", None) or [])
    print(f"tensorviz {command}: capturing {profile} in {workspace}", file=sys.stderr, flush=True)
    capture = run_worker(workspace, profile, python=args.python, timeout=timeout, env=env, progress=progress, log=log,
                         command=command, max_saved_file_mb=getattr(args, "max_saved_file_mb", None),
                         memory_mb=getattr(args, "memory", None))
    output = workspace / CAPTURES_DIR / f"{profile}.tvg"
    try:
        write_graph(capture, output)
        print(f"tensorviz {command}: graph file {output}", file=sys.stderr, flush=True)
    except (OSError, graphfile.GraphFileError) as exc:
        print(f"tensorviz {command}: cannot keep the graph file {output}: {exc}", file=sys.stderr)
    if capture.failure is not None:
        print(describe_failure(capture, command), file=sys.stderr, end="")
    return capture


def _usage(message: str) -> int:
    print(f"tensorviz open: {message}", file=sys.stderr)
    return 2
