"""The structure report (``python -m tools.structure``, named in the README) runs, and
every number it measures is within its budget (tools/structure.py BUDGETS: no mypy or
tsc or ESLint finding, no import circle; the functions over complexity 15 and the
duplicated runs no more than the debt left). This is the suite's one run of mypy (every
shipped package, and --strict over the typed contracts), of tsc over the browser code
(loose and strict) and of ESLint; a finding is printed with its place. Its duplicate detector is checked on a
tree of its own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tools.imports import ROOT
from tools.structure import BUDGETS, Report, duplicated_runs


@pytest.mark.slow
def test_the_structure_report_holds_its_budgets():
    proc = subprocess.run([sys.executable, "-m", "tools.structure", "--check"], cwd=ROOT, capture_output=True,
                          text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for heading in ("lines", "Python types", "browser code", "complexity", "import circles", "duplicated runs"):
        assert heading in proc.stdout
    assert "strict-typed coverage" in proc.stdout


def test_a_number_over_its_budget_is_reported():
    r = Report()
    r.number("import circles", 1)
    r.number("mypy errors", 0)
    assert r.over_budget() == [f"import circles: 1 > {BUDGETS['import circles']}"]


def test_a_check_that_could_not_run_is_not_a_pass():
    r = Report()
    r.number("tsc --checkJs errors", None)  # the checker is not installed
    r.number("mypy errors", -1)  # mypy ran but said neither "Success" nor how many errors
    r.number("functions over complexity 10", None)  # no budget: only reported
    assert r.over_budget() == ["tsc --checkJs errors: not measured", "mypy errors: not measured"]


def test_the_duplicate_detector_finds_a_copied_run(tmp_path, monkeypatch):
    monkeypatch.setattr("tools.structure.ROOT", tmp_path)
    body = "\n".join(f"    total = total + {i} * weight" for i in range(7))
    (tmp_path / "a.py").write_text(f"import os\n\ndef f(weight):\n    total = 0\n{body}\n    return total\n")
    (tmp_path / "b.py").write_text(f"# a comment\ndef g(weight):\n    total = 1\n{body}\n    return total * 2\n")
    (tmp_path / "c.py").write_text("def h():\n    return 1\n")
    runs = duplicated_runs(sorted(tmp_path.glob("*.py")))
    assert runs == [("a.py:5-11", "b.py:4-10")]  # the seven shared lines, once
    assert duplicated_runs([tmp_path / "a.py", tmp_path / "c.py"]) == []


def test_a_shipped_module_over_the_line_limit_is_named_and_over_budget(tmp_path, monkeypatch):
    import tools.structure as structure

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "long.py").write_text("x = 1\n" * (structure.MAX_FILE_LINES + 1))
    (pkg / "short.py").write_text("x = 1\n" * structure.MAX_FILE_LINES)  # at the limit: allowed
    monkeypatch.setattr(structure, "ROOT", tmp_path)
    monkeypatch.setattr(structure, "PACKAGES", ("pkg",))
    monkeypatch.setattr(structure, "_python_files", lambda folder: sorted((tmp_path / folder).rglob("*.py")))
    monkeypatch.setattr(structure, "_browser_files", lambda: [])
    monkeypatch.setattr(structure, "_largest_classes", lambda count: [])
    r = Report()
    structure.lines_section(r)
    name = f"shipped Python files over {structure.MAX_FILE_LINES} lines"
    assert r.numbers[name] == 1
    assert any(f"pkg/long.py {structure.MAX_FILE_LINES + 1}" in line for line in r.lines)
    assert r.over_budget() == [f"{name}: 1 > 0"]
