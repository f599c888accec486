"""docs/architecture.md tells the truth about the code: its folder tables name every
folder of Python and browser code (and nothing that is not there), and every import
between folders is one the table allows. The imports are read from source, every
statement counted (tools/imports.py for Python; ``import``/``from`` and ``new URL(…)`` for
the browser modules)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from tools.imports import PACKAGES, ROOT, all_modules, folder_graph, folder_of, module_graph

DOC = ROOT / "docs" / "architecture.md"
STATIC = ROOT / "viewer" / "static"
_ROW = re.compile(r"^\| `([^`]+)` \| [^|]+ \| ([^|]+) \|$")


def _rows() -> dict[str, set[str]]:
    """folder -> the folders it may import, from every three-column table of the guide."""
    rows: dict[str, set[str]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line.strip())
        if m:
            allowed = m.group(2).strip()
            rows[m.group(1)] = set() if allowed == "nothing" else set(re.findall(r"`([^`]+)`", allowed))
    return rows


@functools.cache
def _python_folders() -> dict[str, set[str]]:
    known = all_modules()
    graph = folder_graph(module_graph(), known)
    return {f.replace(".", "/"): {t.replace(".", "/") for t in targets if not t.endswith(".__main__")}
            for f, targets in graph.items() if not f.endswith(".__main__")}


_JS_IMPORT = re.compile(r"""(?:\bfrom\s+|\bimport\s+|new URL\()\s*["'](\.{1,2}/[^"']+)["']""")


def _browser_folders() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in STATIC.rglob("*.js"):
        if "vendor" in path.relative_to(STATIC).parts and path.name != "elk.js":
            continue
        mine = str(path.parent.relative_to(ROOT))
        targets = out.setdefault(mine, set())
        for spec in _JS_IMPORT.findall(path.read_text(encoding="utf-8")):
            folder = str((path.parent / spec).resolve().parent.relative_to(ROOT))
            if folder != mine:
                targets.add(folder)
    return out


def test_the_guide_names_every_folder_and_only_those():
    documented = _rows()
    actual = {**_python_folders(), **_browser_folders()}
    missing = sorted(set(actual) - set(documented))
    assert not missing, f"folders docs/architecture.md does not describe: {missing}"
    for folder in documented:
        assert (ROOT / folder).is_dir(), f"docs/architecture.md describes {folder}, which does not exist"
    for folder in ("tests", "benchmarks", "tools", "editors", "docs"):
        assert f"| `{folder}` |" in DOC.read_text(encoding="utf-8")


@pytest.mark.parametrize("kind", ["python", "browser"])
def test_every_import_between_folders_is_allowed(kind):
    documented = _rows()
    actual = _python_folders() if kind == "python" else _browser_folders()
    wrong = [f"{folder} imports {target}" for folder, targets in sorted(actual.items())
             for target in sorted(targets) if target not in documented.get(folder, set())]
    assert not wrong, "imports docs/architecture.md does not allow:\n" + "\n".join(wrong)


def test_every_allowed_import_names_a_folder():
    documented = _rows()
    for folder, allowed in documented.items():
        for target in allowed:
            assert target in documented, f"{folder} may import {target}, a folder the guide does not describe"


def test_the_data_path_names_real_places():
    text = DOC.read_text(encoding="utf-8")
    block = text[text.index("## The data path"):text.index("## Where the types are")]
    for place in set(re.findall(r"((?:capture|viewer|tensorviz_lsp|discovery)/[\w/]*\w(?:\.\w+)?)", block)):
        assert (ROOT / place).exists(), f"the data path names {place}, which does not exist"


def test_the_readme_points_here():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/architecture.md" in readme and "python -m tools.structure" in readme


def test_the_python_packages_are_the_documented_roots():
    documented = _rows()
    assert set(PACKAGES) <= set(documented)
    known = all_modules()
    assert {folder_of(m, known).split(".")[0] for m in known} == set(PACKAGES)
    assert all(Path(ROOT / p).is_dir() for p in PACKAGES)
