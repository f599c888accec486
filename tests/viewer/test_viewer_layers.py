"""The graph speaks in layers (issue 26), data side: function calls as op cards, bookkeeping
ops off the main path, one-op and idle modules, every repeat folded, the trunk the first
view opens, frame titles and search by layer.

The captures are built in the style of the real models (``layered_models.py``): a
Llama-style decoder with Torch function groups, vit-pytorch's (Attention, FeedForward)
pairs, Gemma's (local × 5, global) pattern, a ResNet-style stem."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from layered_models import Builder, cnn_capture, decoder_capture, pattern_capture, vit_capture  # noqa: E402

from viewer.projection.projection import Projection, ProjectionError  # noqa: E402
from capture.analysis.structure import find_repeats  # noqa: E402


def by_path(p: Projection, path: str) -> int:
    (g,) = [g.id for g in p.capture.groups if g.attrs.get("path") == path and g.kind == "module"]
    return g


def items_by_key(view: dict) -> dict:
    return {it["key"]: it for it in view["items"]}


@pytest.fixture(scope="module")
def llama() -> Projection:
    return Projection(decoder_capture(4, lift_fresh=True))


# --------------------------------------------------------------------------- function calls


def test_a_function_call_is_one_op_card_with_its_parameters(llama):
    attn = by_path(llama, "model.layers.0.self_attn")
    q = items_by_key(llama.children(attn))[f"g{by_path(llama, 'model.layers.0.self_attn.q_proj')}"]
    # the Linear module ran one function call: it is drawn as that call
    assert q["card"] == "op" and [w["title"] for w in q["wrappers"]] == ["Linear · model.layers.0.self_attn.q_proj"]
    call = q["single"]
    assert (call["card"], call["kind"], call["title"], call["function"]) == (
        "function", "function", "linear", "torch.nn.functional.linear")
    assert call["kernels"] == {"count": 4, "ops": ["aten::view", "aten::t", "aten::mm", "aten::_unsafe_view"]}
    assert [w["name"] for w in call["weights"]] == ["model.layers.0.self_attn.q_proj.weight"]
    assert call["where"] == "model.py:40"


def test_opening_a_function_card_shows_its_kernels_without_the_reshapes():
    p = Projection(decoder_capture(1))
    (fn,) = [g.id for g in p.capture.groups if g.kind == "function" and g.parent == by_path(p, "lm_head")]
    view = p.children(fn)
    assert [it["label"] for it in view["items"]] == ["aten::t", "aten::mm"]
    assert view["elided"]["ops"] == {"aten::view": 1, "aten::_unsafe_view": 1}
    edges = {(e["source"], e["target"]) for e in view["edges"]}
    mm = next(it["key"] for it in view["items"] if it["label"] == "aten::mm")
    # the input flows straight into the matmul and the matmul's result straight out
    assert any(s.startswith("in:") and t == mm for s, t in edges)
    assert any(s == mm and t.startswith("out:") for s, t in edges)
    every = p.children(fn, kernels=True)
    assert [it["label"] for it in every["items"]] == ["aten::view", "aten::t", "aten::mm", "aten::_unsafe_view"]
    assert every["elided"]["count"] == 0 and every["kernels"] is True


def test_with_every_kernel_a_function_call_is_a_frame_and_expand_all_opens_it(llama):
    attn = by_path(llama, "model.layers.0.self_attn")
    q = items_by_key(llama.children(attn, kernels=True))[f"g{by_path(llama, 'model.layers.0.self_attn.q_proj')}"]
    assert q["card"] == "group" and "single" not in q
    fns = {f"g{g.id}" for g in llama.capture.groups if g.kind == "function"}
    assert not fns & set(llama.subtree(-1)["views"])  # Expand all opens modules, not function cards
    assert fns <= set(llama.subtree(-1, kernels=True)["views"])


def test_the_captured_function_itself_is_not_a_function_card():
    b = Builder()
    x = b.input("x", [4])
    with b.group("function", "net", function="net"):
        y = b.one("aten::sin", [x], [4])
        y = b.one("aten::cos", [y], [4])
    p = Projection(b.capture({"value": x}, {"value": y}))
    (top,) = p.children(-1)["items"]
    assert top["card"] == "group" and p.trunk() == [0]


# --------------------------------------------------------------------------- bookkeeping


def test_bookkeeping_ops_are_elided_with_their_edges_rewired(llama):
    root = llama.children(0)
    assert [it["key"] for it in root["items"]] == [f"g{by_path(llama, 'model')}", f"g{by_path(llama, 'lm_head')}"]
    (alias,) = root["elided"]["nodes"]
    head = f"g{by_path(llama, 'lm_head')}"
    assert (alias["op"], alias["near"]) == ("aten::alias", head)
    # the logits leave through the alias: drawn leaving the LM head
    assert [(e["source"], e["target"]) for e in root["edges"] if e["target"].startswith("out:")] == [
        (head, f"out:{llama.capture.nodes[alias['id']].outputs[0]}")]
    assert llama.node(alias["id"])["elided"] is True and llama.node(alias["id"])["near"] == head
    every = llama.children(0, kernels=True)
    assert f"n{alias['id']}" in items_by_key(every) and every["elided"]["count"] == 0


def test_a_lifted_constant_shows_inside_the_op_that_reads_it(llama):
    attn = llama.children(by_path(llama, "model.layers.0.self_attn"), weights=True)
    assert attn["elided"]["ops"] == {"aten::lift_fresh": 1}
    (lifted,) = attn["elided"]["nodes"]
    reader = items_by_key(attn)[lifted["near"]]
    assert [w["name"] for w in reader["weights"]] == ["external"]
    const = reader["weights"][0]["value"]
    assert any(e["source"] == f"in:{const}" and e["target"] == reader["key"] and e["weight"] for e in attn["edges"])


def test_a_zero_element_reserve_is_elided_and_batch_norm_is_one_op():
    p = Projection(cnn_capture())
    bn = items_by_key(p.children(0))[f"g{by_path(p, 'bn1')}"]
    assert bn["card"] == "op" and bn["single"]["label"] == "aten::_native_batch_norm_legit_no_training"
    view = p.children(by_path(p, "bn1"))
    assert view["elided"]["ops"] == {"aten::empty.memory_format": 1}
    assert not [e for e in view["edges"] if e["label"] == "u8[0]"]
    assert len(p.children(by_path(p, "bn1"), kernels=True)["items"]) == 2


# --------------------------------------------------------------------------- one-op and idle modules


def test_one_op_modules_are_that_op_with_the_module_named_on_it():
    p = Projection(cnn_capture())
    items = items_by_key(p.children(0))
    conv = items[f"g{by_path(p, 'conv1')}"]
    assert conv["card"] == "op" and conv["single"]["label"] == "aten::convolution"
    assert [w["name"] for w in conv["single"]["weights"]] == ["conv1.weight"]
    head = items[f"g{by_path(p, 'head')}"]  # Sequential(Linear): both named, outermost first
    assert [w["title"] for w in head["wrappers"]] == ["Sequential · head", "Linear · head.0"]
    assert head["single"]["label"] == "aten::linear"


def test_modules_that_ran_nothing_are_listed_in_their_parent(llama):
    attn = by_path(llama, "model.layers.0.self_attn")
    view = llama.children(attn)
    assert [x["title"] for x in view["idle"]] == ["Dropout · model.layers.0.self_attn.attn_dropout"]
    dropout = by_path(llama, "model.layers.0.self_attn.attn_dropout")
    assert f"g{dropout}" not in items_by_key(view)  # not an item: nothing of it is drawn
    assert f"g{dropout}" not in items_by_key(llama.children(attn, kernels=True))  # nor with every kernel
    card = items_by_key(llama.children(by_path(llama, "model.layers.0")))[f"g{attn}"]
    assert [x["path"] for x in card["idle"]] == ["model.layers.0.self_attn.attn_dropout"] and card["idle_total"] == 1


def test_frames_are_titled_by_class_and_path(llama):
    items = items_by_key(llama.children(by_path(llama, "model")))
    assert items[f"g{by_path(llama, 'model.layers.3')}"]["title"] == "DecoderLayer · model.layers.3"
    assert llama.children(-1)["items"][0]["title"] == "CausalLM"


# --------------------------------------------------------------------------- repeats


def test_layer_zero_joins_its_stack_although_its_inputs_came_in_another_order(llama):
    view = llama.children(by_path(llama, "model"))
    layers = [it for it in view["items"] if it.get("class") == "DecoderLayer"]
    assert [it["identical"] for it in layers] == [{"count": 4, "index": k} for k in range(4)]
    # layer 0 receives [hidden, cos, sin] in that order of production, the others [cos, sin, hidden]
    ids = [sorted(llama.index.bin[it["id"] + 1]) for it in layers]
    hidden_first = [ix[0] == min(llama.index.bin[layers[0]["id"] + 1]) for ix in ids]
    assert hidden_first[0]
    (stack,) = view["stacks"]
    assert (stack["period"], stack["count"], stack["pattern"]) == (1, 4, ["DecoderLayer"])
    assert stack["members"] == [[it["key"]] for it in layers] and stack["key"] == "s" + layers[0]["key"]


def test_different_wiring_is_a_different_block():
    b = Builder()
    x = b.input("x", [4])
    with b.module("Net", "", "Net"):
        for k, reads in enumerate(("xh", "hh")):
            with b.module("Block", f"b{k}"):
                h = b.one("aten::sin", [x], [4])
                x = b.one("aten::add.Tensor", [x if reads == "xh" else h, h], [4])
    p = Projection(b.capture({"value": 0}, {"value": x}))
    a, c = p.children(0)["items"]
    assert a["structure"] != c["structure"] and "identical" not in a


def test_attention_feedforward_pairs_fold_into_one_stack():
    p = Projection(vit_capture(12))
    view = p.children(by_path(p, "transformer"))
    (stack,) = view["stacks"]
    assert (stack["period"], stack["count"], stack["pattern"]) == (4, 12, ["Attention", "FeedForward"])
    first = [items_by_key(view)[k] for k in stack["members"][0]]
    assert [it.get("class") or it["label"] for it in first] == ["Attention", "aten::add.Tensor", "FeedForward",
                                                                 "aten::add.Tensor"]
    assert stack["label"] == "layers.0–11"
    assert all(items_by_key(view)[k]["stack"]["key"] == stack["key"] for rep in stack["members"] for k in rep)
    # the final norm after the pairs is not in the stack
    assert "stack" not in view["items"][-1]


def test_local_global_patterns_fold_with_their_inner_run():
    p = Projection(pattern_capture(3))
    (stack,) = p.children(by_path(p, "model"))["stacks"]
    assert (stack["period"], stack["count"]) == (6, 3)
    assert stack["inner"] == [{"start": 0, "period": 1, "count": 5}]


def test_identical_blocks_apart_share_a_twin_id(llama):
    norms = [g.id for g in llama.capture.groups if g.attrs.get("class") == "RMSNorm"]
    assert len(norms) == 9  # two per layer and the final one
    twins = []
    for g in norms:
        parent = llama.capture.groups[g].parent
        twins.append(items_by_key(llama.children(parent))[f"g{g}"]["twin"])
    assert [t["id"] for t in twins] == [norms[0]] * 9 and [t["index"] for t in twins] == list(range(9))
    assert all(t["count"] == 9 for t in twins)
    # an op card has no twin: every Linear of one width is alike, which says nothing
    lm_head = items_by_key(llama.children(0))[f"g{by_path(llama, 'lm_head')}"]
    assert "twin" not in lm_head


@pytest.mark.parametrize(
    ("tokens", "blocks", "runs"),
    [
        pytest.param("AAAA", "1111", [(0, 1, 4)], id="stack"),
        pytest.param("xAAAy", "01110", [(1, 1, 3)], id="inside"),
        pytest.param("AaBaAaBa", "10101010", [(0, 4, 2)], id="pairs-with-ops-between"),
        pytest.param("LLLLLGLLLLLG", "111111111111", [(0, 6, 2)], id="local-global"),
        pytest.param("ABAB", "1111", [(0, 2, 2)], id="period-2"),
        pytest.param("aaaa", "0000", [], id="ops-alone"),
        pytest.param("aAaA", "0101", [], id="repetition-starts-with-an-op"),
        pytest.param("ABC", "111", [], id="no-repeat"),
        pytest.param("AABAAB", "111111", [(0, 3, 2)], id="longest-cover-wins"),
        pytest.param("AAB", "111", [(0, 1, 2)], id="short-run"),
    ],
)
def test_find_repeats(tokens, blocks, runs):
    assert find_repeats(list(tokens), [b == "1" for b in blocks]) == runs


# --------------------------------------------------------------------------- trunk


def test_the_trunk_follows_the_groups_that_hold_most_of_the_program(llama):
    assert [t["title"] for t in llama.summary()["trunk"]] == ["CausalLM", "Decoder · model"]
    trunk = llama.summary()["trunk"][1]
    assert trunk["key"] == f"g{by_path(llama, 'model')}" and trunk["item_path"] == ["g0", trunk["key"]]
    assert trunk["nodes"] == llama.index.node_count[by_path(llama, "model") + 1] and 0.9 < trunk["share"] < 1
    vit = Projection(vit_capture(6))
    assert [t["title"] for t in vit.summary()["trunk"]] == ["ViT", "Transformer · transformer"]


def test_the_trunk_never_opens_a_one_op_frame_or_a_function_card():
    b = Builder()
    x = b.input("x", [1, 3, 4])
    with b.module("Wrapper", "", "Wrapper"):
        y = b.op("aten::sin", [x], [([1, 3, 4], "float32")])[0]
        y = __import__("layered_models").linear(b, "proj", y, [1, 3, 4], 8)  # 4 of the 5 ops, one call
    p = Projection(b.capture({"value": x}, {"value": y}))
    assert p.trunk() == [0]
    b = Builder()
    x = b.input("x", [4])
    with b.module("Net", "", "Net"):
        with b.module("Conv2d", "conv"):
            y = b.one("aten::convolution", [x], [4])
    p = Projection(b.capture({"value": x}, {"value": y}))
    # a whole model of one op is that op's card, named Net and Conv2d: nothing to open
    (top,) = p.children(-1)["items"]
    assert top["card"] == "op" and [w["title"] for w in top["wrappers"]] == ["Net", "Conv2d · conv"]
    assert p.trunk() == []


# --------------------------------------------------------------------------- search


def test_search_by_module_path_finds_the_module_first(llama):
    r = llama.search("model.layers.0.mlp")
    first = r["results"][0]
    assert (first["type"], first["label"], first["why"]) == ("group", "model.layers.0.mlp", "module path")
    assert first["title"] == "MLP · model.layers.0.mlp"
    assert first["sublabel"] == "MLP · module instance"


def test_search_results_are_told_apart_and_grouped_by_layer(llama):
    r = llama.search("mlp", limit=200)
    groups = [x for x in r["results"] if x["type"] == "group" and x["title"].startswith("MLP")]
    assert [x["label"] for x in groups] == [f"model.layers.{k}.mlp" for k in range(4)]
    layers = {x["key"]: x for x in r["layers"]}
    for k, x in enumerate(groups):
        assert x["layer"] == f"g{by_path(llama, f'model.layers.{k}')}"
        assert layers[x["layer"]]["title"] == f"DecoderLayer · model.layers.{k}"
    assert sum(x["count"] for x in r["layers"]) == len(r["results"])
    # an op deep in a layer is listed under that layer, and says where it sits
    (mm,) = [x for x in llama.search("aten::silu")["results"] if x["type"] == "node"][:1]
    assert mm["layer"] == f"g{by_path(llama, 'model.layers.0')}" and "model.layers.0.mlp" in mm["sublabel"]


def test_search_by_class(llama):
    r = llama.search("RMSNorm", limit=100)
    assert {x["why"] for x in r["results"]} == {"module class"} and r["total"] == 9


@pytest.mark.parametrize(
    ("query", "kwargs", "expect"),
    [
        pytest.param("op:mm", {}, lambda x: x["label"] == "aten::mm", id="inline-op"),
        pytest.param("", {"op": "silu"}, lambda x: x["label"] == "aten::silu", id="op-param"),
        pytest.param("mul class:MLP", {}, lambda x: "mlp" in x["sublabel"] and x["type"] == "node", id="class"),
        pytest.param("op:add shape:1,8,16", {}, lambda x: x["label"].startswith("aten::add") and "f32[1,8,16]" in x["sublabel"],
                     id="op-and-shape"),
        pytest.param("", {"dtype": "i64"}, lambda x: "i64" in x["sublabel"], id="dtype"),
    ],
)
def test_search_filters(llama, query, kwargs, expect):
    r = llama.search(query, limit=500, **kwargs)
    assert r["results"] and all(expect(x) for x in r["results"])
    assert r["total"] == len(r["results"])


def test_a_filter_narrows_a_query(llama):
    everything = llama.search("mul", limit=1000)["total"]
    assert 0 < llama.search("mul class:MLP", limit=1000)["total"] < everything
    assert llama.search("mul", limit=1000, cls="Attention")["filters"]["class"] == "attention"


def test_search_queries_are_bounded_and_read_in_linear_time(llama):
    with pytest.raises(ProjectionError, match="at most 256 characters"):
        llama.search("x" * 64_000)
    with pytest.raises(ProjectionError, match="not a shape"):
        llama.search("", shape="[1,2")
    # the inputs that made a backtracking pattern take seconds parse as what they are
    from viewer.projection.search import _parse_location, _parse_shape

    crafted = "1" + " " * 250 + ",x"
    assert _parse_shape(crafted) == ((1, "x"), None)
    assert _parse_shape("1" + ", " * 120 + "!") is None
    assert _parse_location("a.py" * 60) == ("a.py" * 60, None)
    assert _parse_location("a.py:" + "1" * 200) == ("a.py", int("1" * 200))
    assert _parse_location(":1" * 120) is None


# --------------------------------------------------------------------------- the checked-in real captures

REAL = Path(__file__).resolve().parent / "real_models" / "captures"


@pytest.fixture(scope="module")
def real():
    from capture.graph import graphfile

    return {name: Projection(graphfile.read(REAL / f"{name}.tvg"))
            for name in ("llama_torch", "vit_torch", "gpt2_torch", "resnet18_torch")}


def test_real_llama_stacks_all_four_layers_and_opens_the_decoder(real):
    p = real["llama_torch"]
    assert [t["title"] for t in p.summary()["trunk"]] == ["LlamaForCausalLM", "LlamaModel · model"]
    view = p.children(by_path(p, "model"))
    (stack,) = view["stacks"]
    assert (stack["count"], stack["period"], stack["pattern"]) == (4, 1, ["LlamaDecoderLayer"])
    assert stack["label"] == "layers.0–3"
    top = p.children(0)
    assert top["elided"]["ops"] == {"aten::alias": 1}
    assert [x["label"] for x in p.search("model.layers.0.mlp")["results"][:1]] == ["model.layers.0.mlp"]


def test_real_vit_folds_its_attention_feedforward_pairs(real):
    p = real["vit_torch"]
    assert [t["title"] for t in p.summary()["trunk"]] == ["ViT", "Transformer · transformer"]
    (stack,) = p.children(by_path(p, "transformer"))["stacks"]
    assert (stack["count"], stack["period"], stack["pattern"]) == (12, 4, ["Attention", "FeedForward"])
    assert [x["title"] for x in p.children(0)["idle"]] == ["Dropout · dropout"]


def test_real_gpt2_lists_its_eval_dropouts_instead_of_drawing_them(real):
    p = real["gpt2_torch"]
    dropouts = [g.id for g in p.capture.groups if g.attrs.get("class") == "Dropout"]
    assert dropouts and all(p.index.node_count[g + 1] == 0 for g in dropouts)
    listed = [x["id"] for view in (p.children(g) for g in range(len(p.capture.groups))) for x in view["idle"]]
    listed += [x["id"] for x in p.children(-1)["idle"]]
    assert sorted(listed) == sorted(dropouts)
    (stack,) = p.children(p.capture.groups[by_path(p, "transformer.h.0")].parent)["stacks"]
    assert stack["count"] == 12


def test_real_resnet_batch_norms_lose_their_empty_reserves(real):
    p = real["resnet18_torch"]
    elided = sum(p.children(g)["elided"]["ops"].get("aten::empty.memory_format", 0) for g in range(len(p.capture.groups)))
    assert elided == 20
    norms = [g.id for g in p.capture.groups if g.attrs.get("class") == "BatchNorm2d"]
    cards = [items_by_key(p.children(p.capture.groups[g].parent))[f"g{g}"] for g in norms]
    assert cards and all(c["card"] == "op" for c in cards)


def test_blocks_are_alike_by_content_not_by_which_string_objects_name_their_ops():
    b = Builder()
    x = b.input("x", [4])
    with b.module("Net", "", "Net"):
        for k in range(2):
            with b.module("Block", f"b{k}"):
                op = "".join(["aten::", "sin"])  # a new, equal string object for each block
                x = b.one(op, [x], [4])
                x = b.one("".join(["aten::", "cos"]), [x], [4])
    p = Projection(b.capture({"value": 0}, {"value": x}))
    first, second = p.children(0)["items"]
    assert first["structure"] == second["structure"] and first["identical"]["count"] == 2


# --------------------------------------------------------------------------- over HTTP


def test_the_server_takes_kernels_and_search_filters():
    import http.client
    import json
    from urllib.parse import quote

    from viewer.server.app import ViewerServer

    cap = decoder_capture(2)
    with ViewerServer([cap]) as server:
        server.start()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)

        def get(path: str) -> tuple[int, dict]:
            conn.request("GET", f"/{server.token}/{path}", headers={"Host": f"127.0.0.1:{server.port}"})
            res = conn.getresponse()
            return res.status, json.loads(res.read())

        try:
            status, top = get("api/children?group=0")
            assert status == 200 and top["kernels"] is False and top["elided"]["count"] == 1
            status, every = get("api/children?group=0&kernels=1")
            assert status == 200 and every["kernels"] is True and every["elided"]["count"] == 0
            assert len(every["items"]) == len(top["items"]) + 1
            status, err = get("api/children?group=0&kernels=maybe")
            assert status == 400 and "kernels must be 1 or 0" in err["error"]
            status, st = get("api/subtree?group=-1&kernels=1")
            assert status == 200 and st["kernels"] is True and all(v["kernels"] for v in st["views"].values())
            status, found = get("api/search?q=mul&class=MLP&limit=500")
            assert status == 200 and found["filters"]["class"] == "mlp" and found["results"]
            assert all(".mlp" in r["sublabel"] for r in found["results"])
            status, found = get("api/search?q=" + quote("op:silu"))
            assert status == 200 and {r["label"] for r in found["results"]} == {"aten::silu"}
            status, err = get("api/search?q=" + "x" * 64_000)
            assert status == 400 and "at most 256 characters" in err["error"]
            status, capture = get("api/capture")
            assert [t["title"] for t in capture["trunk"]] == ["CausalLM", "Decoder · model"]
        finally:
            conn.close()


def test_a_one_kernel_call_is_named_on_its_kernel():
    b = Builder()
    x = b.input("x", [4])
    with b.module("Net", "", "Net"):
        y = b.one("aten::silu", [x], [4])
        b.nodes[-1].params["function"] = "torch.nn.functional.silu"
        y = b.one("aten::neg", [y], [4])
    p = Projection(b.capture({"value": x}, {"value": y}))
    silu, neg = p.children(0)["items"]
    assert silu["function"] == "torch.nn.functional.silu" and "function" not in neg
