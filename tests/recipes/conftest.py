"""The recipe tests may name TensorViz's own test framework ("fake"), which does not ship:
it is a framework only where ``TENSORVIZ_TEST_PLUGINS`` names it, as here for every test."""

from __future__ import annotations

import pytest

import fake_framework
from capture.frameworks import TEST_PLUGINS_ENV


@pytest.fixture(autouse=True)
def test_frameworks(monkeypatch):
    monkeypatch.setenv(TEST_PLUGINS_ENV, fake_framework.PLUGIN)
