"""One profile-name rule (capture.recipe): the recipe's check, the shorthand's default
name, the language server's suggested name and the setup form (via the schema) all use
``PROFILE_NAME`` and ``profile_name()`` (issue 16 item 9)."""

from __future__ import annotations

import pytest

from capture.recipe import PROFILE_NAME, PROFILE_NAME_MAX, PROFILE_NAME_RULE, RecipeError, parse_profile, profile_name
from capture.session.graph_files import GraphFileNameError, graph_file
from tensorviz_lsp.features import viewer_setup
from tensorviz_lsp.setup.shorthand import default_profile_name, parse_target


@pytest.mark.parametrize(("text", "made"), [
    ("jax_example", "jax_example"),
    ("pkg.model:Net", "pkg_model_Net"),
    ("Outer.Inner", "Outer_Inner"),
    ("scripts/06_scan", "scripts_06_scan"),
    ("", "profile"),
    ("naïve", "na_ve"),
    ("x" * 200, "x" * PROFILE_NAME_MAX),
])
def test_profile_name_makes_a_valid_name(text, made):
    assert profile_name(text) == made
    assert PROFILE_NAME.match(made)
    assert parse_profile(made, {"model": "m:f"}).name == made


def test_taken_names_get_a_number_within_the_length():
    assert profile_name("Net", {"Net"}) == "Net_2"
    assert profile_name("Net", {"Net", "Net_2"}) == "Net_3"
    long = "x" * PROFILE_NAME_MAX
    again = profile_name(long, {long})
    assert again == "x" * (PROFILE_NAME_MAX - 2) + "_2" and PROFILE_NAME.match(again)


def test_every_maker_uses_it(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "model.py").write_text("")
    monkeypatch.chdir(tmp_path)
    # The shorthand names a new profile like the symbol, as the lens does (issue 30).
    assert default_profile_name(parse_target("pkg/model.py:Net.Block")) == "Net_Block"
    # The language server names profiles with the one function (a qualname with dots, taken names).
    assert viewer_setup.profile_name is profile_name
    assert profile_name("Outer.Inner", {"Outer_Inner": {}}) == "Outer_Inner_2"
    assert profile_name("x" * 150, {}) == "x" * PROFILE_NAME_MAX
    # A graph file is named by a valid profile name only (capture/session/graph_files.py).
    assert graph_file(tmp_path, "a_b_c").name == "a_b_c.tvg"
    with pytest.raises(GraphFileNameError):
        graph_file(tmp_path, "a.b/c")


def test_the_recipe_says_the_rule():
    with pytest.raises(RecipeError, match=f"must be {PROFILE_NAME_RULE}"):
        parse_profile("has.dot", {"model": "m:f"})
