"""The browser loads a graph of a third framework (issue 50): the tests' pure-Python
framework, registered only through ``TENSORVIZ_TEST_PLUGINS``, captured by the command
line, drawn by the real app with nothing shipped naming it (the command line and the
language server: ``tests/lsp/test_third_framework.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import fake_framework
from capture.frameworks import TEST_PLUGINS_ENV
from capture.graph import graphfile
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
MODEL = '''import fake_framework


class Net(fake_framework.Module):
    def __call__(self, x, y):
        h = (x @ y).relu()
        return h * 2.0
'''


def test_a_third_frameworks_graph_is_drawn(browser, close_pages, tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    env = {**os.environ, TEST_PLUGINS_ENV: fake_framework.PLUGIN, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tensorviz_lsp", "capture", "model.py:Net", "--input",
                           "x=float32[2,3]", "--input", "y=float32[3,4]", "-o", "net.tvg"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    server = ViewerServer()
    cid = server.add_capture(graphfile.read(tmp_path / "net.tvg"), "Net · fake")
    server.start()
    try:
        app = open_app(browser, server.url_for(cid))
        close_pages.append(app)
        assert app.keys() and app.painted_pixels() > 0
        assert app.unexpected_errors() == []
    finally:
        server.stop()
