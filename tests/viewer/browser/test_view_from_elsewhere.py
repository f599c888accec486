"""``tensorviz view WORKSPACE/.tensorviz/captures/NAME.tvg`` run from another folder, in
the browser (issue 26 item 6): Go to source shows the op's line from the graph's own
workspace (where its recorded sources still have their sha256), and the page logs no
failed request (no setup form is asked for: this server has none)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from capture.graph import graphfile
from capture.graph.model import Source
from synthetic import synthetic_capture

from tv_browser import make_workspace, open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]


def test_go_to_source_reads_the_graphs_own_workspace_and_nothing_fails(browser, close_pages, tmp_path):
    ws = make_workspace(tmp_path / "ws")
    cap = synthetic_capture(20)
    cap.sources = [Source(f"model/layer{i}.py", hashlib.sha256((ws / "model" / f"layer{i}.py").read_bytes()).hexdigest())
                   for i in range(7)]
    path = ws / ".tensorviz" / "captures" / "net.tvg"
    path.parent.mkdir(parents=True)
    graphfile.write(cap, path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DISPLAY": "", "WAYLAND_DISPLAY": "", "BROWSER": ""}
    proc = subprocess.Popen([sys.executable, "-m", "tensorviz_lsp", "view", str(path), "--no-browser", "--timeout", "60"],
                            cwd=elsewhere, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.poll() is not None else url
        failed: list = []

        def prepare(context):
            context.on("response", lambda r: r.status >= 400 and failed.append((r.status, r.url)))

        app = open_app(browser, url, prepare=prepare)
        close_pages.append(app)
        node = next(k for k in app.keys() if k.startswith("n"))
        app.js("(k) => window.tensorviz.store.select(k)", node)
        app.page.locator("#insp-body [data-reveal]").first.click()
        app.page.wait_for_function("() => document.querySelector('#source-view .line.current')")
        current = app.page.locator("#source-view .line.current").inner_text()
        frame = app.js("(k) => fetch('api/node?id=' + k.slice(1)).then((r) => r.json()).then((d) => d.frame)", node)
        lines = (ws / frame["file"]).read_text().splitlines()
        assert current.endswith(lines[frame["line"] - 1]) and current.startswith(str(frame["line"]))
        assert failed == [] and app.console == [] and app.errors == []
    finally:
        proc.kill()
        _, err = proc.communicate()
    assert f"sources from {ws}" in err
