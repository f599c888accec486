"""Fixtures for the worker runtime tests (fake framework; no JAX or Torch needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from capture.frameworks import TEST_FRAMEWORKS_ENV
from fake_workspace import make_workspace


@pytest.fixture(autouse=True)
def test_frameworks(monkeypatch):
    """The fake framework is hidden from users; these tests switch it on (in this
    process, and so in every worker it starts, which inherits the environment)."""
    monkeypatch.setenv(TEST_FRAMEWORKS_ENV, "1")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return make_workspace(tmp_path)
