"""What each search result holds for the app's filter controls (``facets``): its op, the
innermost class holding it, its shapes and dtypes, spelled so that sending one back as a
filter keeps that result. And a node's ``where`` (module path and source line) apart
from its shapes, so that a row can show them in their own places."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from layered_models import decoder_capture  # noqa: E402

from viewer.projection.projection import Projection  # noqa: E402


@pytest.fixture(scope="module")
def llama() -> Projection:
    return Projection(decoder_capture(2))


def _one(p: Projection, q: str, kind: str, label: str) -> dict:
    (r,) = [x for x in p.search(q, limit=1000)["results"] if x["type"] == kind and x["label"] == label][:1]
    return r


def test_a_group_result_has_its_own_class_and_its_outputs(llama):
    r = _one(llama, "model.layers.1.mlp", "group", "model.layers.1.mlp")
    assert r["facets"] == {"op": None, "class": "MLP", "shape": ["f32[1,8,16]"], "dtype": ["f32"]}


def test_a_node_result_has_its_op_its_innermost_class_and_where_it_sits(llama):
    r = [x for x in llama.search("aten::silu", limit=1000)["results"] if x["type"] == "node"][0]
    fx = r["facets"]
    assert fx["op"] == "aten::silu" and fx["class"] == "MLP" and fx["dtype"] == ["f32"]
    assert fx["shape"] and all(s.startswith("f32[") for s in fx["shape"])
    assert r["where"].startswith("model.layers.0.mlp") and r["sublabel"].endswith(r["where"])
    assert not any(s in r["where"] for s in fx["shape"])


def test_a_value_result_has_its_producers_op_or_none(llama):
    param = _one(llama, "model.layers.0.mlp.up_proj.weight", "value", "model.layers.0.mlp.up_proj.weight")
    assert param["facets"]["op"] is None and param["facets"]["class"] is not None
    assert param["facets"]["shape"] == [param["sublabel"].split(" · ")[0]]


@pytest.mark.parametrize("facet", ["op", "class", "shape", "dtype"])
def test_a_facet_sent_back_as_a_filter_keeps_the_result(llama, facet):
    query = "aten::silu"
    for r in llama.search(query, limit=1000)["results"]:
        values = r["facets"][facet]
        for v in values if isinstance(values, list) else [values] if values else []:
            kwargs = {"cls" if facet == "class" else facet: v}
            kept = {x["key"] for x in llama.search(query, limit=1000, **kwargs)["results"]}
            assert r["key"] in kept, (facet, v, r["key"])
