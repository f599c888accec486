"""The optional memory limit of the capture worker (issue 17 item 8): off by default;
``Limits.max_memory_bytes`` (``--memory MB``, ``tensorviz.captureMemoryMB``) caps the
worker, and running out is a MemoryError failure that names the limit."""

from __future__ import annotations

import sys

import pytest

from capture.graph import graphfile
from capture.session.runner import run_capture
from capture.session.warm import WarmPool
from capture.worker.limits import Limits
from fake_workspace import fake_recipe, tensor
from tensorviz_lsp.cli import main
from tensorviz_lsp.settings import Settings

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA as on Linux")

LIMIT = 400 << 20


@pytest.fixture(params=["one-shot", "warm"])
def pool(request):
    if request.param == "one-shot":
        yield None
        return
    p = WarmPool(idle_seconds=600)
    yield p
    p.close()


def test_running_out_under_the_limit_is_a_memory_error_naming_it(workspace, pool):
    c = run_capture(workspace, fake_recipe("crashy:real_out_of_memory", tensor(2)), timeout=60,
                    limits=Limits(max_memory_bytes=LIMIT), warm=pool)
    f = c.failure
    assert (f.stage, f.type) == ("trace", "MemoryError"), f
    assert "ran out of memory" in f.message and "capture memory limit is 400 MB" in f.message
    assert f.details["limit"] == "max_memory_bytes" and f.details["maximum"] == LIMIT
    assert [fr.file for fr in f.frames][-1:] == ["crashy.py"]


def test_no_limit_by_default(workspace, pool):
    assert Limits().max_memory_bytes == 0
    c = run_capture(workspace, fake_recipe("models:net", tensor(2, 3), tensor(3, 4)), warm=pool)
    assert c.failure is None


def test_the_cli_memory_option(workspace, tmp_path, capsys):
    (workspace / ".tensorviz").mkdir()
    (workspace / ".tensorviz" / "recipes.toml").write_text(
        'version = 1\n\n[profiles.oom]\nframework = "fake"\nmodel = "crashy:real_out_of_memory"\n'
        'inputs = { args = [{ kind = "tensor", shape = [2], dtype = "float32" }] }\n'
    )
    out = tmp_path / "oom.tvg"
    code = main(["capture", "--workspace", str(workspace), "--profile", "oom", "-o", str(out),
                 "--memory", "300", "--timeout", "60"])
    assert code == 1
    back = graphfile.read(out)
    assert back.failure.type == "MemoryError"
    assert back.failure.details["maximum"] == 300 << 20


def test_the_setting():
    assert Settings.from_config({}).capture_memory_mb == 0
    assert Settings.from_config({"tensorviz": {"captureMemoryMB": 2048}}).capture_memory_mb == 2048
    warnings = []
    assert Settings.from_config({"tensorviz": {"captureMemoryMB": -1}}, warn=warnings.append).capture_memory_mb == 0
    assert warnings
