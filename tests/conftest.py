"""Shared test configuration.

Tests that need an optional heavy dependency (jax, torch, Chromium, Neovim, Node) are
marked and skip with a reason when it is missing, so a partial install still says
something useful. CI must not pass by skipping: `.ci/run` sets
``TENSORVIZ_STRICT_SKIPS=1``, which turns every skip into a failure except those whose
reason is a fact about the machine that no install can change (listed below). That
holds for a skip while a test runs and for a skip at collection (a module-level
``pytest.importorskip`` skips a whole file, a conftest's skips a whole folder): the
latter becomes a collection error.
"""

from __future__ import annotations

import os

import pytest

import tensorviz_lsp  # noqa: F401  (hands discovery the frameworks' registry, as the CLI and server do)

# Skips that are legitimate on CI's machine, each a fact no install can change: a Python
# newer than the one a test is about, a GPU that a CPU-only test expects to be absent (or
# that a GPU test needs and this machine lacks), a platform without POSIX, and a clone
# without the project's shared folder beside it (the spec is checked where it is there).
MACHINE_FACTS = (
    "parses PEP 695",
    "this machine has CUDA",
    "this machine has no CUDA GPU",
    "needs POSIX",
    "the specification is not beside this checkout",
)
STRICT_ENV = "TENSORVIZ_STRICT_SKIPS"


def _strict() -> bool:
    return os.environ.get(STRICT_ENV) == "1"


def _reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    return str(longrepr[-1] if isinstance(longrepr, tuple) else longrepr)


def _refused(reason: str) -> str | None:
    """The failure text for a skip strict mode refuses, or None for a machine fact."""
    if any(fact in reason for fact in MACHINE_FACTS):
        return None
    return f"skipped under {STRICT_ENV}=1 (CI installs everything): {reason}"


class StrictSkips:
    """A plugin, not conftest hooks: pytest hides a conftest's hooks from a folder whose
    own conftest has not loaded, and a folder whose conftest skips never loads it."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        _fail_if_refused(outcome.get_result())

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector):
        outcome = yield
        _fail_if_refused(outcome.get_result())


def _fail_if_refused(report: pytest.CollectReport | pytest.TestReport) -> None:
    if report.skipped and _strict() and (message := _refused(_reason(report))):
        report.outcome = "failed"
        report.longrepr = message


# The fast tier (`python -m pytest -m "not slow"`) holds tests that take at most a few
# seconds each; a test past this, not marked `slow`, is named at the end of the run (a
# report to act on, never a failure: wall time on a shared machine is no test verdict).
SLOW_SECONDS = 3.0


class SlowReport:
    """Names the tests of this run that took over :data:`SLOW_SECONDS` (setup, call and
    teardown together) and are not marked ``slow``: candidates for the mark."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.unmarked: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # From the report's keywords, not the collected items: under pytest-xdist the
        # controller that prints this summary collects nothing; the workers' reports carry
        # the markers' names.
        if "slow" not in report.keywords:
            self.unmarked.add(report.nodeid)
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    def pytest_terminal_summary(self, terminalreporter) -> None:
        over = sorted(((s, n) for n, s in self.seconds.items() if n in self.unmarked and s > SLOW_SECONDS),
                      reverse=True)
        if not over:
            return
        terminalreporter.write_sep("-", f"{len(over)} test(s) over {SLOW_SECONDS:g} s not marked slow "
                                        f"(load average {_load()}; mark them @pytest.mark.slow if that holds unloaded)")
        for seconds, nodeid in over[:30]:
            terminalreporter.write_line(f"{seconds:7.2f} s  {nodeid}")


def _load() -> str:
    try:
        with open("/proc/loadavg") as fh:
            return fh.read().split()[0]
    except OSError:
        return "?"


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("tensorviz-strict-skips"):
        config.pluginmanager.register(StrictSkips(), "tensorviz-strict-skips")
    if not config.pluginmanager.has_plugin("tensorviz-slow-report"):
        config.pluginmanager.register(SlowReport(), "tensorviz-slow-report")
