"""A ref's module that leads out of the workspace through a link is refused in both forms
(issue 29 item 6): ``model = "link:net"`` with ``link.py`` (or a package folder, or its
``__init__.py``) linked outside is refused exactly as ``"link.py:net"`` is, and the
outside file is never imported."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from capture.recipe import dotted_module_problem, module_file, path_ref_file
from capture.session.runner import run_capture
from fake_workspace import fake_recipe, tensor

OUTSIDE_MODEL = '''
import os
open(os.environ["TV_OUTSIDE_MARKER"], "w").close()

def net(x):
    return x.relu()

def build():
    return None
'''


def _outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "evil.py").write_text(textwrap.dedent(OUTSIDE_MODEL), encoding="utf-8")
    (folder / "pkg").mkdir()
    (folder / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (folder / "pkg" / "mod.py").write_text(textwrap.dedent(OUTSIDE_MODEL), encoding="utf-8")
    return folder


# (how the workspace links out, the dotted module, the path form of the same file)
LINKS = [
    pytest.param(lambda ws, out: os.symlink(out / "evil.py", ws / "link.py"), "link", "link.py", id="module-file"),
    pytest.param(lambda ws, out: os.symlink(os.path.relpath(out / "evil.py", ws), ws / "link.py"), "link", "link.py",
                 id="relative-link"),
    pytest.param(lambda ws, out: os.symlink(out / "pkg", ws / "ext"), "ext.mod", "ext/mod.py", id="package-folder"),
    pytest.param(lambda ws, out: (os.mkdir(ws / "ext"), os.symlink(out / "pkg" / "__init__.py", ws / "ext" / "__init__.py"),
                                  (ws / "ext" / "mod.py").write_text("def net(x):\n    return x\n")),
                 "ext.mod", None, id="package-init"),
    pytest.param(lambda ws, out: (os.symlink(out, ws / "hop"), os.symlink(ws / "hop" / "evil.py", ws / "link.py")),
                 "link", "link.py", id="two-links"),
]


@pytest.mark.parametrize("make_link, dotted, path_form", LINKS)
def test_both_ref_forms_refuse_a_module_linked_out(workspace, tmp_path, make_link, dotted, path_form):
    out = _outside(tmp_path)
    make_link(workspace, out)
    marker = tmp_path / "imported"
    problem = dotted_module_problem(workspace, dotted)
    assert problem is not None and "outside the workspace" in problem
    assert module_file(workspace, dotted) is None  # sources and preloads never read it either
    forms = [f"{dotted}:net"] + ([f"{path_form}:net"] if path_form else [])
    for ref in forms:
        c = run_capture(workspace, fake_recipe(ref, tensor(2, 3)), timeout=60, env={"TV_OUTSIDE_MARKER": str(marker)})
        assert c.failure is not None, ref
        assert c.failure.stage == "recipe", (ref, c.failure)
        assert "outside the workspace" in c.failure.message, c.failure.message
        assert not marker.exists(), f"{ref}: the outside file was imported"
    if path_form:
        assert "outside the workspace" in path_ref_file(workspace, path_form)[1]


def test_a_factory_ref_linked_out_is_refused_too(workspace, tmp_path):
    out = _outside(tmp_path)
    os.symlink(out / "evil.py", workspace / "link.py")
    marker = tmp_path / "imported"
    c = run_capture(workspace, fake_recipe("models:net", tensor(2, 3), init={"factory": "link:build"}), timeout=60,
                    env={"TV_OUTSIDE_MARKER": str(marker)})
    assert c.failure is not None and "outside the workspace" in c.failure.message, c.failure
    assert not marker.exists()


def test_a_module_linked_inside_the_workspace_is_imported(workspace):
    os.symlink(workspace / "models.py", workspace / "alias.py")
    assert dotted_module_problem(workspace, "alias") is None
    c = run_capture(workspace, fake_recipe("alias:net", tensor(2, 3), tensor(3, 3)), timeout=60)
    assert c.failure is None, c.failure


def test_a_module_the_workspace_does_not_hold_is_not_its_problem(workspace):
    assert dotted_module_problem(workspace, "json.decoder") is None
