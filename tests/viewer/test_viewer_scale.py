"""A 200,000-node capture: read from its file, indexed and served in small pages.

What is checked is what a page gets (sizes, counts, paths); how fast is the benchmark's
(``benchmarks/bench_viewer_projection.py``), never an assertion on a shared machine."""

from __future__ import annotations

import json
import urllib.request

import pytest

from capture.graph import graphfile
from synthetic import synthetic_capture
from viewer.projection.projection import MAX_ITEMS, Projection
from viewer.server.app import ViewerServer

pytestmark = pytest.mark.slow

N = 200_000
MAX_RESPONSE = 1 << 20  # no page comes near a megabyte


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "big.tvg"
    graphfile.write(synthetic_capture(N, opaque_every=997), path)
    return path


def test_index_and_children_of_a_200000_node_capture(big_file):
    capture = graphfile.read(big_file)
    p = Projection(capture)
    root = p.children(-1)
    assert [it["key"] for it in root["items"]] == ["g0"] and root["items"][0]["node_count"] == N
    layers = p.children(0)
    assert len(layers["items"]) == 48 and all(it["type"] == "group" for it in layers["items"])
    attention = p.children(layers["items"][0]["id"] + 1)
    assert attention["chunked"] and all(it["child_count"] <= MAX_ITEMS for it in attention["items"])


def test_a_200000_node_capture_is_served_in_small_pages(big_file):
    capture = graphfile.read(big_file)
    with ViewerServer([(capture, "big")]) as server:
        def get(path: str) -> tuple[dict, int]:
            with urllib.request.urlopen(server.url + path, timeout=60) as res:
                body = res.read()
            assert len(body) < MAX_RESPONSE, (path, len(body))
            return json.loads(body), len(body)

        summary, _ = get("api/capture")
        assert summary["counts"]["nodes"] == N and summary["coverage"]["status"] == "partial"
        root, _ = get("api/children?group=-1")
        layers, _ = get("api/children?group=0")
        sub = layers["items"][5]["id"] + 2
        view, _ = get(f"api/children?group={sub}")
        assert view["chunked"]
        chunk, size = get(f"api/children?group={sub}&chunk=1")
        assert len(chunk["items"]) == MAX_ITEMS
        node_id = chunk["items"][7]["id"]
        node, _ = get(f"api/node?id={node_id}")
        assert node["item_path"] == ["g0", f"g{sub - 2}", f"g{sub}", f"c{sub}:1", f"n{node_id}"]
        found, _ = get("api/search?q=while&limit=20")
        assert len(found["results"]) == 20 and found["truncated"]
        page, _ = get("api/nodes?offset=199990&limit=1000")
        assert [n["id"] for n in page["nodes"]] == list(range(199_990, N))
