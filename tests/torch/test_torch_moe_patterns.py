"""Mixture-of-experts and frontier-size patterns (issue 38), each on a model of our own:
routing by value, a tensor made with ``new_empty`` and filled through slices with
``copy_`` (DeepSeek-V3's attention), the model's dtype, and the invariant every capture
is checked for: every value an op reads is an input, a parameter, a buffer, a constant
or produced by an op."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from capture.graph.invariants import REASON, check_producers, values_without_producer  # noqa: E402
from capture.graph.model import Capture, Coverage, Node, Operand, Value  # noqa: E402
from capture.recipe import RecipeError, parse_profile  # noqa: E402

from torch_workspace import capture_in_process, profile, tensor, write  # noqa: E402

pytestmark = pytest.mark.torch

MODEL = '''
import torch
from torch import nn
import torch.nn.functional as F


class Fill(nn.Module):
    """DeepSeek-V3's attention: key states made with new_empty, filled through two slices."""

    def __init__(self, d=8, nope=6, rope=2):
        super().__init__()
        self.nope, self.rope = nope, rope
        self.k = nn.Linear(d, nope)
        self.r = nn.Linear(d, rope)

    def forward(self, x):
        k_nope, k_rot = self.k(x), self.r(x)
        key = k_nope.new_empty(*k_nope.shape[:-1], self.nope + self.rope)
        key[..., : self.nope].copy_(k_nope)
        key[..., self.nope:].copy_(k_rot)
        return key * 2


class ViewWrites(nn.Module):
    """A view taken before a write, read after it; a write through a view of a view."""

    def forward(self, x):
        buf = torch.zeros(4, 6)
        first = buf[0]
        buf[:, :3].copy_(x)
        inner = buf[1:][:, 3:]
        inner.add_(1.0)
        return first * 2, buf.sum()


class Router(nn.Module):
    def __init__(self, dim, experts, top_k):
        super().__init__()
        self.top_k = top_k
        self.weight = nn.Parameter(torch.randn(experts, dim) * 0.02)

    def forward(self, x):
        scores = F.softmax(F.linear(x, self.weight), dim=-1)
        weights, chosen = torch.topk(scores, self.top_k, dim=-1)
        return weights / weights.sum(-1, keepdim=True), chosen


class Expert(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class MoE(nn.Module):
    """Routing by value with no Python control flow on the counts: every expert runs on
    the tokens routed to it (torch.where, index, index_add)."""

    def __init__(self, dim=16, hidden=32, experts=4, top_k=2):
        super().__init__()
        self.router = Router(dim, experts, top_k)
        self.experts = nn.ModuleList(Expert(dim, hidden) for _ in range(experts))

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        weights, chosen = self.router(flat)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == e)
            out = out.index_add(0, token, expert(flat[token]) * weights[token, slot, None])
        return out.reshape(x.shape)


class LoopMoE(MoE):
    """The loop over the experts the routing hit: Python iterates a data-dependent count."""

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        weights, chosen = self.router(flat)
        out = torch.zeros_like(flat)
        for e in torch.unique(chosen):
            token, slot = torch.where(chosen == e)
            out.index_add_(0, token, self.experts[int(e)](flat[token]) * weights[token, slot, None])
        return out.reshape(x.shape)


def hub_function(func):
    """The kernels hub's pattern: a plain function turned into a module instance of class
    Func whose forward calls it (transformers' apply_rotary_pos_emb, with kernels installed)."""

    class Func(nn.Module):
        can_torch_compile = False

        def forward(self, *args, **kwargs):
            return func(*args, **kwargs)

    return Func()


@hub_function
def apply_rotary_pos_emb(q, cos, sin):
    a, b = q.chunk(2, dim=-1)
    return q * cos + torch.cat((-b, a), dim=-1) * sin


class Rotary(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.q = nn.Linear(d, d)

    def forward(self, x):
        q = self.q(x)
        return apply_rotary_pos_emb(q, torch.ones_like(q), torch.zeros_like(q))


def causal_mask(attention_mask, n):
    """A masking helper in the style of transformers' masking_utils: several ops, computed
    once, read by every layer."""
    q = torch.arange(n)[:, None]
    k = torch.arange(n)[None, :]
    allowed = (k <= q)[None, None] & attention_mask[:, None, None, :].bool()
    return torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))


class Layer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, h, mask, cos, sin):
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        q, k = q * cos + q.flip(-1) * sin, k * cos + k.flip(-1) * sin
        att = (q[:, None] @ k[:, None].transpose(-1, -2) + mask).softmax(-1)
        return h + self.out((att @ v[:, None])[:, 0])


class RotaryTable(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.register_buffer("freq", 1.0 / 10000 ** (torch.arange(d) / d))

    def forward(self, position_ids):
        angles = position_ids[..., None].float() * self.freq
        return angles.cos(), angles.sin()


class Decoder(nn.Module):
    def __init__(self, vocab=50, d=8, layers=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.rotary = RotaryTable(d)
        self.layers = nn.ModuleList(Layer(d) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, input_ids, attention_mask):
        h = self.embed(input_ids)
        n = input_ids.shape[1]
        position_ids = torch.arange(n)[None] + 0
        mask = causal_mask(attention_mask, n)
        cos, sin = self.rotary(position_ids)
        for layer in self.layers:
            h = layer(h, mask, cos, sin)
        return self.head(self.norm(h))


class MaskedLayer(Layer):
    def forward(self, h, mask):
        return super().forward(h, mask, 1.0, 0.0)


class EncoderStack(nn.Module):
    def __init__(self, d=8, layers=4):
        super().__init__()
        self.layer = nn.ModuleList(MaskedLayer(d) for _ in range(layers))

    def forward(self, h, mask):
        for layer in self.layer:
            h = layer(h, mask)
        return h


class Encoder(nn.Module):
    """BERT's shape: the mask built beside the embedding, the layers one level down."""

    def __init__(self, vocab=50, d=8, layers=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.encoder = EncoderStack(d, layers)
        self.head = nn.Linear(d, vocab)

    def forward(self, input_ids, attention_mask):
        mask = causal_mask(attention_mask, input_ids.shape[1])
        return self.head(self.encoder(self.embed(input_ids), mask))


class StackedExperts(nn.Module):
    """Experts stored as stacked weights, run in a loop over the experts the routing hit
    (the pattern of transformers' eager experts)."""

    def __init__(self, d, h, e):
        super().__init__()
        self.gate_up_proj = nn.Parameter(torch.randn(e, 2 * h, d) * 0.1)
        self.down_proj = nn.Parameter(torch.randn(e, d, h) * 0.1)

    def forward(self, x, weights, chosen):
        out = torch.zeros_like(x)
        for e in torch.unique(chosen).tolist():
            token, slot = torch.where(chosen == e)
            gate, up = F.linear(x[token], self.gate_up_proj[e]).chunk(2, dim=-1)
            y = F.linear(F.silu(gate) * up, self.down_proj[e]) * weights[token, slot, None]
            out.index_add_(0, token, y)
        return out


class BatchedExperts(StackedExperts):
    """The same experts in one batched matmul per projection."""

    def forward(self, x, weights, chosen):
        k = chosen.shape[-1]
        flat = chosen.reshape(-1)
        h = x.repeat_interleave(k, dim=0)
        gate, up = torch.bmm(self.gate_up_proj[flat], h[:, :, None])[..., 0].chunk(2, dim=-1)
        y = torch.bmm(self.down_proj[flat], (F.silu(gate) * up)[:, :, None])[..., 0]
        return (y * weights.reshape(-1, 1)).reshape(-1, k, x.shape[-1]).sum(1)


class SparseBlock(nn.Module):
    def __init__(self, d=16, h=32, e=4, k=2, batched=False):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.gate = Router(d, e, k)
        self.experts = (BatchedExperts if batched else StackedExperts)(d, h, e)

    def forward(self, x):
        flat = self.norm(x).reshape(-1, x.shape[-1])
        weights, chosen = self.gate(flat)
        return x + self.experts(flat, weights, chosen).reshape(x.shape)


class RoutedNet(nn.Module):
    def __init__(self, layers=3, batched=False):
        super().__init__()
        self.blocks = nn.ModuleList(SparseBlock(batched=batched) for _ in range(layers))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


class BatchedNet(RoutedNet):
    def __init__(self, layers=3):
        super().__init__(layers, batched=True)


class Sized(nn.Module):
    """A data-dependent scalar used as a size, never in an 'if': fine abstractly."""

    def forward(self, x):
        n = (x > 0).sum().item()
        return torch.zeros(n, 3), x.topk(2).values
'''


@pytest.fixture
def mws(ws):
    write(ws, {"moe.py": MODEL})
    return ws


def run(ws, model, shape, **fields):
    return capture_in_process(ws, profile(model, args=[tensor(shape)], **fields))[0]


def producers(cap):
    return {o: n.id for n in cap.nodes for o in n.outputs}


# --------------------------------------------------------------------------- item 3


@pytest.mark.parametrize("evidence", ["eager", "abstract"])
def test_a_tensor_filled_through_slices_is_produced_by_the_writes(mws, evidence):
    cap = run(mws, "moe:Fill", [2, 8], evidence=evidence)
    made = producers(cap)
    ops = [n.op for n in cap.nodes]
    copies = [n for n in cap.nodes if n.op == "aten::copy_"]
    assert len(copies) == 2
    # the slice of the second write reads what the first write made; the result what the second made
    second_slice = cap.nodes[ops.index("aten::slice.Tensor", ops.index("aten::copy_"))]
    assert made[second_slice.inputs[0].value] == copies[0].id
    mul = cap.nodes[ops.index("aten::mul.Tensor")]
    assert made[mul.inputs[0].value] == copies[1].id
    assert values_without_producer(cap) == {} and cap.coverage.status == "complete"


def test_views_taken_before_a_write_read_the_written_version(mws):
    cap = run(mws, "moe:ViewWrites", [4, 3])
    made = producers(cap)
    assert values_without_producer(cap) == {}
    writes = {n.id for n in cap.nodes if n.op in ("aten::copy_", "aten::add_.Tensor")}
    mul = next(n for n in cap.nodes if n.op == "aten::mul.Tensor")
    assert made[mul.inputs[0].value] in writes  # `first` was taken before both writes
    total = next(n for n in cap.nodes if n.op == "aten::sum")
    assert made[total.inputs[0].value] == max(writes)


def test_the_invariant_marks_a_capture_whose_values_come_from_nowhere():
    """A read value that is neither produced, an input, a labelled parameter/buffer/
    constant, nor a body parameter is listed and makes the coverage partial."""
    values = [Value(0, [2], "float32", {"input": "x"}), Value(1, [2], "float32", {"param": "w"}),
              Value(2, [2], "float32", {"version_of": 0}), Value(3, [2], "float32", {}),
              Value(4, [2], "float32", {})]
    nodes = [Node(0, "aten::mul.Tensor", [Operand(0, 0), Operand(1, 1)], [3]),
             Node(1, "aten::add.Tensor", [Operand(0, 3), Operand(1, 2)], [4])]
    cap = Capture("torch_eager", "torch", "2", Coverage("eager_forward"), values, nodes,
                  inputs={"dict": [["args", {"tuple": [{"value": 0}]}]]}, outputs={"value": 4})
    assert values_without_producer(cap) == {2: 1}
    check_producers(cap)
    assert cap.coverage.status == "partial" and REASON in cap.coverage.reasons
    assert cap.meta["values_without_producer"] == {"count": 1, "values": [{"value": 2, "read_by": 1,
                                                                          "op": "aten::add.Tensor"}]}


# --------------------------------------------------------------------------- item 1


def test_routing_by_value_is_captured_abstractly_with_symbols(mws):
    eager = run(mws, "moe:MoE", [2, 8, 16])
    fake = run(mws, "moe:MoE", [2, 8, 16], evidence="abstract")
    assert [n.op for n in fake.nodes] == [n.op for n in eager.nodes]
    symbols = fake.meta["symbols"]
    assert [(s["name"], s.get("min"), s.get("max"), s["op"]) for s in symbols] == [
        (f"u{i}", 0, 32, "aten::nonzero") for i in range(4)]
    expert_in = [v for v in fake.values if v.shape[:1] == ["u2"] and v.shape[1:] == [16]]
    assert expert_in, "expert 2's tokens are u2 × 16"
    assert values_without_producer(fake) == {}
    # the viewer shows the symbol with its bounds and where it came from
    from viewer.projection.projection import Projection

    shown = Projection(fake).value(expert_in[0].id)
    assert shown["symbols"] == [{"name": "u2", "text": "u2: known only from the data; 0 ≤ u2 ≤ 32, made by aten::nonzero",
                                 "node": symbols[2]["node"]}]
    assert Projection(fake).value(expert_in[0].id)["label"] == "f32[u2,16]"


def test_a_loop_over_a_data_dependent_count_is_refused_naming_the_line(mws):
    from capture.worker.errors import CaptureError

    with pytest.raises(CaptureError) as info:
        run(mws, "moe:LoopMoE", [2, 8, 16], evidence="abstract")
    d = info.value.details
    assert d["reason"] == "GuardOnDataDependentSymNode" and d["op"] == "the model's Python"
    line = (mws / "moe.py").read_text().splitlines()[d["frame"]["line"] - 1]
    assert "for e in torch.unique(chosen):" in line
    assert "u0: a size aten::_unique2 made at moe.py" in info.value.message


def test_a_data_dependent_scalar_as_a_size(mws):
    fake = run(mws, "moe:Sized", [3, 4], evidence="abstract")
    zeros = next(n for n in fake.nodes if n.op == "aten::zeros")
    assert fake.values[zeros.outputs[0]].shape == ["u0", 3]
    assert [s["op"] for s in fake.meta["symbols"]] == ["aten::_local_scalar_dense"]
    assert fake.meta["symbols"][0]["values"] == 1


# --------------------------------------------------------------------------- dtype


def test_the_dtype_key():
    r = parse_profile("p", {"model": "m:Net", "dtype": "bfloat16"})
    assert r.dtype == "bfloat16" and r.to_table()["dtype"] == "bfloat16"
    assert parse_profile("p", r.to_table()) == r
    assert "dtype" not in parse_profile("p", {"model": "m:Net"}).to_table()
    for table, problem in (({"dtype": "int8"}, "expected one of 'float16', 'bfloat16'"),
                           ({"dtype": "float16", "framework": "jax"}, "dtype is a Torch key")):
        with pytest.raises(RecipeError) as info:
            parse_profile("p", {"model": "m:Net", **table})
        assert problem in str(info.value) and info.value.key_path == "profiles.p.dtype"


@pytest.mark.parametrize("evidence", ["eager", "abstract"])
def test_a_recipe_dtype_builds_the_model_in_it(mws, evidence):
    cap = capture_in_process(mws, profile("moe:Fill", args=[tensor([2, 8], "bfloat16")], evidence=evidence,
                                          dtype="bfloat16"))[0]
    params = {v.measured["param"]: v.dtype for v in cap.values if v.measured and "param" in v.measured}
    assert set(params.values()) == {"bfloat16"} and len(params) == 4
    assert cap.meta["dtype"] == {"dtype": "bfloat16", "source": "recipe"}
    assert torch.get_default_dtype() == torch.float32  # the build's default is put back


def test_the_shorthand_dtype(tmp_path, monkeypatch):
    from tensorviz_lsp.setup.shorthand import ShorthandError, build_recipe, parse_target

    (tmp_path / "model.py").write_text("")
    monkeypatch.chdir(tmp_path)
    t = parse_target("model.py:Net")
    assert build_recipe(t, dtype="bfloat16").dtype == "bfloat16"
    with pytest.raises(ShorthandError, match="--dtype is a Torch choice"):
        build_recipe(t, framework="jax", dtype="bfloat16")


# --------------------------------------------------------------------------- item 4


def test_a_function_wrapper_module_takes_the_function_name(mws):
    cap = run(mws, "moe:Rotary", [2, 8])
    (g,) = [g for g in cap.groups if g.attrs.get("wrapper", "").endswith("Func")]
    assert (g.kind, g.name, g.attrs["class"]) == ("module", "apply_rotary_pos_emb", "apply_rotary_pos_emb")
    assert g.attrs["wraps"] == "moe.apply_rotary_pos_emb" and g.attrs["wrapper"] == "moe.hub_function.<locals>.Func"
    frame = cap.frames[g.attrs["class_frame"]]
    lines = (mws / "moe.py").read_text().splitlines()
    assert lines[frame.line - 1:frame.line + 1] == ["@hub_function", "def apply_rotary_pos_emb(q, cos, sin):"]
    from capture.analysis.names import group_title

    assert group_title(g) == "apply_rotary_pos_emb"


def test_what_every_layer_reads_folds_into_one_card(mws):
    """Position ids, a mask made by a helper and the rotary table are computed once and
    read by every layer: the first view shows the embedding, one 'layer inputs' card,
    the stack and what follows it."""
    from viewer.projection.projection import Projection

    ids = tensor([1, 6], "int64", generator={"kind": "randint", "low": 0, "high": 50})
    ones = tensor([1, 6], "int64", generator={"kind": "ones"})
    cap = capture_in_process(mws, profile("moe:Decoder", kwargs={"input_ids": ids, "attention_mask": ones}))[0]
    p = Projection(cap)
    (root,) = p.trunk()
    page = p.children(root)
    (fold,) = [st for st in page["stacks"] if st.get("fold") == "plumbing"]
    (layers,) = [st for st in page["stacks"] if st.get("fold") is None]
    assert layers["count"] == 4 and fold["layers"] == 4 and fold["label"] == "layer inputs"
    by_key = {it["key"]: it for it in page["items"]}
    members = [by_key[k] for k in fold["members"][0]]
    assert "rotary" in [it["label"] for it in members if it["type"] == "group"]
    assert fold["names"][0] in ("causal_mask", "rotary") and "causal_mask" in fold["names"]
    assert all(it["stack"]["key"] == fold["key"] for it in members)
    # drawn apart from the fold and the layers: the embedding, the norm and the head only
    rest = [it["label"] for it in page["items"] if "stack" not in it]
    assert rest == ["embed", "norm", "head"]
    # every op of the helper is inside the fold, none outside it
    def item_of(node):  # the page item that holds an op
        g = node.group
        if g == root:
            return f"n{node.id}"
        while cap.groups[g].parent != root:
            g = cap.groups[g].parent
        return f"g{g}"

    mask_ops = [n for n in cap.nodes if n.frame is not None and cap.frames[n.frame].function == "causal_mask"]
    elided = {it["key"] for it in page["elided"]["nodes"]}
    assert mask_ops and {item_of(n) for n in mask_ops} - elided <= set(fold["members"][0])


def test_a_mask_for_layers_one_level_down_folds_into_one_card(mws):
    """BERT's encoder: the mask ops sit beside the embedding, the stack of layers inside
    the encoder group; what only computes the value every layer reads folds all the same."""
    from viewer.projection.projection import Projection

    ids = tensor([1, 6], "int64", generator={"kind": "randint", "low": 0, "high": 50})
    ones = tensor([1, 6], "int64", generator={"kind": "ones"})
    cap = capture_in_process(mws, profile("moe:Encoder", kwargs={"input_ids": ids, "attention_mask": ones}))[0]
    p = Projection(cap)
    root = next(g.id for g in cap.groups if g.attrs.get("class") == "Encoder")
    encoder = next(g.id for g in cap.groups if g.attrs.get("class") == "EncoderStack")
    page = p.children(root)
    (fold,) = page["stacks"]
    assert fold["fold"] == "plumbing" and fold["feeds"] == [f"g{encoder}"] and fold["layers"] == 4
    assert "causal_mask" in fold["names"]
    assert [it["label"] for it in page["items"] if "stack" not in it] == ["embed", "encoder", "head"]
    mask_ops = {f"n{n.id}" for n in cap.nodes if n.group == root and n.frame is not None
                and cap.frames[n.frame].function == "causal_mask"}
    elided = {it["key"] for it in page["elided"]["nodes"]}
    assert mask_ops and mask_ops - elided <= set(fold["members"][0])


# --------------------------------------------------------------------------- item 2 (viewer)


def routed_projection(mws, model):
    from viewer.projection.projection import Projection

    cap = run(mws, model, [2, 8, 16])
    return cap, Projection(cap)


def test_layers_that_differ_only_in_routing_fold_and_say_so(mws):
    cap, p = routed_projection(mws, "moe:RoutedNet")
    blocks = [g.id for g in cap.groups if g.attrs.get("class") == "SparseBlock"]
    experts = [g.id for g in cap.groups if g.attrs.get("class") == "StackedExperts"]
    structure = p.structure()
    assert set(experts) <= structure.routed and not set(blocks) & structure.routed
    shapes = [tuple(tuple(cap.values[o].shape) for n in cap.nodes if n.group == g for o in n.outputs) for g in experts]
    assert len(set(shapes)) > 1  # each layer's experts ran on the tokens its routing chose
    page = p.children(p.trunk()[-1])
    (stack,) = [st for st in page["stacks"] if st.get("fold") is None]
    assert stack["count"] == 3 and stack["routing"] == "routing differs per layer"
    item = {it["key"]: it for it in p.children(blocks[0])["items"]}[f"g{experts[0]}"]
    assert item["routed"].startswith("routed:")


def test_an_experts_loop_is_cut_into_named_lanes_and_the_router_says_top_k(mws):
    cap, p = routed_projection(mws, "moe:RoutedNet")
    block = next(g.id for g in cap.groups if g.attrs.get("class") == "SparseBlock")
    items = {it.get("class"): it for it in p.children(block)["items"] if it["type"] == "group"}
    assert items["Router"]["role"] == "router: top-2 of 4, softmax scores"
    experts = next(g.id for g in cap.groups if g.attrs.get("class") == "StackedExperts")
    lanes = [st for st in p.children(experts)["stacks"] if st.get("fold") == "lane"]
    inside = {experts} | {g.id for g in cap.groups if g.parent == experts}
    hit = sorted({n.inputs[2].literal for n in cap.nodes if n.group in inside and n.op == "aten::select.int"
                  and n.inputs[0].value is not None
                  and (cap.values[n.inputs[0].value].measured or {}).get("param", "").endswith("gate_up_proj")})
    assert [st["label"] for st in lanes] == [f"expert {e}" for e in hit] and lanes
    items = {it.get("class"): it for it in p.children(block)["items"] if it["type"] == "group"}
    assert items["StackedExperts"]["role"] == f"4 experts · {len(hit)} ran, one lane each · sparse: the active top-2 of 4 experts per token, counted as executed"
    assert all(st["names"] == ["gate_up_proj", "down_proj"] for st in lanes)


def test_experts_in_one_batched_call_say_how_many(mws):
    cap, p = routed_projection(mws, "moe:BatchedNet")
    block = next(g.id for g in cap.groups if g.attrs.get("class") == "SparseBlock")
    items = {it.get("class"): it for it in p.children(block)["items"] if it["type"] == "group"}
    assert items["BatchedExperts"]["role"] == "4 experts · batched matmul · sparse: the active top-2 of 4 experts per token, counted as executed"
    assert "routed" not in items["BatchedExperts"]
    (stack,) = [st for st in p.children(p.trunk()[-1])["stacks"]]
    assert stack["count"] == 3 and "routing" not in stack
