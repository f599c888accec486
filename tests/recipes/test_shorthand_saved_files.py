"""The shorthand's ``--checkpoint``, ``--no-strict``, ``--fixture`` and ``--fixture-key``:
paths saved workspace-relative, kept or replaced on update, and refused outside the
workspace."""

from __future__ import annotations

import pytest

from tensorviz_lsp.cli import build_parser
from tensorviz_lsp.setup.shorthand import ShorthandError, build_recipe, parse_target, workspace_file


@pytest.fixture
def ws(tmp_path, monkeypatch):
    (tmp_path / "model.py").write_text("")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "best.pt").write_bytes(b"x")
    (tmp_path / "batch.npz").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_paths_become_workspace_relative(ws, monkeypatch, tmp_path_factory):
    assert workspace_file("runs/best.pt", ws, "--checkpoint") == "runs/best.pt"
    assert workspace_file(str(ws / "runs" / "best.pt"), ws, "--checkpoint") == "runs/best.pt"
    monkeypatch.chdir(ws / "runs")
    assert workspace_file("best.pt", ws, "--checkpoint") == "runs/best.pt"
    assert workspace_file("../batch.npz", ws, "--fixture") == "batch.npz"
    outside = tmp_path_factory.mktemp("elsewhere") / "w.pt"
    outside.write_bytes(b"x")
    with pytest.raises(ShorthandError, match="is not inside the workspace"):
        workspace_file(str(outside), ws, "--checkpoint")
    with pytest.raises(ShorthandError, match="--checkpoint nope.pt: no file"):
        workspace_file("nope.pt", ws, "--checkpoint")


def test_checkpoint_and_fixture_in_the_recipe(ws):
    t = parse_target("model.py:Net")
    r = build_recipe(t, inits=["width=8"], checkpoint="runs/best.pt", strict=False, fixture="batch.npz",
                     fixture_key=["features=x"], inputs=["return_dict=false"])
    assert (r.init.checkpoint, r.init.strict) == ("runs/best.pt", False)
    assert r.init.kwargs[0][0] == "width"
    assert r.inputs.fixture == "batch.npz" and r.inputs.fixture_keys == (("features", "x"),)
    assert [k for k, _ in r.inputs.kwargs] == ["return_dict"]

    # Updating: new --init keeps the checkpoint; --input replaces the fixture.
    again = build_recipe(t, inits=["width=16"], existing=r)
    assert again.init.checkpoint == "runs/best.pt" and again.init.strict is False
    assert again.inputs.fixture == "batch.npz"
    literal = build_recipe(t, inputs=["x=float32[2,4]"], existing=r)
    assert literal.inputs.fixture is None and literal.inputs.kwargs[0][0] == "x"


@pytest.mark.parametrize(("kw", "problem"), [
    ({"fixture": "batch.npz", "inputs": ["float32[2]"]}, "a positional --input cannot join it"),
    ({"fixture_key": ["a=x"]}, "give --fixture too"),
    ({"strict": False}, "give --checkpoint too"),
    ({"fixture": "batch.npz", "fixture_key": ["a"]}, "expected KEY=PARAM"),
])
def test_shorthand_mistakes(ws, kw, problem):
    with pytest.raises(ShorthandError, match=problem):
        build_recipe(parse_target("model.py:Net"), **kw)


def test_the_options_parse():
    args = build_parser().parse_args(["open", "m.py:Net", "--checkpoint", "runs/best.pt", "--no-strict",
                                      "--fixture", "batch.pt", "--fixture-key", "ids=input_ids"])
    assert (args.checkpoint, args.strict, args.fixture, args.fixture_key) == (
        "runs/best.pt", False, "batch.pt", ["ids=input_ids"])
    assert build_parser().parse_args(["capture", "m.py:Net"]).strict is None


def test_the_size_limit_is_configurable():
    from capture.session import limits_for
    from capture.worker.limits import Limits
    from tensorviz_lsp.settings import Settings

    assert Settings.from_config({}).max_saved_file_mb == 4096.0
    assert Settings.from_config({"tensorviz": {"maxSavedFileMB": 512}}).max_saved_file_mb == 512.0
    warnings = []
    assert Settings.from_config({"tensorviz": {"maxSavedFileMB": -1}}, warn=warnings.append).max_saved_file_mb == 4096.0
    assert "maxSavedFileMB" in warnings[0]
    # One conversion from MiB, for the editor's setting and the CLI's option alike.
    assert limits_for(max_saved_file_mb=512).max_saved_file_bytes == 512 << 20
    assert limits_for(max_saved_file_mb=None) == Limits()
    assert limits_for(max_saved_file_mb=0.5).max_saved_file_bytes == 1 << 19
    args = build_parser().parse_args(["capture", "m.py:Net", "--max-saved-file-mb", "100"])
    assert args.max_saved_file_mb == 100.0
    assert build_parser().parse_args(["open", "--profile", "p", "--max-saved-file-mb", "1"]).max_saved_file_mb == 1.0


@pytest.mark.parametrize("bad", ["0", "-3", "lots", "nan"])
def test_a_bad_size_limit_is_a_usage_error(bad, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["capture", "m.py:Net", "--max-saved-file-mb", bad])
    assert exit_.value.code == 2 and "--max-saved-file-mb" in capsys.readouterr().err


def test_inspect_names_the_checkpoint_keys_and_the_fixture():
    from synthetic import synthetic_capture
    from tensorviz_lsp.cli.commands.inspect import summary

    cap = synthetic_capture(20)
    cap.meta = {"state": "checkpoint", "state_note": "trained weights from runs/best.pt (3 tensors, …)",
                "checkpoint": "runs/best.pt", "checkpoint_strict": False, "checkpoint_missing": ["fc2.bias"],
                "checkpoint_unexpected": ["head.weight"], "fixture": "data/batch.pt"}
    text = summary(cap)
    assert "state:      checkpoint (trained weights from runs/best.pt" in text
    assert "missing:    fc2.bias (strict = false)" in text
    assert "unexpected: head.weight (strict = false)" in text
    assert "fixture:    data/batch.pt" in text
