"""Saving a profile keeps the user's comments and order, and is atomic."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capture.recipe import Recipe, RecipeError
from tensorviz_lsp import recipes_store
from tensorviz_lsp.recipes_store import RecipeStoreError, delete_profile, list_profiles, load_profile, save_profile

USER_FILE = """\
# Team recipes: keep this header
version = 1

# The small one.
[profiles.small]
model = "model:net"   # the function
seed = 4  # lucky number
inputs = { args = [{ kind = "tensor", shape = [2, 3], dtype = "float32" }] }

[profiles.other] # keep me too
framework = "jax"
model = "model:other"
"""


@pytest.fixture
def ws(tmp_path):
    (tmp_path / ".tensorviz").mkdir()
    (tmp_path / ".tensorviz" / "recipes.toml").write_text(USER_FILE)
    return tmp_path


def text(ws) -> str:
    return (ws / ".tensorviz" / "recipes.toml").read_text()


def test_update_keeps_comments_order_and_untouched_keys(ws):
    r = load_profile(ws, "small")
    changed = Recipe.from_dict({**r.to_dict(), "seed": 5})
    save_profile(ws, changed)
    after = text(ws)
    assert after == USER_FILE.replace("seed = 4  # lucky number", "seed = 5  # lucky number")
    assert load_profile(ws, "small") == changed


def test_new_profile_is_appended_and_reads_back(ws):
    new = Recipe.from_dict({"name": "jax_example", "framework": "jax", "model": "model:net",
                            "inputs": {"args": [{"kind": "tensor", "shape": [2, 3], "dtype": "float32",
                                                 "generator": {"kind": "full", "value": 1}}]}})
    save_profile(ws, new)
    after = text(ws)
    assert after.startswith(USER_FILE)
    assert "[profiles.jax_example]" in after
    assert load_profile(ws, "jax_example") == new
    assert list_profiles(ws) == ["small", "other", "jax_example"]


def test_first_save_creates_the_file_with_a_version(tmp_path):
    r = Recipe.from_dict({"name": "p", "model": "m:f"})
    path = save_profile(tmp_path, r)
    assert path == tmp_path / ".tensorviz" / "recipes.toml"
    assert path.read_text().startswith("version = 1\n")
    assert load_profile(tmp_path, "p") == r


def test_unknown_dimensions_are_saved_as_question_marks(tmp_path):
    r = Recipe.from_dict({"name": "p", "model": "m:f",
                          "inputs": {"args": [{"kind": "tensor", "shape": [None, "batch"], "dtype": "int64"}]}})
    save_profile(tmp_path, r)
    again = load_profile(tmp_path, "p")
    assert again.inputs.args[0].shape == ("?", "batch")
    assert [(n.axis, n.name) for n in again.unknown_dims()] == [(0, None), (1, "batch")]


def test_failed_replace_leaves_the_old_file_intact(ws, monkeypatch):
    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(recipes_store.os, "replace", broken_replace)
    with pytest.raises(RecipeStoreError, match="No space left on device"):
        save_profile(ws, Recipe.from_dict({"name": "small", "model": "model:net", "seed": 9}))
    assert text(ws) == USER_FILE
    # No temp file left behind (the lock file beside it stays: issue 29 item 4).
    assert sorted(os.listdir(ws / ".tensorviz")) == ["recipes.toml", "recipes.toml.lock"]


def test_failed_write_midway_leaves_the_old_file_intact(ws, monkeypatch):
    real_fsync = os.fsync

    def failing_fsync(fd):
        real_fsync(fd)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(recipes_store.os, "fsync", failing_fsync)
    with pytest.raises(RecipeStoreError):
        save_profile(ws, Recipe.from_dict({"name": "new", "model": "m:f"}))
    assert text(ws) == USER_FILE
    assert sorted(os.listdir(ws / ".tensorviz")) == ["recipes.toml", "recipes.toml.lock"]


def test_an_unparseable_file_is_left_alone(ws):
    broken = USER_FILE + "\n[profiles.bad\n"
    (ws / ".tensorviz" / "recipes.toml").write_text(broken)
    with pytest.raises(RecipeStoreError, match="left alone"):
        save_profile(ws, Recipe.from_dict({"name": "new", "model": "m:f"}))
    assert text(ws) == broken


def test_delete_profile(ws):
    assert delete_profile(ws, "other") is True
    assert delete_profile(ws, "other") is False
    assert list_profiles(ws) == ["small"]
    assert "# The small one." in text(ws)


def test_file_mode_is_kept(ws):
    path = ws / ".tensorviz" / "recipes.toml"
    path.chmod(0o640)
    save_profile(ws, Recipe.from_dict({"name": "new", "model": "m:f"}))
    assert path.stat().st_mode & 0o777 == 0o640


@pytest.fixture
def umask_027():
    set_umask = os.umask  # held here: a test may replace os.umask before this is torn down
    previous = set_umask(0o027)
    yield
    set_umask(previous)


@pytest.mark.parametrize("existing", [pytest.param(False, id="new-file"), pytest.param(True, id="existing-file")])
def test_a_write_never_touches_the_process_umask(tmp_path, monkeypatch, umask_027, existing):
    # The umask is process-wide; the server is threaded. Setting it even for a moment
    # would give another thread's files the temporary value.
    if existing:
        save_profile(tmp_path, Recipe.from_dict({"name": "p", "model": "m:f"}))

    def forbidden(mask):
        raise AssertionError("os.umask called while saving a recipe")

    monkeypatch.setattr(recipes_store.os, "umask", forbidden)
    save_profile(tmp_path, Recipe.from_dict({"name": "q", "model": "m:f"}))
    monkeypatch.undo()
    assert list_profiles(tmp_path) == (["p", "q"] if existing else ["q"])


def test_a_new_file_is_created_with_0644_less_the_umask(tmp_path, umask_027):
    path = save_profile(tmp_path, Recipe.from_dict({"name": "p", "model": "m:f"}))
    assert path.stat().st_mode & 0o777 == 0o640
    assert sorted(os.listdir(path.parent)) == ["recipes.toml", "recipes.toml.lock"]


descs = st.recursive(
    st.one_of(
        st.integers(-5, 5), st.booleans(), st.text("abc", max_size=3), st.just({"kind": "none"}),
        st.builds(lambda shape, dtype: {"kind": "tensor", "shape": shape, "dtype": dtype},
                  st.lists(st.one_of(st.integers(0, 4), st.none(), st.just("batch")), max_size=3),
                  st.sampled_from(["float32", "int64", "bool"])),
    ),
    # Objects built by a call, nested (issue 24): they must survive the file too.
    lambda inner: st.builds(
        lambda target, args, kwargs: {"kind": "call", "target": target, "args": args, "kwargs": kwargs},
        st.sampled_from(["model:GPTConfig", "transformers:AutoConfig.from_pretrained", "cfg/06_c.py:C"]),
        st.lists(inner, max_size=2), st.dictionaries(st.sampled_from(["n_layer", "bias"]), inner, max_size=2),
    ),
    max_leaves=6,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.lists(descs, max_size=3), kwargs=st.dictionaries(st.sampled_from(["x", "y", "mask"]), descs, max_size=2),
       seed=st.integers(0, 100), framework=st.sampled_from(["torch", "jax"]))
def test_any_valid_profile_round_trips_through_the_file(tmp_path_factory, args, kwargs, seed, framework):
    ws = tmp_path_factory.mktemp("rt")
    (ws / ".tensorviz").mkdir()
    (ws / ".tensorviz" / "recipes.toml").write_text(USER_FILE)
    try:
        r = Recipe.from_dict({"name": "rt", "model": "m:f", "framework": framework, "seed": seed,
                              "inputs": {"args": args, "kwargs": kwargs}})
    except RecipeError:
        return
    save_profile(ws, r)
    again = load_profile(ws, "rt")
    assert again.to_dict() == recipes_store._toml_ready(r.to_dict())
    assert text(ws).startswith(USER_FILE)
