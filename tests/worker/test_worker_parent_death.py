"""A capture worker dies with the process that started it (issue 17 item 6): the CLI
handles SIGTERM and SIGHUP like Ctrl-C (worker and the processes it started killed,
exit 128 + signal); a SIGKILLed CLI or language server takes its workers (one-shot and
warm: resident and capture child) with it, by ``PR_SET_PDEATHSIG``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from processes import exited

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

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
    print("sleepy: stuck", flush=True)
    while True:
        time.sleep(0.05)


def _sleeper_argv():
    return [sys.executable, "-c", "import time; time.sleep(120)"]


def hang_env_cleared(x):
    # Processes that keep neither the worker's environment (its marker) nor its session
    # or process group (issue 39 item 2): a new session with env={}, and a double fork
    # whose grandchild execs with an empty environment.
    detached = subprocess.Popen(_sleeper_argv(), env={}, start_new_session=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r, w = os.pipe()
    first = os.fork()
    if first == 0:
        os.setsid()
        second = os.fork()
        if second == 0:
            os.close(r)
            os.write(w, str(os.getpid()).encode())
            os.close(w)
            os.execve(sys.executable, _sleeper_argv(), {})
        os._exit(0)
    os.close(w)
    os.waitpid(first, 0)
    grandchild = int(os.read(r, 32))
    with open(os.environ["TV_PIDS"] + ".tmp", "w") as fh:
        fh.write(f"{os.getpid()} {detached.pid} {grandchild}")
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

[profiles.cleared]
framework = "fake"
model = "sleepy:hang_env_cleared"
inputs = { args = [{ kind = "tensor", shape = [2, 3], dtype = "float32" }] }
"""


@pytest.fixture
def ws(workspace):
    (workspace / "sleepy.py").write_text(textwrap.dedent(SLEEPY), encoding="utf-8")
    (workspace / ".tensorviz").mkdir()
    (workspace / ".tensorviz" / "recipes.toml").write_text(RECIPES)
    return workspace


def wait_pids(path: Path, proc: subprocess.Popen, timeout: float = 60) -> tuple[int, ...]:
    end = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "the model never ran"
        time.sleep(0.05)
    return tuple(int(p) for p in path.read_text().split())


def env_with(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_the_cli_handles_sigterm_and_sighup_like_ctrl_c(ws, tmp_path, sig):
    pids = tmp_path / "pids"
    cli = subprocess.Popen(
        [sys.executable, "-m", "tensorviz_lsp", "capture", "--workspace", str(ws), "--profile", "sleepy",
         "-o", str(tmp_path / "out.tvg"), "--timeout", "120"],
        env=env_with(TV_PIDS=str(pids)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        worker, detached = wait_pids(pids, cli)[:2]
        cli.send_signal(sig)
        _, err = cli.communicate(timeout=20)
        assert cli.returncode == 128 + sig, err
        assert exited(worker, 5), f"the worker {worker} outlived the CLI ({sig.name})"
        assert exited(detached, 5), f"the worker's detached process {detached} outlived the CLI ({sig.name})"
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        _kill_quietly(detached if "detached" in locals() else None)


def test_a_sigkilled_cli_takes_its_worker_with_it(ws, tmp_path):
    pids = tmp_path / "pids"
    cli = subprocess.Popen(
        [sys.executable, "-m", "tensorviz_lsp", "capture", "--workspace", str(ws), "--profile", "sleepy",
         "-o", str(tmp_path / "out.tvg"), "--timeout", "120"],
        env=env_with(TV_PIDS=str(pids)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        worker, detached = wait_pids(pids, cli)[:2]
        cli.kill()
        cli.wait()
        assert exited(worker, 5), f"the worker {worker} outlived the SIGKILLed CLI"
        # The worker's keeper takes what the model started along.
        assert exited(detached, 5), f"the worker's detached process {detached} outlived the SIGKILLed CLI"
    finally:
        if cli.poll() is None:
            cli.kill()
        _kill_quietly(detached if "detached" in locals() else None)


@pytest.mark.slow  # a whole CLI run with a capture
def test_a_sigkilled_cli_takes_processes_that_cleared_their_environment(ws, tmp_path):
    """Issue 39 item 2: a process in a session of its own started with ``env={}``, and a
    double-forked grandchild that execs with an empty environment, carry no marker and
    no group of the worker's: they still end with a SIGKILLed CLI (4 of 4 survived)."""
    pids = tmp_path / "pids"
    cli = subprocess.Popen(
        [sys.executable, "-m", "tensorviz_lsp", "capture", "--workspace", str(ws), "--profile", "cleared",
         "-o", str(tmp_path / "out.tvg"), "--timeout", "120"],
        env=env_with(TV_PIDS=str(pids)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    started: tuple[int, ...] = ()
    try:
        started = wait_pids(pids, cli)
        worker, detached, grandchild = started
        # Its pid is written just before its execve: wait for the exec (under load the
        # read could come first and see the environment it is about to drop).
        environ = Path(f"/proc/{grandchild}/environ")
        end = time.monotonic() + 10
        while b"TENSORVIZ_WORKER_ID" in environ.read_bytes() and time.monotonic() < end:
            time.sleep(0.02)
        assert b"TENSORVIZ_WORKER_ID" not in environ.read_bytes()
        cli.kill()
        cli.wait()
        for pid, what in ((worker, "worker"), (detached, "env-less process in a session of its own"),
                          (grandchild, "double-forked process that exec'd with an empty environment")):
            assert exited(pid, 5), f"the {what} ({pid}) outlived the SIGKILLed CLI"
    finally:
        if cli.poll() is None:
            cli.kill()
        for pid in started[1:]:
            _kill_quietly(pid)


SERVER = """
import sys
from capture.session.runner import run_capture
from capture.session.warm import WarmPool
from fake_workspace import fake_recipe, tensor

pool = WarmPool() if sys.argv[2] == "warm" else None
run_capture(sys.argv[1], fake_recipe("sleepy:hang", tensor(2, 3)), timeout=120, warm=pool)
"""


def children(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            if int(stat[stat.rindex(b")") + 2:].split()[1]) == pid:
                out.append(int(name))
    return out


@pytest.mark.parametrize("mode", ["one-shot", "warm"])
def test_a_killed_language_server_takes_its_workers_with_it(ws, tmp_path, mode):
    """The server's side (run_capture on its executor), SIGKILLed mid-capture: the
    one-shot worker, or the warm resident and its capture child, die with it."""
    pids = tmp_path / "pids"
    here = Path(__file__).resolve().parent
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(ws), mode],
        env=env_with(TV_PIDS=str(pids), PYTHONPATH=os.pathsep.join([str(here.parents[1]), str(here), str(here.parent)])),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    detached = None
    try:
        capture_pid, detached = wait_pids(pids, server)[:2]
        started = [p for p in children(server.pid)]
        assert started, "the server started a worker"
        server.kill()
        server.wait()
        for pid in [capture_pid, *started]:
            assert exited(pid, 5), f"{pid} outlived the killed server ({mode})"
        # What the capture started goes too (one-shot: the worker's guardian; warm: the
        # resident is told by SIGTERM and clears it).
        assert exited(detached, 5), f"the capture's detached process {detached} outlived the killed server"
    finally:
        if server.poll() is None:
            server.kill()
        _kill_quietly(detached)


def _kill_quietly(pid: int | None) -> None:
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
