"""Shared test configuration.

Tests that need an optional heavy dependency (jax, torch, Chromium, Neovim, Node) are
marked and skip with a reason when it is missing, so a partial install still says
something useful. CI must not pass by skipping: `.ci/run` sets
``TENSORVIZ_STRICT_SKIPS=1``, which turns every skip into a failure except those whose
reason is a fact about the machine that no install can change (listed below).
"""

from __future__ import annotations

import os

import pytest

# Skips that are legitimate on CI's machine: a Python newer than the one a test is
# about, or a GPU that this CPU-only test expects to be absent.
_MACHINE_FACTS = ("parses PEP 695", "this machine has CUDA", "needs POSIX")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or os.environ.get("TENSORVIZ_STRICT_SKIPS") != "1":
        return
    reason = str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr)
    if any(fact in reason for fact in _MACHINE_FACTS):
        return
    report.outcome = "failed"
    report.longrepr = f"skipped under TENSORVIZ_STRICT_SKIPS=1 (CI installs everything): {reason}"
