"""The VS Code extension's server launch, through a Node harness (VS Code itself
cannot run here): ``editors/vscode/test/harness.js`` spawns ``tensorviz lsp`` the way
the extension does and exchanges initialize / didOpen / codeLens with vscode-jsonrpc.

Needs ``node`` and ``npm ci`` in ``editors/vscode`` (CI's .ci/run does that)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# The spec's `net` example, verbatim (the demo's data file, checked against the spec in
# tests/viewer/test_viewer_open_demo.py).
from tensorviz_lsp.cli.commands.demo import MODEL_PY as SPEC_NET

ROOT = Path(__file__).resolve().parents[2]
EXT = ROOT / "editors" / "vscode"


pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (EXT / "node_modules" / "vscode-jsonrpc").is_dir(),
    reason="needs node and `npm ci` in editors/vscode",
)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "TENSORVIZ_CONFIG_DIR": str(tmp_path / "cfg")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _settings() -> dict:
    # The extension's default command is `tensorviz lsp`; use it when the console script
    # is installed (CI: pip install -e), else the same server through this interpreter.
    if shutil.which("tensorviz"):
        return {}
    return {"server": {"command": [sys.executable, "-m", "tensorviz_lsp", "lsp"]}}


def test_harness_self_test():
    proc = subprocess.run(["node", "test/harness.js", "--self-test"], cwd=EXT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["command"] == ["tensorviz", "lsp", "--stdio"]


@pytest.mark.slow
def test_extension_launch_initialize_and_code_lens(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "model.py").write_text(SPEC_NET)
    settings = {**_settings(), "captureTimeout": 60}
    proc = subprocess.run(
        ["node", "test/harness.js", "--workspace", str(ws), "--file", "model.py", "--settings", json.dumps(settings)],
        cwd=EXT, capture_output=True, text=True, timeout=120, env=_env(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["command"][-2:] == ["lsp", "--stdio"]
    assert seen["serverInfo"]["name"] == "tensorviz"
    assert {"tensorviz.openGraph", "tensorviz.trustWorkspace", "tensorviz.installDependencies",
            "tensorviz.selectInterpreter", "tensorviz.captureProfile"} <= set(seen["commands"])
    assert seen["codeLensProvider"] is True
    assert seen["configurationRequests"] >= 1
    assert "workspace/didChangeWatchedFiles" in seen["registrations"]
    lenses = seen["lenses"]
    assert [(l["command"]["title"], l["range"]["start"]["line"]) for l in lenses] == [("Open as Graph", 4)]
    assert lenses[0]["command"]["arguments"][0]["symbol"] == "net"
    assert seen["exitCode"] == 0


def test_extension_wiring_one_watcher_viewer_in_an_editor_tab_and_source_beside_it():
    """extension.js under stand-ins for `vscode` and LanguageClient (test/extension-harness.js):
    one watcher across restarts; the viewer URL opens in a webview panel framing
    asExternalUri(url); go-to-source lands beside it; openIn = browser and other URLs go to
    the browser; "Open Viewer in Browser" opens the last graph."""
    proc = subprocess.run(["node", "test/extension-harness.js"], cwd=EXT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["failures"] == [] and seen["watchers"] == 1 and seen["panels"] == 1


@pytest.mark.slow
@pytest.mark.skipif(not (EXT / "node_modules" / ".bin" / "vsce").exists(), reason="needs @vscode/vsce (npm ci)")
def test_extension_packages(tmp_path):
    out = tmp_path / "tensorviz.vsix"
    proc = subprocess.run(
        [str(EXT / "node_modules" / ".bin" / "vsce"), "package", "--allow-missing-repository", "--out", str(out)],
        cwd=EXT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    import zipfile

    names = zipfile.ZipFile(out).namelist()
    assert "extension/extension.js" in names and "extension/server-options.js" in names
    assert any(n.startswith("extension/node_modules/vscode-languageclient/") for n in names)
    assert not any(n.startswith("extension/test/") for n in names)
    assert "extension/viewer-panel.js" in names
