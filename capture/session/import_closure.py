"""Which workspace files a capture would import, from source alone (``ast``).

Used for the saved-source check before a capture starts: a dirty buffer of any of
these files means the worker would import stale text from disk, so the capture is
refused with a clear message instead. Nothing is imported or executed here; only
files inside the workspace root are followed.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable

from ..recipe import module_file


def _module_of(root: Path, path: Path) -> list[str]:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
        return parts  # a package's own name is its "module"; relative imports resolve from it
    return parts[:-1]


def _targets(tree: ast.AST, package: list[str]) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level - 1 <= len(package) else []
            else:
                base = []
            mod = ".".join(base + ([node.module] if node.module else []))
            if mod:
                names.append(mod)
            # ``from pkg import sub`` may name a submodule.
            for alias in node.names:
                if alias.name != "*" and mod:
                    names.append(f"{mod}.{alias.name}")
    return names


def import_closure(
    root: Path, start: list[Path], read: Callable[[Path], str | None], limit: int = 2000
) -> list[Path]:
    """Workspace files reachable by imports from ``start`` (``start`` included).

    A start file in a folder that is not a package (a script folder, named by a recipe's
    path form) has that folder on the worker's ``sys.path``: its sibling imports are
    followed from there too."""
    root = root.resolve()
    seen: dict[Path, None] = {}
    queue = [p.resolve() for p in start]
    roots = [root]
    for p in queue:
        folder = p.parent
        if folder != root and root in folder.parents and not (folder / "__init__.py").is_file() and folder not in roots:
            roots.append(folder)
    while queue and len(seen) < limit:
        path = queue.pop()
        if path in seen:
            continue
        try:
            path.relative_to(root)
        except ValueError:
            continue
        seen[path] = None
        text = read(path)
        if text is None:
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        package = _module_of(root, path)
        for name in _targets(tree, package):
            parts = name.split(".")
            # Importing a.b.c runs a/__init__.py and a/b/__init__.py too.
            for i in range(1, len(parts) + 1):
                for base in roots:
                    found = module_file(base, ".".join(parts[:i]))
                    if found is not None and found.resolve() not in seen:
                        queue.append(found.resolve())
                        break
    return list(seen)
