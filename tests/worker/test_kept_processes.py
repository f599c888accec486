"""What the parent runs besides the worker is kept like the worker (issue 52 items 3-4):
the interpreter probe and an approved install run under a keeper of their own
(:func:`capture.worker.procs.run_kept`), so that a process the capture interpreter starts
there (a committed ``.venv/bin/python`` wrapper script that leaves a background child in
a session of its own) outlives neither the probe, nor the CLI or language server that
started it, however that one ends (SIGKILL included)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from capture.session.launcher import kept
from capture.session.probe import forget_probes, probe_interpreter
from capture.session.runner import make_job
from fake_workspace import fake_recipe, tensor
from processes import exited

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

ROOT = Path(__file__).resolve().parents[2]


def wrapper(folder: Path, *, delay: float = 0.0, then: str = f'exec {sys.executable} "$@"') -> Path:
    """A ``.venv/bin/python`` that starts a background process in a session of its own
    (its pid written to ``$TV_BG``, its own to ``$TV_BG.self``), waits until that pid is
    written, for up to 10 s (else a loaded machine may end the child, as it should, before it says who it
    was, and the test could not tell), then ``delay`` s, then runs the real interpreter (or
    ``then``)."""
    path = folder / ".venv" / "bin" / "python"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo $$ > "$TV_BG.self"
        setsid sh -c 'echo $$ > "$TV_BG.tmp"; mv "$TV_BG.tmp" "$TV_BG"; exec sleep 120' \\
            </dev/null >/dev/null 2>&1 &
        i=0; until [ -s "$TV_BG" ] || [ $i -ge 1000 ]; do sleep 0.01; i=$((i+1)); done
        sleep {delay}
        {then}
        """))
    path.chmod(0o755)
    return path


def wait_file(path: Path, timeout: float = 30.0) -> int:
    end = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.02)
    return int(path.read_text().split()[0])


def kill_quietly(*pids: int | None) -> None:
    for pid in pids:
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_the_keeper_runs_the_command_and_exits_as_it_did(tmp_path):
    done = subprocess.run(kept([sys.executable, "-c", "import sys; print('hi'); sys.exit(3)"]),
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (3, "hi\n"), done.stderr
    missing = subprocess.run(kept([str(tmp_path / "no-python"), "-c", "pass"]), capture_output=True, text=True,
                             timeout=60)
    from capture.worker.procs import not_started

    assert not_started(missing.returncode, missing.stderr) == "No such file or directory", missing.stderr


def test_what_the_probed_interpreter_starts_ends_with_the_probe(workspace, tmp_path, monkeypatch):
    """Before: the wrapper's background child (setsid) ran on after the probe, the
    capture and the CLI."""
    python = wrapper(tmp_path)
    bg = tmp_path / "bg"
    monkeypatch.setenv("TV_BG", str(bg))
    forget_probes()
    job = make_job(workspace, fake_recipe("models:net", tensor(2, 3)), python=python)
    answer = probe_interpreter(job, ("msgpack",))
    assert isinstance(answer, dict), answer
    child = wait_file(bg)
    try:
        assert exited(child, 5), "the probe's interpreter left a background process running"
    finally:
        kill_quietly(child)


PROBING_PARENT = """
import sys
from capture.session.probe import probe_interpreter
from capture.session.runner import make_job
from fake_workspace import fake_recipe, tensor

job = make_job(sys.argv[1], fake_recipe("models:net", tensor(2, 3)), python=sys.argv[2])
probe_interpreter(job, ("msgpack",))
"""


def test_a_sigkilled_parent_takes_its_probe_and_what_it_started(workspace, tmp_path):
    """The parent (a CLI, the language server) SIGKILLed while the probe runs: the probed
    interpreter and its background child go with it."""
    python = wrapper(tmp_path, delay=60)
    bg = tmp_path / "bg"
    here = Path(__file__).resolve().parent
    env = {**os.environ, "TV_BG": str(bg),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(here), str(here.parent)])}
    parent = subprocess.Popen([sys.executable, "-c", PROBING_PARENT, str(workspace), str(python)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    child = wrapped = None
    try:
        child = wait_file(bg)
        wrapped = wait_file(Path(f"{bg}.self"))
        parent.kill()
        parent.wait()
        assert exited(wrapped, 5), "the probed interpreter outlived its SIGKILLed parent"
        assert exited(child, 5), "the probed interpreter's background process outlived its SIGKILLed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        kill_quietly(child, wrapped)


INSTALLING_CLI = """
import sys
from types import SimpleNamespace
from capture.graph.model import Capture, Coverage, Failure
from tensorviz_lsp.cli.commands.capture import offer_model_dependencies

python = sys.argv[1]
failure = Failure("ModuleNotFoundError", "No module named 'tiktoken'", "import",
                  details={"missing_module": "tiktoken", "missing": ["tiktoken"], "python": python,
                           "install": [python, "-m", "pip", "install", "tiktoken"]})
result = SimpleNamespace(capture=Capture("fake", "fake", "1", Coverage("traced_program"), failure=failure),
                         job=SimpleNamespace(python=python))
offer_model_dependencies("capture", result, ask=lambda prompt: "y")
"""


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_an_approved_install_ends_with_the_cli(tmp_path, how):
    """Before: the install ran on after a SIGKILLed CLI (and in a session of its own in
    the editor, killed only by the shutdown hook)."""
    python = wrapper(tmp_path, then="exec sleep 120")  # a "pip" that takes its time, with a background child
    bg = tmp_path / "bg"
    env = {**os.environ, "TV_BG": str(bg), "PYTHONPATH": str(ROOT)}
    cli = subprocess.Popen([sys.executable, "-c", INSTALLING_CLI, str(python)], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    child = pip = None
    try:
        child = wait_file(bg)
        pip = wait_file(Path(f"{bg}.self"))
        cli.send_signal(getattr(signal, how))
        cli.wait(timeout=30)
        assert exited(pip, 5), f"the install outlived the CLI ({how})"
        assert exited(child, 5), f"the install's background process outlived the CLI ({how})"
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        kill_quietly(child, pip)


HANG = '''
import os
import time


def hang(x):
    with open(os.environ["TV_PIDS"] + ".tmp", "w") as fh:
        fh.write(str(os.getpid()))
    os.replace(os.environ["TV_PIDS"] + ".tmp", os.environ["TV_PIDS"])
    while True:
        time.sleep(0.05)
'''


def test_a_wrapper_interpreters_orphan_ends_with_a_sigkilled_cli(workspace, tmp_path):
    """A ``.venv/bin/python`` wrapper whose background process is orphaned before the
    worker's own keeper exists (a subshell that starts it and exits): it was re-parented
    to the CLI, and to init once the CLI was SIGKILLed. The worker runs under a keeper of
    TensorViz's own, which adopts it."""
    python = wrapper(tmp_path)
    text = python.read_text().replace("setsid sh -c", "( setsid sh -c").replace(
        "</dev/null >/dev/null 2>&1 &", "</dev/null >/dev/null 2>&1 & )")
    python.write_text(text)
    (workspace / "hang.py").write_text(HANG)
    (workspace / ".tensorviz").mkdir(exist_ok=True)
    (workspace / ".tensorviz" / "recipes.toml").write_text(
        'version = 1\n[profiles.hang]\nframework = "fake"\nmodel = "hang:hang"\n'
        'inputs = { args = [{ kind = "tensor", shape = [2, 3], dtype = "float32" }] }\n')
    bg, pids = tmp_path / "bg", tmp_path / "pids"
    from capture.frameworks import TEST_PLUGINS_ENV

    env = {**os.environ, "TV_BG": str(bg), "TV_PIDS": str(pids), "PYTHONPATH": str(ROOT),
           TEST_PLUGINS_ENV: os.environ[TEST_PLUGINS_ENV]}
    here = Path(__file__).resolve().parent
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(here), str(here.parent)])
    cli = subprocess.Popen([sys.executable, "-m", "tensorviz_lsp", "capture", "--workspace", str(workspace),
                            "--profile", "hang", "--python", str(python), "--timeout", "120",
                            "-o", str(tmp_path / "out.tvg")], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    model = child = None
    try:
        model = wait_file(pids, 90)
        time.sleep(0.5)  # the worker's wrapper's background process has written its pid (the probe's, before)
        child = wait_file(bg)
        cli.kill()
        cli.wait()
        assert exited(model, 5), "the worker outlived the SIGKILLed CLI"
        assert exited(child, 5), "the wrapper interpreter's orphan outlived the SIGKILLed CLI"
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        kill_quietly(model, child)


SERVER = """
import sys
from capture.session.runner import run_capture
from capture.session.warm import WarmPool
from fake_workspace import fake_recipe, tensor

pool = WarmPool() if sys.argv[3] == "warm" else None
run_capture(sys.argv[1], fake_recipe("hang:hang", tensor(2, 3)), python=sys.argv[2], timeout=120, warm=pool)
"""


@pytest.mark.slow  # a capture each
@pytest.mark.parametrize("mode", ["one-shot", "warm"])
def test_a_wrapper_interpreters_orphan_ends_with_a_sigkilled_server(workspace, tmp_path, mode):
    """The language server's side (a one-shot worker, or the folder's warm resident)."""
    python = wrapper(tmp_path)
    python.write_text(python.read_text().replace("setsid sh -c", "( setsid sh -c").replace(
        "</dev/null >/dev/null 2>&1 &", "</dev/null >/dev/null 2>&1 & )"))
    (workspace / "hang.py").write_text(HANG)
    bg, pids = tmp_path / "bg", tmp_path / "pids"
    here = Path(__file__).resolve().parent
    env = {**os.environ, "TV_BG": str(bg), "TV_PIDS": str(pids),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(here), str(here.parent)])}
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(workspace), str(python), mode], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    model = child = None
    try:
        model = wait_file(pids, 90)
        time.sleep(0.5)
        child = wait_file(bg)
        server.kill()
        server.wait()
        assert exited(model, 5), f"the capture outlived the SIGKILLed server ({mode})"
        assert exited(child, 5), f"the wrapper interpreter's orphan outlived the SIGKILLed server ({mode})"
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        kill_quietly(model, child)


PTH = ("import os, subprocess; (os.environ.get('TV_BG') and not os.path.exists(os.environ['TV_BG'])) and "
       "open(os.environ['TV_BG'], 'w').write(str(subprocess.Popen(['sleep', '120'], start_new_session=True, "
       "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid))\n")


@pytest.mark.slow  # makes a venv
def test_what_a_pth_file_starts_ends_with_the_probe(workspace, tmp_path, monkeypatch):
    """A ``.pth`` file in the capture interpreter's site-packages runs at every start of
    it, the probe's included: what it starts (in a session of its own) ends with the probe."""
    from interpreters import make_venv, site_packages

    python = make_venv(tmp_path / "venv", see_running_packages=True)
    (site_packages(tmp_path / "venv") / "aa_starts_a_process.pth").write_text(PTH)
    bg = tmp_path / "bg"
    monkeypatch.setenv("TV_BG", str(bg))
    forget_probes()
    job = make_job(workspace, fake_recipe("models:net", tensor(2, 3)), python=python)
    answer = probe_interpreter(job, ("msgpack",))
    assert isinstance(answer, dict), answer
    child = wait_file(bg)
    try:
        assert exited(child, 5), "the process a .pth file started outlived the probe"
    finally:
        kill_quietly(child)
