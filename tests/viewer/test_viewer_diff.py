"""The viewer's diff API (``GET api/diff``, ``viewer/server/diffview.py``): against another held
capture or the baseline the embedder set (the previous capture of the profile), with the
items the page highlights and the paths it opens."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from capture.graph import graphfile
from capture.graph.model import Capture, Failure
from viewer.projection.projection import Projection
from viewer.server.app import ViewerServer

CAPTURES = Path(__file__).resolve().parents[1] / "diff" / "models" / "captures"


def _read(name: str) -> Capture:
    return graphfile.read(CAPTURES / f"{name}.tvg")


def _get(server: ViewerServer, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(server.url + path, timeout=30) as res:
            return res.status, json.loads(res.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def server():
    s = ViewerServer()
    s.start()
    try:
        yield s
    finally:
        s.stop()


def test_against_a_held_capture(server):
    a = server.add_capture(_read("gpt2_2_layers"), "two")
    b = server.add_capture(_read("gpt2_3_layers"), "three")
    status, d = _get(server, f"api/diff?capture={b}&against={a}")
    assert status == 200
    assert d["a"]["label"] == "two" and d["counts"]["groups_added"] == 1
    (change,) = d["changes"]
    assert change["path"] == "lm.transformer.h.2" and change["status"] == "added" and change["type"] == "group"
    # The key and path are B's items: the page expands item_path and highlights key.
    proj = Projection(server._entry(str(b)).capture)
    g = int(change["key"][1:])
    assert proj.capture.groups[g].attrs["path"] == "lm.transformer.h.2"
    assert change["item_path"][-1] == change["key"]
    assert d["marks"][change["key"]] == "added"
    assert all(d["marks"][k] == "contains" for k in change["item_path"][:-1])
    # No baseline was set for B: "previous" is not offered.
    assert _get(server, f"api/capture?capture={b}")[1]["diff"] is None
    status, err = _get(server, f"api/diff?capture={b}")
    assert status == 404 and "no previous capture" in err["error"]


def test_the_previous_capture_is_offered_and_read_lazily(server):
    reads = []

    def load():
        reads.append(1)
        return _read("gpt2_2_layers")

    b = server.add_capture(_read("gpt2_wider"), "wider", baseline=(load, "previous capture of gpt2 (12:00:00 UTC)"))
    assert _get(server, f"api/capture?capture={b}")[1]["diff"] == {
        "against": "previous", "label": "previous capture of gpt2 (12:00:00 UTC)"}
    assert reads == []  # showing the capture did not read its predecessor
    status, d = _get(server, f"api/diff?capture={b}&against=previous")
    assert status == 200 and reads == [1]
    nodes = [c for c in d["changes"] if c["type"] == "node"]
    assert nodes and all(c["status"] == "changed" for c in nodes)
    addmm = [c for c in nodes if c["path"] == "lm.transformer.h.0.attn.c_attn" and c["title"].startswith("aten::addmm")]
    assert addmm and "shape [8,192] → [8,288]" in addmm[0]["detail"]
    assert "weight lm.transformer.h.0.attn.c_attn.weight float32[64,192] → float32[96,288]" in addmm[0]["detail"]
    assert d["marks"][addmm[0]["key"]] == "changed"
    assert _get(server, f"api/diff?capture={b}")[1] == d and reads == [1]  # cached


def test_a_removed_block_is_shown_on_the_group_that_lost_it(server):
    b = server.add_capture(_read("gpt2_2_layers"), "two", baseline=(_read("gpt2_3_layers"), "three"))
    status, d = _get(server, f"api/diff?capture={b}")
    assert status == 200
    (change,) = d["changes"]
    assert change["status"] == "removed" and change["path"] == "lm.transformer.h.2"
    holder = int(change["key"][1:])
    assert server._entry(str(b)).capture.groups[holder].attrs["path"] == "lm.transformer"
    assert d["marks"][change["key"]] == "removed-inside"


def test_an_inserted_op_is_one_added_node_item(server):
    b = server.add_capture(_read("mlp_edited"), "edited", baseline=(_read("mlp"), "before"))
    d = _get(server, f"api/diff?capture={b}")[1]
    node_changes = [c for c in d["changes"] if c["type"] == "node"]
    assert [(c["status"], c["title"]) for c in node_changes] == [("added", "aten::relu #1")]
    key = node_changes[0]["key"]
    assert server._entry(str(b)).capture.nodes[int(key[1:])].op == "aten::relu"
    assert d["marks"][key] == "added"


def test_failed_captures_are_refused_with_a_reason(server):
    failed = Capture.failed_capture(Failure("ImportError", "no module named model", stage="import"))
    ok = server.add_capture(_read("mlp"), "ok")
    bad = server.add_capture(failed, "bad")
    status, err = _get(server, f"api/diff?capture={ok}&against={bad}")
    assert status == 409 and "failed capture" in err["error"]
    status, err = _get(server, f"api/diff?capture={bad}&against={ok}")
    assert status == 409 and "failed" in err["error"]
    status, err = _get(server, f"api/diff?capture={ok}&against=99")
    assert status == 404


def test_a_baseline_that_can_no_longer_be_read_says_so(server, tmp_path):
    gone = tmp_path / "gone.tvg"
    b = server.add_capture(_read("mlp"), "mlp", baseline=(lambda: graphfile.read(gone), "previous capture of mlp"))
    status, err = _get(server, f"api/diff?capture={b}")
    assert status == 404 and "can no longer be read" in err["error"] and "gone.tvg" in err["error"]
