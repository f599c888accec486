"""Which workspace files a capture would import, from source alone (``ast``).

Used for the saved-source check before a capture starts: a dirty buffer of any of
these files means the worker would import stale text from disk, so the capture is
refused with a clear message instead. Nothing is imported or executed here; only
files inside the workspace root are followed.

Bounds (this runs in the CLI's and the language server's own process, outside the
capture's ``--memory``; ``ast`` holds about 650 bytes a byte of source, so 4 MiB of source
once took the CLI to 2.6 GB): a file of up to :data:`AST_MAX_CHARS` is parsed with
``ast``; a longer one is scanned line by line for its ``import`` statements (no tree:
memory about its text); and the walk reads at most :data:`MAX_TOTAL_CHARS` of source in
all, then stops following imports (the files past it are left unchecked).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Callable

from ..recipe import module_file

#: The longest file parsed with ``ast`` (at ~650x: about 85 MB at most, then freed).
AST_MAX_CHARS = 128 << 10
#: The source the walk reads in all before it stops following imports.
MAX_TOTAL_CHARS = 32 << 20
_IMPORT_LINE = re.compile(
    r"^([ \t]*)(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+\(?([^#\n]*)|import[ \t]+([^#\n]*))", re.M)


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


def _scanned(text: str, package: list[str], top_level: bool = False) -> list[str]:
    """The modules ``text``'s import lines name, found line by line (a file too long for
    ``ast``): what :func:`_targets` finds, less names after a line break inside
    parentheses; ``top_level``: unindented absolute imports only."""
    names: list[str] = []
    for m in _IMPORT_LINE.finditer(text):
        indent, dots, module, imported, plain = m.groups()
        if top_level and indent:
            continue
        if plain is not None:
            names += [a.split(" as ")[0].strip() for a in plain.split(",") if a.strip()]
            continue
        level = len(dots)
        if top_level and level:
            continue
        base = (package[: len(package) - (level - 1)] if level - 1 <= len(package) else []) if level else []
        mod = ".".join(base + ([module] if module else []))
        if not mod:
            continue
        names.append(mod)
        for alias in imported.replace("(", " ").replace(")", " ").split(","):
            alias = alias.split(" as ")[0].strip()
            if alias and alias != "*" and alias.isidentifier():
                names.append(f"{mod}.{alias}")
    return names


def imports_of(text: str, package: list[str]) -> list[str]:
    """The modules ``text`` imports (``package``: its own, for relative imports), by
    ``ast`` up to :data:`AST_MAX_CHARS`, line by line beyond."""
    if len(text) > AST_MAX_CHARS:
        return _scanned(text, package)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    return _targets(tree, package)


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
    total = 0
    while queue and len(seen) < limit and total < MAX_TOTAL_CHARS:
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
        total += len(text)
        package = _module_of(root, path)
        for name in imports_of(text, package):
            parts = name.split(".")
            # Importing a.b.c runs a/__init__.py and a/b/__init__.py too.
            for i in range(1, len(parts) + 1):
                for base in roots:
                    found = module_file(base, ".".join(parts[:i]))
                    if found is not None and found.resolve() not in seen:
                        queue.append(found.resolve())
                        break
    return list(seen)
