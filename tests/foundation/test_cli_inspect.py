"""`tensorviz --version` and `tensorviz inspect` as a user runs them."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from capture.graph import graphfile
from capture.graph.model import Capture, Failure, Frame
from synthetic import synthetic_capture
from tensorviz_lsp import __version__


def tensorviz(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tensorviz_lsp", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def good(tmp_path):
    path = tmp_path / "good.tvg"
    graphfile.write(synthetic_capture(500, opaque_every=100), path)
    return path


def test_version():
    proc = tensorviz("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"tensorviz {__version__}"


def test_console_script_is_installed():
    # The README's commands use the `tensorviz` entry point, not `python -m`.
    exe = os.path.join(os.path.dirname(sys.executable), "tensorviz")
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and __version__ in proc.stdout


def test_no_command_is_a_usage_error():
    proc = tensorviz()
    assert proc.returncode == 2


def test_inspect_summary(good):
    proc = tensorviz("inspect", str(good))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "backend:    jaxpr" in out
    assert "framework:  jax 0.0-synthetic" in out
    assert "traced_program, partial (opaque_kernel), effects incomplete" in out
    assert "500 nodes, 501 values, " in out
    assert "inputs:     (float32[128,128],)" in out
    assert "outputs:    float32[128,128]" in out
    assert "FAILED" not in out


def test_inspect_json_is_the_capture(good):
    proc = tensorviz("inspect", str(good), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["format"] == "tensorviz-graph" and data["version"] == 1
    expected_keys = {"format", "version", "backend", "framework", "framework_version", "coverage", "values",
                     "nodes", "groups", "frames", "inputs", "outputs", "sources", "recipe", "failure", "meta"}
    assert set(data) == expected_keys
    assert set(data["nodes"][0]) == {"id", "op", "inputs", "outputs", "params", "group", "frame", "opaque"}
    assert set(data["values"][0]) >= {"id", "shape", "dtype"}
    assert set(data["frames"][0]) == {"file", "line", "column", "function"}
    assert set(data["coverage"]) == {"scope", "status", "reasons", "effects"}
    assert len(data["nodes"]) == 500
    assert sum(n["opaque"] for n in data["nodes"]) == 5


def test_inspect_says_when_weights_are_freshly_initialised(tmp_path):
    cap = synthetic_capture(20)
    cap.meta.update(state="fresh_init", state_note="freshly initialised with jax.random.key(seed): not trained weights")
    path = tmp_path / "fresh.tvg"
    graphfile.write(cap, path)
    proc = tensorviz("inspect", str(path))
    assert "state:      fresh_init (freshly initialised with jax.random.key(seed): not trained weights)" in proc.stdout


def test_inspect_failed_capture(tmp_path):
    path = tmp_path / "failed.tvg"
    cap = Capture.failed_capture(
        Failure("ZeroDivisionError", "division by zero", "trace", [Frame("model.py", 7, 4, "net")]),
        framework="jax", backend="jaxpr",
    )
    graphfile.write(cap, path)
    proc = tensorviz("inspect", str(path))
    assert proc.returncode == 0
    assert "FAILED:     [trace] ZeroDivisionError: division by zero" in proc.stdout
    assert "at model.py:7 in net" in proc.stdout
    assert "0 nodes" in proc.stdout


@pytest.mark.parametrize("make, expected", [
    pytest.param(lambda p, good: p.write_bytes(good.read_bytes()[:200]), "truncated", id="truncated"),
    pytest.param(lambda p, good: p.write_bytes(random.Random(7).randbytes(4096)), "not a TensorViz graph file", id="random-bytes"),
    pytest.param(lambda p, good: p.write_text("hello"), "not a TensorViz graph file", id="text"),
    pytest.param(lambda p, good: None, "cannot read", id="missing"),
    pytest.param(lambda p, good: p.mkdir(), "is a directory", id="directory"),
])
def test_inspect_bad_files(tmp_path, good, make, expected):
    path = tmp_path / "bad.tvg"
    make(path, good)
    proc = tensorviz("inspect", str(path))
    assert proc.returncode == 1
    assert proc.stdout == ""
    err = proc.stderr.strip()
    assert "\n" not in err, err  # one line, never a traceback
    assert err.startswith(f"tensorviz inspect: {path}: ")
    assert expected in err


def test_inspect_json_spells_non_finite_floats_as_strings(tmp_path):
    cap = synthetic_capture(10)
    cap.nodes[2].params = {"lo": float("-inf"), "hi": float("inf"), "fill": float("nan"), "ok": 0.5}
    path = tmp_path / "nan.tvg"
    graphfile.write(cap, path)
    proc = tensorviz("inspect", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    assert "NaN" not in proc.stdout and "Infinity" not in proc.stdout
    data = json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    assert data["nodes"][2]["params"] == {"lo": "-inf", "hi": "inf", "fill": "nan", "ok": 0.5}


def test_inspect_summarises_a_large_state_tree(tmp_path):
    """Issue 25 item 3: a model's state (hundreds of arrays among the inputs) is one short
    summary, not tens of kilobytes on one line; small parts still print in full."""
    cap = synthetic_capture(400)
    layers = [(f"layer{i}", {"dict": [("kernel", {"value": 2 * i}), ("bias", {"value": 2 * i + 1})]}) for i in range(150)]
    cap.inputs = {"dict": [("args", {"tuple": [{"value": 300}]}), ("state", {"dict": layers})]}
    path = tmp_path / "state.tvg"
    graphfile.write(cap, path)
    proc = tensorviz("inspect", str(path))
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("inputs:")]
    assert len(line) < 300, line
    assert "'args': (" in line and "'state': <dict layer0, layer1, layer2, layer3, … (150 keys): 300 arrays" in line


HOSTILE = ["\x1b]0;owned\x07", "\x1b]52;c;cm0gLXJmIH4=\x07", "\r\x1b[K", "\x9b31m", "\x00\x7f"]


def _raw_controls(text: str) -> list[str]:
    return sorted({c for c in text if (ord(c) < 0x20 and c not in "\t\n") or 0x7F <= ord(c) < 0xA0})


def test_inspect_escapes_terminal_controls_in_every_printed_string(tmp_path):
    """A graph file's strings (model, fixture, a failure and its frames, the file's
    own name) printed raw could retitle the window, write the clipboard (OSC 52) or
    erase lines."""
    cap = synthetic_capture(20)
    cap.recipe = {"model": "m:Net" + HOSTILE[0]}
    cap.meta["fixture"] = "batch" + HOSTILE[1]
    failed = Capture.failed_capture(Failure("Err" + HOSTILE[4], "boom" + "".join(HOSTILE), stage="trace",
                                            frames=[Frame("f" + HOSTILE[2] + ".py", 3, 0, "fn" + HOSTILE[0])]))
    for name, c in (("hostile\x1b[2J.tvg", cap), ("failed.tvg", failed)):
        graphfile.write(c, tmp_path / name)
    proc = tensorviz("inspect", str(tmp_path / "hostile\x1b[2J.tvg"))
    assert proc.returncode == 0, proc.stderr
    assert _raw_controls(proc.stdout) == []
    assert "m:Net\\x1b]0;owned\\x07" in proc.stdout
    assert "batch\\x1b]52;c;cm0gLXJmIH4=\\x07" in proc.stdout
    proc = tensorviz("inspect", str(tmp_path / "failed.tvg"))
    assert proc.returncode == 0, proc.stderr
    assert _raw_controls(proc.stdout) == []
    assert "boom\\x1b]0;owned\\x07\\x1b]52;c;cm0gLXJmIH4=\\x07\\x0d\\x1b[K\\x9b31m\\x00\\x7f" in proc.stdout
    assert "fn\\x1b]0;owned\\x07" in proc.stdout
    # An unreadable file's name, in the error on stderr, too.
    broken = tmp_path / "broken\x1b]0;x\x07.tvg"
    broken.write_bytes(b"not a graph")
    proc = tensorviz("inspect", str(broken))
    assert proc.returncode == 1 and _raw_controls(proc.stderr) == [] and "broken\\x1b]0;x\\x07.tvg" in proc.stderr


def test_diff_summary_escapes_terminal_controls(tmp_path):
    a, b = synthetic_capture(20), synthetic_capture(20)
    b.nodes[3].op = "op" + HOSTILE[1]
    for name, cap in (("a.tvg", a), ("b.tvg", b)):
        graphfile.write(cap, tmp_path / name)
    proc = tensorviz("diff", str(tmp_path / "a.tvg"), str(tmp_path / "b.tvg"))
    assert proc.returncode == 1, proc.stderr
    assert "\\x1b]52;c;" in proc.stdout and _raw_controls(proc.stdout) == []
