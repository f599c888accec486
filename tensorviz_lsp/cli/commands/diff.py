"""``tensorviz diff A.tvg B.tvg [--json] [--view]``: what changed from capture A to capture B.

    tensorviz diff before.tvg after.tvg            a summary: + added, - removed, ~ changed
    tensorviz diff before.tvg after.tvg --json     every change, groups named by path
    tensorviz diff before.tvg after.tvg --view     serve B in the viewer, changes highlighted
    tensorviz diff --profile NAME [--workspace D]  the previous capture of NAME against its newest

Groups are matched by path (``lm.transformer.h.2``) and nodes by their place in their group,
never by id (``capture/graph/diff.py``). ``--profile`` compares the two newest captures the
workspace's history keeps (``.tensorviz/captures/history/NAME/``).
Exit status, as diff(1): 0 no differences, 1 differences, 2 trouble (a file that cannot be
read, a failed capture, which has no graph to compare, or a usage error).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from capture.graph import graphfile
from capture.graph.diff import DiffError, diff, summary, to_json
from capture.graph.model import Capture
from capture.recipe import RECIPES_FILE, RecipeError, load_recipes_table, profile_names
from capture.session.history import CaptureHistory, HistoryError

from .view import add_serve_options, serve


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diff",
        help="what changed between two .tvg graph files (exit 0 same, 1 different, 2 trouble)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("a", nargs="?", metavar="A.tvg", help="the capture before")
    p.add_argument("b", nargs="?", metavar="B.tvg", help="the capture after")
    p.add_argument("--profile", metavar="NAME",
                   help="compare the previous capture of this profile with its newest (the workspace's history)")
    p.add_argument("--workspace", metavar="DIR", default=None,
                   help="the workspace: --profile's history (default: the current folder), and the folder whose "
                        "files --view may show (default: none; the graphs' recorded sources are shown when the "
                        "current folder holds them unchanged)")
    p.add_argument("--json", action="store_true", help="print the diff as JSON (groups named by path)")
    p.add_argument("--view", action="store_true", help="serve B in the viewer with the changes highlighted")
    add_serve_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    workspace = Path(args.workspace).expanduser() if args.workspace else Path.cwd()
    if args.profile:
        if args.a or args.b:
            return _trouble("give either A.tvg B.tvg or --profile NAME, not both")
        try:
            got = _from_history(workspace, args.profile)
        except HistoryError as exc:
            return _trouble(str(exc))
        if isinstance(got, str):
            return _trouble(got)
        (a, label_a), (b, label_b) = got
    else:
        if not (args.a and args.b):
            return _trouble("give two graph files, A.tvg B.tvg (or --profile NAME)")
        try:
            a, b = graphfile.read(args.a), graphfile.read(args.b)
        except graphfile.GraphFileError as exc:
            return _trouble(str(exc))
        label_a, label_b = args.a, args.b
    try:
        d = diff(a, b, label_a=label_a, label_b=label_b)
    except DiffError as exc:
        return _trouble(str(exc))
    status = 0 if d.same else 1
    if args.view:
        sys.stderr.write(summary(d))
        if not workspace.is_dir():
            return _trouble(f"{workspace}: not a folder")
        # As `tensorviz view`: without --workspace the current folder (a home directory?)
        # only anchors the graphs' recorded sources, which must still match their sha256.
        served = serve("diff", b, Path(label_b).name, workspace, args, trusted_sources=False,
                       baseline=(a, Path(label_a).name), browse_workspace=args.workspace is not None)
        return served if served else status
    if args.json:
        json.dump(to_json(d), sys.stdout, ensure_ascii=False, default=_jsonable)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(summary(d))
    return status


def _from_history(workspace: Path, profile: str) -> tuple[tuple[Capture, str], tuple[Capture, str]] | str:
    history = CaptureHistory(workspace)
    entries = history.entries(profile)
    if not entries:
        known = _profiles(workspace, history)
        if profile not in known:
            there = ", ".join(known) if known else "none saved"
            return f"no such profile {profile} in {workspace} (profiles: {there})"
    if len(entries) < 2:
        kept = "no capture" if not entries else "only one capture"
        return (f"the history of {profile} in {workspace} holds {kept} "
                f"({history.folder(profile)}); capture it again to have two to compare")
    try:
        newest = history.load(entries[0])
        before = history.load(entries[1])
    except graphfile.GraphFileError as exc:
        return str(exc)
    return (before, f"{profile} @ {entries[1].label}"), (newest, f"{profile} @ {entries[0].label}")


def _profiles(workspace: Path, history: CaptureHistory) -> list[str]:
    """The profiles of ``workspace``: saved in its recipes, or with a kept capture."""
    try:
        doc, _ = load_recipes_table(workspace / RECIPES_FILE)
        saved = profile_names(doc)
    except RecipeError:
        saved = []
    return sorted({*saved, *history.profiles()})


def _jsonable(obj: object) -> object:
    if isinstance(obj, bytes):
        return obj.hex()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _trouble(message: str) -> int:
    print(f"tensorviz diff: {message}", file=sys.stderr)
    return 2
