"""The server never imports a workspace file in place of one of its own modules (issue 39
item 1): editors start the server with the workspace as its current folder, and
``python -m`` puts that folder first on the module path (5 of 6 tries imported the
workspace's ``msgpack.py``, ``lsprotocol.py``, ``platformdirs.py``, ``safe_read.py`` or
``tensorviz_lsp/``). Started that way anyway, the real server refuses, naming the file,
when the folder holds one of its modules, and takes the folder off its path otherwise;
no documented command adds it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # each starts a real server process


def _marker_module(marker: Path) -> str:
    return f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"


def _start(cwd: Path, *args: str, python_flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *python_flags, "-m", "tensorviz_lsp", *args], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module", ["msgpack.py", "pygls/__init__.py", "safe_read.py", "platformdirs.py"])
def test_a_workspace_module_that_would_shadow_the_servers_stops_it(tmp_path, module):
    marker = tmp_path / "ran"
    shadow = tmp_path / "ws" / module
    shadow.parent.mkdir(parents=True)
    shadow.write_text(_marker_module(marker))
    done = _start(tmp_path / "ws", "lsp")
    assert not marker.exists(), f"the workspace's {module} ran: {marker.read_text()}"
    assert done.returncode == 2, (done.returncode, done.stderr)
    name = module.split("/")[0].removesuffix(".py")
    assert "refusing to start" in done.stderr and f"{name} (" in done.stderr, done.stderr
    assert str(shadow.parent if "/" in module else shadow) in done.stderr, done.stderr
    assert "python -P -m tensorviz_lsp" in done.stderr
    assert done.stdout == ""  # nothing said on the protocol channel


def test_the_workspace_is_off_the_path_for_every_later_import(tmp_path):
    """A workspace file named like a standard-library module the server imports later
    (json, argparse, logging: not the server's own) is never imported either."""
    marker = tmp_path / "ran"
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in ("json", "argparse", "logging", "selectors"):
        (ws / f"{name}.py").write_text(_marker_module(marker))
    done = _start(ws, "lsp")
    assert not marker.exists(), f"workspace modules ran: {marker.read_text()}"
    assert "refusing" not in done.stderr, done.stderr


def test_the_documented_command_needs_no_check(tmp_path):
    """``python -P -m tensorviz_lsp`` never puts the folder on the path: the shadowing
    file is simply not seen (the server starts; it answers --version)."""
    marker = tmp_path / "ran"
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "msgpack.py").write_text(_marker_module(marker))
    done = _start(ws, "--version", python_flags=("-P",))
    assert done.returncode == 0 and done.stdout.startswith("tensorviz "), done.stderr
    assert not marker.exists()


def test_a_tensorviz_checkout_still_runs_its_own_modules():
    """A developer starting the server from a TensorViz checkout: its own packages are
    found in the current folder, and they are the ones meant."""
    done = _start(ROOT, "--version")
    assert done.returncode == 0 and done.stdout.startswith("tensorviz "), done.stderr


COMMAND = re.compile(r"""["'`]?-m["'`]?,?\s*["'`]?tensorviz_lsp\b""")


def _documented_commands() -> list[tuple[str, str]]:
    files = [ROOT / "docs" / "editors.md", ROOT / "README.md", ROOT / "editors" / "vscode" / "README.md",
             ROOT / "editors" / "nvim" / "README.md", ROOT / "editors" / "vscode" / "server-options.js",
             ROOT / "editors" / "nvim" / "lua" / "tensorviz" / "init.lua", ROOT / "tensorviz_lsp" / "settings.py"]
    package = json.loads((ROOT / "editors" / "vscode" / "package.json").read_text())
    texts = [(str(f.relative_to(ROOT)), f.read_text()) for f in files]
    texts.append(("package.json", json.dumps(package["contributes"]["configuration"])))
    out = []
    for where, text in texts:
        for line in text.splitlines():
            # ``python -m tensorviz_lsp.settings`` regenerates files in a checkout: no server
            if any(not line[m.end():].startswith(".") for m in COMMAND.finditer(line)):
                out.append((where, line.strip()))
    return out


def test_no_documented_or_generated_command_puts_the_workspace_on_the_path():
    commands = _documented_commands()
    assert commands, "the docs give a python -m server command"
    bare = [(where, line) for where, line in commands if not re.search(r"""["'`]?-[PI]["'`]?,?\s*["'`]?-m""", line)]
    assert not bare, bare
