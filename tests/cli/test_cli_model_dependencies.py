"""The model's own libraries, missing from the capture interpreter (issue 36, item 5):
the import failure lists every library the model's files import at module level that
the interpreter lacks, with the one reviewed command that installs them; the command
line shows that exact command and runs it only when the person says yes; a workspace
folder that shadows an installed library is said."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from capture.graph.model import Capture, Coverage, Failure
from capture.session.model_dependencies import module_level_imports
from tensorviz_lsp.cli.commands.capture import offer_model_dependencies

ROOT = Path(__file__).resolve().parents[2]

MODEL = """\
import json
import tv_missing_tokenizer_lib
from helpers import double


def net(x):
    return double(x)
"""
HELPERS = """\
import math
import tv_missing_numeric_lib
try:
    import tv_optional_lib
except ImportError:
    tv_optional_lib = None


def double(x):
    return x * 2.0
"""


def cli(tmp_path, *argv, stdin=None):
    import fake_framework
    from capture.frameworks import TEST_PLUGINS_ENV

    env = {**os.environ, TEST_PLUGINS_ENV: fake_framework.PLUGIN, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tensorviz_lsp", *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=180, stdin=stdin)


def test_module_level_imports_leave_optional_ones_out(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "helpers.py").write_text(HELPERS)
    assert module_level_imports([tmp_path / "model.py", tmp_path / "helpers.py"]) == [
        "json", "tv_missing_tokenizer_lib", "helpers", "math", "tv_missing_numeric_lib"]


@pytest.mark.slow
def test_every_missing_library_and_the_command_that_adds_them(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "helpers.py").write_text(HELPERS)
    done = cli(tmp_path, "capture", "model.py:net", "--framework", "fake", "--input", "x=float32[2,3]",
               stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    command = f"{sys.executable} -m pip install tv_missing_tokenizer_lib tv_missing_numeric_lib"
    assert (f"the model imports tv_missing_tokenizer_lib, tv_missing_numeric_lib, which the capture interpreter "
            f"{sys.executable} lacks") in done.stderr
    assert f"To install, run:\n  {command}" in done.stderr
    assert "Run this command now?" not in done.stderr, "no terminal: nobody to ask, nothing installed"
    from capture.graph import graphfile

    failure = graphfile.read(tmp_path / ".tensorviz" / "captures" / "net.tvg").failure
    assert failure.stage == "import" and failure.details["missing_module"] == "tv_missing_tokenizer_lib"
    assert failure.details["missing"] == ["tv_missing_tokenizer_lib", "tv_missing_numeric_lib"]
    assert failure.details["install"][:4] == [sys.executable, "-m", "pip", "install"]


def _failed_import(install):
    failure = Failure("ModuleNotFoundError", "importing 'model' failed: No module named 'tiktoken'", "import",
                      details={"missing_module": "tiktoken", "missing": ["tiktoken"], "install": install,
                               "python": sys.executable})
    return SimpleNamespace(capture=Capture("fake", "fake", "1", Coverage("traced_program"), failure=failure))


def test_nothing_is_installed_without_a_yes(capsys):
    result = _failed_import([sys.executable, "-c", "raise SystemExit('must not run')"])
    assert offer_model_dependencies("capture", result, ask=lambda prompt: "n") is False
    err = capsys.readouterr().err
    assert "To install, run:" in err and "nothing was installed" in err


def test_a_yes_runs_exactly_the_command_shown(tmp_path, capsys):
    marker = tmp_path / "ran"
    install = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('ok')"]
    asked = []
    assert offer_model_dependencies("capture", _failed_import(install),
                                    ask=lambda prompt: asked.append(prompt) or "y") is True
    assert asked == ["Run this command now? [y/N] "] and marker.read_text() == "ok"


@pytest.mark.slow
def test_a_workspace_folder_shadowing_an_installed_library_is_said(tmp_path):
    """Flax's own repository opened at its root: its flax/ was imported instead of the
    installed Flax, silently. Here the shadowed library is tqdm (a dependency of the test tools)."""
    pytest.importorskip("tqdm")
    (tmp_path / "tqdm").mkdir()
    (tmp_path / "tqdm" / "__init__.py").write_text("VERSION = 'the workspace copy'\n")
    (tmp_path / "model.py").write_text("import tqdm\n\n\ndef net(x):\n    return x * 2.0\n")
    done = cli(tmp_path, "capture", "model.py:net", "--framework", "fake", "--input", "x=float32[2,3]")
    assert done.returncode == 0, done.stderr
    assert "note: the workspace shadows installed libraries: tqdm/__init__.py instead of the installed tqdm" \
        in done.stderr, done.stderr
