"""The repository's own import graph, read from source (every import statement counts:
module level, inside a function, under ``TYPE_CHECKING``): modules, the folders they sit
in, and the circles among either. Read by ``tests/foundation/test_import_cycles.py``,
``tests/foundation/test_architecture_doc.py`` and the structure report
(``python -m tools.structure``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("capture", "discovery", "tensorviz_lsp", "viewer", "safe_read")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in python_files(package)}


def python_files(folder: str) -> list[Path]:
    """The repository's Python files under ``folder`` (npm's installed packages left out:
    viewer/node_modules holds the browser checkers, and a few of their files are Python)."""
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "node_modules" not in p.parts)


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The repository modules ``name`` imports, by every statement in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                base_name = ".".join(base + ([node.module] if node.module else []))
            else:
                base_name = node.module or ""
            # ``from pkg import sub`` imports the module pkg.sub when there is one.
            targets = [f"{base_name}.{a.name}" if f"{base_name}.{a.name}" in known else base_name for a in node.names]
        else:
            continue
        out.update(t for t in targets if t in known and t != name)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def module_graph() -> dict[str, set[str]]:
    known = all_modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def folder_of(name: str, known: dict[str, Path]) -> str:
    """The folder (package) a module belongs to; a ``__main__`` module is its own."""
    path = known[name]
    if path.name == "__init__.py" or path.name == "__main__.py":
        return name
    return name.rpartition(".")[0]


def folder_graph(graph: dict[str, set[str]], known: dict[str, Path]) -> dict[str, set[str]]:
    folders: dict[str, set[str]] = {}
    for name, targets in graph.items():
        mine = folders.setdefault(folder_of(name, known), set())
        for target in targets:
            theirs = folder_of(target, known)
            folders.setdefault(theirs, set())
            if theirs != folder_of(name, known):
                mine.add(theirs)
    return folders
