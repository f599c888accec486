"""Concurrent writers of ``recipes.toml`` (issue 29 item 4): each read-modify-write holds
the lock beside the file, so writers at once (threads of the language server, separate
processes, the editor and the CLI) keep every profile; a writer that waits too long says
so and leaves the file; what a killed writer left is removed at the next save, or the
next capture's start."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from capture.recipe import Recipe
from capture.recipe import lock as recipes_lock_module
from capture.recipe.lock import lock_path, remove_abandoned_temporaries
from tensorviz_lsp.recipes_store import RecipeStoreError, list_profiles, recipes_path, save_profile

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs POSIX")


def recipe(name: str) -> Recipe:
    return Recipe.from_dict({"name": name, "model": "model:net", "seed": 1})


def test_threads_saving_at_once_keep_every_profile(tmp_path):
    n = 12
    start = threading.Barrier(n)
    errors: list[BaseException] = []

    def save(i: int) -> None:
        start.wait()
        try:
            save_profile(tmp_path, recipe(f"p{i}"))
        except BaseException as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=save, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert sorted(list_profiles(tmp_path)) == sorted(f"p{i}" for i in range(n))


SAVER = """
import sys, time
from capture.recipe import Recipe
from tensorviz_lsp.recipes_store import save_profile
go = float(sys.argv[3])
while time.time() < go:
    pass
for k in range(5):
    save_profile(sys.argv[1], Recipe.from_dict({"name": f"{sys.argv[2]}_{k}", "model": "model:net"}))
"""


@pytest.mark.slow
def test_processes_saving_at_once_keep_every_profile(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    go = time.time() + 3  # every process past its imports, then all at once
    procs = [subprocess.Popen([sys.executable, "-c", SAVER, str(tmp_path), f"w{i}", str(go)], env=env,
                              stderr=subprocess.PIPE, text=True) for i in range(6)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert sorted(list_profiles(tmp_path)) == sorted(f"w{i}_{k}" for i in range(6) for k in range(5))


def test_a_writer_that_waits_too_long_says_so_and_leaves_the_file(tmp_path, monkeypatch):
    save_profile(tmp_path, recipe("first"))
    before = recipes_path(tmp_path).read_text()
    monkeypatch.setattr(recipes_lock_module, "LOCK_WAIT_SECONDS", 0.3)
    with open(lock_path(recipes_path(tmp_path)), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another writer, mid-save
        with pytest.raises(RecipeStoreError, match="another TensorViz has been saving"):
            save_profile(tmp_path, recipe("second"))
    assert recipes_path(tmp_path).read_text() == before
    save_profile(tmp_path, recipe("second"))  # released: saved
    assert list_profiles(tmp_path) == ["first", "second"]


def test_a_writer_waits_for_the_one_holding_the_lock(tmp_path):
    save_profile(tmp_path, recipe("first"))
    held = open(lock_path(recipes_path(tmp_path)), "a")
    fcntl.flock(held, fcntl.LOCK_EX)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (save_profile(tmp_path, recipe("second")), done.set()))
    worker.start()
    assert not done.wait(0.5), "saved while another writer held the lock"
    held.close()  # the other writer is done
    assert done.wait(30)
    worker.join()
    assert list_profiles(tmp_path) == ["first", "second"]


def _leftovers(folder: Path) -> list[Path]:
    names = [".recipes.toml.0123456789ab.tmp", ".recipes.toml.ffffffffffff.tmp"]
    for name in names:
        (folder / name).write_text("half a recipes file")
    return [folder / n for n in names]


def test_what_a_killed_save_left_goes_at_the_next_save(tmp_path):
    save_profile(tmp_path, recipe("first"))
    folder = recipes_path(tmp_path).parent
    left = _leftovers(folder)  # fresh: within the 10 minutes the old clean-up waited
    unrelated = folder / ".notes.0123456789ab.tmp"
    unrelated.write_text("not ours")
    save_profile(tmp_path, recipe("second"))
    assert not any(p.exists() for p in left)
    assert unrelated.exists()


def test_what_a_killed_save_left_goes_at_a_captures_start_unless_a_save_is_under_way(tmp_path):
    save_profile(tmp_path, recipe("first"))
    folder = recipes_path(tmp_path).parent
    left = _leftovers(folder)
    with open(lock_path(recipes_path(tmp_path)), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a save under way: its temporary is not stale
        remove_abandoned_temporaries(recipes_path(tmp_path))
        assert all(p.exists() for p in left)
    from capture.session import CaptureRequest, run_session

    run_session(CaptureRequest(workspace=tmp_path, profile="first", trusted=False))
    assert not any(p.exists() for p in left)


def test_a_killed_writer_releases_the_lock(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom pathlib import Path\nfrom capture.recipe.lock import recipes_lock\n"
         "with recipes_lock(Path(sys.argv[1])):\n    print('held', flush=True)\n    time.sleep(120)\n",
         str(recipes_path(tmp_path))], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        holder.kill()
        holder.wait()
        save_profile(tmp_path, recipe("after"))
        assert list_profiles(tmp_path) == ["after"]
    finally:
        if holder.poll() is None:
            holder.kill()
