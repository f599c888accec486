"""The folder TensorViz was started in stays off its module path (issue 39 item 1).

``python -m tensorviz_lsp lsp`` (and ``python -c``) put the current folder first on
``sys.path``, and editors start a server with the workspace as its current folder: a
workspace's ``msgpack.py``, ``pygls/`` or ``json.py`` would then be imported in place of
the real one, running the workspace's code before anyone trusted it. The documented
commands (the ``tensorviz`` script, or ``python -P -m tensorviz_lsp``) never add that
entry; this module is the server's own check, run by ``tensorviz_lsp/__init__.py``
before anything else is imported (standard library only, nothing it imports can be
shadowed: ``os``, ``sys`` and ``importlib.machinery`` are loaded before any of our code).

:func:`keep_workspace_off_path`, when this is the main program (``-m``/``-c``) and the
current folder is on the path only because of how Python was started:

- refuses to start (a clear message on stderr, exit status 2) when one of the modules
  the server is made of, or one it imports first, would be found in that folder
  (``tensorviz_lsp``, ``capture``, ``viewer``, ``discovery``, ``safe_read``, ``msgpack``,
  ``pygls``, ``lsprotocol``, ``platformdirs``, ``libcst``, ``tomlkit``, ``cattrs``,
  ``attrs``…), or a module already loaded came from it;
- otherwise removes the entry, so that no later import (a lazily loaded library) finds
  a workspace file either.

The one folder left alone is TensorViz's own source tree (the folder that holds the
running ``tensorviz_lsp``): a developer running the server from a checkout.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import PathFinder

#: The server's own packages and the libraries it imports at startup (and theirs).
OWN_MODULES = ("tensorviz_lsp", "capture", "viewer", "discovery", "safe_read")
DEPENDENCIES = ("msgpack", "pygls", "lsprotocol", "platformdirs", "libcst", "tomlkit", "cattrs", "cattr",
                "attrs", "attr", "typing_extensions", "yaml", "exceptiongroup")

EXIT_REFUSED = 2


class WorkspaceOnPath(Exception):
    """A module of the server would be (or was) loaded from the folder it was started in."""


def implicit_entries(path: list[str], cwd: str) -> list[int]:
    """Indexes of ``path`` entries that name the current folder only because of how
    Python was started: ``''`` (``-c``, the REPL) or the current folder itself as the
    first entry (``-m``). None under ``-P``/``-I`` (``sys.flags.safe_path``)."""
    if sys.flags.safe_path or not path:
        return []
    first = path[0]
    if first == "" or _same(first, cwd):
        return [0]
    return []


def shadowed(cwd: str, names: tuple[str, ...] = OWN_MODULES + DEPENDENCIES) -> list[tuple[str, str]]:
    """``(module, file)`` for each of ``names`` that a search of ``cwd`` alone finds, and
    for each module already loaded from ``cwd`` itself (not from a folder below it, such
    as a ``.venv``)."""
    found = []
    for name in names:
        try:
            spec = PathFinder.find_spec(name, [cwd])
        except (ImportError, OSError, ValueError):
            continue
        if spec is not None:
            where = spec.origin if spec.origin not in (None, "namespace") else \
                next(iter(spec.submodule_search_locations or []), os.path.join(cwd, name))
            found.append((name, str(where)))
    named = {n for n, _ in found}
    for name, module in list(sys.modules.items()):
        if "." in name or name in named:
            continue
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and _top_level_in(file, cwd):
            found.append((name, file))
    return found


def refusal(cwd: str, found: list[tuple[str, str]]) -> str:
    shown = ", ".join(f"{name} ({file})" for name, file in found[:6])
    more = f" and {len(found) - 6} more" if len(found) > 6 else ""
    return (
        f"tensorviz: refusing to start: the folder it was started in, {cwd}, is on Python's module path "
        f"(python -m and python -c put it there), and it holds modules TensorViz would import in place of its "
        f"own: {shown}{more}. Nothing of them was run. Start TensorViz with the tensorviz command, or with "
        f"python -P -m tensorviz_lsp (docs/editors.md)."
    )


def keep_workspace_off_path(argv0: str | None = None) -> None:
    """See the module docstring. ``argv0``: ``sys.argv[0]`` (``-m`` or ``-c`` while the
    main program is being found); anything else (a library import, the ``tensorviz``
    script, which never puts the current folder on the path) leaves the path as it is."""
    argv0 = sys.argv[0] if argv0 is None and sys.argv else argv0
    if argv0 not in ("-m", "-c"):
        return
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:
        return
    entries = implicit_entries(sys.path, cwd)
    if not entries or _same(cwd, _installation_root()):
        return  # a TensorViz checkout: its own modules are the ones to run
    found = shadowed(cwd)
    if found:
        sys.stderr.write(refusal(cwd, found) + "\n")
        sys.stderr.flush()
        raise SystemExit(EXIT_REFUSED)
    for index in reversed(entries):
        del sys.path[index]


def _installation_root() -> str:
    """The folder that holds the running ``tensorviz_lsp`` package."""
    return os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def _same(a: str, b: str) -> bool:
    try:
        return os.path.realpath(a or ".") == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def _top_level_in(file: str, folder: str) -> bool:
    """Whether ``file`` is a module directly in ``folder`` (``folder/x.py``) or the
    ``__init__`` of a package directly in it (``folder/x/__init__.py``)."""
    try:
        real = os.path.realpath(file)
    except (OSError, ValueError):
        return False
    parent = os.path.dirname(real)
    if os.path.basename(real).startswith("__init__."):
        parent = os.path.dirname(parent)
    return parent == folder
