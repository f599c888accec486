"""The one atomic write (``capture.graph.atomic.atomic_write``: graph files, JSON state, the
demo's files) and the one ``module_file`` (``capture.recipe``), which the runner and the
language server share."""

from __future__ import annotations

import os
import stat

import pytest

from capture.graph import atomic, graphfile
from capture.recipe import module_file
from synthetic import synthetic_capture
from tensorviz_lsp import backends, jsonstore
from tensorviz_lsp.features import open_graph


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_the_mode_asked_for_less_the_umask(tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)  # read it back (single-threaded test process)
    atomic.atomic_write(tmp_path / "a", b"x")
    atomic.atomic_write(tmp_path / "b", b"y", new_mode=0o600)
    assert (tmp_path / "a").read_bytes() == b"x" and _mode(tmp_path / "a") == 0o644 & ~umask
    assert _mode(tmp_path / "b") == 0o600 & ~umask


def test_an_existing_file_keeps_its_mode_and_no_temporary_stays(tmp_path):
    target = tmp_path / "recipes.toml"
    target.write_text("old")
    target.chmod(0o640)
    atomic.atomic_write(target, b"new")
    assert target.read_text() == "new" and _mode(target) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recipes.toml"]


def test_a_failed_write_leaves_the_target_as_it_was(tmp_path, monkeypatch):
    target = tmp_path / "g.tvg"
    target.write_bytes(b"before")

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        atomic.atomic_write(target, b"after")
    assert target.read_bytes() == b"before"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.tvg"]
    # The graph file writer says which file, in its own error.
    with pytest.raises(graphfile.GraphFileError, match="No space left"):
        graphfile.write(synthetic_capture(4), target)


def test_json_state_is_written_through_it_privately(tmp_path):
    path = tmp_path / "state" / "trust.json"
    jsonstore.write_json(path, {"b": 1, "a": [2]})
    assert path.read_text() == '{\n  "a": [\n    2\n  ],\n  "b": 1\n}\n'
    assert _mode(path) & 0o077 == 0
    assert jsonstore.read_json(path) == {"a": [2], "b": 1}


def test_module_file_is_one_function(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text("")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("")
    assert module_file(tmp_path, "pkg.mod") == tmp_path / "pkg" / "mod.py"
    assert module_file(tmp_path, "pkg.sub") == tmp_path / "pkg" / "sub" / "__init__.py"
    assert module_file(tmp_path, "pkg") == tmp_path / "pkg" / "__init__.py"
    assert module_file(tmp_path, "pkg.missing") is None
    assert backends.module_file is module_file and open_graph.module_file is module_file
