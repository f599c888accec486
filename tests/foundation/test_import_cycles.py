"""No import circle anywhere in the repository's own code (issues 27 and 37): every import
statement counts, at module level, inside a function, or under ``TYPE_CHECKING``, so a
circle cannot hide behind a function-level import. Two circles are looked for, in every
package: between modules, and between folders (``capture/graph`` importing
``capture/worker`` while ``capture/worker`` imports ``capture/graph`` is a circle even when
no two modules import each other). A ``__main__`` module is a program's entry, imported
by nothing: it belongs to no folder's dependencies.

Plug-ins found by name are not import statements, and this is by design: the language
server imports each module of ``tensorviz_lsp/features/`` by name at startup (each
registers its feature), and the worker imports a framework's capture module by the name
the registry gives (``capture/frameworks``); both sides import only the contract
(``tensorviz_lsp/feature.py``, ``capture/worker/plugin.py``), never each other.
"""

from __future__ import annotations

import pytest

from tools.imports import (
    PACKAGES, ROOT, all_modules, cycles, folder_graph, folder_of, imported, module_graph, python_files,
)


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


def test_the_check_covers_every_package():
    """Every folder of Python code under the packages is in the graph (none skipped)."""
    known = all_modules()
    folders = {folder_of(n, known) for n in known}
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for package in PACKAGES
               for p in python_files(package)}
    assert on_disk <= folders
    for expected in ("capture.torch", "capture.jax", "capture.graph", "viewer.projection", "viewer.server",
                     "tensorviz_lsp.features", "tensorviz_lsp.cli.commands", "safe_read"):
        assert expected in folders


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle_between_modules(package):
    inside = [c for c in cycles(module_graph()) if any(m == package or m.startswith(package + ".") for m in c)]
    assert not inside, "import circles:\n" + "\n".join(" <-> ".join(c) for c in inside)


def test_no_import_circle_between_folders():
    known = all_modules()
    found = cycles(folder_graph(module_graph(), known))
    assert not found, "folders importing each other:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_folder_check_sees_a_circle_no_module_closes(tmp_path):
    """graph/a imports worker/b, worker/c imports graph/d: no module circle, a folder circle."""
    pkg = tmp_path / "pkg"
    for sub in ("graph", "worker"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "graph" / "a.py").write_text("from ..worker import b\n")
    (pkg / "worker" / "b.py").write_text("")
    (pkg / "worker" / "c.py").write_text("def f():\n    from ..graph import d\n")
    (pkg / "graph" / "d.py").write_text("")
    known = {"pkg": pkg / "__init__.py", "pkg.graph": pkg / "graph" / "__init__.py",
             "pkg.worker": pkg / "worker" / "__init__.py", "pkg.graph.a": pkg / "graph" / "a.py",
             "pkg.graph.d": pkg / "graph" / "d.py", "pkg.worker.b": pkg / "worker" / "b.py",
             "pkg.worker.c": pkg / "worker" / "c.py"}
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert cycles(graph) == []
    assert cycles(folder_graph(graph, known)) == [["pkg.graph", "pkg.worker"]]
