"""The recipe's ``mesh`` (issue 34): ``mesh = { data = 4, model = 2 }``, a JAX axis type
written ``{ size = 2, type = "explicit" }``; refused with the key path and its TOML line
when malformed; the shorthand's ``--mesh data=4,model=2``."""

from __future__ import annotations

import pytest

from capture.recipe import MeshSetup, Recipe, RecipeError, parse_profile
from capture.recipe.parse import parse_recipes_text
from tensorviz_lsp.setup.shorthand import ShorthandError, build_recipe, mesh_table, parse_target

TEXT = '''version = 1

[profiles.p]
framework = "{framework}"
model = "m:f"
{mesh}
'''


def parse(mesh: str, framework: str = "jax") -> Recipe:
    text = TEXT.format(framework=framework, mesh=mesh)
    return parse_profile("p", parse_recipes_text(text)["profiles"]["p"], text=text, file="recipes.toml")


def test_axes_in_order_with_sizes_and_types():
    r = parse('mesh = { data = 4, model = { size = 2, type = "explicit" } }')
    # an axis given by its size has jax.make_mesh's default type (Explicit), resolved in the worker
    assert r.mesh == MeshSetup((("data", 4, "default"), ("model", 2, "explicit")))
    assert (r.mesh.devices, r.mesh.names, r.mesh.sizes) == (8, ("data", "model"), (4, 2))
    assert r.mesh.text() == "data=4,model=2:explicit"
    assert r.to_table()["mesh"] == {"data": 4, "model": {"size": 2, "type": "explicit"}}
    assert Recipe.from_dict(r.to_dict()) == r
    assert parse("").mesh is None and "mesh" not in parse("").to_table()


def test_an_automatic_axis_is_written_as_such():
    r = parse('mesh = { batch = { size = 8, type = "auto" }, model = { size = 2 } }')
    assert r.mesh == MeshSetup((("batch", 8, "auto"), ("model", 2, "default")))
    assert r.mesh.text() == "batch=8:auto,model=2"
    assert r.to_table()["mesh"] == {"batch": {"size": 8, "type": "auto"}, "model": 2}
    assert Recipe.from_dict(r.to_dict()) == r
    assert mesh_table("batch=8:auto") == {"batch": {"size": 8, "type": "auto"}}


@pytest.mark.parametrize("mesh, where, problem", [
    pytest.param("mesh = 4", "profiles.p.mesh", "expected a table of mesh axes", id="not-a-table"),
    pytest.param("mesh = {}", "profiles.p.mesh", "at least one axis", id="empty"),
    pytest.param("mesh = { data = 0 }", "profiles.p.mesh.data", "from 1 to 1024, found 0", id="zero"),
    pytest.param("mesh = { data = 2.0 }", "profiles.p.mesh.data", "found 2.0", id="float"),
    pytest.param("mesh = { data = true }", "profiles.p.mesh.data", "found true", id="bool"),
    pytest.param('mesh = { "1x" = 2 }', "profiles.p.mesh.1x", "Python identifier", id="bad-name"),
    pytest.param("mesh = { a = 64, b = 32 }", "profiles.p.mesh", "more than 1024 devices", id="too-many-devices"),
    pytest.param('mesh = { d = { type = "auto" } }', "profiles.p.mesh.d", "missing size", id="no-size"),
    pytest.param('mesh = { d = { size = 2, type = "manual" } }', "profiles.p.mesh.d.type", "'auto', 'explicit'",
                 id="manual-type"),
    pytest.param("mesh = { d = { size = 2, kind = 1 } }", "profiles.p.mesh.d.kind", "unknown key", id="unknown-key"),
    pytest.param("mesh = { a = 1, b = 1, c = 1, d = 1, e = 1, f = 1, g = 1, h = 1, i = 1 }", "profiles.p.mesh",
                 "at most 8", id="too-many-axes"),
])
def test_malformed_meshes_name_the_key_and_line(mesh, where, problem):
    with pytest.raises(RecipeError) as err:
        parse(mesh)
    assert err.value.key_path == where and problem in str(err.value)
    assert err.value.line == 6 and str(err.value).startswith("recipes.toml:6: ")


def test_axis_types_are_jax_only():
    assert parse("mesh = { tp = 4 }", "torch").mesh.devices == 4
    with pytest.raises(RecipeError, match="axis types are JAX's") as err:
        parse('mesh = { tp = { size = 4, type = "explicit" } }', "torch")
    assert err.value.key_path == "profiles.p.mesh.tp.type"


@pytest.mark.parametrize("text, table", [
    ("data=4,model=2", {"data": 4, "model": 2}),
    (" data = 4 , model=2:explicit ", {"data": 4, "model": {"size": 2, "type": "explicit"}}),
    ("none", None),
])
def test_shorthand_mesh(text, table):
    assert mesh_table(text) == table


@pytest.mark.parametrize("text, problem", [
    ("data", "expected AXIS=SIZE"), ("data=x", "expected AXIS=SIZE"), ("data=4,data=2", "named twice"),
    ("", "give the axes"), ("data=4:", "expected AXIS=SIZE"),
])
def test_shorthand_mesh_mistakes(text, problem):
    with pytest.raises(ShorthandError, match=problem):
        mesh_table(text)


def test_shorthand_saves_and_removes_the_mesh(tmp_path, monkeypatch):
    (tmp_path / "model.py").write_text("")
    monkeypatch.chdir(tmp_path)
    t = parse_target("model.py:f")
    r = build_recipe(t, inputs=["x=float32[8,16]"], framework="jax", mesh="data=4,model=2")
    assert r.mesh.text() == "data=4,model=2"
    kept = build_recipe(t, inputs=["x=float32[8,16]"], existing=r)
    assert kept.mesh == r.mesh
    assert build_recipe(t, existing=r, mesh="none").mesh is None
    with pytest.raises(RecipeError, match="from 1 to 1024"):
        build_recipe(t, inputs=["x=float32[8,16]"], framework="jax", mesh="data=0")


def test_the_forms_text_spelling_is_read_as_the_table():
    r = Recipe.from_dict({"name": "p", "framework": "jax", "model": "m:f", "mesh": "data=4, model=2:explicit"})
    assert r.mesh == MeshSetup((("data", 4, "default"), ("model", 2, "explicit")))
    assert r.to_table()["mesh"] == {"data": 4, "model": {"size": 2, "type": "explicit"}}
    assert Recipe.from_dict({"name": "p", "model": "m:f", "mesh": ""}).mesh is None
    with pytest.raises(RecipeError, match="named twice") as err:
        Recipe.from_dict({"name": "p", "model": "m:f", "mesh": "a=2,a=2"})
    assert err.value.key_path == "profiles.p.mesh"


def test_the_setup_form_offers_the_mesh():
    from tensorviz_lsp.features.setup_form import MESH_HELP, _mesh_text

    assert _mesh_text({"data": 4, "model": {"size": 2, "type": "explicit"}}) == "data=4,model=2:explicit"
    assert _mesh_text({"data": {"size": 4, "type": "auto"}}) == "data=4:auto"
    assert _mesh_text(None) == ""
    assert "simulated" in MESH_HELP
