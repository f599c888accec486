"""The repository lints clean (ruff, configured in pyproject.toml: no function over
cyclomatic complexity 15 but those a ``noqa: C901`` still lists, see
``python -m tools.structure``), and every framework plug-in type-checks against its
contract: a finding here is a bug or a contract that drifted, said with its place. mypy
over every shipped package and ``--strict`` over the typed contracts run once, in the
structure report (tests/foundation/test_structure.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path



ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=env)


def test_ruff_finds_nothing():
    proc = _run("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_framework_plugin_is_the_protocol():
    """The Torch and JAX plug-in modules and the tests' fake framework, assigned to
    ``FrameworkPlugin`` (tests/worker/plugin_conformance.py): a member missing, or with
    another signature, is a type error naming it."""
    env = {**os.environ, "MYPYPATH": str(ROOT / "tests")}
    proc = _run("mypy", "--strict", "--follow-imports=silent", "--ignore-missing-imports", "--no-incremental",
                "--cache-dir", "/dev/null", "tests/worker/plugin_conformance.py", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
