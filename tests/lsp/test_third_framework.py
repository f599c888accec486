"""A third framework takes its own folder and one registration (issue 50): the tests'
pure-Python framework (``tests/fake_framework.py``: the plug-in and its declaration,
``CAPABILITIES``), registered only through the registry's way in for plug-ins that do
not ship (``TENSORVIZ_TEST_PLUGINS``), is discovered, captured and opened from the
command line (``capture``, ``summary``), from the language server (its lens, then
``tensorviz.openGraph``) and in the viewer (``api/capture``, ``api/nodes``), with no
shipped file naming it. The browser's load of such a graph:
``tests/viewer/browser/test_third_framework_browser.py``."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

import fake_framework
from capture.frameworks import TEST_PLUGINS_ENV
from capture.graph import graphfile

from .conftest import REAL_SERVER, make_workspace, start_session, stop_session

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
SHIPPED = ("capture", "discovery", "tensorviz_lsp", "viewer", "safe_read", "editors")

# A model of the third framework: a class deriving from its declared base.
MODEL = '''import fake_framework


class Net(fake_framework.Module):
    def __init__(self, scale: float = 2.0):
        self.scale = scale

    def __call__(self, x, y):
        h = (x @ y).relu()
        return h * self.scale
'''
RECIPE = '''version = 1

[profiles.net]
framework = "fake"
model = "model:Net"
inputs.kwargs.x = { kind = "tensor", shape = [2, 3], dtype = "float32" }
inputs.kwargs.y = { kind = "tensor", shape = [3, 4], dtype = "float32" }
'''
OPS = ["matmul", "relu", "mul"]


def _env() -> dict[str, str]:
    return {**os.environ, TEST_PLUGINS_ENV: fake_framework.PLUGIN,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tensorviz_lsp", *args], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=180)


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return resp.status, resp.read()


def _named_in_code(path: Path, names: set[str]) -> list[str]:
    """The string constants of a Python file (docstrings aside) that are one of ``names``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    return [f"{path.relative_to(ROOT)}:{n.lineno} {n.value!r}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and n.value in names and id(n) not in docstrings]


def test_no_shipped_file_names_the_third_framework():
    """Registering it touched nothing shipped: no code names its framework, kind, base or module."""
    names = {"fake", "fake_module", "fake_framework", "fake_framework.Module", "Fake"}
    others = (ROOT / "capture" / "torch", ROOT / "capture" / "jax")  # the other frameworks' own folders
    named = [hit for folder in SHIPPED for p in sorted((ROOT / folder).rglob("*.py"))
             if not any(p.is_relative_to(o) for o in others) for hit in _named_in_code(p, names)]
    named += [str(p.relative_to(ROOT)) for p in sorted((ROOT / "viewer" / "static").rglob("*.js"))
              if "vendor" not in p.parts and re.search(r"""["'](fake|fake_module)["']""", p.read_text(encoding="utf-8"))]
    assert named == []


def test_the_command_line_discovers_captures_and_summarises_it(tmp_path):
    make_workspace(tmp_path, {"model.py": MODEL})
    found = _cli(tmp_path, "discover", "model.py")
    assert found.returncode == 0, found.stderr
    assert "Net (fake_module, fake): a subclass of fake_framework.Module" in found.stdout
    # The shorthand: discovery gives the framework (no --framework), the recipe saves it.
    done = _cli(tmp_path, "capture", "model.py:Net", "--input", "x=float32[2,3]", "--input", "y=float32[3,4]",
                "-o", "net.tvg")
    assert done.returncode == 0, done.stderr
    assert 'framework = "fake"' in (tmp_path / ".tensorviz" / "recipes.toml").read_text()
    capture = graphfile.read(tmp_path / "net.tvg")
    assert capture.failure is None and capture.framework == "fake"
    assert [n.op for n in capture.nodes] == OPS
    summary = _cli(tmp_path, "summary", "net.tvg", "--json")
    assert summary.returncode == 0, summary.stderr
    doc = json.loads(summary.stdout)
    # Bytes at the recorded shapes; the FLOPs a plug-in without rules cannot count, said so.
    totals = doc["totals"]
    assert doc["framework"] == "fake" and (totals["bytes_read"], totals["bytes_written"]) == (24 + 48 + 32 + 32, 96)
    assert totals["flops"] == 0 and totals["uncounted"] == len(OPS)
    assert sorted(u["op"] for u in doc["uncounted"]) == sorted(OPS)
    assert all("counts no FLOPs" in u["reason"] for u in doc["uncounted"])
    assert [(r["title"], r["output"]) for r in doc["rows"]] == [("Net.__call__", "f32[2,4]")]


@pytest.mark.asyncio
async def test_the_language_server_lens_opens_it_in_the_viewer(tmp_path, config_dir):
    ws = make_workspace(tmp_path / "ws", {"model.py": MODEL, ".tensorviz/recipes.toml": RECIPE})
    s = await start_session(ws, config_dir, server=REAL_SERVER, env={TEST_PLUGINS_ENV: fake_framework.PLUGIN})
    try:
        s.open("model.py")
        lenses = await s.lenses("model.py")
        assert [(lens.command.title, lens.range.start.line) for lens in lenses] == [("Open as Graph (net)", 3)]
        s.answer("Trust Workspace")
        result = await s.execute(lenses[0].command.command, *lenses[0].command.arguments, timeout=180)
        assert result["ok"] is True, s.logs()
        base, _, query = result["url"].partition("?")
        cid = query.partition("=")[2]
        status, body = await asyncio.to_thread(_get, f"{base.rstrip('/')}/api/capture?capture={cid}")
        capture = json.loads(body)
        assert status == 200 and capture["failure"] is None
        assert capture["backend"] == "fake" and capture["framework"] == "fake"
        assert capture["counts"]["nodes"] == len(OPS)
        status, body = await asyncio.to_thread(_get, f"{base.rstrip('/')}/api/nodes?offset=0&limit=50&capture={cid}")
        nodes = json.loads(body)
        ops = [n["op"] for n in nodes.get("nodes", nodes.get("items", []))]
        assert status == 200 and sorted(ops) == sorted(OPS)
    finally:
        await stop_session(s)
