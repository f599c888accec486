"""Fixtures for the Torch capture tests: skipped cleanly without torch; one thread each
(the machines running the suite are small and shared)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torch_workspace import forget_workspace_modules, make_workspace  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def ws(tmp_path: Path):
    root = make_workspace(tmp_path)
    yield root
    forget_workspace_modules(root)
