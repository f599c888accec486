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
from typing import Any, Callable

from capture.graph.model import Capture
from capture.session import SessionResult

from ...setup.shorthand import BEFORE_HELP, GRAMMAR_HELP, STEP_HELP
from .capture import (
    add_setup_options,
    add_worker_options,
    capture_in_session,
    describe_failure,
    parse_env,
    setup_of,
)
from .view import add_serve_options, keep_serving, serve, start_serving

DESCRIPTION = """\
Capture FILE.py:SYMBOL (or a saved --profile NAME) as tensorviz capture does, then serve
the graph in the viewer and print its URL. The shorthand's arguments (--input, --init,
the factories) are those of tensorviz capture, checked the same way before anything runs.
Exit status: 0 viewed, 1 the capture failed (after serving it), 2 usage error."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "open",
        help="capture FILE.py:SYMBOL (or a saved --profile) and serve it in the viewer",
        description=DESCRIPTION, epilog=GRAMMAR_HELP + "\n" + STEP_HELP + "\n" + BEFORE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_setup_options(p)
    add_worker_options(p, timeout_flag="--capture-timeout")
    add_serve_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    setup = setup_of("open", args)
    if isinstance(setup, int):
        return setup
    _, workspace, profile = setup
    first: list[Any] = []

    def on_graph(capture: Capture, path: Path | None) -> None:
        """The graph first (its compiled program or statistics follow): served now; the
        complete capture replaces it in place when it arrives."""
        if not first:
            first.append(start_serving("open", capture, profile, workspace, args, trusted_sources=True))

    try:
        result = capture_profile("open", workspace, profile, args, on_graph=on_graph)
    except BaseException:
        if first and isinstance(first[0], tuple):
            first[0][0].stop()
        raise
    if first and isinstance(first[0], tuple):
        server, cid = first[0]
        server.add_capture(result.capture, profile, trusted_sources=True, baseline=result.baseline, replaces=cid,
                           in_place=result.capture.failure is None)
        status = keep_serving("open", server, args)
    elif first:
        status = first[0]  # the viewer could not listen (said when the graph came)
    else:
        status = serve("open", result.capture, profile, workspace, args, trusted_sources=True,
                       baseline=result.baseline)
    return 1 if result.capture.failure is not None and status == 0 else status


def capture_profile(command: str, workspace: Path, profile: str, args: argparse.Namespace,
                    on_graph: Callable[[Capture, Path | None], None] | None = None) -> SessionResult:
    """Capture ``profile`` with progress on stderr (the graph file and the history kept
    as for ``tensorviz capture``), saying where the graph file went and, when it failed,
    why. ``on_graph``: a graph shown before its compiled program or statistics arrive."""
    verbose = args.verbose

    def progress(message: str, fraction: float | None) -> None:
        pct = f" {fraction * 100:3.0f}%" if fraction is not None else ""
        print(f"tensorviz {command}:{pct} {message}", file=sys.stderr, flush=True)

    def log(line: str) -> None:
        if verbose:
            print(f"  worker| {line}", file=sys.stderr, flush=True)

    timeout = args.capture_timeout if args.capture_timeout and args.capture_timeout > 0 else None
    print(f"tensorviz {command}: capturing {profile} in {workspace}", file=sys.stderr, flush=True)
    result = capture_in_session(command, workspace, profile, args, timeout=timeout, env=parse_env(args.env),
                                progress=progress, log=log, on_graph=on_graph)
    if result.graph_file is not None:
        print(f"tensorviz {command}: graph file {result.graph_file}", file=sys.stderr, flush=True)
    for problem in result.problems:
        print(f"tensorviz {command}: {problem}", file=sys.stderr)
    if result.capture.failure is not None:
        print(describe_failure(result.capture, command, result.graph_file), file=sys.stderr, end="")
    return result
