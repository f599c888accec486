"""``tensorviz demo``: the specification's ``net`` example, end to end.

Writes the spec's ``model.py`` and its ``jax_example`` profile (both verbatim) into a
demo workspace (default: ``demo`` in the user cache folder, ``userdirs.cache_dir()``),
captures it through the real worker (``capture.session.run_session``; JAX must be
installed in the capturing Python) and serves it like ``tensorviz view``: the URL alone
on standard output, the browser opened when possible.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

from capture.graph.atomic import atomic_write
from capture.recipe import RECIPES_FILE

from ...setup.shorthand import ShorthandError
from ...userdirs import cache_dir
from .capture import add_worker_options, parse_env
from .open import capture_profile
from .view import add_serve_options, serve

PROFILE = "jax_example"

# From spec/jax-and-flax-graphs.txt, "Open a function", both verbatim. Kept as data
# files: the language server's own code never imports (or even spells) jax.
_FILES = resources.files("tensorviz_lsp") / "demo_workspace"
MODEL_PY = (_FILES / "model.py.txt").read_text(encoding="utf-8")
RECIPES_TOML = (_FILES / "recipes.toml").read_text(encoding="utf-8")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="capture and view the specification's JAX `net` example")
    p.add_argument("--dir", metavar="DIR", help="demo workspace (default: the user cache folder, e.g. ~/.cache/tensorviz/demo on Linux)")
    add_worker_options(p, timeout_flag="--capture-timeout")
    add_serve_options(p)
    p.set_defaults(func=run)


def default_dir() -> Path:
    return cache_dir() / "demo"


def write_workspace(folder: Path) -> None:
    """The spec's files, rewritten on every run so that the demo is always the spec's."""
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / "model.py", MODEL_PY.encode())
    recipes = folder / RECIPES_FILE
    recipes.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(recipes, RECIPES_TOML.encode())


def run(args: argparse.Namespace) -> int:
    try:
        parse_env(args.env)
    except ShorthandError as exc:
        print(f"tensorviz demo: {exc}", file=sys.stderr)
        return 2
    folder = Path(args.dir).expanduser() if args.dir else default_dir()
    try:
        write_workspace(folder)
    except OSError as exc:
        print(f"tensorviz demo: cannot write the demo workspace {folder}: {exc}", file=sys.stderr)
        return 1
    workspace = folder.resolve()
    capture = capture_profile("demo", workspace, PROFILE, args).capture
    status = serve("demo", capture, "net (spec example)", workspace, args, trusted_sources=True)
    return 1 if capture.failure is not None and status == 0 else status
