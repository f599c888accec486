"""A committed ``recipes.toml`` that is a FIFO, a link to ``/dev/zero`` or a link out of
the workspace (issue 29 item 2) is refused, never waited on or read: by the reader the
worker and the lenses share, by the store every writer uses, and by
``tensorviz capture --profile``. A linked ``.tensorviz`` folder leading out is refused
the same way (item 5)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from capture.recipe import Recipe, RecipeError, load_recipes_table
from tensorviz_lsp.recipes_store import RecipeStoreError, list_profiles, recipes_path, save_profile

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs POSIX special files")

PROFILE = '''version = 1

[profiles.p]
model = "model:net"
'''


def finishes(fn, seconds: float = 10.0):
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001  (returned to the test)
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "blocked reading the recipes file"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def fifo_recipes(ws: Path) -> Path:
    (ws / ".tensorviz").mkdir(parents=True)
    os.mkfifo(ws / ".tensorviz" / "recipes.toml")
    return ws / ".tensorviz" / "recipes.toml"


def linked_recipes(ws: Path, target: str | Path) -> Path:
    (ws / ".tensorviz").mkdir(parents=True)
    os.symlink(target, ws / ".tensorviz" / "recipes.toml")
    return ws / ".tensorviz" / "recipes.toml"


def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "elsewhere" / "recipes.toml"
    secret.parent.mkdir()
    secret.write_text(PROFILE)
    return secret


def test_a_fifo_recipes_file_is_refused_at_once(tmp_path):
    path = fifo_recipes(tmp_path / "ws")
    with pytest.raises(RecipeError, match=r"is a pipe \(FIFO\), not a regular file"):
        finishes(lambda: load_recipes_table(path))
    with pytest.raises(RecipeStoreError, match="is a pipe"):
        finishes(lambda: save_profile(tmp_path / "ws", Recipe.from_dict({"name": "q", "model": "model:net"})))
    assert Path(path).is_fifo()  # left as it was


def test_recipes_linked_to_dev_zero_are_refused_before_reading(tmp_path):
    path = linked_recipes(tmp_path / "ws", "/dev/zero")
    with pytest.raises(RecipeError, match="outside the workspace"):
        finishes(lambda: load_recipes_table(path))
    with pytest.raises(RecipeStoreError, match="outside the workspace"):
        finishes(lambda: save_profile(tmp_path / "ws", Recipe.from_dict({"name": "q", "model": "model:net"})))
    assert os.readlink(path) == "/dev/zero"


@pytest.mark.parametrize("how", ["file-link", "relative-link", "folder-link"])
def test_recipes_leading_out_of_the_workspace_are_refused(tmp_path, how):
    secret = outside(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    if how == "file-link":
        linked_recipes(ws, secret)
    elif how == "relative-link":
        linked_recipes(ws, os.path.join("..", "..", "elsewhere", "recipes.toml"))
    else:
        os.symlink(secret.parent, ws / ".tensorviz")  # the whole folder linked out
    with pytest.raises(RecipeError, match="outside the workspace"):
        load_recipes_table(recipes_path(ws))
    with pytest.raises(RecipeError, match="outside the workspace"):
        list_profiles(ws)
    with pytest.raises(RecipeStoreError, match="outside the workspace"):
        save_profile(ws, Recipe.from_dict({"name": "q", "model": "model:net"}))
    assert secret.read_text() == PROFILE
    assert sorted(os.listdir(secret.parent)) == ["recipes.toml"]  # no lock, no temporary written there


def test_a_tensorviz_folder_linked_out_gets_no_new_recipes_file(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink(target, ws / ".tensorviz")
    with pytest.raises(RecipeStoreError, match="outside the workspace"):
        save_profile(ws, Recipe.from_dict({"name": "q", "model": "model:net"}))
    assert os.listdir(target) == []


def test_a_recipes_file_linked_inside_the_workspace_is_read(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "shared.toml").write_text(PROFILE)
    linked_recipes(ws, ws / "shared.toml")
    assert list(load_recipes_table(recipes_path(ws))[0]["profiles"]) == ["p"]


def test_capture_with_a_fifo_recipes_file_fails_at_once(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "model.py").write_text("def net(x):\n    return x\n")
    fifo_recipes(ws)
    proc = subprocess.run([sys.executable, "-m", "tensorviz_lsp", "capture", "--profile", "p"], cwd=ws,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "is a pipe (FIFO), not a regular file" in proc.stderr, proc.stderr
