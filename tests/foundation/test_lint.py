"""The repository lints clean (ruff, configured in pyproject.toml), and the typed
contracts type-check strictly (mypy --strict on the worker protocol, the capture
session, the framework plug-in contract, and the language server's hooks; every
framework plug-in against its contract): a finding here is a bug or a contract that
drifted, said with its place."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The contracts between the parent and the worker, the one capture flow, the framework
# plug-in contract with its registry, and the language server's hooks with its registry
# of parts and of captures.
TYPED = ["capture/worker/protocol.py", "capture/session", "capture/worker/plugin.py", "capture/frameworks/__init__.py",
         "tensorviz_lsp/feature.py", "tensorviz_lsp/hooks.py", "tensorviz_lsp/registry.py", "tensorviz_lsp/records.py"]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=env)


def test_ruff_finds_nothing():
    proc = _run("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_typed_contracts_check_strictly():
    proc = _run("mypy", "--strict", "--follow-imports=silent", "--ignore-missing-imports", "--implicit-reexport",
                "--no-incremental", "--cache-dir", "/dev/null", *TYPED)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_framework_plugin_is_the_protocol():
    """The Torch and JAX plug-in modules and the tests' fake framework, assigned to
    ``FrameworkPlugin`` (tests/worker/plugin_conformance.py): a member missing, or with
    another signature, is a type error naming it."""
    env = {**os.environ, "MYPYPATH": str(ROOT / "tests")}
    proc = _run("mypy", "--strict", "--follow-imports=silent", "--ignore-missing-imports", "--no-incremental",
                "--cache-dir", "/dev/null", "tests/worker/plugin_conformance.py", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
