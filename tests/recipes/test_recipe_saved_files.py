"""Recipe keys for Torch saved files: ``init.checkpoint``/``init.strict`` and
``inputs.fixture``/``inputs.fixture_keys``: what is accepted, round trips, and the
precise message (profile, key path, TOML line) for what is not, JAX's refusal among them."""

from __future__ import annotations

import pytest

from capture.recipe import Recipe, RecipeError, parse_profile, parse_recipes_text, profile_from_document
from tensorviz_lsp.recipes_store import save_profile


def load(text: str, name: str = "p") -> Recipe:
    return profile_from_document(parse_recipes_text(text, file="recipes.toml"), name, text=text, file="recipes.toml")


def err(table: dict, name: str = "p") -> RecipeError:
    with pytest.raises(RecipeError) as exc:
        parse_profile(name, {"model": "models:Net", **table})
    return exc.value


TOML = '''version = 1

[profiles.trained]
model = "models:Net"
init = { args = [10], checkpoint = "runs/best.pt", strict = false }

[profiles.trained.inputs]
fixture = "data/batch.npz"
fixture_keys = { features = "x", arr_1 = "args[1]" }
kwargs = { return_dict = false }
'''


def test_checkpoint_and_fixture_keys_are_read():
    r = load(TOML, "trained")
    assert (r.init.checkpoint, r.init.strict, r.init.factory) == ("runs/best.pt", False, None)
    assert len(r.init.args) == 1
    assert r.inputs.fixture == "data/batch.npz"
    assert r.inputs.fixture_keys == (("features", "x"), ("arr_1", "args[1]"))
    assert [k for k, _ in r.inputs.kwargs] == ["return_dict"]
    assert r.saved_files() == [("profiles.trained.init.checkpoint", "runs/best.pt"),
                               ("profiles.trained.inputs.fixture", "data/batch.npz")]
    d = r.to_dict()
    assert d["init"] == {"args": [10], "kwargs": {}, "checkpoint": "runs/best.pt", "strict": False}
    assert d["inputs"] == {"fixture": "data/batch.npz", "fixture_keys": {"features": "x", "arr_1": "args[1]"},
                           "kwargs": {"return_dict": False}}
    assert Recipe.from_dict(d) == r


def test_strict_is_the_default_and_a_factory_can_take_a_checkpoint():
    r = parse_profile("p", {"model": "models:Net", "init": {"factory": "models:build", "checkpoint": "best.safetensors"}})
    assert r.init.strict is True and r.init.factory == "models:build"
    assert r.to_dict()["init"] == {"factory": "models:build", "checkpoint": "best.safetensors", "strict": True}
    assert Recipe.from_dict(r.to_dict()) == r
    # Paths are kept normalised, as POSIX paths.
    assert parse_profile("p", {"model": "m:N", "init": {"checkpoint": "./runs//best.pt"}}).init.checkpoint == "runs/best.pt"
    # A recipe without saved files reads as before.
    plain = parse_profile("p", {"model": "m:N"})
    assert plain.init.checkpoint is None and plain.inputs.fixture is None and plain.saved_files() == []
    assert plain.to_dict()["init"] == {"args": [], "kwargs": {}}


@pytest.mark.parametrize(
    ("table", "key", "words"),
    [
        ({"init": {"checkpoint": "../outside/best.pt"}}, "profiles.p.init.checkpoint", "leaves the workspace through '..'"),
        ({"init": {"checkpoint": "runs/../../best.pt"}}, "profiles.p.init.checkpoint", "leaves the workspace"),
        ({"init": {"checkpoint": "/home/me/best.pt"}}, "profiles.p.init.checkpoint", "is not workspace-relative"),
        ({"init": {"checkpoint": "~/best.pt"}}, "profiles.p.init.checkpoint", "is not workspace-relative"),
        ({"init": {"checkpoint": "C:\\runs\\best.pt"}}, "profiles.p.init.checkpoint", "is not workspace-relative"),
        ({"init": {"checkpoint": ""}}, "profiles.p.init.checkpoint", "expected a workspace-relative path"),
        ({"init": {"checkpoint": 3}}, "profiles.p.init.checkpoint", "expected a workspace-relative path"),
        ({"init": {"checkpoint": "runs/best.ckpt"}}, "profiles.p.init.checkpoint",
         "a checkpoint is one of .pt, .pth, .bin, .safetensors"),
        ({"inputs": {"fixture": "batch.json"}}, "profiles.p.inputs.fixture",
         "a fixture is one of .pt, .pth, .safetensors, .npz"),
        ({"init": {"strict": False}}, "profiles.p.init.strict", "strict applies to a checkpoint"),
        ({"init": {"checkpoint": "a.pt", "strict": "no"}}, "profiles.p.init.strict", "expected true or false"),
        ({"inputs": {"fixture": "a.pt", "factory": "m:f"}}, "profiles.p.inputs.factory", "use either fixture or factory"),
        ({"inputs": {"fixture": "a.pt", "args": [1]}}, "profiles.p.inputs.args", "use either fixture or args"),
        ({"inputs": {"fixture_keys": {"a": "x"}}}, "profiles.p.inputs.fixture_keys", "add inputs.fixture"),
        ({"inputs": {"fixture": "a.pt", "fixture_keys": ["x"]}}, "profiles.p.inputs.fixture_keys",
         "expected a table of fixture key = parameter name"),
        ({"inputs": {"fixture": "a.pt", "fixture_keys": {"a": "not a name"}}}, "profiles.p.inputs.fixture_keys.a",
         'expected a parameter name of forward (or "args[N]" for a position)'),
        ({"inputs": {"fixture": "a.pt", "fixture_keys": {"a": "x", "b": "x"}}}, "profiles.p.inputs.fixture_keys.b",
         "'x' is already given by fixture key 'a'"),
        ({"inputs": {"checkpoint": "a.pt"}}, "profiles.p.inputs.checkpoint",
         "unknown key (expected args, kwargs, factory, fixture or fixture_keys)"),
        ({"init": {"fixture": "a.pt"}}, "profiles.p.init.fixture",
         "unknown key (expected args, kwargs, factory, checkpoint, strict, before or then)"),
    ],
)
def test_bad_saved_file_keys_are_named(table, key, words):
    e = err(table)
    assert e.key_path == key and e.profile == "p"
    assert words in e.problem


def test_errors_carry_the_toml_line():
    text = 'version = 1\n\n[profiles.p]\nmodel = "m:N"\n\n[profiles.p.init]\nargs = []\ncheckpoint = "../best.pt"\n'
    with pytest.raises(RecipeError) as exc:
        load(text)
    assert exc.value.line == 8
    assert str(exc.value).startswith("recipes.toml:8: profiles.p.init.checkpoint: ")


@pytest.mark.parametrize(("section", "key", "value", "factory"), [
    ("init", "checkpoint", "runs/best.pt", "init.factory returning the module bound with model.bind(variables)"),
    ("inputs", "fixture", "batch.npz", "inputs.factory returning the inputs"),
])
def test_jax_refuses_checkpoints_and_fixtures_pointing_to_workspace_factories(section, key, value, factory):
    e = err({"framework": "jax", section: {key: value}})
    assert e.key_path == f"profiles.p.{section}.{key}"
    assert f"no Torch {key} loader is used for JAX: use an explicit workspace factory instead" in e.problem
    assert factory in e.problem


def test_saving_a_profile_with_saved_files_round_trips(tmp_path):
    r = load(TOML, "trained")
    path = save_profile(tmp_path, r)
    again = load(path.read_text(), "trained")
    assert again == r
    text = path.read_text()
    assert 'checkpoint = "runs/best.pt"' in text and 'fixture = "data/batch.npz"' in text


def test_a_jax_capture_naming_a_checkpoint_fails_before_anything_runs(tmp_path):
    """Through the runner: a failure at the recipe stage, pointing to workspace factories,
    and the model module is never imported."""
    from capture.session.runner import run_capture

    (tmp_path / "model.py").write_text("from pathlib import Path\nPath(__file__).with_name('imported').write_text('x')\n")
    (tmp_path / ".tensorviz").mkdir()
    (tmp_path / ".tensorviz" / "recipes.toml").write_text(
        'version = 1\n\n[profiles.p]\nframework = "jax"\nmodel = "model:net"\n'
        'init = { args = [], kwargs = {}, checkpoint = "runs/best.pt" }\n'
    )
    c = run_capture(tmp_path, "p", timeout=60)
    assert c.failed and not c.nodes
    assert (c.failure.stage, c.failure.details["key_path"]) == ("recipe", "profiles.p.init.checkpoint")
    assert "use an explicit workspace factory instead" in c.failure.message
    assert c.failure.details["line"] == 6
    assert not (tmp_path / "imported").exists()
