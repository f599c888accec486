"""Where user-level state lives: the Linux paths are the XDG ones, overrides win."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tensorviz_lsp.cli.commands.demo import default_dir
from tensorviz_lsp.userdirs import cache_dir, config_dir, state_dir

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the XDG layout is Linux's convention")

_VARS = ("TENSORVIZ_CONFIG_DIR", "TENSORVIZ_STATE_DIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")


@pytest.fixture
def env(monkeypatch, tmp_path):
    for name in _VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


@linux_only
def test_linux_defaults_are_the_xdg_fallbacks(env, tmp_path):
    home = tmp_path / "home"
    assert config_dir() == home / ".config" / "tensorviz"
    assert state_dir() == home / ".local" / "state" / "tensorviz"
    assert cache_dir() == home / ".cache" / "tensorviz"
    assert default_dir() == home / ".cache" / "tensorviz" / "demo"


@linux_only
def test_linux_follows_absolute_xdg_variables(env, tmp_path):
    env.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    env.setenv("XDG_STATE_HOME", str(tmp_path / "st"))
    env.setenv("XDG_CACHE_HOME", str(tmp_path / "ca"))
    assert config_dir() == tmp_path / "cfg" / "tensorviz"
    assert state_dir() == tmp_path / "st" / "tensorviz"
    assert default_dir() == tmp_path / "ca" / "tensorviz" / "demo"


@linux_only
def test_linux_ignores_relative_xdg_variables(env, tmp_path):
    # The XDG spec: a relative value is invalid and must be ignored.
    env.setenv("XDG_CONFIG_HOME", "relative/cfg")
    env.setenv("XDG_STATE_HOME", "relative/st")
    env.setenv("XDG_CACHE_HOME", "relative/ca")
    home = tmp_path / "home"
    assert config_dir() == home / ".config" / "tensorviz"
    assert state_dir() == home / ".local" / "state" / "tensorviz"
    assert default_dir() == home / ".cache" / "tensorviz" / "demo"


@pytest.mark.parametrize(
    ("variables", "config", "state"),
    [
        pytest.param({"TENSORVIZ_CONFIG_DIR": "C"}, "C", "C/state", id="config-override-holds-state-too"),
        pytest.param({"TENSORVIZ_CONFIG_DIR": "C", "TENSORVIZ_STATE_DIR": "S"}, "C", "S/state", id="state-override-wins-for-state"),
    ],
)
def test_tensorviz_overrides_win_on_every_platform(env, tmp_path, variables, config, state):
    env.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for name, value in variables.items():
        env.setenv(name, str(tmp_path / value))
    assert config_dir() == tmp_path / config
    assert state_dir() == tmp_path / state


def test_paths_are_absolute(env):
    assert Path(config_dir()).is_absolute()
    assert Path(state_dir()).is_absolute()
    assert Path(cache_dir()).is_absolute()
