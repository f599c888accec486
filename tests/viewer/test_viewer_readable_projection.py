"""What the projection gives the viewer for readable graphs of real models: parameters
folded into the ops that use them (and flagged on boundaries and edges), group cards that
say what is inside (class, parameter count and bytes, input and output shapes), repeated
blocks recognised ("×N identical"), and a whole subtree in one answer (Expand all).

Checked on the real captures in ``tests/viewer/real_models/captures`` (a 12-block GPT-2 and
a ResNet-18 built from ``transformers`` configs, a Flax Linen ResNet-18 with bound
variables), so the facts are about what people open, not synthetic graphs."""

from __future__ import annotations

from pathlib import Path

import pytest

from capture.graph import graphfile
from viewer.projection.projection import SUBTREE_ITEMS, WEIGHT_ROLES, Projection

CAPTURES = Path(__file__).resolve().parent / "real_models" / "captures"


@pytest.fixture(scope="module")
def gpt2() -> Projection:
    return Projection(graphfile.read(CAPTURES / "gpt2_torch.tvg"))


@pytest.fixture(scope="module")
def resnet() -> Projection:
    return Projection(graphfile.read(CAPTURES / "resnet18_torch.tvg"))


@pytest.fixture(scope="module")
def linen() -> Projection:
    return Projection(graphfile.read(CAPTURES / "resnet18_linen.tvg"))


def _groups_by_class(p: Projection, cls: str) -> list[int]:
    return [g.id for g in p.capture.groups if isinstance(g.attrs, dict) and g.attrs.get("class") == cls]


def _walk(p: Projection, group: int = -1):
    """Every (container group, view) with its items, depth first."""
    view = p.children(group)
    yield group, view
    for it in view["items"]:
        if it["type"] == "group" and it["child_count"]:
            yield from _walk(p, it["id"])


def _drawn_cards(p: Projection, group: int = -1):
    """Every item the default pages draw, opening what Expand all opens (not function cards)."""
    for it in p.children(group)["items"]:
        yield it
        if it["type"] == "group" and it["child_count"] and it["card"] != "function":
            yield from _drawn_cards(p, it["id"])


def test_every_parameter_is_on_the_ops_that_use_it(gpt2):
    # a function card (the LM head's linear, issue 26) stands for its kernels
    kernels_of: dict[int, set[int]] = {}
    for n in gpt2.capture.nodes:
        kernels_of.setdefault(n.group, set()).add(n.id)
    on_cards: dict[int, set[int]] = {}
    for it in _drawn_cards(gpt2):
        for w in it.get("weights", []):
            assert w["role"] in WEIGHT_ROLES and w["name"]
            ops = kernels_of[it["id"]] & set(gpt2.uses(w["value"])) if it["card"] == "function" else {it["id"]}
            on_cards.setdefault(w["value"], set()).update(ops)
    params = [v for v, (_, role) in gpt2.names.names.items() if role == "param"]
    assert len(params) == 148
    # each parameter appears on exactly the nodes that consume it
    for v in params:
        assert on_cards.get(v) == set(gpt2.uses(v)), gpt2.names.names[v]
    # the tied embedding: the token embedding's lookup and the LM head both show it, shared
    wte = next(v for v in params if gpt2.names.names[v][0].endswith("wte.weight"))
    users = [it for it in _drawn_cards(gpt2) if any(w["value"] == wte for w in it.get("weights", []))]
    assert [it["card"] for it in users] == ["op", "function"]
    assert all(next(w for w in it["weights"] if w["value"] == wte)["shared"] == 2 for it in users)


def test_weight_pills_are_at_the_op_cards_that_list_them_capture_inputs_are_not_weights(gpt2):
    # Asked for (the Weights toggle), a page draws a weight as a pill where an op card on
    # it reads the weight: what the card's weight lines say, as nodes. A group or chunk
    # card lists no weight lines, so the pills of the weights inside it are on its page.
    root = gpt2.children(-1, weights=True)
    assert [(b["name"], b["role"]) for b in root["inputs"] if not b.get("weight")] == [("input_ids", "input")]
    pills: set[int] = set()
    for g, _ in _walk(gpt2):
        page = gpt2.children(g, weights=True)
        assert page["weights_asked"] is True
        cards = {it["key"]: it for it in page["items"]}
        flagged = {b["value"] for b in page["inputs"] if b.get("weight")}
        assert all(b["role"] in WEIGHT_ROLES for b in page["inputs"] if b.get("weight"))
        listed = {w["value"] for it in page["items"] for w in _weight_lines(it)}
        assert flagged == {v for v in listed if f"in:{v}" in {e["source"] for e in page["edges"]}}
        for e in page["edges"]:
            assert bool(e.get("weight")) == (e["source"].startswith("in:") and e["value"] in flagged)
            if e.get("weight"):
                assert cards[e["target"]]["card"] in ("op", "function")
                assert e["value"] in {w["value"] for w in _weight_lines(cards[e["target"]])}
        pills |= flagged
    assert len(pills) == 148  # every parameter, as a pill somewhere


def _weight_lines(item: dict) -> list[dict]:
    """The weights an op card lists (a group drawn as its one op: that op's)."""
    return item.get("weights") or (item.get("single") or {}).get("weights") or []


def test_a_page_leaves_weight_inputs_out_unless_asked_and_counts_them(gpt2):
    # Weights are drawn inside their ops by default: the page leaves out their pills and
    # edges (57k of them on a deep model's first page) and says how many it left out.
    for g in (-1, _groups_by_class(gpt2, "GPT2Attention")[0]):
        full = gpt2.children(g, weights=True)
        page = gpt2.children(g)
        weights = [b for b in full["inputs"] if b.get("weight")]
        assert page["weights_hidden"] == full.get("weights_hidden", 0) + len(weights) > 0
        assert "weights_asked" not in page
        assert page["inputs"] == [b for b in full["inputs"] if not b.get("weight")]
        assert page["edges"] == [e for e in full["edges"] if not e.get("weight")]
        assert {k: v for k, v in page.items() if k not in ("inputs", "edges", "weights_hidden")} == \
            {k: v for k, v in full.items() if k not in ("inputs", "edges", "weights_hidden", "weights_asked")}


def test_group_cards_say_class_parameters_and_shapes(gpt2):
    blocks = _groups_by_class(gpt2, "GPT2Block")
    assert len(blocks) == 12
    parent = gpt2.capture.groups[blocks[0]].parent
    items = {it["id"]: it for it in gpt2.children(parent)["items"] if it["type"] == "group"}
    h3 = items[blocks[3]]
    assert (h3["label"], h3["class"], h3["path"]) == ("h.3", "GPT2Block", "transformer.h.3")
    # GPT-2 block with n_embd=64: ln_1 (2·64) + c_attn (64·192+192) + c_proj (64·64+64)
    # + ln_2 (2·64) + mlp c_fc (64·256+256) + c_proj (256·64+64) = 49,984 parameters
    assert h3["params"] == {"tensors": 12, "count": 49_984, "bytes": 49_984 * 4}
    assert [i["label"] for i in h3["inputs"]][:1] == ["f32[1,8,64]"]
    assert [o["label"] for o in h3["outputs"]][:1] == ["f32[1,8,64]"]
    assert all("measured" not in v for v in h3["inputs"] + h3["outputs"])  # cards stay small


def test_identical_blocks_are_recognised_and_different_ones_are_not(gpt2, resnet):
    blocks = _groups_by_class(gpt2, "GPT2Block")
    parent = gpt2.capture.groups[blocks[0]].parent
    items = [it for it in gpt2.children(parent)["items"] if it["type"] == "group"]
    same = [it for it in items if it.get("class") == "GPT2Block"]
    assert [it["identical"] for it in same] == [{"count": 12, "index": k} for k in range(12)]
    assert len({it["structure"] for it in same}) == 1
    # ln_f is a different module: not marked
    assert all("identical" not in it for it in items if it.get("class") != "GPT2Block")
    # ResNet: a stage's first block downsamples (a shortcut conv), its second does not
    layers = _groups_by_class(resnet, "ResNetBasicLayer")
    sigs = {resnet.structure().signature[g] for g in layers}
    assert 1 < len(sigs) < len(layers)


def test_subtree_returns_every_container_in_one_answer(gpt2):
    st = gpt2.subtree(-1)
    assert st["complete"] is True
    views = st["views"]
    # the root and every group with children, nothing else; a function call's kernels
    # (GPT-2's torch.diff and its LM head's linear, issue 26) only when every kernel is asked for
    with_children = {f"g{g}" for g in range(len(gpt2.capture.groups)) if gpt2.children(g)["items"]}
    calls = {f"g{g.id}" for g in gpt2.capture.groups if g.kind == "function"}
    assert len(calls) == 2 and calls <= with_children
    assert set(views) == {"g-1"} | (with_children - calls)
    assert set(gpt2.subtree(-1, kernels=True)["views"]) == {"g-1"} | with_children
    assert views["g-1"] == gpt2.children(-1)
    assert st["items"] == sum(len(v["items"]) for v in views.values())


def test_subtree_stops_at_its_item_budget_and_says_so(gpt2):
    st = gpt2.subtree(-1, max_items=20)
    assert st["complete"] is False and st["items"] <= 20 and "g-1" in st["views"]
    assert gpt2.subtree(-1, max_items=10**9)["items"] <= SUBTREE_ITEMS


def test_linen_variables_fold_into_their_ops(linen):
    folded = [w for _, view in _walk(linen) for it in view["items"] for w in it.get("weights", [])]
    roles = {w["role"] for w in folded}
    assert roles == {"variable"} or roles == {"variable", "const"}
    names = {w["name"] for w in folded}
    assert any(n.endswith("conv_init.kernel") for n in names) and any("batch_stats" in n for n in names)


def test_the_server_answers_api_subtree_with_the_projections_views():
    import http.client
    import json

    from viewer.server.app import ViewerServer

    cap = graphfile.read(CAPTURES / "gpt2_torch.tvg")
    with ViewerServer([cap]) as server:
        server.start()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            conn.request("GET", f"/{server.token}/api/subtree?group=-1", headers={"Host": f"127.0.0.1:{server.port}"})
            res = conn.getresponse()
            body = json.loads(res.read())
            assert res.status == 200 and body["complete"] is True
            assert body["views"]["g-1"]["items"][0]["class"] == "GPT2LMHeadModel"
            conn.request("GET", f"/{server.token}/api/subtree?group=9999", headers={"Host": f"127.0.0.1:{server.port}"})
            res = conn.getresponse()
            assert res.status == 404 and "no group 9999" in json.loads(res.read())["error"]
        finally:
            conn.close()
