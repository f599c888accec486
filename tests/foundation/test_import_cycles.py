"""No import circle among the repository's own modules (issue 27): every import
statement counts, at module level, inside a function, or under ``TYPE_CHECKING``, so a
cycle cannot hide behind a function-level import. The graph is the whole repository's;
each folder in ``CHECKED`` may be part of no circle (the others' owners add theirs)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("capture", "discovery", "tensorviz_lsp", "viewer")
CHECKED = ("tensorviz_lsp", "capture.session", "capture.worker", "capture.frameworks", "capture.recipe", "discovery")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


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
    known = {"pkg": pkg / "__init__.py", "pkg.a": pkg / "a.py", "pkg.b": pkg / "b.py"}
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]


@pytest.mark.parametrize("package", CHECKED)
def test_no_import_circle(package):
    known = all_modules()
    graph = {name: imported(name, path, known) for name, path in known.items()}
    inside = [c for c in cycles(graph) if any(m == package or m.startswith(package + ".") for m in c)]
    assert not inside, "import circles:\n" + "\n".join(" <-> ".join(c) for c in inside)
