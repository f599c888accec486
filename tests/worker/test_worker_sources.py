"""Sources: every workspace file imported during setup and tracing, with its sha256;
and freshness: which of them changed since."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from capture.freshness import SourceChange, is_fresh, stale_sources
from capture.model import Source
from capture.runner import run_capture
from fake_workspace import fake_recipe, tensor


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
    """Library code in ``.venv`` under the workspace is not user code."""
    venv = workspace / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True, timeout=120)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "vendored_lib.py").write_text("def double(x):\n    return x + x\n")
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
