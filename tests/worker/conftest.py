"""Fixtures for the worker runtime tests (fake framework; no JAX or Torch needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

import fake_framework
from capture.frameworks import TEST_PLUGINS_ENV
from fake_workspace import make_workspace


@pytest.fixture(autouse=True)
def test_frameworks(monkeypatch):
    """The fake framework lives in the tests, not in the package; these tests name it as
    a plug-in (in this process, and so in every worker it starts, which inherits the
    environment)."""
    monkeypatch.setenv(TEST_PLUGINS_ENV, fake_framework.PLUGIN)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return make_workspace(tmp_path)
