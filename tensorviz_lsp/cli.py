"""The ``tensorviz`` command."""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__

# Each names a module of tensorviz_lsp.commands with a ``register(subparsers)``.
COMMANDS = ("inspect", "lsp", "view", "capture", "open", "demo", "discover", "diff")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tensorviz",
        description="Open PyTorch modules, JAX functions and Flax modules as graphs.",
    )
    parser.add_argument("--version", action="version", version=f"tensorviz {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"tensorviz_lsp.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `tensorviz inspect … | head`: the reader left; that is not an error.
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
