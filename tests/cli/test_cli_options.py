"""``capture``, ``open`` and ``demo`` take their setup and worker options from one
definition, and ``--framework`` offers the frameworks the recipe accepts now (a test
plug-in named by ``TENSORVIZ_TEST_PLUGINS`` included)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fake_framework
from capture.graph import graphfile
from capture.frameworks import TEST_PLUGINS_ENV
from tensorviz_lsp.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices[name]


def _options(p: argparse.ArgumentParser) -> dict[str, tuple]:
    return {
        a.dest: (tuple(a.option_strings), a.choices and tuple(a.choices), a.type, a.default, a.help)
        for a in p._actions
        if not isinstance(a, argparse._HelpAction)
    }


def test_capture_and_open_share_their_options(monkeypatch):
    monkeypatch.delenv(TEST_PLUGINS_ENV, raising=False)
    parser = build_parser()
    capture, open_, demo = (_options(_subparser(parser, n)) for n in ("capture", "open", "demo"))
    setup = ("target", "workspace", "profile", "input", "init", "framework", "device", "seed")
    worker = ("python", "env", "verbose")
    for dest in setup + worker:
        assert open_[dest] == capture[dest], dest
    for dest in worker + ("capture_timeout",):
        assert demo[dest] == open_[dest], dest
    # ``open`` and ``demo`` serve too, so their ``--timeout`` is the viewer's.
    assert capture["timeout"][0] == ("--timeout",) and open_["capture_timeout"][0] == ("--capture-timeout",)
    assert capture["timeout"][2:] == open_["capture_timeout"][2:]
    assert capture["framework"][1] == ("torch", "jax")


@pytest.mark.parametrize("command", ["capture", "open"])
def test_framework_choices_follow_the_test_plugins(monkeypatch, capsys, command):
    monkeypatch.delenv(TEST_PLUGINS_ENV, raising=False)
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([command, "m.py:net", "--framework", "fake"])
    assert exit_.value.code == 2 and "invalid choice: 'fake'" in capsys.readouterr().err
    monkeypatch.setenv(TEST_PLUGINS_ENV, fake_framework.PLUGIN)
    assert build_parser().parse_args([command, "m.py:net", "--framework", "fake"]).framework == "fake"


@pytest.mark.slow
def test_a_test_plugin_captures_through_the_shorthand(tmp_path):
    (tmp_path / "model.py").write_text("def net(x):\n    return (x * 2.0).relu()\n")
    env = {**os.environ, TEST_PLUGINS_ENV: fake_framework.PLUGIN, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "tensorviz_lsp", "capture", "model.py:net", "--framework", "fake",
         "--input", "x=float32[2,3]", "-o", "out.tvg"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stderr
    capture = graphfile.read(tmp_path / "out.tvg")
    assert capture.failure is None and capture.framework == "fake"
    assert [n.op for n in capture.nodes] == ["mul", "relu"]
