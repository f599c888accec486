"""The package-boundary table of docs/architecture.md, enforced.

Two checks: a static one (every import statement in each package, including ones
inside functions, against the table) and a runtime one (importing every module of
a package in a fresh interpreter pulls in none of the forbidden modules).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = ("jax", "jaxlib", "flax", "torch")

# package -> top-level modules it must never import
FORBIDDEN = {
    "discovery": {*FRAMEWORKS, "pygls", "lsprotocol", "tensorviz_lsp", "capture", "viewer", "msgpack", "tomlkit"},
    "capture": {"pygls", "lsprotocol", "libcst", "tensorviz_lsp", "viewer", "discovery", "tomlkit"},
    "viewer": {*FRAMEWORKS, "pygls", "lsprotocol", "tensorviz_lsp", "discovery", "libcst"},
    "tensorviz_lsp": set(FRAMEWORKS),
    # Imported by all the others (and put on the worker's path beside capture): stdlib only.
    "safe_read": {*FRAMEWORKS, "pygls", "lsprotocol", "tensorviz_lsp", "capture", "viewer", "discovery",
                  "msgpack", "tomlkit", "libcst"},
}


# Parts of a forbidden package a package may still import: none. Discovery reads the
# frameworks' declarations from the registry its front end hands in (discovery/registry.py).
ALLOWED: dict[str, tuple[str, ...]] = {}


# The folders of ``capture/`` that hold a framework's capture (run inside the worker):
# the only place jax/flax/torch may be imported.
FRAMEWORK_FOLDERS = ("jax", "torch")


def _is_framework_module(path: Path) -> bool:
    return path.relative_to(ROOT / "capture").parts[0] in FRAMEWORK_FOLDERS


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def _py_files(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "node_modules" not in p.parts)


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_static_imports_respect_the_table(package):
    problems = []
    for path in _py_files(package):
        forbidden = set(FORBIDDEN[package])
        if package == "capture" and not _is_framework_module(path):
            forbidden |= set(FRAMEWORKS)
        for line, module in _imports(path):
            allowed = any(module == a or module.startswith(a + ".") for a in ALLOWED.get(package, ()))
            if module.split(".")[0] in forbidden and not allowed:
                problems.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not problems, "\n".join(problems)


def _modules(package: str) -> list[str]:
    mods = []
    for path in _py_files(package):
        if package == "capture" and _is_framework_module(path):
            continue
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods.append(".".join(parts))
    return mods


@pytest.mark.parametrize("package, must_not_load", [
    pytest.param("discovery", ["jax", "flax", "torch", "pygls", "msgpack"], id="discovery"),
    pytest.param("capture", ["jax", "flax", "torch", "pygls", "libcst", "tomlkit"], id="capture"),
    pytest.param("viewer", ["jax", "flax", "torch", "pygls", "libcst"], id="viewer"),
    pytest.param("tensorviz_lsp", ["jax", "flax", "torch"], id="tensorviz_lsp"),
    pytest.param("safe_read", ["jax", "flax", "torch", "pygls", "libcst", "msgpack", "tomlkit", "capture",
                               "discovery", "viewer", "tensorviz_lsp"], id="safe_read"),
])
def test_fresh_interpreter_imports(package, must_not_load):
    modules = _modules(package)
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        f"print(json.dumps(sorted(set(k.split('.')[0] for k in sys.modules) & set({must_not_load!r}))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


# Front ends sit beside each other: what the command line and the language server's features
# both need (the shorthand reader, setup checks, suggestions) lives in ``tensorviz_lsp/setup``,
# which imports neither.
@pytest.mark.parametrize("folder, forbidden", [
    pytest.param("tensorviz_lsp/features", "tensorviz_lsp.cli", id="features-not-cli"),
    pytest.param("tensorviz_lsp/setup", "tensorviz_lsp.cli", id="setup-not-cli"),
    pytest.param("tensorviz_lsp/setup", "tensorviz_lsp.features", id="setup-not-features"),
])
def test_front_ends_do_not_import_each_other(folder, forbidden):
    package = folder.replace("/", ".")
    problems = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        here = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1]) if path.name != "__init__.py" \
            else package if path.parent == ROOT / folder else ".".join(path.parent.relative_to(ROOT).parts)
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here.split(".")
                if node.level:
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join([*base, node.module] if node.module else base)
                else:
                    target = node.module or ""
                names = [target] + [f"{target}.{alias.name}" for alias in node.names]
            if any(n == forbidden or n.startswith(forbidden + ".") for n in names):
                problems.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {forbidden}")
    assert (ROOT / folder).is_dir()
    assert not problems, "\n".join(problems)


# The analysis every front end reads (index, names, layer costs, the line index, memory fit) is
# ``capture/analysis``; ``viewer/projection`` keeps what only the browser's pages need. Outside
# ``viewer/``, no shipped package imports it (the command line and the language server read the
# same figures through ``capture.analysis.analysis.Analysis``).
SHIPPED_OUTSIDE_VIEWER = ("capture", "discovery", "tensorviz_lsp", "safe_read", "tools")


def _projection_imports(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        if any(n == "viewer.projection" or n.startswith("viewer.projection.") for n in names):
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("package", SHIPPED_OUTSIDE_VIEWER)
def test_nothing_outside_the_viewer_imports_its_projection(package):
    problems = [f"{path.relative_to(ROOT)}:{line} imports viewer.projection"
                for path in _py_files(package) for line in _projection_imports(path)]
    assert (ROOT / package).exists()
    assert not problems, "\n".join(problems)


def test_the_projection_check_finds_each_spelling(tmp_path):
    """The check above can fail: each way of writing the import is found."""
    cases = {
        "import viewer.projection.projection\n": [1],
        "from viewer.projection.lines import LineIndex\n": [1],
        "from viewer import projection\n": [1],
        "def f():\n    from viewer.projection import projection\n": [2],
        "from viewer.server import app\nfrom capture.analysis import lines\n": [],
    }
    for text, expected in cases.items():
        p = tmp_path / "m.py"
        p.write_text(text, encoding="utf-8")
        assert _projection_imports(p) == expected, text
