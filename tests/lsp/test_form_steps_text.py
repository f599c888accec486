"""The setup form's ``steps_text`` (issue 52 item 15): a string sent instead of a list of
lines deleted every saved step and the save answered ``ok: true``; now it is refused
with a clear error at the form's ``steps`` path, and nothing is saved."""

from __future__ import annotations

import pytest

from tensorviz_lsp.features.form_values import read_form_recipe

RECIPE = {"model": "model:Cached", "init": {"args": [], "kwargs": {},
                                            "then": [{"call": "setup_caches", "kwargs": {"max_batch_size": 1}}]}}


@pytest.mark.parametrize("steps, got", [
    ("model.setup_caches(max_batch_size=2)", "a str"),
    ({"0": "model.x()"}, "a dict"),
    (["model.x()", 3], "a list holding a int"),
    (7, "a int"),
])
def test_steps_text_that_is_not_a_list_of_lines_is_refused(tmp_path, steps, got):
    data, errors = read_form_recipe(tmp_path, "Cached", {**RECIPE, "steps_text": steps}, None)
    assert errors == [{"path": "steps", "message": "steps_text must be a list of lines (strings), one STEP a line; "
                                                   f"got {got}. Nothing was saved"}]
    assert data["init"]["then"] == RECIPE["init"]["then"], "the saved steps are kept"


def test_a_list_of_lines_replaces_the_steps(tmp_path):
    data, errors = read_form_recipe(tmp_path, "Cached", {**RECIPE, "steps_text": ["model.setup_caches(max_batch_size=2)"]},
                                    None)
    assert errors == []
    assert data["init"]["then"] == [{"call": "setup_caches", "kwargs": {"max_batch_size": 2}}]
    data, errors = read_form_recipe(tmp_path, "Cached", {**RECIPE, "steps_text": []}, None)
    assert errors == [] and not data["init"].get("then")
