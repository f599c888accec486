"""The fake framework is for TensorViz's own tests and does not ship: without
``TENSORVIZ_TEST_PLUGINS`` naming it, a capture and the worker refuse it and name only
torch and jax; with it (this folder's conftest), the worker started by the runner
inherits the setting and loads the plug-in from its file. The CLI never offers it."""

from __future__ import annotations

import os
import subprocess
import sys


from capture.frameworks import TEST_PLUGINS_ENV
from capture.session.runner import launcher_script, run_capture
from capture.worker.protocol import encode_frame, read_frame
from fake_workspace import tensor
from tensorviz_lsp.cli import main

FAKE = {"name": "p", "framework": "fake", "model": "models:net",
        "inputs": {"args": [tensor(2, 3), tensor(3, 4)], "kwargs": {}}}


def test_a_user_capture_of_fake_is_a_recipe_error(workspace, monkeypatch):
    monkeypatch.delenv(TEST_PLUGINS_ENV)
    c = run_capture(workspace, FAKE)
    assert (c.failure.stage, c.failure.type) == ("recipe", "RecipeError")
    assert "expected one of 'torch', 'jax', found 'fake'" in c.failure.message
    (workspace / ".tensorviz").mkdir()
    (workspace / ".tensorviz" / "recipes.toml").write_text('version = 1\n[profiles.p]\nframework = "fake"\nmodel = "models:net"\n')
    c = run_capture(workspace, "p")
    assert c.failure.stage == "recipe" and "expected one of 'torch', 'jax', found 'fake'" in c.failure.message
    assert c.framework != "fake"


def test_without_the_test_setting_the_cli_offers_only_torch_and_jax(workspace, monkeypatch, capsys):
    # (with TENSORVIZ_TEST_PLUGINS the plug-in is a choice too: tests/cli/test_cli_options.py)
    monkeypatch.delenv(TEST_PLUGINS_ENV)
    monkeypatch.chdir(workspace)
    try:
        code = main(["capture", "models.py:net", "--framework", "fake", "--input", "float32[2,3]"])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'fake'" in err and "'torch', 'jax')" in err


def test_the_worker_inherits_the_setting(workspace):
    c = run_capture(workspace, FAKE)
    assert c.failure is None, c.failure
    assert c.framework == "fake"


def test_a_worker_without_the_switch_refuses_fake(workspace, monkeypatch):
    """Even a request that reached a worker directly: the worker validates it again."""
    monkeypatch.delenv(TEST_PLUGINS_ENV)
    read_fd, write_fd = os.pipe()
    request = {"protocol": 1, "action": "capture", "workspace": str(workspace), "recipe": FAKE,
               "limits": {}, "seconds_left": 30}
    proc = subprocess.Popen([sys.executable, launcher_script(), "--fd", str(write_fd)], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(write_fd,), cwd=workspace)
    os.close(write_fd)
    proc.communicate(encode_frame(request), timeout=60)
    with os.fdopen(read_fd, "rb") as fh:
        msg = read_frame(fh)
    assert msg["kind"] == "failure"
    assert "expected one of 'torch', 'jax', found 'fake'" in msg["failure"]["message"]
