"""The ``tensorviz`` command."""

from __future__ import annotations

import argparse
import importlib
import re
import sys

from .. import __version__
from .terminal import escaped_output

# Each names a module of tensorviz_lsp.cli.commands with a ``register(subparsers)``.
COMMANDS = ("inspect", "summary", "lsp", "view", "capture", "open", "demo", "discover", "diff")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole CLI, or (``only``) the top level and that one command: a command then
    imports only what it needs (``tensorviz diff`` does not load discovery's libcst)."""
    parser = PlainHelpParser(
        prog="tensorviz",
        description="Open PyTorch modules, JAX functions and Flax modules as graphs.",
    )
    parser.add_argument("--version", action="version", version=f"tensorviz {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=PlainHelpParser)
    for name in COMMANDS:
        if only is None or name == only:
            importlib.import_module(f"tensorviz_lsp.cli.commands.{name}").register(sub)
    return parser


class PlainHelpParser(argparse.ArgumentParser):
    """``--help`` in plain text: the commands' descriptions are their modules' docstrings,
    which quote code in reStructuredText backticks (single and double), and a terminal
    would show them as they are."""

    def format_help(self) -> str:
        return re.sub(r"``([^`]+)``|`([^`]+)`", lambda m: m.group(1) or m.group(2), super().format_help())


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    first = args_in[0] if args_in else None
    parser = build_parser(first if first in COMMANDS else None)
    args = parser.parse_args(args_in)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        # Graph files, recipes and model output are printed: none may drive the terminal.
        # (The language server's stdout is its protocol, written as bytes.)
        with escaped_output():
            return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:
        return 128 + int(getattr(exc, "signum", 2))  # Ctrl-C: 130; SIGTERM/SIGHUP in a capture: 143/129
    except BrokenPipeError:
        # `tensorviz inspect … | head`: the reader left; that is not an error.
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
