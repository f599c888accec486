"""The checks before any user code runs, in docs/architecture.md's order, each a clear failure.

``models.py`` touches a marker file when imported (``TV_IMPORT_MARKER``): every check
below must fail without it appearing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from capture.recipe import Recipe
from capture.session.runner import MIN_PYTHON, default_interpreter, install_command, run_capture
from fake_workspace import fake_recipe, tensor
from interpreters import make_venv, site_packages


@pytest.fixture
def marker(tmp_path) -> Path:
    return tmp_path / "imported"


def run(workspace, recipe, marker, **kw):
    return run_capture(workspace, recipe, env={"TV_IMPORT_MARKER": str(marker)}, **kw)


def test_marker_proves_import(workspace, marker):
    c = run(workspace, fake_recipe("models:net", tensor(2, 3), tensor(3, 4)), marker)
    assert c.failure is None and marker.exists()


def test_untrusted_workspace(workspace, marker):
    c = run(workspace, fake_recipe("models:net", tensor(2, 3)), marker, trusted=False)
    assert (c.failure.stage, c.failure.type) == ("trust", "WorkspaceNotTrusted")
    assert not marker.exists()


@pytest.mark.parametrize(
    "unsaved, blocked",
    [
        pytest.param(["models.py"], ["models.py"], id="relative"),
        pytest.param(lambda ws: [str(ws / "pkg" / "deep.py")], ["pkg/deep.py"], id="absolute"),
        pytest.param(lambda ws: [(ws / "helpers.py").as_uri()], ["helpers.py"], id="file-uri"),
        pytest.param([".tensorviz/recipes.toml"], [".tensorviz/recipes.toml"], id="recipes"),
    ],
)
def test_unsaved_sources_block_before_anything_runs(workspace, marker, unsaved, blocked):
    paths = unsaved(workspace) if callable(unsaved) else unsaved
    c = run(workspace, fake_recipe("models:net", tensor(2, 3)), marker, unsaved=paths, trusted=True, python="/nonexistent")
    assert (c.failure.stage, c.failure.type) == ("source", "UnsavedSource")
    assert c.failure.details["unsaved"] == blocked
    assert not marker.exists()


def test_unsaved_files_outside_the_workspace_or_not_python_do_not_block(workspace, marker, tmp_path):
    c = run(workspace, fake_recipe("models:net", tensor(2, 3), tensor(3, 4)), marker,
            unsaved=lambda: [str(tmp_path / "elsewhere.py"), "README.md"])
    assert c.failure is None


def test_missing_interpreter(workspace, marker):
    c = run(workspace, fake_recipe("models:net", tensor(2, 3)), marker, python="/nonexistent/python3")
    assert (c.failure.stage, c.failure.type) == ("interpreter", "InterpreterNotFound")
    assert "/nonexistent/python3 does not exist" in c.failure.message
    assert not marker.exists()


def test_interpreter_that_is_not_python(workspace, marker, tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'I am not Python' >&2\nexit 4\n")
    fake.chmod(0o755)
    c = run(workspace, fake_recipe("models:net", tensor(2, 3)), marker, python=str(fake))
    assert (c.failure.stage, c.failure.type) == ("interpreter", "InterpreterNotRunnable")
    assert "exit status 4" in c.failure.message and "I am not Python" in c.failure.message
    assert not marker.exists()


@pytest.mark.parametrize("version", [[3, 8, 10], [3, 10, 14]], ids=["3.8", "3.10"])
def test_interpreter_too_old(workspace, marker, tmp_path, version):
    fake = tmp_path / "python"
    probe = {"version": version, "executable": "x", "prefix": "x", "modules": {}}
    fake.write_text(f"#!/bin/sh\necho '{json.dumps(probe)}'\n")
    fake.chmod(0o755)
    c = run(workspace, fake_recipe("models:net", tensor(2, 3)), marker, python=str(fake))
    assert (c.failure.stage, c.failure.type) == ("interpreter", "InterpreterTooOld")
    assert f"is Python {'.'.join(map(str, version))}; capture needs Python 3.11 or newer" in c.failure.message
    assert not marker.exists()


def test_the_oldest_python_is_the_one_the_package_declares():
    """One floor: the worker refuses what pyproject.toml does not support (3.11+)."""
    declared = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert declared["project"]["requires-python"] == ">=" + ".".join(map(str, MIN_PYTHON))
    assert MIN_PYTHON == (3, 11)


def test_non_executable_interpreter(workspace, marker, tmp_path):
    fake = tmp_path / "python"
    fake.write_text("")
    c = run(workspace, fake_recipe("models:net", tensor(2, 3)), marker, python=str(fake))
    assert (c.failure.stage, c.failure.type) == ("interpreter", "InterpreterNotExecutable")


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory) -> str:
    """A real interpreter without msgpack, torch, jax or flax (and without pip)."""
    return str(make_venv(tmp_path_factory.mktemp("bare") / "venv", see_running_packages=False))


@pytest.mark.parametrize(
    "framework, missing",
    [
        pytest.param("fake", ["msgpack"], id="fake"),
        pytest.param("torch", ["msgpack", "torch"], id="torch"),
        pytest.param("jax", ["msgpack", "torch", "jax"], id="jax-function-still-needs-torch"),
        # Flax is an optional model dependency: required only when the model uses it.
        pytest.param("jax", ["msgpack", "torch", "jax", "flax"], id="flax-model"),
    ],
)
def test_missing_dependencies_report_and_install_command(
    request, workspace, marker, bare_venv, framework, missing
):
    model = "models:net"
    if request.node.callspec.id == "flax-model":
        (workspace / "flax_model.py").write_text("from flax import linen as nn\n\nclass MLP(nn.Module):\n    pass\n")
        model = "flax_model:MLP"
    recipe = Recipe.from_dict({"name": "p", "framework": framework, "model": model})
    c = run(workspace, recipe, marker, python=bare_venv)
    f = c.failure
    assert (f.stage, f.type) == ("dependencies", "MissingDependencies")
    assert f.details["missing"] == missing
    assert f.details["install"] == [bare_venv, "-m", "pip", "install", *missing]
    assert f.details["pip_available"] is False
    assert "ensurepip" in f.message
    assert " ".join(missing) in f.message
    assert not marker.exists()


@pytest.mark.parametrize(
    "missing, modules, device, expected",
    [
        pytest.param(["jax", "flax"], {"torch": {"found": True, "version": "2.13.0+cpu"}}, "cpu",
                     ["jax", "flax", "torch==2.13.0+cpu"], id="adding-jax-pins-the-selected-torch"),
        pytest.param(["jax", "flax"], {"torch": {"found": True, "version": "2.13.0"}}, "cuda:0",
                     ["jax[cuda12]", "flax", "torch==2.13.0"], id="cuda-jax"),
        pytest.param(["torch"], {"torch": {"found": False}}, "cpu", ["torch"], id="torch-missing"),
        pytest.param(["msgpack"], {"torch": {"found": True, "version": None}}, "cpu", ["msgpack"], id="no-version-no-pin"),
    ],
)
def test_install_command(missing, modules, device, expected):
    assert install_command("/py", missing, modules, device=device) == ["/py", "-m", "pip", "install", *expected]


def test_device_unavailable_fails_before_import_without_cpu_fallback(workspace, marker):
    c = run(workspace, fake_recipe("models:net", tensor(2, 3), device="cuda:0"), marker)
    assert (c.failure.stage, c.failure.type) == ("device", "CaptureError")
    assert "no CPU fallback" in c.failure.message
    assert c.failure.details == {"device": "cuda:0", "available": ["cpu"]}
    assert not marker.exists()


def test_device_is_checked_before_an_invalid_recipe(workspace, marker):
    """the order of docs/architecture.md ("The checks before a capture"): device backend, then recipe validity."""
    (workspace / ".tensorviz").mkdir()
    (workspace / ".tensorviz" / "recipes.toml").write_text(
        'version = 1\n[profiles.p]\nframework = "fake"\nmodel = "models:net"\ndevice = "cuda:1"\n'
        'inputs = { args = [{ kind = "tensor", shape = [2], dtype = "float33" }] }\n'
    )
    c = run(workspace, "p", marker)
    assert c.failure.stage == "device"
    (workspace / ".tensorviz" / "recipes.toml").write_text(
        'version = 1\n[profiles.p]\nframework = "fake"\nmodel = "models:net"\ndevice = "cpu"\n'
        'inputs = { args = [{ kind = "tensor", shape = [2], dtype = "float33" }] }\n'
    )
    c = run(workspace, "p", marker)
    assert (c.failure.stage, c.failure.type) == ("recipe", "RecipeError")
    assert c.failure.details["key_path"] == "profiles.p.inputs.args[0].dtype"
    assert c.failure.details["line"] == 6
    assert not marker.exists()


def test_unknown_dimensions_are_requested_not_guessed(workspace, marker):
    recipe = fake_recipe("models:net", tensor("batch", 3), tensor(3, None), name="p")
    c = run(workspace, recipe, marker)
    f = c.failure
    assert (f.stage, f.type) == ("recipe", "InputsNeeded")
    assert f.details["needs"] == [
        {"section": "inputs", "input": "args[0]", "path": "profiles.p.inputs.args[0]", "axis": 0,
         "name": "batch", "shape": ["batch", 3], "dtype": "float32"},
        {"section": "inputs", "input": "args[1]", "path": "profiles.p.inputs.args[1]", "axis": 1,
         "name": None, "shape": [3, None], "dtype": "float32"},
    ]
    assert "args[0] axis 0 (batch)" in f.message
    assert not marker.exists()
    assert c.recipe["model"] == "models:net"


def test_profile_by_name_and_missing_profile(workspace, marker):
    (workspace / ".tensorviz").mkdir()
    (workspace / ".tensorviz" / "recipes.toml").write_text(
        'version = 1\n[profiles.ok]\nframework = "fake"\nmodel = "models:net"\n'
        'inputs = { args = [{ kind = "tensor", shape = [2, 3], dtype = "float32" },'
        ' { kind = "tensor", shape = [3, 4], dtype = "float32" }] }\n'
    )
    assert run(workspace, "ok", marker).failure is None
    c = run(workspace, "absent", marker)
    assert c.failure.stage == "recipe"
    assert "no profile named 'absent' (profiles: ok)" in c.failure.message


def test_no_recipes_file(workspace, marker):
    c = run(workspace, "p", marker)
    assert c.failure.stage == "recipe" and "no recipes file" in c.failure.message


def test_default_interpreter_prefers_the_workspace_venv(tmp_path):
    assert default_interpreter(tmp_path) == sys.executable
    venv_python = tmp_path / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text("")
    assert default_interpreter(tmp_path) == str(venv_python)


def test_worker_sees_only_the_capture_package_of_this_environment(workspace, tmp_path):
    """The launcher puts ``capture`` on the worker's path, not this environment's
    site-packages: a module installed only here (tomlkit) is not importable there
    when the selected interpreter is a bare venv with msgpack linked in."""
    import msgpack

    folder = tmp_path / "venv"
    make_venv(folder, see_running_packages=False)
    os.symlink(Path(msgpack.__file__).parent, site_packages(folder) / "msgpack")
    (workspace / "probe_env.py").write_text(
        "import importlib.util\n"
        "def net(x):\n"
        "    assert importlib.util.find_spec('tomlkit') is None, 'parent site-packages leaked'\n"
        "    assert importlib.util.find_spec('capture') is not None\n"
        "    return x + 1\n"
    )
    c = run_capture(workspace, fake_recipe("probe_env:net", tensor(2)), python=str(folder / "bin" / "python"))
    assert c.failure is None, c.failure


def test_installing_a_missing_package_is_seen_by_the_next_capture(workspace, tmp_path):
    """The probe's answer is cached per interpreter only until its path changes."""
    import msgpack

    folder = tmp_path / "venv2"
    python = str(make_venv(folder, see_running_packages=False))
    recipe = fake_recipe("models:net", tensor(2, 3), tensor(3, 4))
    assert run_capture(workspace, recipe, python=python).failure.details["missing"] == ["msgpack"]
    os.symlink(Path(msgpack.__file__).parent, site_packages(folder) / "msgpack")  # "pip install msgpack"
    c = run_capture(workspace, recipe, python=python)
    assert c.failure is None, c.failure


def test_worker_entry_refuses_to_run_by_hand():
    proc = subprocess.run([sys.executable, "-m", "capture.worker"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "started by TensorViz" in proc.stderr
