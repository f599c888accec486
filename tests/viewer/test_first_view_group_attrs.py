"""Opening a capture read from a file builds the attrs maps of a handful of its groups
(capture/graph/group_table.py): structure and loop folding read the keys they need
(class, frame, path, function) from the columns, and the answers equal those made from
the same groups with every map built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capture.graph import graphfile, group_table
from capture.graph.model import Group
from viewer.projection.projection import Projection

CAPTURES = Path(__file__).parent / "real_models" / "captures"


def _built(groups: list[Group]) -> int:
    n = 0
    for g in groups:
        try:
            group_table._ATTRS.__get__(g, type(g))
            n += 1
        except AttributeError:
            pass
    return n


def _answers(proj: Projection) -> str:
    s = proj.structure()
    pages = [proj.children(*key) for key in proj.first_pages()]
    return json.dumps([s.signature, s.routing, pages], sort_keys=True, default=repr)


@pytest.mark.parametrize("name", ["gpt2_torch", "resnet18_linen"])
def test_first_view_builds_a_handful_of_group_attrs_and_answers_alike(name):
    path = CAPTURES / f"{name}.tvg"
    lazy, eager = graphfile.read(path), graphfile.read(path)
    assert all(isinstance(g.attrs, dict) for g in eager.groups)  # every map built
    lazy_proj = Projection(lazy)
    lazy_proj.prepare()
    got = _answers(lazy_proj)
    # the groups the first pages show, not all of them at once (ONE_BY_ONE)
    assert len(lazy.groups) > 50 and _built(lazy.groups) <= 32, _built(lazy.groups)
    assert lazy.groups[1]._table._maps is None
    eager_proj = Projection(eager)
    eager_proj.prepare()
    assert got == _answers(eager_proj)
