"""An approved install in the editor ends with the language server, however the server
ends (issue 52 items 4-5): ``shutdown`` and ``exit`` (the server exits 0: ``shutdown``
with work in flight failed inside pygls, "dictionary changed size during iteration",
and the server exited 1), ``exit`` alone, and SIGKILL. Before, pip ran in a session of
its own, killed only by the shutdown hook: after ``exit`` alone or a SIGKILL it ran on.

The "pip" here is the workspace's ``.venv/bin/python``: a script that leaves a background
process in a session of its own and then takes its time, as a slow install does."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from processes import exited
from tensorviz_lsp.trust import TrustStore

from .test_exit_during_captures import Client

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs POSIX"),
              pytest.mark.timeout(180)]


def slow_pip(ws: Path) -> None:
    path = ws / ".venv" / "bin" / "python"
    path.parent.mkdir(parents=True)
    path.write_text(textwrap.dedent("""\
        #!/bin/sh
        setsid sh -c 'echo $$ > "$TV_PIDS.bg.tmp"; mv "$TV_PIDS.bg.tmp" "$TV_PIDS.bg"; exec sleep 120' \\
            </dev/null >/dev/null 2>&1 &
        echo $$ > "$TV_PIDS.tmp"; mv "$TV_PIDS.tmp" "$TV_PIDS"
        exec sleep 120
        """))
    path.chmod(0o755)


def wait_pid(path: Path, client: Client, timeout: float = 60) -> int:
    end = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        assert client.proc.poll() is None, client.stderr.read_text(errors="replace")[-3000:]
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.05)
    return int(path.read_text())


def approve_install(client: Client) -> None:
    """Answer the server's requests as an editor does, choosing "Install" when asked."""
    import threading

    def run() -> None:
        try:
            while True:
                message = client.read()
                if "method" in message and "id" in message:
                    answer = None
                    if message["method"] == "window/showMessageRequest":
                        answer = {"title": "Install"}
                    client.send({"jsonrpc": "2.0", "id": message["id"], "result": answer})
        except (AssertionError, ValueError, OSError):
            pass

    threading.Thread(target=run, daemon=True).start()


@pytest.mark.parametrize("how", ["shutdown-and-exit", "shutdown-then-exit", "exit-alone", "SIGKILL"])
def test_an_install_ends_with_the_server(tmp_path, how):
    ws = tmp_path / "ws"
    ws.mkdir()
    slow_pip(ws)
    TrustStore(tmp_path / "cfg" / "trust.json").set_trusted(ws)
    pids = tmp_path / "pids"
    client = Client(tmp_path, ws, pids)
    pip = background = None
    try:
        client.send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                     "params": {"processId": None, "rootUri": ws.as_uri(),
                                "capabilities": {"window": {"workDoneProgress": True}}}})
        client.response(0)
        client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        approve_install(client)
        client.send({"jsonrpc": "2.0", "id": 1, "method": "workspace/executeCommand",
                     "params": {"command": "tensorviz.installDependencies",
                                "arguments": [{"folder": str(ws), "packages": ["tiktoken"]}]}})
        pip = wait_pid(pids, client)
        background = wait_pid(Path(f"{pids}.bg"), client)
        if how == "SIGKILL":
            client.proc.kill()
        elif how == "exit-alone":
            client.send({"jsonrpc": "2.0", "method": "exit"})
        elif how == "shutdown-and-exit":
            client.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}, {"jsonrpc": "2.0", "method": "exit"})
        else:
            client.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
            time.sleep(1.0)  # the shutdown handled (the install stopped) before the exit comes
            client.send({"jsonrpc": "2.0", "method": "exit"})
        if how != "SIGKILL":
            client.proc.stdin.close()
        code = client.proc.wait(timeout=60)
        stderr = client.stderr.read_text(errors="replace")
        if how.startswith("shutdown"):
            assert code == 0, stderr[-3000:]
            assert "dictionary changed size" not in stderr and "Traceback" not in stderr, stderr[-3000:]
        assert exited(pip, 5), f"the install outlived the server ({how})"
        assert exited(background, 5), f"the install's background process outlived the server ({how})"
    finally:
        if client.proc.poll() is None:
            client.proc.kill()
            client.proc.wait()
        for pid in (pip, background):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


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


def test_shutdown_during_a_requested_capture_exits_0(tmp_path):
    """A ``tensorviz.captureProfile`` request still unanswered when ``shutdown`` comes:
    pygls's cancel of it failed the shutdown (exit 1); the worker and what the model
    started go with the server."""
    ws = tmp_path / "ws"
    (ws / ".tensorviz").mkdir(parents=True)
    (ws / "sleepy.py").write_text(textwrap.dedent(SLEEPY), encoding="utf-8")
    (ws / ".tensorviz" / "recipes.toml").write_text(
        'version = 1\n[profiles.sleepy]\nframework = "fake"\nmodel = "sleepy:hang"\n'
        'inputs = { args = [{ kind = "tensor", shape = [2, 3], dtype = "float32" }] }\n', encoding="utf-8")
    TrustStore(tmp_path / "cfg" / "trust.json").set_trusted(ws)
    pids = tmp_path / "pids"
    client = Client(tmp_path, ws, pids)
    started: list[int] = []
    try:
        client.send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                     "params": {"processId": None, "rootUri": ws.as_uri(),
                                "capabilities": {"window": {"workDoneProgress": True}}}})
        client.response(0)
        client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        approve_install(client)
        client.send({"jsonrpc": "2.0", "id": 1, "method": "workspace/executeCommand",
                     "params": {"command": "tensorviz.captureProfile",
                                "arguments": [{"profile": "sleepy", "folder": str(ws)}]}})
        end = time.monotonic() + 90
        while not pids.exists():
            assert client.proc.poll() is None and time.monotonic() < end, "the model never ran"
            time.sleep(0.05)
        started = [int(p) for p in pids.read_text().split()]
        client.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}, {"jsonrpc": "2.0", "method": "exit"})
        client.proc.stdin.close()
        code = client.proc.wait(timeout=60)
        stderr = client.stderr.read_text(errors="replace")
        assert code == 0, stderr[-3000:]
        assert "dictionary changed size" not in stderr and "Traceback" not in stderr, stderr[-3000:]
        for pid in started:
            assert exited(pid, 5), f"{pid} outlived the server"
    finally:
        if client.proc.poll() is None:
            client.proc.kill()
            client.proc.wait()
        for pid in started:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
