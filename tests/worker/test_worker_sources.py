"""Sources: every workspace file imported during setup and tracing, with its sha256;
and freshness: which of them changed since."""

from __future__ import annotations

import hashlib

from capture.graph.freshness import SourceChange, is_fresh, stale_sources
from capture.graph.model import Source
from capture.session.runner import run_capture
from fake_workspace import fake_recipe, tensor
from interpreters import make_venv, site_packages


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sources_cover_model_helpers_and_factories(workspace):
    recipe = fake_recipe("models:Scaled", name="p", init={"factory": "factories:make_model"})
    recipe = type(recipe).from_dict({**recipe.to_dict(), "inputs": {"factory": "factories:make_inputs"}})
    c = run_capture(workspace, recipe)
    assert c.failure is None, c.failure
    assert [s.path for s in c.sources] == ["factories.py", "helpers.py", "models.py"]
    for s in c.sources:
        assert s.sha256 == sha(workspace / s.path)
    assert [n.op for n in c.nodes] == ["mul"]


def test_named_inputs_factory_and_bad_factory(workspace):
    recipe = type(fake_recipe("pkg.deep:f")).from_dict(
        {"name": "p", "framework": "fake", "model": "pkg.deep:f", "inputs": {"factory": "factories:named_inputs"}}
    )
    c = run_capture(workspace, recipe)
    assert c.failure is None
    assert {s.path for s in c.sources} >= {"pkg/__init__.py", "pkg/deep.py", "factories.py"}
    bad = type(recipe).from_dict({**recipe.to_dict(), "inputs": {"factory": "factories:bad_inputs"}})
    c = run_capture(workspace, bad)
    assert c.failure.stage == "recipe" and "returned list" in c.failure.message


def test_a_virtualenv_inside_the_workspace_is_not_a_source(workspace):
    """Library code in ``.venv`` under the workspace is not user code. The venv sees the
    test interpreter's packages (msgpack), also when the tests run in a venv."""
    venv = workspace / ".venv"
    make_venv(venv, see_running_packages=True)
    (site_packages(venv) / "vendored_lib.py").write_text("def double(x):\n    return x + x\n")
    (workspace / "uses_lib.py").write_text("import vendored_lib\n\ndef net(x):\n    return vendored_lib.double(x)\n")
    c = run_capture(workspace, fake_recipe("uses_lib:net", tensor(2)))  # default: the workspace .venv
    assert c.failure is None, c.failure
    assert [s.path for s in c.sources] == ["uses_lib.py"]
    # The node's frame is the user's line, not the library's.
    assert {f.file for f in c.frames} == {"uses_lib.py"}


def test_failed_capture_still_records_sources(workspace):
    c = run_capture(workspace, fake_recipe("crashy:raises", tensor(2)))
    assert [s.path for s in c.sources] == ["crashy.py"]
    c = run_capture(workspace, fake_recipe("crashy:segfault", tensor(2)))
    assert [s.path for s in c.sources] == ["crashy.py"]  # guessed by the parent after a crash


def test_freshness_on_disk_and_in_buffers(workspace):
    c = run_capture(workspace, fake_recipe("models:net", tensor(2, 3), tensor(3, 4)))
    assert is_fresh(c.sources, workspace)
    (workspace / "helpers.py").write_text("# edited\n" + (workspace / "helpers.py").read_text())
    assert stale_sources(c.sources, workspace) == [SourceChange("helpers.py", "changed")]
    (workspace / "models.py").unlink()
    assert stale_sources(c.sources, workspace) == [
        SourceChange("helpers.py", "changed"),
        SourceChange("models.py", "missing"),
    ]


def test_open_buffers_win_over_disk(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    sources = [Source("a.py", sha(tmp_path / "a.py"))]
    assert stale_sources(sources, tmp_path, {"a.py": "x = 1\n"}) == []
    assert stale_sources(sources, tmp_path, {str(tmp_path / "a.py"): "x = 2\n"}) == [
        SourceChange("a.py", "changed", in_buffer=True)
    ]


SELF_EDITING = '''\
from pathlib import Path

def net(x):
    return x + 1

# Saved while the capture runs: the graph still comes from the text above.
_here = Path(__file__)
_here.write_text(_here.read_text().replace("x + 1", "x + 2"))
'''


def test_sources_are_hashed_as_imported_not_as_saved_later(workspace):
    path = workspace / "self_editing.py"
    path.write_text(SELF_EDITING)
    imported = sha(path)
    c = run_capture(workspace, fake_recipe("self_editing:net", tensor(2)))
    assert c.failure is None, c.failure
    assert "x + 2" in path.read_text()  # the edit happened during the capture
    assert {s.path: s.sha256 for s in c.sources} == {"self_editing.py": imported}
    assert stale_sources(c.sources, workspace) == [SourceChange("self_editing.py", "changed")]
    assert not is_fresh(c.sources, workspace)


def test_a_module_edited_after_import_by_a_factory_is_stale(workspace):
    """``models`` imports ``helpers``; the inputs factory then rewrites ``helpers.py``."""
    (workspace / "editing_factory.py").write_text(
        "from pathlib import Path\n"
        "import fake_framework as fake\n\n"
        "def inputs():\n"
        "    p = Path(__file__).with_name('helpers.py')\n"
        "    p.write_text('# saved during the capture\\n' + p.read_text())\n"
        "    return {'args': (fake.array([2, 3]), fake.array([3, 4])), 'kwargs': {}}\n"
    )
    before = {name: sha(workspace / name) for name in ("helpers.py", "models.py", "editing_factory.py")}
    recipe = type(fake_recipe("models:net")).from_dict(
        {"name": "p", "framework": "fake", "model": "models:net", "inputs": {"factory": "editing_factory:inputs"}}
    )
    c = run_capture(workspace, recipe)
    assert c.failure is None, c.failure
    assert {s.path: s.sha256 for s in c.sources} == before
    assert stale_sources(c.sources, workspace) == [SourceChange("helpers.py", "changed")]


def test_a_module_whose_import_failed_is_recorded_as_imported(workspace):
    """The text that failed (here: rewritten, then raising) is the one recorded."""
    path = workspace / "broken.py"
    path.write_text(
        "from pathlib import Path\n"
        "Path(__file__).write_text('def net(x):\\n    return x\\n')\n"
        "raise RuntimeError('broken at import')\n"
    )
    imported = sha(path)
    c = run_capture(workspace, fake_recipe("broken:net", tensor(2)))
    assert c.failure is not None and "broken at import" in c.failure.message
    assert {s.path: s.sha256 for s in c.sources} == {"broken.py": imported}
    assert stale_sources(c.sources, workspace) == [SourceChange("broken.py", "changed")]
