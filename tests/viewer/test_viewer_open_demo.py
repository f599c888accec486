"""``tensorviz demo`` and ``tensorviz open``: capture through the real worker, then serve.

That the demo's files are the spec's ``net`` example is tests/foundation/test_spec_examples.py's."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tensorviz_lsp.cli.commands.demo import MODEL_PY

ROOT = Path(__file__).resolve().parents[2]
needs_jax = pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")


def run_cli(*args: str, cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DISPLAY": "", "WAYLAND_DISPLAY": "", "BROWSER": ""}
    return subprocess.Popen([sys.executable, "-m", "tensorviz_lsp", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def served(proc: subprocess.Popen) -> tuple[str, dict, dict]:
    """Read the URL, fetch the capture and its root, stop the server; (url, capture, root)."""
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.poll() is not None else url
        with urllib.request.urlopen(url + "api/capture", timeout=10) as res:
            capture = json.load(res)
        with urllib.request.urlopen(url + "api/children?group=-1", timeout=10) as res:
            root = json.load(res)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        return url, capture, root
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
@pytest.mark.jax
@needs_jax
def test_demo_captures_the_spec_example_and_serves_it(tmp_path):
    proc = run_cli("demo", "--dir", str(tmp_path / "demo"), "--no-browser", "--capture-timeout", "120", cwd=tmp_path)
    url, capture, root = served(proc)
    assert proc.returncode == 0
    assert capture["failure"] is None and capture["backend"] == "jaxpr" and capture["framework"] == "jax"
    assert capture["coverage"]["scope"] == "traced_program"
    assert capture["outputs"]["label"] == "f32[2,4]"
    assert [(it["kind"], it["label"]) for it in root["items"]] == [("jit", "net")]
    assert {e["label"] for e in root["edges"]} == {"f32[2,3]", "f32[2,4]"}
    assert (tmp_path / "demo" / "model.py").read_text() == MODEL_PY
    assert (tmp_path / "demo" / ".tensorviz" / "captures" / "jax_example.tvg").is_file()


@pytest.mark.slow
@pytest.mark.jax
@needs_jax
def test_open_shorthand_captures_and_serves(tmp_path):
    (tmp_path / "model.py").write_text(MODEL_PY)
    proc = run_cli("open", "model.py:net", "--input", "x=float32[2,3]", "--framework", "jax", "--no-browser", cwd=tmp_path)
    _, capture, root = served(proc)
    assert capture["failure"] is None and capture["title"] == "net"
    assert root["items"][0]["label"] == "net"
    assert "[profiles.net]" in (tmp_path / ".tensorviz" / "recipes.toml").read_text()


@pytest.mark.slow
@pytest.mark.jax
@needs_jax
def test_open_shows_a_failed_capture_and_exits_1(tmp_path):
    (tmp_path / "model.py").write_text("import jax\nraise RuntimeError('broken on purpose')\ndef net(x):\n    return x\n")
    proc = run_cli("open", "model.py:net", "--input", "float32[2]", "--framework", "jax", "--no-browser",
                   "--timeout", "30", cwd=tmp_path)
    _, capture, root = served(proc)
    assert capture["failure"]["stage"] == "import" and "broken on purpose" in capture["failure"]["message"]
    assert root["items"] == []
    assert proc.returncode == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [(["open"], "give FILE.py:SYMBOL"), (["open", "--input", "float32[2]"], "need FILE.py:SYMBOL"),
     (["open", "nope.py:net"], "no file"), (["open", "model.py"], "expected FILE.py:SYMBOL")],
    ids=["nothing", "input-without-target", "missing-file", "no-symbol"],
)
def test_open_usage_errors(tmp_path, args, message):
    proc = run_cli(*args, "--no-browser", cwd=tmp_path)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and out == "" and message in err
