"""Device refusals in terms of what JAX has here (issue 47): a ``cuda:0`` request on a TPU
machine names its platforms, never a CUDA install for a machine that has a TPU; a busy
TPU names the process holding libtpu's lock; a ``JAX_PLATFORMS`` that leaves the
platform out says so. And which platforms the worker lets JAX start per device."""

from __future__ import annotations

import pytest

from capture.jax import platforms
from capture.worker.errors import CaptureError

LOCK_TEXT = ("Unable to initialize backend 'tpu': INTERNAL: Internal error when accessing libtpu multi-process "
             "lockfile. Run \"$ sudo lsof -w /dev/vfio/0\" to figure out which process is using the TPU.")


class _Jax:
    __version__ = "0.0-fake"


@pytest.mark.parametrize(
    "spec, platform, error, installed, jax_platforms, holders, has, lacks, error_type",
    [
        pytest.param("cuda:0", "cuda", "Unknown backend cuda", ["cpu", "tpu"], "", [],
                     ["has no cuda platform (its platforms: cpu, tpu)", 'device = "tpu" or device = "cpu"',
                      "jax[cuda12]"], [], "DeviceUnavailable", id="cuda-on-a-tpu-machine"),
        pytest.param("tpu", "tpu", LOCK_TEXT, ["cpu", "tpu"], "tpu,cpu",
                     [{"pid": 4242, "command": "python train.py", "holds": ["/tmp/libtpu_lockfile"]}],
                     ["held by another process (pid 4242 (python train.py))", "/tmp/libtpu_lockfile",
                      'device = "cpu"'], ["CUDA"], "DeviceBusy", id="busy-tpu-holder-found"),
        pytest.param("tpu:0", "tpu", "TPU is already in use by process with pid 77.", ["cpu", "tpu"], "", [],
                     ["held by another process (pid 77)"], ["CUDA"], "DeviceBusy", id="busy-tpu-pid-from-jax"),
        pytest.param("tpu", "tpu", "Unknown backend tpu", ["cpu", "tpu"], "cpu", [],
                     ["JAX_PLATFORMS=cpu in the capture environment leaves out tpu"], ["CUDA"], "DeviceUnavailable",
                     id="jax-platforms-leaves-it-out"),
        pytest.param("tpu", "tpu", "Failed to open libtpu.so", ["cpu"], "", [],
                     ["has no tpu platform (its platforms: cpu)", "jax[tpu]"], ["CUDA"], "DeviceUnavailable",
                     id="no-libtpu"),
        pytest.param("cuda:0", "cuda", "CUDA driver too old", ["cpu", "cuda"], "", [],
                     ["could not start its cuda backend (CUDA driver too old)"], [], "DeviceUnavailable",
                     id="cuda-fails-to-start"),
    ],
)
def test_refusals_name_what_jax_has(monkeypatch, spec, platform, error, installed, jax_platforms, holders, has,
                                    lacks, error_type):
    monkeypatch.setattr(platforms, "installed_platforms", lambda: installed)
    monkeypatch.setattr(platforms, "tpu_holders", lambda: holders)
    if jax_platforms:
        monkeypatch.setenv("JAX_PLATFORMS", jax_platforms)
    else:
        monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    err = platforms.device_unavailable(_Jax, spec, platform, RuntimeError(error))
    assert isinstance(err, CaptureError) and err.stage == "device" and err.error_type == error_type
    for words in has:
        assert words in err.message, err.message
    for words in lacks:
        assert words not in err.message, err.message
    assert err.details["installed_platforms"] == installed
    assert "does not fall back" in err.message or error_type == "DeviceBusy"


@pytest.mark.parametrize("device, value", [("cpu", "cpu"), ("tpu", "tpu,cpu"), ("tpu:3", "tpu,cpu"),
                                           ("cuda:1", "cuda,cpu")])
def test_the_platforms_each_device_needs(monkeypatch, device, value):
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    monkeypatch.delenv("TENSORVIZ_WORKER_ID", raising=False)  # not a worker: this process's environment stays
    monkeypatch.setattr(platforms, "_backends_started", lambda: True)  # and JAX's config too
    assert platforms.select_platforms(device) == {"value": value, "set_by": "tensorviz"}
    import os

    assert "JAX_PLATFORMS" not in os.environ


def test_the_persons_setting_is_kept(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")
    assert platforms.select_platforms("cpu") == {"value": "tpu", "set_by": "environment"}


def test_tpu_holders_finds_an_open_lock_file(tmp_path, monkeypatch):
    """A process of ours holding a file named like libtpu's lock is found with its command."""
    import subprocess
    import sys
    import time

    lock = tmp_path / "libtpu_lockfile"
    monkeypatch.setattr(platforms, "LIBTPU_LOCKFILE", str(lock))
    proc = subprocess.Popen([sys.executable, "-c", f"f = open({str(lock)!r}, 'w'); import time; time.sleep(30)"])
    try:
        for _ in range(100):
            found = [h for h in platforms.tpu_holders() if h["pid"] == proc.pid]
            if found:
                break
            time.sleep(0.05)
        assert found and found[0]["holds"] == [str(lock)] and "time.sleep" in found[0]["command"]
    finally:
        proc.kill()
        proc.wait()
