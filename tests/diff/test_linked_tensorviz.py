"""A linked ``.tensorviz``, ``captures/`` or history folder (issue 29 item 5): TensorViz
writes, lists and removes nothing through a link that leads out of the workspace (the
error names the link and its target), never prunes through a link at all, and prunes
only what it wrote (an entry's name and a graph file's header)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from capture.graph import graphfile
from capture.recipe import Recipe
from capture.session import CaptureRequest, run_session
from capture.session.graph_files import CAPTURES_DIR
from capture.session.history import HISTORY_DIR, CaptureHistory, HistoryError, HistoryLimits
from synthetic import synthetic_capture
from tensorviz_lsp.recipes_store import save_profile


def _listing(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    target.mkdir(parents=True, exist_ok=True)
    os.symlink(target, link, target_is_directory=True)


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    save_profile(ws, Recipe.from_dict({"name": "net", "model": "model:net", "seed": 1}))
    return ws


# Which folder is linked out, as a path below the workspace.
LINKED = [
    pytest.param(Path(".tensorviz"), id="tensorviz"),
    pytest.param(CAPTURES_DIR, id="captures"),
    pytest.param(HISTORY_DIR, id="history"),
    pytest.param(HISTORY_DIR / "net", id="profile-history"),
]


@pytest.mark.parametrize("linked", LINKED)
def test_a_capture_writes_nothing_through_a_folder_linked_out(tmp_path, linked):
    ws = _workspace(tmp_path)
    outside = tmp_path / "elsewhere"
    if linked == Path(".tensorviz"):
        os.rename(ws / ".tensorviz", tmp_path / "moved")  # the recipes live in the target now
        os.rename(tmp_path / "moved", outside)
    (outside / "keep.tvg").parent.mkdir(parents=True, exist_ok=True)
    _link(ws / linked, outside)
    before = _listing(outside)
    result = run_session(CaptureRequest(workspace=ws, profile="net"), worker=lambda job: synthetic_capture(5))
    assert _listing(outside) == before, "a file was written through the link"
    assert result.problems, result
    said = " ".join(result.problems)
    assert f"{ws / linked.parts[0]}" in said or str(ws / linked) in said, said
    assert str(outside) in said and "outside the workspace" in said


def test_a_folder_linked_inside_the_workspace_is_used(tmp_path):
    ws = _workspace(tmp_path)
    _link(ws / CAPTURES_DIR, ws / "kept-captures")
    result = run_session(CaptureRequest(workspace=ws, profile="net"), worker=lambda job: synthetic_capture(5))
    assert result.problems == [] and result.graph_file is not None
    assert (ws / "kept-captures" / "net.tvg").is_file()


@pytest.mark.parametrize("hop", ["absolute", "relative", "two-links"])
def test_the_history_refuses_a_folder_linked_out(tmp_path, hop):
    ws = tmp_path / "ws"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (ws / HISTORY_DIR).mkdir(parents=True)
    if hop == "absolute":
        os.symlink(outside, ws / HISTORY_DIR / "net")
    elif hop == "relative":
        os.symlink(os.path.join("..", "..", "..", "..", "elsewhere"), ws / HISTORY_DIR / "net")
    else:  # a link inside the workspace to a link out
        os.symlink(outside, ws / "hop")
        os.symlink(ws / "hop", ws / HISTORY_DIR / "net")
    victim = outside / "000001-20260101T000000Z.tvg"
    victim.write_bytes(graphfile.encode(synthetic_capture(3)))
    h = CaptureHistory(ws, HistoryLimits(max_captures=1))
    with pytest.raises(HistoryError, match="outside the workspace"):
        h.record("net", synthetic_capture(4))
    with pytest.raises(HistoryError, match=str(ws / HISTORY_DIR / "net")):
        h.entries("net")
    assert _listing(outside) == [victim.name]


def test_pruning_never_removes_through_a_link_inside_the_workspace(tmp_path):
    ws = tmp_path / "ws"
    real = ws / "my-captures"
    real.mkdir(parents=True)
    (ws / HISTORY_DIR).mkdir(parents=True)
    os.symlink(real, ws / HISTORY_DIR / "net")
    h = CaptureHistory(ws, HistoryLimits(max_captures=1))
    for n in range(3, 7):
        h.record("net", synthetic_capture(n, grouped=False))
    assert len(_listing(real)) == 4  # kept, not pruned through the link


def test_pruning_removes_only_graph_files_tensorviz_wrote(tmp_path):
    h = CaptureHistory(tmp_path, HistoryLimits(max_captures=2))
    folder = tmp_path / HISTORY_DIR / "net"
    folder.mkdir(parents=True)
    notes = folder / "000001-20260101T000000Z.tvg"  # an entry's name, not a graph file
    notes.write_text("my notes, named like an entry")
    secret = tmp_path / "secret.tvg"
    secret.write_bytes(graphfile.encode(synthetic_capture(2)))
    os.symlink(secret, folder / "000002-20260101T000000Z.tvg")  # a link named like one
    unrelated = folder / ".scratch.tmp"  # a temporary file TensorViz did not make
    unrelated.write_text("x")
    os.utime(unrelated, (0, 0))
    stale = folder / ".000003-20260101T000000Z.tvg.0123456789ab.tmp"
    stale.write_bytes(b"half a graph")
    os.utime(stale, (0, 0))
    for n in range(3, 8):
        h.record("net", synthetic_capture(n, grouped=False))
    assert notes.read_text() == "my notes, named like an entry"
    assert os.path.islink(folder / "000002-20260101T000000Z.tvg") and secret.is_file()
    assert unrelated.exists() and not stale.exists()
    written = [e for e in h.entries("net") if e.path not in (notes, folder / "000002-20260101T000000Z.tvg")]
    assert len(written) == 2  # the captures TensorViz wrote are pruned as before
