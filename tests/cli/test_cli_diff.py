"""``tensorviz diff A.tvg B.tvg [--json] [--view]`` and ``--profile NAME``: output and exit
status (0 same, 1 different, 2 trouble, as diff(1))."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from capture.graph import graphfile
from capture.graph.model import Capture, Failure
from tensorviz_lsp.cli import main
from capture.session.history import CaptureHistory

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "tests" / "diff" / "models" / "captures"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(["diff", *argv])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_different_captures_exit_1_with_a_summary(capsys):
    status, out, err = _run(capsys, str(CAPTURES / "gpt2_2_layers.tvg"), str(CAPTURES / "gpt2_3_layers.tvg"))
    assert status == 1 and err == ""
    assert "+ group lm.transformer.h.2 (module GPT2Block): 35 nodes, 12 groups, 12 parameter tensors" in out
    assert "summary: groups 1 added, 0 removed, 0 changed" in out


def test_the_same_capture_exits_0(capsys):
    status, out, _ = _run(capsys, str(CAPTURES / "flax_mlp_16.tvg"), str(CAPTURES / "flax_mlp_16.tvg"))
    assert status == 0 and "no differences" in out


def test_json_names_changed_groups_by_path(capsys):
    status, out, _ = _run(capsys, str(CAPTURES / "mlp.tvg"), str(CAPTURES / "mlp_edited.tvg"), "--json")
    assert status == 1
    d = json.loads(out)
    assert d["format"] == "tensorviz-diff" and d["counts"]["nodes_added"] == 1
    assert d["nodes"] == [{"group": "", "status": "added", "op": "aten::relu", "index_a": None, "index_b": 1}]
    assert d["a"]["label"].endswith("mlp.tvg") and d["b"]["label"].endswith("mlp_edited.tvg")


def test_unreadable_files_exit_2_naming_the_file(capsys, tmp_path):
    missing = tmp_path / "gone.tvg"
    status, out, err = _run(capsys, str(missing), str(CAPTURES / "mlp.tvg"))
    assert status == 2 and out == ""
    assert err.startswith("tensorviz diff: ") and "gone.tvg: cannot read" in err
    junk = tmp_path / "junk.tvg"
    junk.write_bytes(b"not a graph")
    status, _, err = _run(capsys, str(CAPTURES / "mlp.tvg"), str(junk))
    assert status == 2 and "junk.tvg: not a TensorViz graph file" in err


def test_a_failure_capture_exits_2_saying_it_cannot_be_diffed(capsys, tmp_path):
    failed = tmp_path / "failed.tvg"
    graphfile.write(Capture.failed_capture(Failure("RuntimeError", "CUDA out of memory", stage="trace")), failed)
    status, out, err = _run(capsys, str(CAPTURES / "mlp.tvg"), str(failed))
    assert status == 2 and out == ""
    assert "failed.tvg is a failed capture ([trace] RuntimeError: CUDA out of memory)" in err
    assert "no graph to compare" in err


def test_usage_errors_exit_2(capsys):
    status, _, err = _run(capsys, str(CAPTURES / "mlp.tvg"))
    assert status == 2 and "give two graph files" in err
    status, _, err = _run(capsys, str(CAPTURES / "mlp.tvg"), str(CAPTURES / "mlp.tvg"), "--profile", "x")
    assert status == 2 and "not both" in err


def test_profile_compares_the_two_newest_in_the_history(capsys, tmp_path):
    # A saved profile never captured: its history holds nothing yet. (Before issue 30 an
    # unsaved name said the same; it now says there is no such profile, below.)
    (tmp_path / ".tensorviz").mkdir()
    (tmp_path / ".tensorviz" / "recipes.toml").write_text(
        'version = 1\n\n[profiles.gpt2]\nmodel = "m:GPT"\n', encoding="utf-8")
    status, _, err = _run(capsys, "--profile", "gpt2", "--workspace", str(tmp_path))
    assert status == 2 and "holds no capture" in err
    history = CaptureHistory(tmp_path)
    history.record("gpt2", graphfile.read(CAPTURES / "gpt2_2_layers.tvg"))
    status, _, err = _run(capsys, "--profile", "gpt2", "--workspace", str(tmp_path))
    assert status == 2 and "holds only one capture" in err
    history.record("gpt2", graphfile.read(CAPTURES / "gpt2_3_layers.tvg"))
    status, out, _ = _run(capsys, "--profile", "gpt2", "--workspace", str(tmp_path), "--json")
    assert status == 1
    d = json.loads(out)
    assert [(g["path"], g["status"]) for g in d["groups"]] == [("lm.transformer.h.2", "added")]
    assert d["a"]["label"].startswith("gpt2 @ ")


@pytest.mark.parametrize("recipes, kept, listed", [
    pytest.param('version = 1\n\n[profiles.mlp]\nmodel = "m:MLP"\n\n[profiles.gpt2]\nmodel = "m:GPT"\n', [],
                 "profiles: gpt2, mlp", id="saved-profiles"),
    pytest.param(None, ["old_one"], "profiles: old_one", id="only-a-history"),
    pytest.param(None, [], "profiles: none saved", id="nothing"),
    pytest.param("version = [broken", ["kept"], "profiles: kept", id="unreadable-recipes"),
])
def test_profile_that_does_not_exist_says_so_listing_the_profiles(capsys, tmp_path, recipes, kept, listed):
    if recipes is not None:
        (tmp_path / ".tensorviz").mkdir()
        (tmp_path / ".tensorviz" / "recipes.toml").write_text(recipes, encoding="utf-8")
    for name in kept:
        CaptureHistory(tmp_path).record(name, graphfile.read(CAPTURES / "mlp.tvg"))
    status, out, err = _run(capsys, "--profile", "nosuch", "--workspace", str(tmp_path))
    assert status == 2 and out == ""
    assert f"no such profile nosuch in {tmp_path} ({listed})" in err, err
    assert "capture it again" not in err


def _source_status(url: str, file: str) -> int:
    try:
        with urllib.request.urlopen(url + f"api/source?file={file}&line=1", timeout=10) as res:
            return res.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize("extra, key_status", [
    pytest.param((), 404, id="no-workspace"),
    pytest.param(("--workspace", "."), 200, id="explicit-workspace"),
])
def test_view_serves_the_current_folder_only_when_named_as_the_workspace(tmp_path, extra, key_status):
    """``cd ~ && tensorviz diff a.tvg b.tvg --view``: ``api/source?file=.ssh/id_rsa`` must
    not answer (it did: the current folder was served as the workspace)."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (home / "notes.py").write_text("x = 1\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tensorviz_lsp", "diff", str(CAPTURES / "mlp.tvg"), str(CAPTURES / "mlp_edited.tvg"),
         "--view", "--no-browser", "--timeout", "60", *extra],
        cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        base = proc.stdout.readline().strip().split("?", 1)[0]
        assert base.startswith("http://127.0.0.1:"), proc.stderr.read()
        assert _source_status(base, ".ssh/id_rsa") == key_status
        assert _source_status(base, "notes.py") == key_status
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_view_serves_b_in_diff_mode(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tensorviz_lsp", "diff", str(CAPTURES / "gpt2_2_layers.tvg"),
         str(CAPTURES / "gpt2_3_layers.tvg"), "--view", "--no-browser", "--timeout", "60"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("&diff=previous"), url
        base, query = url.split("?", 1)
        with urllib.request.urlopen(f"{base}api/capture?{query.split('&')[0]}", timeout=30) as res:
            offered = json.loads(res.read())["diff"]
        assert offered == {"against": "previous", "label": "gpt2_2_layers.tvg"}
        with urllib.request.urlopen(f"{base}api/diff?{query.split('&')[0]}&against=previous", timeout=30) as res:
            d = json.loads(res.read())
        assert [c["path"] for c in d["changes"]] == ["lm.transformer.h.2"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "+ group lm.transformer.h.2" in proc.stderr.read()


def test_diff_is_a_listed_command(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "diff" in capsys.readouterr().out


@pytest.mark.slow
def test_capture_keeps_history_that_diff_profile_reads(tmp_path):
    import fake_framework
    from capture.frameworks import TEST_PLUGINS_ENV

    env = {**os.environ, TEST_PLUGINS_ENV: fake_framework.PLUGIN, "PYTHONPATH": str(ROOT)}

    def cli(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tensorviz_lsp", *argv], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=180)

    (tmp_path / "model.py").write_text("def net(x):\n    return (x * 2.0).relu()\n")
    for _ in range(2):
        done = cli("capture", "model.py:net", "--framework", "fake", "--input", "x=float32[2,3]", "--profile", "net")
        assert done.returncode == 0, done.stderr
    kept = sorted((tmp_path / ".tensorviz" / "captures" / "history" / "net").glob("*.tvg"))
    assert len(kept) == 2
    same = cli("diff", "--profile", "net")
    assert same.returncode == 0 and "no differences" in same.stdout, same.stderr
    # The model changes: one op more.
    (tmp_path / "model.py").write_text("def net(x):\n    return (-(x * 2.0)).relu()\n")
    done = cli("capture", "model.py:net", "--framework", "fake", "--input", "x=float32[2,3]", "--profile", "net")
    assert done.returncode == 0, done.stderr
    changed = cli("diff", "--profile", "net", "--json")
    assert changed.returncode == 1, changed.stderr
    d = json.loads(changed.stdout)
    assert [(n["status"], n["op"]) for n in d["nodes"]] == [("added", "neg")]
