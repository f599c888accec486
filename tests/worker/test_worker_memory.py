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
    assert "ran out of memory" in f.message and "capture memory limit is 400 MiB" in f.message
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


SHARED = '''
import mmap
import os
import time


def _touch(m, size):
    for offset in range(0, size, 4096):
        m[offset] = 1


def anonymous(x):
    # MAP_SHARED memory is no "data" for RLIMIT_DATA: 2.5 GiB succeeded under --memory 1024.
    size = 768 << 20
    m = mmap.mmap(-1, size, flags=mmap.MAP_SHARED)
    _touch(m, size)
    time.sleep(5)
    return x.relu()


def in_a_child(x):
    # The same in a forked child, whose own RLIMIT_DATA it is not either.
    if os.fork() == 0:
        size = 768 << 20
        m = mmap.mmap(-1, size, flags=mmap.MAP_SHARED)
        _touch(m, size)
        time.sleep(30)
        os._exit(0)
    time.sleep(20)
    return x.relu()


def small(x):
    m = mmap.mmap(-1, 16 << 20, flags=mmap.MAP_SHARED)
    _touch(m, 16 << 20)
    return x.relu()
'''


@pytest.mark.slow  # maps and touches some hundred MB
@pytest.mark.parametrize("model", ["shared:anonymous", "shared:in_a_child"])
def test_shared_memory_counts_under_the_limit(workspace, pool, model):
    """Issue 39 item 5: the keeper (one-shot) and the warm worker (for its capture child)
    count the shared memory the capture's processes map against ``--memory``, which
    ``RLIMIT_DATA`` does not: over it, the capture stops with a failure saying so."""
    (workspace / "shared.py").write_text(SHARED, encoding="utf-8")
    limit = 192 << 20
    c = run_capture(workspace, fake_recipe(model, tensor(2)), timeout=60, limits=Limits(max_memory_bytes=limit),
                    warm=pool)
    f = c.failure
    assert f is not None, "768 MB of shared memory under a 192 MB limit went through"
    assert (f.stage, f.type) == ("limit", "MemoryError"), f
    assert "shared memory" in f.message and "192 MiB" in f.message and "MAP_SHARED" in f.message
    assert f.details["limit"] == "max_memory_bytes" and f.details["maximum"] == limit


def test_a_little_shared_memory_under_the_limit_is_fine(workspace, pool):
    (workspace / "shared.py").write_text(SHARED, encoding="utf-8")
    c = run_capture(workspace, fake_recipe("shared:small", tensor(2)), timeout=60,
                    limits=Limits(max_memory_bytes=192 << 20), warm=pool)
    assert c.failure is None, c.failure
