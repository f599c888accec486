"""The worker refuses a Torch older than the tested floor (issue 14, item 4): a
``dependencies`` failure naming the version found and the one needed, before any
workspace code runs. ``pyproject.toml``'s extras carry the same floors, CI's exact
versions live in ``.ci/constraints.txt``."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from capture.frameworks.supported import MIN_VERSIONS, is_supported, version_tuple  # noqa: E402
from capture.recipe import parse_profile  # noqa: E402
from capture.session.runner import run_capture  # noqa: E402
from torch_workspace import profile, tensor  # noqa: E402

pytestmark = pytest.mark.torch

ROOT = Path(__file__).resolve().parents[2]


def stub_torch(folder: Path, version: str) -> Path:
    """A package named ``torch`` reporting ``version``, to put first on the worker's path."""
    pkg = folder / "stub" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\n")
    return pkg.parent


def test_an_old_torch_is_a_clear_dependencies_failure(ws, tmp_path):
    stub = stub_torch(tmp_path, "2.1.2+cu118")
    c = run_capture(ws, parse_profile("p", profile("marked:Marked", args=[tensor([2])])), timeout=120,
                    env={"PYTHONPATH": str(stub)})
    assert c.failed and not c.nodes
    f = c.failure
    assert f.stage == "dependencies", f
    assert "2.1.2+cu118" in f.message and f">={MIN_VERSIONS['torch']}" in f.message
    assert f.details["found"] == "2.1.2+cu118" and f.details["needed"] == f">={MIN_VERSIONS['torch']}"
    assert f.details["package"] == "torch"
    # Refused before the model was imported.
    assert not (ws / "imported.marker").exists()


def test_the_floor_itself_and_newer_builds_are_supported():
    floor = MIN_VERSIONS["torch"]
    assert is_supported("torch", floor) and is_supported("torch", floor + ".0+cpu")
    assert is_supported("torch", torch.__version__)  # the Torch these tests run on
    assert is_supported("torch", "3.0.0.dev20270101")
    assert not is_supported("torch", "2.1.0") and not is_supported("torch", "1.13.1")
    assert not is_supported("torch", "unknown")
    assert version_tuple("2.13.0+cpu") == (2, 13, 0)


def test_the_extras_use_the_floors_and_ci_pins_exact_versions():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert extras["torch"] == [f"torch>={MIN_VERSIONS['torch']}"]
    assert sorted(extras["jax"]) == sorted([f"jax>={MIN_VERSIONS['jax']}", f"flax>={MIN_VERSIONS['flax']}"])
    pins = dict(
        line.split("==", 1)
        for line in (ROOT / ".ci" / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    for package, floor in MIN_VERSIONS.items():
        assert version_tuple(pins[package]) >= version_tuple(floor), (package, pins[package], floor)
    assert re.fullmatch(r"\d+(\.\d+)+", pins["torch"])
    for script in ("run", "fresh-clone"):
        assert "constraints.txt" in (ROOT / ".ci" / script).read_text(), script
