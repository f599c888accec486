"""A killed CLI's launcher folder (issue 29 item 11): SIGKILL runs no exit handler, so
``tensorviz-worker-*`` folders were left in the temporary folder forever; the next
process that makes its own removes those whose owner process is gone, and only those."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from capture.session.launcher import remove_abandoned_launchers

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")

MAKE = "from capture.session.launcher import launcher_script; print(launcher_script(), flush=True)"


def _python(tmp: Path, code: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True, **kw)


def _folders(tmp: Path) -> list[str]:
    return sorted(n for n in os.listdir(tmp) if n.startswith("tensorviz-worker-"))


def test_a_sigkilled_processes_folder_goes_at_the_next_start(tmp_path):
    killed = _python(tmp_path, MAKE + "\nimport time; time.sleep(60)")
    try:
        left = Path(killed.stdout.readline().strip()).parent
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
    finally:
        killed.kill()
    assert left.is_dir() and (left / "capture").exists()  # SIGKILL: no exit handler ran
    nxt = _python(tmp_path, MAKE)
    made = Path(nxt.communicate(timeout=60)[0].strip()).parent
    assert not left.exists(), "the killed process's launcher folder was left"
    assert _folders(tmp_path) == []  # the next one's own went at its exit
    assert not made.exists()
    assert (ROOT / "capture" / "__init__.py").is_file()  # removing the folder's links left the package


def test_a_running_owners_folder_stays(tmp_path):
    alive = _python(tmp_path, MAKE + "\nimport time; time.sleep(60)")
    try:
        folder = Path(alive.stdout.readline().strip()).parent
        assert remove_abandoned_launchers(str(tmp_path)) == []
        assert folder.is_dir()
    finally:
        alive.kill()
        alive.wait(10)


def test_a_reused_pid_is_not_the_owner(tmp_path):
    # The owner file names this (running) pid with another start time: a process that
    # died, its pid since given to another.
    folder = tmp_path / f"tensorviz-worker-{os.getpid()}-abc"
    folder.mkdir()
    (folder / "owner").write_text(f"{os.getpid()} 1")
    assert remove_abandoned_launchers(str(tmp_path)) == [str(folder)]


@pytest.mark.parametrize("case", ["no-owner-file", "a-link", "garbage-owner", "owner-a-fifo"])
def test_what_is_not_known_to_be_abandoned_stays(tmp_path, case):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep.txt").write_text("keep")
    name = tmp_path / "tensorviz-worker-1-x"
    if case == "a-link":
        (target / "owner").write_text("999999999 1")  # would say "gone" if read through the link
        os.symlink(target, name)
    else:
        name.mkdir()
        if case == "garbage-owner":
            (name / "owner").write_text("not a pid")
        elif case == "owner-a-fifo":
            os.mkfifo(name / "owner")
    assert remove_abandoned_launchers(str(tmp_path)) == []
    assert os.path.lexists(name) and (target / "keep.txt").exists()
