"""``tensorviz lsp`` signalled during a capture (issue 29 item 10): SIGINT ends it as
SIGTERM and SIGHUP do, promptly, with 128 + the signal, and the capture's worker and
what the model started go with it. (SIGINT used to kill the worker and leave the server
running, waiting for its threads.)"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time

import pytest

import fake_framework
from capture.frameworks import TEST_PLUGINS_ENV
from processes import exited
from tensorviz_lsp.trust import TrustStore

from .test_framing import Wire, frame

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs POSIX"),
              pytest.mark.timeout(180),
              pytest.mark.slow]

SLEEPY = '''
import os
import subprocess
import sys
import time


def hang(x):
    detached = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    with open(os.environ["TV_PIDS"] + ".tmp", "w") as fh:
        fh.write(f"{os.getpid()} {detached.pid}")
    os.replace(os.environ["TV_PIDS"] + ".tmp", os.environ["TV_PIDS"])
    while True:
        time.sleep(0.05)
'''

RECIPES = """\
version = 1

[profiles.sleepy]
framework = "fake"
model = "sleepy:hang"
inputs = { args = [{ kind = "tensor", shape = [2, 3], dtype = "float32" }] }
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_during_a_capture_ends_the_server_and_its_worker(tmp_path, sig):
    ws = tmp_path / "ws"
    (ws / ".tensorviz").mkdir(parents=True)
    (ws / "sleepy.py").write_text(textwrap.dedent(SLEEPY), encoding="utf-8")
    (ws / ".tensorviz" / "recipes.toml").write_text(RECIPES, encoding="utf-8")
    TrustStore(tmp_path / "cfg" / "trust.json").set_trusted(ws)
    pids = tmp_path / "pids"
    wire = Wire(tmp_path, initialize=False, env={TEST_PLUGINS_ENV: fake_framework.PLUGIN, "TV_PIDS": str(pids)})
    detached = None
    try:
        wire.initialize(ws)
        wire.send(frame({"jsonrpc": "2.0", "id": 1, "method": "workspace/executeCommand",
                         "params": {"command": "tensorviz.captureProfile",
                                    "arguments": [{"profile": "sleepy", "folder": str(ws)}]}}))
        end = time.monotonic() + 90
        while not pids.exists():
            assert wire.proc.poll() is None, wire.proc.stderr.read().decode()
            assert time.monotonic() < end, "the model never ran"
            time.sleep(0.05)
        worker, detached = (int(p) for p in pids.read_text().split())
        wire.proc.send_signal(sig)
        # The wait only ends a hang (the capture runs forever); how long the server takes
        # to go: benchmarks/bench_lsp.py.
        assert wire.proc.wait(timeout=60) == 128 + sig, wire.proc.stderr.read().decode()
        assert exited(worker, 5), f"the worker {worker} outlived the server ({sig.name})"
        assert exited(detached, 5), f"the model's detached process {detached} outlived the server ({sig.name})"
        assert f"{sig.name} received" in wire.proc.stderr.read().decode()
    finally:
        wire.close()
        if detached is not None:
            try:
                os.kill(detached, signal.SIGKILL)
            except ProcessLookupError:
                pass

