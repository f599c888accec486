"""The missing-dependency offer is the parent's (issue 52 items 1-2): the install command a
failed capture carries is ``[the job's interpreter, -m, pip, install, …]`` of checked
distribution names, whatever the worker (the model's process) says. Before: the module
name of a model's ``ModuleNotFoundError`` went unchecked into the command
(``--index-url=…``, ``-U``, ``name @ file:///…`` offered, and run after "y"), and a
model that patched the worker's missing-library helper had ``/bin/sh -c …`` offered."""

from __future__ import annotations

import sys

import pytest

from capture.graph.model import Failure
from capture.session import CaptureRequest, run_session
from capture.session.model_dependencies import disown
from capture.session.runner import make_job
from capture.worker.distributions import distribution, install_spec, project_name, safe_install
from capture.worker.protocol import missing_dependencies, model_dependencies
from fake_workspace import fake_recipe, tensor

#: Module names a model's ModuleNotFoundError may carry that are no package to offer.
HOSTILE_NAMES = [
    "--index-url=http://localhost:8765/simple", "-U", "--force-reinstall", "--target=/tmp/x", "-r reqs",
    "-e", "tiktoken @ file:///tmp/evil", "--pre", "/tmp/evil", "../evil", "http://evil/x", "tiktoken>=0",
    "tiktoken[all]", "evil.whl", "", " ", "os", "_private", "naïve", "a b", "x;y",
]

#: (import name, the distribution offered)
MAPPED = [("sklearn", "scikit-learn"), ("PIL", "pillow"), ("cv2", "opencv-python"), ("yaml", "pyyaml"),
          ("bs4", "beautifulsoup4"), ("tiktoken", "tiktoken"), ("more_itertools", "more-itertools"),
          ("google", None), ("json", None)]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_no_hostile_name_is_a_distribution(name):
    assert distribution(name) is None
    assert not install_spec(name) or name in ("os",)  # "os" is a valid project name, never offered for import os


@pytest.mark.parametrize("module, package", MAPPED)
def test_import_names_map_to_distributions(module, package):
    assert distribution(module) == package


@pytest.mark.parametrize("spec, ok", [
    ("tiktoken", True), ("scikit-learn", True), ("ruamel.yaml", True), ("torch==2.13.0+cpu", True),
    ("jax[cuda12]", True), ("jax[evil]", False), ("-U", False), ("--index-url=http://x", False), ("x @ http://y", False),
    ("torch>=2", False), ("torch==", False), ("torch==--pre", False), ("./x", False), ("x.tar.gz", False), ("", False),
])
def test_install_specs(spec, ok):
    assert install_spec(spec) is ok
    assert project_name(spec) is (ok and "==" not in spec and "[" not in spec)


def test_only_the_parents_command_shape_is_safe():
    assert safe_install(["/py", "-m", "pip", "install", "tiktoken", "torch==2.13.0"], "/py")
    assert not safe_install(["/py", "-m", "pip", "install", "tiktoken"], "/other")
    assert not safe_install(["/py", "-m", "pip", "install"], "/py")
    assert not safe_install(["/bin/sh", "-c", "x", "y", "z"], "/bin/sh")
    assert not safe_install(["/py", "-m", "pip", "download", "tiktoken"], "/py")
    assert not safe_install("/py -m pip install tiktoken", "/py")


def worker_failure(stage: str, details: dict) -> Failure:
    return Failure("ModuleNotFoundError", "importing 'model' failed", stage, details=dict(details))


def test_the_parent_drops_what_a_worker_says_about_installs(workspace):
    job = make_job(workspace, fake_recipe("models:net", tensor(2, 3)))
    patched = worker_failure("import", {"module": "model", "install": ["/bin/sh", "-c", "touch RAN"],
                                        "python": "/bin/sh", "missing": ["x"], "modules": ["x"]})
    disown(job, patched)
    assert patched.details == {"module": "model"}
    assert model_dependencies(patched) is None
    hostile = worker_failure("import", {"missing_module": "--index-url=http://localhost:8765/simple"})
    disown(job, hostile)
    assert hostile.details == {}
    deps = worker_failure("dependencies", {"missing": ["-U", "safetensors", "PIL.Image", "/tmp/x"], "python": "/bin/sh",
                                           "install": ["/bin/sh", "-c", "x"], "pinned": ["--pre"]})
    disown(job, deps)
    assert deps.details == {"missing": ["safetensors", "pillow"], "python": job.python}
    wanted = missing_dependencies(deps, job.python)
    assert wanted is not None and "install" not in wanted and wanted["python"] == job.python
    checkpoint = worker_failure("checkpoint", {"missing": ["layer.weight"], "unexpected": []})
    disown(job, checkpoint)
    assert checkpoint.details == {"missing": ["layer.weight"], "unexpected": []}, "another stage's details stay"


def test_readers_refuse_commands_and_names_no_parent_makes():
    failure = worker_failure("dependencies", {"missing": ["--pre", "numpy"], "python": "/py",
                                              "install": ["/py", "-m", "pip", "install", "--pre", "numpy"]})
    wanted = missing_dependencies(failure, "/py")
    assert wanted == {"missing": ["numpy"], "python": "/py"}
    assert missing_dependencies(failure, "/other")["python"] == "/other"
    good = worker_failure("import", {"missing": ["tiktoken"], "python": "/py",
                                     "install": ["/py", "-m", "pip", "install", "tiktoken"]})
    assert model_dependencies(good, "/py") is not None
    assert model_dependencies(good, "/bin/sh") is None


MODELS = {
    "hostile_name": "raise ModuleNotFoundError('no', name={name!r})\n",
    "patched_helper": (
        "import capture.worker.context as c\n"
        "c._missing_library = lambda exc, ws: {{'install': ['/bin/sh', '-c', 'touch RAN'], 'python': '/bin/sh',"
        " 'missing': ['x']}}\n"
        "raise ModuleNotFoundError('no', name='tiktoken')\n"),
    "mapped": "import {name}\n",
}


def run(workspace, source: str, **fmt: str):
    (workspace / "offered.py").write_text(source.format(**fmt) + "\ndef net(x):\n    return x\n")
    (workspace / ".tensorviz").mkdir(exist_ok=True)
    (workspace / ".tensorviz" / "recipes.toml").write_text(
        'version = 1\n[profiles.p]\nframework = "fake"\nmodel = "offered:net"\n'
        'inputs = { args = [{ kind = "tensor", shape = [2, 3], dtype = "float32" }] }\n')
    result = run_session(CaptureRequest(workspace, "p", trusted=True, output=workspace / "out.tvg"))
    assert result.capture.failure is not None and result.capture.failure.stage == "import", result.capture.failure
    return result


@pytest.mark.slow  # a capture each
@pytest.mark.parametrize("name", ["--index-url=http://localhost:8765/simple", "-U", "tiktoken @ file:///tmp/evil",
                                  "--target=/tmp/x"])
def test_a_hostile_module_name_is_never_offered(workspace, name):
    result = run(workspace, MODELS["hostile_name"], name=name)
    details = result.capture.failure.details
    assert "install" not in details and "missing" not in details, details
    assert model_dependencies(result.capture.failure, result.job.python) is None


@pytest.mark.slow
def test_a_patched_missing_library_helper_gets_no_shell_offered(workspace):
    result = run(workspace, MODELS["patched_helper"])
    details = result.capture.failure.details
    assert not {"install", "python", "missing", "missing_module"} & set(details), details
    assert model_dependencies(result.capture.failure, result.job.python) is None


@pytest.mark.slow
@pytest.mark.parametrize("module, package", [("sklearn", "scikit-learn"), ("cv2", "opencv-python")])
def test_a_missing_library_is_offered_as_its_distribution(workspace, module, package):
    result = run(workspace, MODELS["mapped"], name=module)
    wanted = model_dependencies(result.capture.failure, result.job.python)
    assert wanted is not None, result.capture.failure.details
    assert wanted["missing"] == [package]
    assert wanted["install"][:5] == [sys.executable, "-m", "pip", "install", package]


@pytest.mark.slow
def test_a_workers_dependencies_failure_gets_the_parents_command(workspace):
    """A ``dependencies`` failure the worker raised (a checkpoint reader that needs
    safetensors) names packages: the parent keeps the checked ones and builds the command
    for the job's interpreter."""
    (workspace / "offered.py").write_text(
        "from capture.worker.errors import CaptureError\n\n\n"
        "def net(x):\n"
        "    raise CaptureError('dependencies', 'needs safetensors', {'missing': ['safetensors', '--pre'],"
        " 'python': '/bin/sh', 'install': ['/bin/sh', '-c', 'touch RAN']})\n")
    (workspace / ".tensorviz").mkdir(exist_ok=True)
    (workspace / ".tensorviz" / "recipes.toml").write_text(
        'version = 1\n[profiles.p]\nframework = "fake"\nmodel = "offered:net"\n'
        'inputs = { args = [{ kind = "tensor", shape = [2, 3], dtype = "float32" }] }\n')
    result = run_session(CaptureRequest(workspace, "p", trusted=True, output=workspace / "out.tvg"))
    failure = result.capture.failure
    assert failure is not None and failure.stage == "dependencies", failure
    wanted = missing_dependencies(failure, result.job.python)
    assert wanted is not None and wanted["missing"] == ["safetensors"] and wanted["python"] == sys.executable
    assert wanted["install"][:5] == [sys.executable, "-m", "pip", "install", "safetensors"]
