"""``tensorviz discover FILE… [--workspace DIR] [--python PATH] [--json]``: what can be
opened as a graph.

Reads source only (nothing is imported or run). Bases imported from other files are
followed inside the workspace (default: the current directory), and bases imported
from installed packages (``class TinyBert(BertModel)``) into the source files of the
interpreter's packages (``--python``; default: the workspace's ``.venv``/``venv``,
else the Python running this command).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from capture.session.checks import default_interpreter
from discovery import Candidate, FileResult, WorkspaceIndex, find_environment


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "discover",
        help="list the JAX functions, Flax modules and PyTorch modules in source files",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="Python source files")
    p.add_argument(
        "--workspace",
        metavar="DIR",
        default=None,
        help="root that module paths resolve against (default: the current directory)",
    )
    p.add_argument(
        "--python",
        metavar="PATH",
        default=None,
        help="interpreter whose installed packages library bases are read from, never run "
        "(default: the workspace's .venv or venv, else this one)",
    )
    p.add_argument("--json", action="store_true", help='print {"files": [...]} as JSON')
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = args.workspace or os.getcwd()
    python = getattr(args, "python", None)
    # Library bases come from the packages of the interpreter that would capture.
    libraries = find_environment(python=python or default_interpreter(root))
    index = WorkspaceIndex(root, libraries)
    results = [index.discover(path) for path in args.files]
    if args.json:
        json.dump({"files": [r.to_json() for r in results]}, sys.stdout)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(listing(results))
    # Like a linter: a file that could not be analysed makes the run fail.
    return 1 if any(r.errors for r in results) else 0


def listing(results: list[FileResult]) -> str:
    """Compiler-style lines (1-based ``path:line:column``), one per candidate or error."""
    lines: list[str] = []
    for result in results:
        for error in result.errors:
            start = error.range.start
            lines.append(
                f"{result.path}:{start.line + 1}:{start.character + 1}: "
                f"error [{error.code}] {error.message}"
            )
        for candidate in result.candidates:
            lines.extend(_describe(result.path, candidate))
        if not result.errors and not result.candidates:
            lines.append(f"{result.path}: no candidates")
    return "\n".join(lines) + "\n"


def _describe(path: str, c: Candidate) -> list[str]:
    start = c.name_range.start
    out = [
        f"{path}:{start.line + 1}:{start.character + 1}: {c.qualname} "
        f"({c.kind}, {c.framework}): {c.reason}"
    ]
    if c.setup_fields or not c.setup_fields_complete:
        shown = ", ".join(_field_text(f) for f in c.setup_fields) or "none found"
        more = "" if c.setup_fields_complete else " (a base may add more)"
        out.append(f"    setup: {shown}{more}")
    inputs = ", ".join(_input_text(i) for i in c.call_inputs) or "none"
    via = f"{c.call_method} of {c.call_defined_in}: " if c.call_defined_in else ""
    out.append(f"    inputs: {via}{inputs}")
    return out


def _field_text(f) -> str:
    text = _input_text(f)
    return text + " [supplied by TensorViz]" if f.supplied_by else text


def _input_text(p) -> str:
    prefix = {"var_positional": "*", "var_keyword": "**"}.get(p.kind, "")
    text = prefix + p.name
    if p.annotation:
        text += f": {p.annotation}"
    if p.default is not None:
        text += f" = {p.default.text}"
    return text


__all__ = ["register", "run", "listing"]
