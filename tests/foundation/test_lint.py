"""The repository lints clean (ruff, configured in pyproject.toml: no function over
cyclomatic complexity 15 but those a ``noqa: C901`` still lists, see
``python -m tools.structure``), every shipped package type-checks (mypy as
pyproject.toml's ``[tool.mypy]`` configures it, ``check_untyped_defs``), and the typed
contracts type-check strictly (mypy --strict over ``tools.structure.STRICT``: the graph
model and file format, the worker protocol, the capture session, the recipe model, the
framework plug-in contract, the language server's hooks and registries, discovery; every framework
plug-in against its contract): a finding here is a bug or a contract that drifted, said
with its place."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.structure import STRICT_ARGS, strict_targets

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=env)


def test_ruff_finds_nothing():
    proc = _run("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_every_shipped_package_type_checks():
    proc = _run("mypy")  # files and options: pyproject.toml's [tool.mypy]
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_the_typed_contracts_check_strictly():
    proc = _run("mypy", *STRICT_ARGS, *strict_targets())
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_framework_plugin_is_the_protocol():
    """The Torch and JAX plug-in modules and the tests' fake framework, assigned to
    ``FrameworkPlugin`` (tests/worker/plugin_conformance.py): a member missing, or with
    another signature, is a type error naming it."""
    env = {**os.environ, "MYPYPATH": str(ROOT / "tests")}
    proc = _run("mypy", "--strict", "--follow-imports=silent", "--ignore-missing-imports", "--no-incremental",
                "--cache-dir", "/dev/null", "tests/worker/plugin_conformance.py", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
