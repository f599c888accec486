"""No import circle inside the recipe and discovery packages (issue 27), counting every
import: module level, inside functions, and under ``if TYPE_CHECKING:``. A circle
hidden behind a function-level import is still a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(path: Path, known: set[str], root: Path = ROOT) -> set[str]:
    """The modules of ``known`` that ``path`` imports, relative imports resolved."""
    here = _module_name(path, root)
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            # ``from . import x`` may import the submodule ``x``.
            names = [prefix] + [f"{prefix}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            # A module importing its own package's facade is no edge of interest.
            if name and name != here and not here.startswith(name + "."):
                out.add(name)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
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


@pytest.mark.parametrize("package", ["capture/recipe", "discovery"])
def test_no_import_circle(package):
    files = sorted((ROOT / package).rglob("*.py"))
    known = {_module_name(f) for f in files}
    graph = {_module_name(f): _imported(f, known) for f in files}
    assert graph, f"no modules found under {package}"
    assert _cycles(graph) == []


@pytest.mark.parametrize(
    "b_text",
    [
        pytest.param("def g():\n    from .a import x\n", id="function-level"),
        pytest.param("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import X\n", id="type-checking"),
    ],
)
def test_the_check_sees_a_hidden_circle(tmp_path, b_text):
    """The detector itself: a circle closed only by a hidden import is found."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import g\n")
    (pkg / "b.py").write_text(b_text)
    files = sorted(pkg.rglob("*.py"))
    known = {_module_name(f, tmp_path) for f in files}
    graph = {_module_name(f, tmp_path): _imported(f, known, tmp_path) for f in files}
    assert _cycles(graph) == [["pkg.a", "pkg.b"]]
