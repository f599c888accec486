"""The strict-skip guard (tests/conftest.py) itself: under TENSORVIZ_STRICT_SKIPS=1 a
skip fails the run, whether it happens while a test runs or while a file or folder is
collected, unless its reason is a fact about the machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

GUARD = Path(__file__).resolve().parents[1] / "conftest.py"

RUNTIME_SKIP = "import pytest\n\ndef test_a():\n    pytest.skip('needs a tool CI installs')\n"
MARK_SKIPIF = "import pytest\n\n@pytest.mark.skipif(True, reason='jax is not installed')\ndef test_a():\n    pass\n"
MODULE_IMPORTORSKIP = "import pytest\n\npytest.importorskip('tensorviz_no_such_module')\n\ndef test_a():\n    pass\n"
FOLDER_IMPORTORSKIP = "import pytest\n\npytest.importorskip('tensorviz_no_such_module')\n"
MACHINE_FACT_RUNTIME = "import pytest\n\ndef test_a():\n    pytest.skip('this machine has no CUDA GPU (torch sees none)')\n"
MACHINE_FACT_MODULE = (
    "import pytest\n\npytest.skip('the specification is not beside this checkout', allow_module_level=True)\n\n"
    "def test_a():\n    pass\n"
)
PASSING = "def test_ok():\n    pass\n"


def run_pytest(folder: Path, files: dict[str, str], strict: bool) -> subprocess.CompletedProcess:
    """pytest on a tiny folder that has the real guard as its conftest."""
    (folder / "conftest.py").write_text(GUARD.read_text())
    (folder / "pytest.ini").write_text("[pytest]\n")
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "TENSORVIZ_STRICT_SKIPS"}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only the guard; faster, and no ini of ours
    if strict:
        env["TENSORVIZ_STRICT_SKIPS"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--rootdir", str(folder), str(folder)],
        cwd=folder, env=env, capture_output=True, text=True, timeout=120,
    )


@pytest.mark.parametrize(
    ("files", "rc", "summary"),
    [
        pytest.param({"test_x.py": RUNTIME_SKIP}, 1, "1 failed", id="pytest.skip-in-a-test"),
        pytest.param({"test_x.py": MARK_SKIPIF}, 1, "1 error", id="skipif-mark"),  # an error: skipped at setup
        pytest.param({"test_x.py": MODULE_IMPORTORSKIP, "test_y.py": PASSING}, 2, "1 error",
                     id="module-level-importorskip"),
        pytest.param({"sub/conftest.py": FOLDER_IMPORTORSKIP, "sub/test_x.py": PASSING, "test_y.py": PASSING}, 2,
                     "1 error", id="conftest-importorskip"),
    ],
)
def test_strict_mode_fails_a_skip(tmp_path, files, rc, summary):
    proc = run_pytest(tmp_path, files, strict=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == rc, out
    assert "skipped under TENSORVIZ_STRICT_SKIPS=1" in out, out
    assert summary in out.splitlines()[-1], out
    assert "skipped" not in out.splitlines()[-1], out


@pytest.mark.parametrize(
    "files",
    [
        pytest.param({"test_x.py": MODULE_IMPORTORSKIP, "test_y.py": PASSING}, id="module-level-importorskip"),
        pytest.param({"sub/conftest.py": FOLDER_IMPORTORSKIP, "sub/test_x.py": PASSING, "test_y.py": PASSING},
                     id="conftest-importorskip"),
        pytest.param({"test_x.py": RUNTIME_SKIP, "test_y.py": PASSING}, id="pytest.skip-in-a-test"),
    ],
)
def test_without_strict_mode_a_skip_is_a_skip(tmp_path, files):
    proc = run_pytest(tmp_path, files, strict=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    last = out.splitlines()[-1]
    assert "1 passed" in last and "1 skipped" in last, out


@pytest.mark.parametrize(
    "files",
    [
        pytest.param({"test_x.py": MACHINE_FACT_RUNTIME, "test_y.py": PASSING}, id="in-a-test"),
        pytest.param({"test_x.py": MACHINE_FACT_MODULE, "test_y.py": PASSING}, id="module-level"),
    ],
)
def test_strict_mode_accepts_a_machine_fact(tmp_path, files):
    proc = run_pytest(tmp_path, files, strict=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    last = out.splitlines()[-1]
    assert "1 passed" in last and "1 skipped" in last and "failed" not in last and "error" not in last, out
