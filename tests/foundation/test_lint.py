"""The repository lints clean (ruff, configured in pyproject.toml), and the typed
contracts type-check strictly (mypy --strict on the worker protocol and the capture
session): a finding here is a bug or a contract that drifted, said with its place."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The contracts between the parent and the worker, and the one capture flow.
TYPED = ["capture/worker/protocol.py", "capture/session"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing():
    proc = _run("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_typed_contracts_check_strictly():
    proc = _run("mypy", "--strict", "--follow-imports=silent", "--ignore-missing-imports", "--implicit-reexport",
                "--no-incremental", "--cache-dir", "/dev/null", *TYPED)
    assert proc.returncode == 0, proc.stdout + proc.stderr
