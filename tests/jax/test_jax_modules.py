"""Flax module calls as ``module`` groups in JAX captures (``capture/jax/modules.py``
and the converter's marker handling): NNX models written the way Flax's examples and
Gemma-style codebases write them (``nnx.List``/``nnx.Dict`` of blocks, ``nnx.jit``,
``nnx.remat``, ``nnx.scan`` over an ``nnx.vmap``-made stack, ``nnx.cond``, ``nnx.vmap``),
Linen with ``nn.remat`` and ``nn.scan``; and the proof that the interception never
changes the traced program."""

from __future__ import annotations

import importlib
import re
import sys

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
flax = pytest.importorskip("flax")

from capture.jax import modules as jax_modules  # noqa: E402
from capture.jax.convert import _Converter  # noqa: E402
from capture.graph.model import Group  # noqa: E402
from capture.worker.limits import Limits  # noqa: E402

from jax_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write  # noqa: E402
from jaxpr_walk import node_counts, primitive_counts  # noqa: E402

pytestmark = pytest.mark.jax

GEMMA = """
import jax
import jax.numpy as jnp
from flax import nnx


class Embedder(nnx.Module):
    def __init__(self, vocab, dim, *, rngs):
        self.input_embedding = nnx.Param(jax.random.normal(rngs.params(), (vocab, dim)))

    def encode(self, x):
        return self.input_embedding[(x,)] * jnp.sqrt(self.input_embedding.shape[-1]).astype(jnp.float32)

    def decode(self, x):
        return jnp.dot(x, self.input_embedding[...].T)


class RMSNorm(nnx.Module):
    def __init__(self, dim, *, rngs):
        self.scale = nnx.Param(jnp.zeros((dim,)))

    def __call__(self, x):
        var = jnp.mean(jnp.square(x), axis=-1, keepdims=True)
        return x * jax.lax.rsqrt(var + 1e-6) * (1 + self.scale[...])


class Attention(nnx.Module):
    def __init__(self, dim, heads, *, rngs):
        self.heads = heads
        self.q_proj = nnx.Linear(dim, dim, use_bias=False, rngs=rngs)
        self.kv_proj = nnx.Linear(dim, 2 * dim, use_bias=False, rngs=rngs)
        self.out_proj = nnx.Linear(dim, dim, use_bias=False, rngs=rngs)

    def __call__(self, x):
        b, t, d = x.shape
        q = self.q_proj(x).reshape(b, t, self.heads, -1)
        k, v = jnp.split(self.kv_proj(x).reshape(b, t, 2 * self.heads, -1), 2, axis=2)
        probs = jax.nn.softmax(jnp.einsum("BTNH,BSNH->BNTS", q, k), axis=-1)
        return self.out_proj(jnp.einsum("BNTS,BSNH->BTNH", probs, v).reshape(b, t, d))


class FeedForward(nnx.Module):
    def __init__(self, dim, hidden, *, rngs):
        self.gate = nnx.Linear(dim, hidden, rngs=rngs)
        self.up = nnx.Linear(dim, hidden, rngs=rngs)
        self.down = nnx.Linear(hidden, dim, rngs=rngs)

    def __call__(self, x):
        return self.down(nnx.gelu(self.gate(x)) * self.up(x))


class Block(nnx.Module):
    def __init__(self, dim, heads, *, rngs):
        self.pre_attention_norm = RMSNorm(dim, rngs=rngs)
        self.attn = Attention(dim, heads, rngs=rngs)
        self.pre_ffw_norm = RMSNorm(dim, rngs=rngs)
        self.mlp = FeedForward(dim, 2 * dim, rngs=rngs)

    def __call__(self, x):
        x = x + self.attn(self.pre_attention_norm(x))
        return x + self.mlp(self.pre_ffw_norm(x))


class Transformer(nnx.Module):
    def __init__(self, vocab=64, dim=16, heads=2, layers=3, *, rngs: nnx.Rngs):
        self.embedder = Embedder(vocab, dim, rngs=rngs)
        self.layers = nnx.List([Block(dim, heads, rngs=rngs) for _ in range(layers)])
        self.final_norm = RMSNorm(dim, rngs=rngs)

    def __call__(self, tokens):
        x = self.embedder.encode(tokens)
        for layer in self.layers:
            x = layer(x)  # the blocks' call site
        return self.embedder.decode(self.final_norm(x))


class NormedBlock(Block):
    \"\"\"A subclass extending its parent's call (super().__call__: one call, not two).\"\"\"

    def __call__(self, x):
        return super().__call__(x) * 0.5


class DictModel(nnx.Module):
    \"\"\"Blocks in an nnx.Dict, one of them called twice.\"\"\"

    def __init__(self, dim=16, *, rngs: nnx.Rngs):
        self.blocks = nnx.Dict({"enc": Block(dim, 2, rngs=rngs), "dec": NormedBlock(dim, 2, rngs=rngs)})

    def __call__(self, x):
        for name in ("enc", "dec", "enc"):
            x = self.blocks[name](x)
        return x
"""

TRANSFORMS = """
import jax
import jax.numpy as jnp
from flax import nnx


class Block(nnx.Module):
    def __init__(self, dim, *, rngs):
        self.linear = nnx.Linear(dim, dim, rngs=rngs)
        self.norm = nnx.LayerNorm(dim, rngs=rngs)

    def __call__(self, x):
        return x + nnx.relu(self.linear(self.norm(x)))


class Model(nnx.Module):
    def __init__(self, dim=8, *, rngs: nnx.Rngs):
        self.layers = nnx.List([Block(dim, rngs=rngs) for _ in range(2)])
        self.blocks = nnx.Dict({"first": Block(dim, rngs=rngs), "second": Block(dim, rngs=rngs)})

        @nnx.split_rngs(splits=3)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make(rngs):
            return Block(dim, rngs=rngs)

        self.stack = make(rngs)
        self.head = nnx.Linear(dim, 4, rngs=rngs)

    @nnx.jit
    def __call__(self, x):
        for layer in self.layers:
            x = nnx.remat(lambda l, x: l(x))(layer, x)

        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def over_layers(x, block):
            return block(x)

        x = over_layers(x, self.stack)
        x = nnx.cond(x.sum() > 0, lambda m, x: m.blocks["first"](x), lambda m, x: m.blocks["second"](x), self, x)
        x = nnx.vmap(lambda b, x: b(x), in_axes=(None, 0))(self.layers[0], x)
        return self.head(x)
"""

# In the style of Flax's NNX scan-over-layers example (examples/nnx_toy_examples/06_scan_over_layers.py)
SCAN_MLP = """
import jax
import jax.numpy as jnp
from flax import nnx


class Block(nnx.Module):
    def __init__(self, dim: int, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(dim, dim, rngs=rngs)
        self.bn = nnx.BatchNorm(dim, rngs=rngs)
        self.dropout = nnx.Dropout(0.5, rngs=rngs)

    def __call__(self, x: jax.Array):
        return nnx.gelu(self.dropout(self.bn(self.linear(x))))


class ScanMLP(nnx.Module):
    def __init__(self, dim: int = 10, *, n_layers: int = 5, rngs: nnx.Rngs):
        self.n_layers = n_layers

        @nnx.split_rngs(splits=n_layers)
        @nnx.vmap(in_axes=(0,), out_axes=0, axis_size=n_layers)
        def create_block(rngs: nnx.Rngs):
            return Block(dim, rngs=rngs)

        self.layers = create_block(rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def forward(x, model):
            x = model(x)
            return x

        return forward(x, self.layers)
"""

JIT_BLOCKS = """
import jax
from flax import nnx


class Block(nnx.Module):
    def __init__(self, dim, *, rngs):
        self.linear = nnx.Linear(dim, dim, rngs=rngs)

    @nnx.jit
    def __call__(self, x):
        return nnx.relu(self.linear(x))


class Model(nnx.Module):
    def __init__(self, dim=8, *, rngs: nnx.Rngs):
        self.layers = nnx.List([Block(dim, rngs=rngs) for _ in range(3)])

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
"""

LINEN = """
import jax
import jax.numpy as jnp
from flax import linen as nn


class MlpBlock(nn.Module):
    dim: int

    @nn.compact
    def __call__(self, x, _=None):
        h = nn.LayerNorm()(x)
        h = nn.Dense(self.dim * 2)(h)
        return x + nn.Dense(self.dim)(nn.gelu(h)), None


class Encoder(nn.Module):
    dim: int = 8
    layers: int = 3

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(self.dim, name="embed")(x)
        x, _ = nn.remat(MlpBlock)(self.dim, name="first")(x)
        Stack = nn.scan(nn.remat(MlpBlock), variable_axes={"params": 0}, split_rngs={"params": True},
                        length=self.layers)
        x, _ = Stack(self.dim, name="blocks")(x, None)
        return self.head(x)

    def head(self, x):
        return nn.Dense(4, name="out")(x)
"""


@pytest.fixture
def ws(tmp_path):
    write(tmp_path, {"gemma.py": GEMMA, "transforms.py": TRANSFORMS, "linen_models.py": LINEN, "jit_blocks.py": JIT_BLOCKS,
                     "scan_over_layers.py": SCAN_MLP})
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    forget_workspace_modules(tmp_path)


def capture(ws, model, shape, dtype="float32"):
    return capture_in_process(ws, profile(model, args=[tensor(shape, dtype, generator={"kind": "zeros"})]))[0]


def modules(cap):
    return [g for g in cap.groups if g.kind == "module"]


def by_path(cap):
    out: dict = {}
    for g in modules(cap):
        out.setdefault(g.attrs["path"], []).append(g)
    return out


def line_of(text, needle):
    (i,) = [n for n, line in enumerate(text.strip("\n").splitlines(), 1) if needle in line]
    return i


def ancestors(cap, g):
    out = []
    while g.parent is not None:
        g = cap.groups[g.parent]
        out.append(g)
    return out


# --------------------------------------------------------------------------- the traced program is unchanged


def program(jaxpr):
    """The equations of ``jaxpr`` and of every nested jaxpr: primitive, params, operand
    wiring (variables numbered by first appearance) and avals, in order; name stacks
    and tracebacks left out."""
    ids: dict = {}

    def var(v):
        if hasattr(v, "val"):  # a literal
            return ("lit", repr(v.val), str(v.aval))
        return ids.setdefault(v, len(ids)), str(v.aval)

    def param(v):
        if hasattr(v, "eqns"):
            return ("jaxpr", program(v))
        if hasattr(v, "jaxpr") and hasattr(v.jaxpr, "eqns"):
            return ("closed", program(v.jaxpr), [repr(c) for c in v.consts])
        if isinstance(v, (tuple, list)):
            return tuple(param(x) for x in v)
        if callable(v) and not isinstance(v, type):
            return ("callable", getattr(v, "__name__", type(v).__name__))
        return re.sub(r" at 0x[0-9a-f]+", "", repr(v))

    for v in [*jaxpr.constvars, *jaxpr.invars]:
        var(v)
    eqns = [(e.primitive.name, sorted((k, param(p)) for k, p in e.params.items()),
             [var(v) for v in e.invars], [var(v) for v in e.outvars]) for e in jaxpr.eqns]
    return eqns, [var(v) for v in jaxpr.outvars]


def name_stacks(jaxpr, out=None):
    out = set() if out is None else out
    for e in jaxpr.eqns:
        out.add(str(e.source_info.name_stack))
        for p in e.params.values():
            for sub in p if isinstance(p, (tuple, list)) else [p]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    name_stacks(inner, out)
    return out


def nnx_trace(module_name, cls_name, x, intercepted):
    """``jax.make_jaxpr`` of an NNX model the way the capture traces it (split outside,
    merged inside), with or without the interception; ``(closed jaxpr, records)``."""
    from flax import nnx

    model = getattr(importlib.import_module(module_name), cls_name)(rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(model)

    def f(state, x):
        merged = nnx.merge(graphdef, state)
        jax_modules.register_merged([merged], [""])
        return merged(x)

    if not intercepted:
        return jax.make_jaxpr(f)(state, x), []
    with jax_modules.intercept(jax, [(model, "")]) as calls:
        return jax.make_jaxpr(f)(state, x), calls.records


def linen_trace(x, intercepted):
    from linen_models import Encoder

    m = Encoder()
    variables = jax.eval_shape(m.init, jax.random.key(0), x)
    if not intercepted:
        return jax.make_jaxpr(m.apply)(variables, x), []
    with jax_modules.intercept(jax) as calls:
        return jax.make_jaxpr(m.apply)(variables, x), calls.records


CASES = {
    "gemma": lambda on: nnx_trace("gemma", "Transformer", jnp.zeros((2, 8), jnp.int32), on),
    "nnx_dict": lambda on: nnx_trace("gemma", "DictModel", jnp.ones((2, 4, 16)), on),
    "nnx_transforms": lambda on: nnx_trace("transforms", "Model", jnp.ones((3, 8)), on),
    "nnx_scan_over_layers": lambda on: nnx_trace("scan_over_layers", "ScanMLP", jnp.ones((3, 10)), on),
    "linen_scan_remat": lambda on: linen_trace(jnp.ones((2, 8)), on),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_interception_never_changes_the_traced_program(ws, case):
    plain, _ = CASES[case](False)
    marked, records = CASES[case](True)
    again, _ = CASES[case](False)
    assert records, "the interception recorded module calls"
    assert any(jax_modules.MARKER in s for s in name_stacks(marked.jaxpr)), "and marked their equations"
    assert not any(jax_modules.MARKER in s for s in name_stacks(plain.jaxpr) | name_stacks(again.jaxpr))
    assert program(marked.jaxpr) == program(plain.jaxpr) == program(again.jaxpr)
    assert [str(a) for a in marked.in_avals] == [str(a) for a in plain.in_avals]
    assert [str(a) for a in marked.out_avals] == [str(a) for a in plain.out_avals]


def test_classes_are_restored_even_when_the_trace_fails(ws):
    from flax import nnx
    from gemma import Block, Embedder, Transformer

    before = {c: dict(c.__dict__) for c in (Block, Embedder, Transformer, nnx.Linear)}
    model = Transformer(rngs=nnx.Rngs(0))
    with pytest.raises(TypeError):
        with jax_modules.intercept(jax, [(model, "")]):
            assert Block.__call__ is not before[Block]["__call__"]  # patched while tracing
            assert Embedder.encode is not before[Embedder]["encode"]
            jax.make_jaxpr(model)(jnp.zeros((2, 3, 4, 5), jnp.float32))  # float tokens: the embedder fails
    for c, d in before.items():
        assert {k: c.__dict__.get(k) for k in d} == d
    assert not jax_modules._ACTIVE


# --------------------------------------------------------------------------- NNX


@pytest.mark.slow
def test_gemma_style_transformer_shows_its_modules(ws):
    cap = capture(ws, "gemma:Transformer", [2, 8], "int32")
    paths = by_path(cap)
    (root,) = paths[""]
    assert root.parent is None and root.name == "Transformer" and root.attrs["class"] == "Transformer"
    assert root.attrs["module"] == "gemma" and root.attrs["framework"] == "flax.nnx"
    # every block, with attn and mlp and their projections, at its attribute path
    for i in range(3):
        (block,) = paths[f"layers.{i}"]
        assert (block.name, block.attrs["class"], block.parent, block.attrs["call"]) == (f"layers.{i}", "Block", root.id, 0)
        kids = {g.name: g for g in modules(cap) if g.parent == block.id}
        assert list(kids) == ["pre_attention_norm", "attn", "pre_ffw_norm", "mlp"]
        assert [g.attrs["path"] for g in kids.values()] == [f"layers.{i}.{k}" for k in kids]
        attn_kids = [g.attrs["path"] for g in modules(cap) if g.parent == kids["attn"].id]
        assert attn_kids == [f"layers.{i}.attn.{k}" for k in ("q_proj", "kv_proj", "out_proj")]
        assert {g.attrs["class"] for g in modules(cap) if g.parent == kids["mlp"].id} == {"Linear"}
    # the embedder's two methods: two calls of one module, by method
    encode, decode = paths["embedder"]
    assert (encode.name, encode.attrs["method"], encode.attrs["call"]) == ("embedder.encode", "encode", 0)
    assert (decode.name, decode.attrs["method"], decode.attrs["call"]) == ("embedder.decode", "decode", 1)
    assert paths["final_norm"][0].attrs["class"] == "RMSNorm"
    # call sites: the frame of the call, in the model file
    block_frame = cap.frames[paths["layers.1"][0].attrs["frame"]]
    assert (block_frame.file, block_frame.line) == ("gemma.py", line_of(GEMMA, "x = layer(x)  #"))
    q_frame = cap.frames[paths["layers.2.attn.q_proj"][0].attrs["frame"]]
    assert q_frame.line == line_of(GEMMA, "q = self.q_proj(x)")
    # the attention's ops sit in its groups, the einsum scopes stay tracing scopes
    attn = paths["layers.0.attn"][0]
    einsums = [g for g in cap.groups if g.kind == "scope" and g.parent == attn.id]
    assert sorted(g.name for g in einsums) == ["BNTS,BSNH->BTNH", "BTNH,BSNH->BNTS"]
    assert all("not a recovered layer hierarchy" in g.attrs["note"] for g in einsums)
    assert all(g.attrs["note"] == "one call of a Flax module, recorded while tracing" for g in modules(cap))
    assert all(n.group is not None for n in cap.nodes), "every op is inside the model's call"
    dots = [n for n in cap.nodes if n.op == "dot_general" and n.group == paths["layers.0.attn.q_proj"][0].id]
    assert len(dots) == 1
    # the graph is the traced program: the same primitives as an independent trace
    closed, _ = CASES["gemma"](False)
    assert node_counts(cap) == primitive_counts(closed)


def test_nnx_dict_blocks_and_repeated_calls(ws):
    cap = capture(ws, "gemma:DictModel", [2, 4, 16])
    paths = by_path(cap)
    enc = paths["blocks.enc"]
    assert [g.attrs["call"] for g in enc] == [0, 1] and [g.name for g in enc] == ["blocks.enc"] * 2
    (dec,) = paths["blocks.dec"]  # super().__call__ continues the subclass's call
    assert (dec.attrs["call"], dec.attrs["class"]) == (0, "NormedBlock")
    assert [g.attrs["path"] for g in modules(cap) if g.parent == dec.id][:2] == [
        "blocks.dec.pre_attention_norm", "blocks.dec.attn"]
    assert [g.attrs["call"] for g in paths["blocks.enc.attn.q_proj"]] == [0, 1]
    order = [g.attrs["path"] for g in modules(cap) if g.parent == paths[""][0].id]
    assert order == ["blocks.enc", "blocks.dec", "blocks.enc"]


def _in_body(cap, gid):
    while gid is not None:
        if cap.groups[gid].kind == "body":
            return True
        gid = cap.groups[gid].parent
    return False


@pytest.mark.slow
def test_nnx_transforms_keep_their_tracing_scopes_and_find_module_paths(ws):
    cap = capture(ws, "transforms:Model", [3, 8])
    paths = by_path(cap)
    (root,) = paths[""]
    (jit,) = [g for g in cap.groups if g.kind == "jit" and g.parent == root.id]  # nnx.jit: a tracing scope
    remats = [g for g in cap.groups if g.kind == "remat"]
    assert len(remats) == 2 and {g.parent for g in remats} == {jit.id}
    for i, remat in enumerate(remats):  # nnx.remat bodies: the block called inside, found by path
        (block,) = [g for g in modules(cap) if g.parent == remat.id]
        assert (block.attrs["path"], block.attrs["class"]) == (f"layers.{i}", "Block")
        kids = sorted(g.attrs["path"] for g in modules(cap) if g.parent == block.id)
        assert kids == [f"layers.{i}.linear", f"layers.{i}.norm"]
    # nnx.vmap: the same layers.0, a second call, its ops batched under the block's group
    vmapped = paths["layers.0"][1]
    assert (vmapped.attrs["call"], vmapped.parent) == (1, jit.id)
    assert paths["head"][0].parent == jit.id
    # the scan and the cond stay opaque boundaries at this level; the module calls inside
    # them sit only in their unexecuted bodies (capture/jax/control_flow.py)
    assert {n.op for n in cap.nodes if n.opaque and n.group is not None and not _in_body(cap, n.group)} \
        == {"scan", "cond"}
    inside = [g for p in ("blocks.first", "blocks.second") for g in paths[p]]
    assert inside and all(_in_body(cap, g.id) for g in inside)
    assert all(not _in_body(cap, g.id) for g in (root, jit, vmapped))
    assert "note" in jit.attrs and "not a recovered layer hierarchy" in jit.attrs["note"]


def test_a_jit_body_reused_from_the_cache_is_named_for_each_layer(ws):
    """``@nnx.jit`` on a block's ``__call__``: JAX traces layer 0's body once and reuses it
    (the same jaxpr, with layer 0's markers) for layers 1 and 2."""
    cap = capture(ws, "jit_blocks:Model", [3, 8])
    paths = by_path(cap)
    for i in range(3):
        (block,) = paths[f"layers.{i}"]
        (jit,) = [g for g in cap.groups if g.parent == block.id]
        assert jit.kind == "jit"
        (linear,) = paths[f"layers.{i}.linear"]
        assert (linear.parent, linear.attrs["call"], linear.attrs["class"]) == (jit.id, 0, "Linear")


def body_of(closed, prim, param):
    """The first ``prim`` equation's nested jaxpr(s) under ``param``, anywhere."""
    stack = [closed.jaxpr]
    while stack:
        jaxpr = stack.pop(0)
        for e in jaxpr.eqns:
            if e.primitive.name == prim:
                p = e.params[param]
                return [getattr(b, "jaxpr", b) for b in (p if isinstance(p, (tuple, list)) else [p])]
            for p in e.params.values():
                inner = getattr(p, "jaxpr", p)
                if hasattr(inner, "eqns"):
                    stack.append(inner)
    raise AssertionError(f"no {prim}")


def convert_body(records, jaxpr, kind="body"):
    """A nested jaxpr converted the way control-flow body conversion does: walked into a
    container group (here a stand-in ``body`` group) with its variables bound to values."""
    conv = _Converter(None, Limits(), records)
    conv.groups.append(Group(0, kind, "body", None, {"executed": False}))
    env = {v: conv.new_value(v.aval) for v in [*jaxpr.constvars, *jaxpr.invars]}
    conv.walk(jaxpr, env, 0)
    return conv


def tree(conv, parent):
    """The module groups below ``parent`` (through tracing scopes such as a remat)."""
    out = []
    for g in conv.groups:
        if g.parent == parent:
            out += [(g.kind, g.attrs.get("path"), tree(conv, g.id))] if g.kind == "module" else tree(conv, g.id)
    return out


def test_module_calls_inside_scan_and_cond_bodies_form_under_any_container(ws):
    closed, records = CASES["nnx_transforms"](True)
    paths = [r.path for r in records]
    # the scan over the vmap-made stack and both cond branches were intercepted with their paths
    for p in ("stack", "stack.linear", "stack.norm", "blocks.first", "blocks.first.linear", "blocks.second"):
        assert p in paths, p
    (scan_body,) = body_of(closed, "scan", "jaxpr")
    conv = convert_body(records, scan_body)
    assert tree(conv, 0) == [("module", "stack", [("module", "stack.norm", []), ("module", "stack.linear", [])])]
    assert {conv.groups[n.group].kind for n in conv.nodes if n.op == "dot_general"} == {"module"}
    branches = body_of(closed, "cond", "branches")
    got = [tree(convert_body(records, b), 0)[0][1] for b in branches]
    assert sorted(got) == ["blocks.first", "blocks.second"]


# --------------------------------------------------------------------------- Linen


@pytest.mark.slow
def test_nnx_scan_over_a_vmap_made_stack(ws):
    """The scan-over-layers MLP: one scan node at the top level, the root's call
    around it, and the stacked block's calls (with their dropout's RNG use) inside the
    scan body, at the stack's attribute path."""
    cap = capture(ws, "scan_over_layers:ScanMLP", [3, 10])
    (root,) = [g for g in modules(cap) if not _in_body(cap, g.id)]
    assert (root.attrs["path"], root.attrs["class"]) == ("", "ScanMLP")
    (scan,) = [n for n in cap.nodes if n.opaque and not _in_body(cap, n.group)]
    assert scan.op == "scan" and scan.group == root.id
    # The capture converts the scan's body (an unexecuted template): the block's calls are
    # module groups inside it, at the stack's attribute path.
    (body,) = [g for g in cap.groups if g.kind == "body" and g.attrs["node"] == scan.id]
    inside = [g for g in modules(cap) if _in_body(cap, g.id)]
    assert [g.attrs["path"] for g in inside] == ["layers", "layers.linear", "layers.bn", "layers.dropout"]
    assert inside[0].parent == body.id
    closed, records = CASES["nnx_scan_over_layers"](True)
    (body,) = body_of(closed, "scan", "jaxpr")
    assert tree(convert_body(records, body), 0) == [
        ("module", "layers", [("module", "layers.linear", []), ("module", "layers.bn", []),
                              ("module", "layers.dropout", [])])]


def test_linen_modules_are_module_groups_through_remat_and_methods(ws):
    cap = capture(ws, "linen_models:Encoder", [2, 8])
    paths = by_path(cap)
    (root,) = paths[""][:1]
    assert (root.name, root.attrs["class"], root.attrs["framework"], root.parent) == ("Encoder", "Encoder", "flax.linen", None)
    assert not [g for g in cap.groups if g.kind == "scope"], "Linen's name scopes became the module groups"
    (embed,) = paths["embed"]
    assert (embed.name, embed.attrs["class"], embed.parent) == ("embed", "Dense", root.id)
    # nn.remat: the checkpoint keeps its tracing-scope kind; the block is a module inside it
    (first,) = paths["first"]
    remat = cap.groups[first.parent]
    assert remat.kind == "remat" and remat.parent == root.id
    assert [g.attrs["path"] for g in modules(cap) if g.parent == first.id] == [
        "first.LayerNorm_0", "first.Dense_0", "first.Dense_1"]
    assert cap.frames[first.attrs["frame"]].line == line_of(LINEN, 'nn.remat(MlpBlock)(self.dim, name="first")')
    # a method the module calls on itself
    head = paths[""][1]
    assert (head.name, head.attrs["method"], head.attrs["call"], head.parent) == ("head", "head", 1, root.id)
    (out,) = paths["out"]
    assert out.parent == head.id and cap.frames[out.attrs["frame"]].line == line_of(LINEN, 'nn.Dense(4, name="out")')
    # nn.scan: an opaque boundary here; its body's calls are module groups in its
    # unexecuted body only
    assert [n.op for n in cap.nodes if n.opaque and not _in_body(cap, n.group)] == ["scan"]
    assert paths["blocks"] and all(_in_body(cap, g.id) for g in paths["blocks"])


def test_linen_scan_body_module_calls(ws):
    closed, records = CASES["linen_scan_remat"](True)
    (scan_body,) = body_of(closed, "scan", "jaxpr")
    conv = convert_body(records, scan_body)
    (block,) = tree(conv, 0)
    assert block[1] == "blocks"
    assert [p for _, p, _ in block[2]] == ["blocks.LayerNorm_0", "blocks.Dense_0", "blocks.Dense_1"]
    assert not [g for g in conv.groups if g.kind == "scope"]
    # Linen traces the scan body twice; only calls whose equations landed become groups
    assert sum(r.path == "blocks" for r in records) == 2
    assert [g.attrs["call"] for g in conv.groups if g.kind == "module" and g.attrs["path"] == "blocks"] == [0]


def test_linen_counts_match_the_traced_program(ws):
    cap = capture(ws, "linen_models:Encoder", [2, 8])
    closed, _ = CASES["linen_scan_remat"](False)
    assert node_counts(cap) == primitive_counts(closed)


# --------------------------------------------------------------------------- the viewer


def test_viewer_shows_nnx_blocks_as_module_cards_that_stack(ws):
    from viewer.projection.projection import Projection

    cap = capture(ws, "gemma:Transformer", [2, 8], "int32")
    p = Projection(cap)
    (top,) = p.children(-1)["items"]
    assert (top["type"], top["label"], top["class"], top["sublabel"]) == ("group", "Transformer", "Transformer",
                                                                          "module instance")
    items = p.children(top["id"])["items"]
    assert [it["label"] for it in items] == ["embedder.encode", "layers.0", "layers.1", "layers.2", "final_norm",
                                             "embedder.decode"]
    blocks = [it for it in items if it.get("class") == "Block"]
    assert [it["path"] for it in blocks] == ["layers.0", "layers.1", "layers.2"]
    assert [it["identical"] for it in blocks] == [{"count": 3, "index": k} for k in range(3)]
    assert all("identical" not in it for it in items if it.get("class") != "Block")
    # a block's card counts its parameters: 2 norms (16) + q, kv, out (16·16, 16·32, 16·16)
    # + gate, up (16·32+32 each), down (32·16+16)
    assert blocks[0]["params"]["count"] == 2 * 16 + 16 * 16 + 16 * 32 + 16 * 16 + 2 * (16 * 32 + 32) + 32 * 16 + 16
    detail = p.group(blocks[0]["id"])
    assert detail["kind"] == "module" and "Flax module" in detail["honest"]
    assert detail["attrs"]["path"] == "layers.0" and detail["attrs"]["class"] == "Block"
