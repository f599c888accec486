"""The path form of a model or factory ref (``"dir/06_file.py:Qualname"``, docs/setups.md
"Saved setup"): parsing and validation, the file it names, and which form a writer
(lens, setup form, shorthand) saves for a file."""

from __future__ import annotations

import os

import pytest

from capture.recipe import (
    Recipe,
    RecipeError,
    is_path_ref,
    model_ref_for,
    module_file,
    parse_profile,
    path_ref_file,
    path_ref_stem,
    parse_recipes_text,
    profile_from_document,
)


def table(model: str, **extra) -> dict:
    return {"framework": "jax", "model": model, **extra}


@pytest.mark.parametrize(
    "ref",
    ["scripts/06_scan_over_layers.py:ScanMLP", "train-model.py:Net", "a/b/c.py:Outer.Inner", "06.py:f", "m.py:M"],
)
def test_path_forms_parse_and_round_trip(ref):
    r = parse_profile("p", table(ref, init={"factory": "scripts/make-model.py:build"},
                                 inputs={"factory": "scripts/06_scan_over_layers.py:inputs"}))
    assert r.model == ref and is_path_ref(r.model)
    assert r.factory_refs() == ["scripts/make-model.py:build", "scripts/06_scan_over_layers.py:inputs"]
    assert Recipe.from_dict(r.to_dict()) == r


def test_the_dotted_form_is_unchanged():
    r = parse_profile("p", table("pkg.mod:Net"))
    assert r.model == "pkg.mod:Net" and not is_path_ref(r.model)


@pytest.mark.parametrize(
    "ref, problem",
    [
        ("../outside.py:Net", "leaves the workspace ('..')"),
        ("scripts/../../x.py:Net", "leaves the workspace"),
        ("/abs/model.py:Net", "is absolute"),
        ("C:/model.py:Net", "is absolute"),
        ("scripts\\model.py:Net", "with '/' between folders"),
        ("scripts/model.txt:Net", "is not a .py file"),
        ("train-model.ipynb:Net", "is not a .py file"),
        ("model.py", "names no object: add ':' and the qualname"),
        ("scripts/model.py:", "names no object"),
        ("model.py:1Net", "'1Net' is not a Python qualname"),
        ("model.py:Net.", "is not a Python qualname"),
        ("my.model.py:Net", "a module name cannot hold '.'"),
        ("./model.py:Net", "without empty or '.' segments"),
        ("scripts//model.py:Net", "without empty or '.' segments"),
        (".py:Net", "no file name before .py"),
    ],
)
def test_bad_path_forms_are_named(ref, problem):
    text = f'version = 1\n\n[profiles.p]\nframework = "jax"\nmodel = {ref!r}\n'.replace("\\", "\\\\")
    doc = parse_recipes_text(text, file="recipes.toml")
    with pytest.raises(RecipeError) as info:
        profile_from_document(doc, "p", text=text, file="recipes.toml")
    err = info.value
    assert problem in err.problem
    assert err.key_path == "profiles.p.model" and err.line == 5


def test_a_bad_factory_path_names_its_key():
    with pytest.raises(RecipeError) as info:
        parse_profile("p", table("m.py:f", inputs={"factory": "../make.py:inputs"}))
    assert info.value.key_path == "profiles.p.inputs.factory" and "leaves the workspace" in info.value.problem


def test_the_file_a_path_form_names(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "06_scan_over_layers.py").write_text("")
    (tmp_path / "train-model.py").write_text("")
    assert module_file(tmp_path, "scripts/06_scan_over_layers.py") == tmp_path / "scripts" / "06_scan_over_layers.py"
    assert module_file(tmp_path, "train-model.py") == tmp_path / "train-model.py"
    assert module_file(tmp_path, "scripts/missing.py") is None
    assert path_ref_file(tmp_path, "scripts/missing.py")[1].startswith("no file 'scripts/missing.py' in the workspace")
    assert path_ref_file(tmp_path, "scripts")[1] is not None
    assert path_ref_stem("scripts/06_scan_over_layers.py:ScanMLP") == "06_scan_over_layers"
    assert path_ref_stem("train-model.py:Net") == "train-model"


def test_a_symlink_out_of_the_workspace_is_refused(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "evil.py").write_text("")
    os.symlink(outside / "evil.py", ws / "model.py")
    os.symlink(outside, ws / "linked")
    assert module_file(ws, "model.py") is None
    assert "outside the workspace" in path_ref_file(ws, "model.py")[1]
    assert "outside the workspace" in path_ref_file(ws, "linked/evil.py")[1]
    # A link that stays inside the workspace is fine.
    (ws / "real.py").write_text("")
    os.symlink(ws / "real.py", ws / "alias.py")
    assert module_file(ws, "alias.py") == ws / "alias.py"


def test_writers_keep_the_dotted_form_where_it_works(tmp_path):
    for name in ("model.py", "pkg/__init__.py", "pkg/layers.py", "scripts/06_scan_over_layers.py",
                 "scripts/model.py", "train-model.py", "pkg/sub-dir/m.py", "pkg/nopkg/m.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    want = {
        "model.py": "model:Net",
        "pkg/__init__.py": "pkg:Net",
        "pkg/layers.py": "pkg.layers:Net",
        # not importable by a dotted name: the path form
        "scripts/06_scan_over_layers.py": "scripts/06_scan_over_layers.py:Net",
        "train-model.py": "train-model.py:Net",
        "pkg/sub-dir/m.py": "pkg/sub-dir/m.py:Net",
        # a script folder (no __init__.py): loaded as the script runs, by path
        "scripts/model.py": "scripts/model.py:Net",
        "pkg/nopkg/m.py": "pkg/nopkg/m.py:Net",
    }
    for name, ref in want.items():
        assert model_ref_for(tmp_path, tmp_path / name, "Net") == ref, name
    assert model_ref_for(tmp_path, tmp_path.parent / "elsewhere.py", "Net") is None
    (tmp_path / "notes.txt").write_text("")
    assert model_ref_for(tmp_path, tmp_path / "notes.txt", "Net") is None
