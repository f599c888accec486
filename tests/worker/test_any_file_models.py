"""Any file as a model (docs/setups.md): ``model = "dir/06_file.py:Qualname"``
and path-form factories, through the real worker (fake framework here; the JAX and
Torch captures of the same layout are in tests/jax and tests/torch)."""

from __future__ import annotations

import os
import textwrap

from capture.graph.freshness import SourceChange, stale_sources
from capture.recipe import Recipe
from capture.session.runner import run_capture
from fake_workspace import tensor

FILES = {
    # a script folder: no __init__.py, names no dotted module can have
    "scripts/06_scan_over_layers.py": """
        from layer_utils import double

        class ScanMLP:
            def __init__(self, factor=2):
                self.factor = factor

            def __call__(self, x):
                return double(x) * self.factor

        def net(x):
            return double(x) + 1
    """,
    "scripts/layer_utils.py": """
        def double(x):
            return x + x
    """,
    "train-model.py": """
        def net(x):
            return x.relu()
    """,
    # a factory in another path-form file, importing the model file by its stem
    "setups/make-model.py": """
        import importlib

        model_file = importlib.import_module("06_scan_over_layers")

        def build():
            return model_file.ScanMLP(5)

        def same_class():
            import sys
            loaded = sys.modules["06_scan_over_layers"]
            assert loaded is model_file, (loaded, model_file)
            return model_file.ScanMLP(7)
    """,
}


def workspace(tmp_path):
    root = tmp_path / "ws"
    for name, text in FILES.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip())
    return root


def recipe(model: str, *args, **fields) -> Recipe:
    return Recipe.from_dict({"name": "p", "framework": "fake", "model": model,
                             "inputs": {"args": list(args), "kwargs": {}}, **fields})


def test_a_file_in_a_script_folder_with_a_digit_name(tmp_path):
    ws = workspace(tmp_path)
    c = run_capture(ws, recipe("scripts/06_scan_over_layers.py:net", tensor(2, 3)))
    assert c.failure is None, c.failure
    assert [n.op for n in c.nodes] == ["add", "add"]
    # the sibling import worked (the script's folder is on the path) and both are sources
    assert [s.path for s in c.sources] == ["scripts/06_scan_over_layers.py", "scripts/layer_utils.py"]
    assert {f.file for f in c.frames} == {"scripts/06_scan_over_layers.py", "scripts/layer_utils.py"}
    assert c.recipe["model"] == "scripts/06_scan_over_layers.py:net"


def test_a_dashed_file_name(tmp_path):
    ws = workspace(tmp_path)
    c = run_capture(ws, recipe("train-model.py:net", tensor(4)))
    assert c.failure is None, c.failure
    assert [n.op for n in c.nodes] == ["relu"] and [s.path for s in c.sources] == ["train-model.py"]


def test_a_path_form_factory_importing_the_model_by_its_stem_gets_the_same_class(tmp_path):
    ws = workspace(tmp_path)
    # same_class asserts, inside the worker, that the module it imported is the one the
    # model was loaded as (sys.modules under the stem), and builds ScanMLP(7) from it
    c = run_capture(ws, recipe("scripts/06_scan_over_layers.py:ScanMLP", tensor(2),
                               init={"factory": "setups/make-model.py:same_class"}))
    assert c.failure is None, c.failure
    ops = [n.op for n in c.nodes]
    assert ops == ["add", "mul"], ops
    assert [i.literal for i in c.nodes[1].inputs] == [None, 7]
    assert [s.path for s in c.sources] == ["scripts/06_scan_over_layers.py", "scripts/layer_utils.py",
                                           "setups/make-model.py"]


def test_freshness_covers_the_path_form_file(tmp_path):
    ws = workspace(tmp_path)
    c = run_capture(ws, recipe("train-model.py:net", tensor(4)))
    assert stale_sources(c.sources, ws) == []
    f = ws / "train-model.py"
    f.write_text(f.read_text() + "\n# edited\n")
    assert stale_sources(c.sources, ws) == [SourceChange("train-model.py", "changed")]


def test_clear_failures(tmp_path):
    ws = workspace(tmp_path)
    c = run_capture(ws, recipe("scripts/missing.py:net", tensor(2)))
    assert c.failure.stage == "import"
    assert "no file 'scripts/missing.py' in the workspace" in c.failure.message
    c = run_capture(ws, recipe("train-model.py:Missing", tensor(2)))
    assert c.failure.stage == "import" and "'train-model.py' has no attribute 'Missing'" in c.failure.message
    assert [s.path for s in c.sources] == ["train-model.py"]
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil.py").write_text("def net(x):\n    return x\n")
    os.symlink(outside / "evil.py", ws / "linked.py")
    c = run_capture(ws, recipe("linked.py:net", tensor(2)))
    assert c.failure.stage == "recipe" and "outside the workspace" in c.failure.message
    # a file whose stem is an already imported module cannot be loaded under it
    (ws / "tools").mkdir()
    (ws / "tools" / "os.py").write_text("def net(x):\n    return x + 1\n")
    c = run_capture(ws, recipe("tools/os.py:net", tensor(2)))
    assert c.failure.stage == "import"
    assert "cannot load 'tools/os.py' as module 'os': a module of that name is already imported" in c.failure.message
    # an error in the file's own code keeps its frames
    (ws / "broken-model.py").write_text("def net(x):\n    return x\n\nraise ValueError('bad config')\n")
    c = run_capture(ws, recipe("broken-model.py:net", tensor(2)))
    assert c.failure.stage == "import" and "ValueError: bad config" in c.failure.message
    assert [f.file for f in c.failure.frames] == ["broken-model.py"]


def test_a_path_form_naming_a_package_module_imports_it_as_the_package_does(tmp_path):
    ws = workspace(tmp_path)
    (ws / "pkg").mkdir()
    (ws / "pkg" / "__init__.py").write_text("")
    (ws / "pkg" / "layers.py").write_text("def double(x):\n    return x + x\n")
    (ws / "pkg" / "model.py").write_text("from .layers import double\n\ndef net(x):\n    return double(x).relu()\n")
    c = run_capture(ws, recipe("pkg/model.py:net", tensor(2)))
    # relative imports work: loaded as pkg.model, not as a top-level "model"
    assert c.failure is None, c.failure
    assert [n.op for n in c.nodes] == ["add", "relu"]
    assert [s.path for s in c.sources] == ["pkg/__init__.py", "pkg/layers.py", "pkg/model.py"]
