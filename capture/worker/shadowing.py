"""Workspace folders that shadow an installed library.

The worker puts the workspace root first on ``sys.path`` (workspace modules win over
installed ones, as when running ``python`` there). Opened at the root of Flax's own
repository, ``import flax`` then loads the repository's ``flax/`` folder instead of the
installed Flax, silently (issue 36, item 5). :func:`shadowed_libraries` lists each such
top-level module of the capture: loaded from the workspace, and installed as well (found
on the interpreter's path outside the workspace). The capture says so (``meta.shadowed``
or the failure's ``details.shadowed``); nothing is changed about which one loads.
Standard library only."""

from __future__ import annotations

import importlib.machinery
import os
import sys
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any

from ..graph.meta import ShadowedLibrary


def shadowed_libraries(workspace: str | os.PathLike[str], limit: int = 16) -> list[ShadowedLibrary]:
    """``[{"module", "workspace", "installed"}]``: top-level modules loaded from a file of
    ``workspace`` that the interpreter's path also holds outside it (its site-packages)."""
    root = os.path.realpath(workspace)
    inside = root + os.sep
    elsewhere = [p for p in sys.path if p and not (os.path.realpath(p) + os.sep).startswith(inside)]
    # A virtual environment inside the workspace (its site-packages on the path: the
    # interpreter that captures) holds installed libraries, not the workspace's own modules.
    installed_inside = tuple(os.path.realpath(p) + os.sep for p in sys.path
                             if p and os.path.basename(os.path.normpath(p)) in ("site-packages", "dist-packages")
                             and (os.path.realpath(p) + os.sep).startswith(inside))
    out: list[ShadowedLibrary] = []
    for name, module in sorted(list(sys.modules.items())):
        if "." in name or module is None:
            continue
        file = getattr(module, "__file__", None)
        if not isinstance(file, str) or not os.path.realpath(file).startswith(inside) \
                or os.path.realpath(file).startswith(installed_inside):
            continue
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, elsewhere)
        except (ImportError, ValueError, AttributeError):
            spec = None
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        origin = getattr(spec, "origin", None) or (locations[0] if locations else None)
        if spec is None or not origin:
            continue
        out.append({"module": name, "workspace": Path(os.path.realpath(file)).relative_to(root).as_posix(),
                    "installed": str(Path(origin).parent if origin.endswith("__init__.py") else origin)})
        if len(out) >= limit:
            break
    return out


def shadowing_note(entries: Sequence[Mapping[str, Any]]) -> str:
    """One sentence for people: which workspace folder was imported instead of which
    installed library."""
    parts = [f"{e['workspace']} instead of the installed {e['module']} ({e['installed']})" for e in entries]
    return ("the workspace shadows installed libraries: " + "; ".join(parts) +
            " (the workspace root comes first on the path; open a folder that does not hold them to use the "
            "installed ones)")
