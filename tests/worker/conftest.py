"""Fixtures for the worker runtime tests (fake framework; no JAX or Torch needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_workspace import make_workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return make_workspace(tmp_path)
