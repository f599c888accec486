"""Abstract evidence for Torch (issue 25 item 1): ``evidence = "abstract"`` builds and
runs the model on fake tensors (``capture.torch.abstract``) and records the same graph
an eager capture records, with nothing measured."""

from __future__ import annotations

import hashlib
import json
import struct
import sys

import pytest

torch = pytest.importorskip("torch")

from capture.graph import graphfile  # noqa: E402
from capture.graph.model import ABSTRACT_FORWARD_SCOPE  # noqa: E402
from capture.recipe import RecipeError, parse_profile  # noqa: E402
from capture.worker.errors import CaptureError  # noqa: E402

from torch_workspace import capture_in_process, profile, tensor, write  # noqa: E402

pytestmark = pytest.mark.torch

MODEL = '''
import torch
from torch import nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.attn = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.attn(self.ln(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, 2, d // 2).transpose(1, 2) for z in (q, k, v))
        y = (q @ k.transpose(-2, -1) / (d // 2) ** 0.5).masked_fill(self.mask[:t, :t] == 0, float("-inf"))
        y = y.softmax(-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(x)


class TinyLM(nn.Module):
    """Tied embeddings, a buffer, and Python numbers computed from tensors in __init__."""

    def __init__(self, vocab=50, d=16, layers=2, drop=0.1):
        super().__init__()
        self.rates = [x.item() for x in torch.linspace(0, drop, layers)]
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, 32, d))
        self.blocks = nn.ModuleList([Block(d) for _ in range(layers)])
        for blk in self.blocks:
            blk.register_buffer("mask", torch.tril(torch.ones(32, 32)))
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, idx):
        x = self.emb(idx) + self.pos[:, : idx.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return self.head(F.layer_norm(x, x.shape[-1:]))


class Wide(nn.Module):
    """4 GiB of float32 parameters."""

    def __init__(self, width=16384, layers=4):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(width, width, bias=False) for _ in range(layers)])

    def forward(self, x):
        return self.layers(x)


class Masked(nn.Module):
    def forward(self, x):
        y = x * 2
        return y[y > 0]


class Branches(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        if h.sum() > 0:
            return h.relu()
        return h


class Swallows(nn.Module):
    def forward(self, x):
        try:
            n = int(x.sum())
        except Exception:
            n = 3
        return x * n


class Routing(nn.Module):
    """MoE-style routing written with nonzero: expert i takes the tokens routed to it."""

    def __init__(self, d=8, experts=2):
        super().__init__()
        self.gate = nn.Linear(d, experts)
        self.experts = nn.ModuleList([nn.Linear(d, d) for _ in range(experts)])

    def forward(self, x):
        choice = self.gate(x).argmax(-1)
        out = torch.zeros_like(x)
        for i, expert in enumerate(self.experts):
            idx = torch.nonzero(choice == i).squeeze(-1)
            out[idx] = expert(x[idx])
        return out


class ReadsWeights(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(128, 128)
        self.scale = float(self.fc.weight.abs().max())

    def forward(self, x):
        return self.fc(x) * self.scale


MODULE_LEVEL = TinyLM(layers=1)


def make_tiny():
    return TinyLM(layers=3)


def make_tiny_bf16():
    """Converted after building (Module.to on fake parameters), ties kept."""
    return TinyLM(d=64, vocab=5000).to(torch.bfloat16)


def ids():
    return {"idx": torch.randint(0, 50, (2, 12))}
'''


@pytest.fixture
def aws(ws):
    write(ws, {"absmodel.py": MODEL})
    return ws


IDS = [tensor([2, 12], "int64", generator={"kind": "randint", "low": 0, "high": 50})]


def run(ws, table, **kw):
    return capture_in_process(ws, table, **kw)[0]


def both(ws, model, **fields):
    """The eager and the abstract capture of one profile."""
    return run(ws, profile(model, **fields)), run(ws, profile(model, evidence="abstract", **fields))


def group_paths(cap):
    out = {}
    for g in cap.groups:
        out[g.id] = f"{out.get(g.parent, '')}/{g.kind}:{g.name}:{g.attrs.get('path')}:{g.attrs.get('function')}"
    return out


def op_rows(cap, strides=True):
    """Per node, everything an abstract capture must share with the eager one."""
    paths = group_paths(cap)
    values = {v.id: v for v in cap.values}

    def value(vid):
        v = values[vid]
        m = v.measured or {}
        return (tuple(v.shape), v.dtype, tuple(m.get("strides") or ()) if strides else None, m.get("param"),
                m.get("buffer"), m.get("input"), m.get("device"))

    rows = []
    for n in cap.nodes:
        frame = cap.frames[n.frame] if n.frame is not None else None
        rows.append((
            n.op, paths.get(n.group), tuple(value(o) for o in n.outputs),
            tuple(value(o.value) if o.value is not None else ("literal", json.dumps(o.literal)) for o in n.inputs),
            (frame.file, frame.line, frame.column, frame.function, frame.library) if frame else None,
            json.dumps(n.params, sort_keys=True),
        ))
    return rows


# --------------------------------------------------------------------------- the recipe key


def test_the_recipe_key():
    assert parse_profile("p", {"model": "m:Net"}).evidence == "eager"
    r = parse_profile("p", {"model": "m:Net", "evidence": "abstract"})
    assert r.evidence == "abstract" and r.to_table()["evidence"] == "abstract"
    assr = parse_profile("p", r.to_table())
    assert assr == r
    assert "evidence" not in parse_profile("p", {"model": "m:Net"}).to_table()  # the default is not written


@pytest.mark.parametrize("table, problem", [
    pytest.param({"evidence": "fake"}, "expected one of 'eager', 'abstract'", id="unknown value"),
    pytest.param({"evidence": "abstract", "framework": "jax"}, "evidence is a Torch key", id="jax"),
    pytest.param({"evidence": "abstract", "kind": "training_step", "grad_enabled": True}, "records a forward",
                 id="training step"),
])
def test_the_recipe_key_refuses(table, problem):
    with pytest.raises(RecipeError) as info:
        parse_profile("p", {"model": "m:Net", **table})
    assert problem in str(info.value) and info.value.key_path == "profiles.p.evidence"


# --------------------------------------------------------------------------- the same graph


@pytest.mark.slow
def test_the_same_graph_as_an_eager_capture_with_nothing_measured(aws):
    eager, abstract = both(aws, "absmodel:TinyLM", args=IDS)
    assert (eager.backend, eager.coverage.scope) == ("torch_eager", "eager_forward")
    assert (abstract.backend, abstract.coverage.scope, abstract.coverage.status) == (
        "torch_abstract", ABSTRACT_FORWARD_SCOPE, "complete")
    # Same ops, module and function groups, shapes, dtypes, strides, parameters, frames.
    assert op_rows(abstract) == op_rows(eager)
    assert [(g.kind, g.name, g.parent, g.attrs.get("path"), g.attrs.get("class"), g.attrs.get("frame"))
            for g in abstract.groups] == [
        (g.kind, g.name, g.parent, g.attrs.get("path"), g.attrs.get("class"), g.attrs.get("frame"))
        for g in eager.groups]
    assert abstract.frames == eager.frames
    assert any(g.kind == "function" for g in abstract.groups)
    # Nothing measured: no statistics, no bytes, no byte sums per group.
    assert any("stats" in v.measured for v in eager.values)
    assert not any("stats" in v.measured or "bytes" in v.measured for v in abstract.values)
    assert not any("output_bytes" in g.attrs or "result_bytes" in g.attrs for g in abstract.groups)
    # What fake storage proves stays: views of one storage are aliases.
    assert [v.measured.get("aliases") for v in abstract.values] == [v.measured.get("aliases") for v in eager.values]
    assert "prim::device" not in {n.op for n in abstract.nodes}
    meta = abstract.meta
    assert (meta["evidence"], meta["state"], meta["stats"]) == ("abstract", "abstract", False)
    assert "nothing was computed" in meta["evidence_note"]
    assert "memory_estimate" not in meta and "memory_estimate" in eager.meta


@pytest.mark.slow
def test_factories_and_module_level_instances(aws):
    for fields in ({"init": {"factory": "absmodel:make_tiny"}},
                   {"inputs": {"factory": "absmodel:ids"}}):
        eager, abstract = both(aws, "absmodel:TinyLM", **({"args": IDS} | fields if "init" in fields else fields))
        assert op_rows(abstract) == op_rows(eager)
    eager, abstract = both(aws, "absmodel:MODULE_LEVEL", args=IDS)
    assert op_rows(abstract) == op_rows(eager)
    assert abstract.meta["state"] == "abstract"
    eager, abstract = both(aws, "absmodel:TinyLM", args=IDS, init={"factory": "absmodel:make_tiny_bf16"})
    assert op_rows(abstract) == op_rows(eager)
    weights = {v.measured["param"]: v.dtype for v in abstract.values if v.measured.get("param")}
    assert weights["emb.weight"] == "bfloat16" and "head.weight" not in weights  # tied: one value


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmRSS from /proc")
def test_no_parameter_storage(aws):
    """4 GiB of parameters: the abstract capture's process does not grow by them."""

    def rss():
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmRSS:"))

    before = rss()
    cap = run(aws, profile("absmodel:Wide", args=[tensor([2, 16384])], evidence="abstract"))
    assert rss() - before < 512 << 20
    assert [n.op for n in cap.nodes] == ["aten::t", "aten::mm"] * 4
    weights = [v for v in cap.values if v.measured.get("param")]
    assert [(v.shape, v.measured["strides"]) for v in weights] == [([16384, 16384], [16384, 1])] * 4


def test_the_graph_file_refuses_measurements_in_an_abstract_capture(aws):
    cap = run(aws, profile("absmodel:TinyLM", args=IDS, evidence="abstract"))
    data = graphfile.encode(cap)
    assert graphfile.decode(data).coverage.scope == ABSTRACT_FORWARD_SCOPE
    cap.values = list(cap.values)  # rows of their own (a file's rows are built on access, read-only)
    vid = next(v.id for v in cap.values if v.measured.get("param"))
    cap.values[vid].measured["stats"] = {"min": 0.0, "max": 1.0, "mean": 0.5, "std": 0.1, "nan": 0, "inf": 0}
    with pytest.raises(graphfile.GraphFileError, match=rf"values.measured\[{vid}\].stats: an abstract capture"):
        graphfile.decode(graphfile.encode(cap))
    del cap.values[vid].measured["stats"]
    cap.values[vid].measured["bytes"] = 64
    with pytest.raises(graphfile.GraphFileError, match="bytes: an abstract capture carries no measured evidence"):
        graphfile.decode(graphfile.encode(cap))
    del cap.values[vid].measured["bytes"]
    cap.groups[0].attrs["output_bytes"] = 10
    with pytest.raises(graphfile.GraphFileError, match=r"groups\[0\].attrs.output_bytes"):
        graphfile.decode(graphfile.encode(cap))


# --------------------------------------------------------------------------- data-dependent ops


@pytest.mark.parametrize("model, needle, condition", [
    pytest.param("absmodel:Branches", "if h.sum() > 0:", "u0", id="item in control flow"),
    pytest.param("absmodel:Swallows", "n = int(x.sum())", "zuf0", id="swallowed by user code"),
])
def test_python_control_flow_that_needs_a_value_stops_the_capture(aws, model, needle, condition):
    """Only the model's Python asking a data-dependent value for an answer stops an
    abstract capture (issue 38 item 1), also when the model's code catches the error."""
    with pytest.raises(CaptureError) as info:
        run(aws, profile(model, args=[tensor([3, 4])], evidence="abstract"))
    err = info.value
    assert (err.stage, err.error_type) == ("trace", "DataDependentOp")
    d = err.details
    assert (d["op"], d["reason"], d["phase"]) == ("the model's Python", "GuardOnDataDependentSymNode", "forward")
    assert condition in d["condition"]
    frame = d["frame"]
    assert frame["file"] == "absmodel.py"
    assert needle in (aws / "absmodel.py").read_text().splitlines()[frame["line"] - 1]
    assert f"absmodel.py:{frame['line']}" in err.message and f"{condition}: a value aten::_local_scalar_dense made at absmodel.py" in err.message
    assert 'evidence = "eager"' in err.message and d["ways_out"] == ["eager_smaller_config", "eager"]


@pytest.mark.parametrize("model, shape, symbols", [
    pytest.param("absmodel:Masked", [3, 4], [("u0", 0, 12, "aten::index.Tensor")], id="boolean mask"),
    pytest.param("absmodel:Routing", [3, 8], [("u0", 0, 3, "aten::nonzero"), ("u1", 0, 3, "aten::nonzero")],
                 id="moe routing"),
])
def test_a_size_that_depends_on_data_is_a_symbol(aws, model, shape, symbols):
    """``nonzero``, a boolean mask, routing by value: an unbacked size ``u0`` with its
    bounds, carried by every shape it reaches, as torch.export does; the graph file
    keeps it (issue 38 item 1)."""
    eager, fake = both(aws, model, args=[tensor(shape)])
    got = [(e["name"], e.get("min"), e.get("max"), e["op"]) for e in fake.meta["symbols"]]
    assert got == symbols
    assert [n.op for n in fake.nodes] == [n.op for n in eager.nodes]  # the same program, sizes aside
    dims = {d for v in fake.values for d in v.shape if type(d) is str}
    assert {name for name, *_ in symbols} <= dims and "symbols" not in eager.meta
    for e in fake.meta["symbols"]:  # the op that made it is where the symbol first appears
        assert any(e["name"] in map(str, fake.values[o].shape) for o in fake.nodes[e["node"]].outputs)
    back = graphfile.decode(graphfile.encode(fake))
    assert [list(v.shape) for v in back.values] == [list(v.shape) for v in fake.values]
    assert back.meta["symbols"] == fake.meta["symbols"]


def test_a_constructor_that_reads_weights_stops_the_build(aws):
    with pytest.raises(CaptureError) as info:
        run(aws, profile("absmodel:ReadsWeights", args=[tensor([2, 128])], evidence="abstract"))
    d = info.value.details
    assert (info.value.error_type, d["phase"], d["reason"]) == ("DataDependentOp", "build", "GuardOnDataDependentSymNode")
    assert "float(self.fc.weight.abs().max())" in (aws / "absmodel.py").read_text().splitlines()[d["frame"]["line"] - 1]
    assert "building the model" in info.value.message


# --------------------------------------------------------------------------- checkpoints


def _state(ws):
    """TinyLM's state dict (eager), saved both ways."""
    sys.path.insert(0, str(ws))
    try:
        import absmodel
    finally:
        sys.path.remove(str(ws))
    state = absmodel.TinyLM().state_dict()
    (ws / "runs").mkdir(exist_ok=True)
    torch.save(state, ws / "runs" / "best.pt")
    from safetensors.torch import save_file

    unique = {k: v.contiguous() for k, v in state.items() if k != "head.weight"}  # tied: saved once
    save_file(unique, str(ws / "runs" / "best.safetensors"))
    return state


@pytest.mark.parametrize("rel", ["runs/best.pt", "runs/best.safetensors"])
def test_a_checkpoint_is_checked_not_loaded(aws, rel):
    pytest.importorskip("safetensors")
    _state(aws)
    cap, ctx = capture_in_process(aws, profile("absmodel:TinyLM", args=IDS, evidence="abstract",
                                               init={"args": [], "kwargs": {}, "checkpoint": rel}))
    m = cap.meta
    assert (m["state"], m["checkpoint"], m["checkpoint_strict"]) == ("checkpoint_checked", rel, True)
    assert "nothing was loaded" in m["state_note"] and "checkpoint_load_s" not in m
    # Hashed like a loaded one: replacing it makes the graph stale.
    sources = ctx.files.imported_sources(ctx.requested_sources)
    assert [s.sha256 for s in sources if s.path == rel] == [hashlib.sha256((aws / rel).read_bytes()).hexdigest()]


def test_a_safetensors_checkpoint_is_read_from_its_header_only(aws):
    """A header describing 1 GiB of tensors and no data at all: checked all the same."""
    header = {"w": {"dtype": "F32", "shape": [16384, 16384], "data_offsets": [0, 1 << 30]}}
    write(aws, {"big.py": "from torch import nn\n\nclass Big(nn.Module):\n    def __init__(self):\n"
                          "        super().__init__()\n        self.w = nn.Parameter(__import__('torch').empty(16384, 16384))\n\n"
                          "    def forward(self, x):\n        return x @ self.w\n"})
    body = json.dumps(header).encode()
    (aws / "runs").mkdir(exist_ok=True)
    (aws / "runs" / "big.safetensors").write_bytes(struct.pack("<Q", len(body)) + body)
    cap = run(aws, profile("big:Big", args=[tensor([2, 16384])], evidence="abstract",
                           init={"args": [], "kwargs": {}, "checkpoint": "runs/big.safetensors"}))
    assert cap.meta["checkpoint_tensors"] == 1
    header["w"]["shape"] = [16384, 8]
    body = json.dumps(header).encode()
    (aws / "runs" / "big.safetensors").write_bytes(struct.pack("<Q", len(body)) + body)
    with pytest.raises(CaptureError) as info:
        run(aws, profile("big:Big", args=[tensor([2, 16384])], evidence="abstract",
                         init={"args": [], "kwargs": {}, "checkpoint": "runs/big.safetensors"}))
    assert info.value.error_type == "ShapeMismatch" and "w: checkpoint [16384, 8], model [16384, 16384]" in info.value.message


def test_checkpoint_key_checks_in_an_abstract_capture(aws):
    state = _state(aws)
    del state["blocks.0.ln.weight"]
    state["extra.weight"] = torch.zeros(2)
    torch.save(state, aws / "runs" / "partial.pt")
    init = {"args": [], "kwargs": {}, "checkpoint": "runs/partial.pt"}
    with pytest.raises(CaptureError) as info:
        run(aws, profile("absmodel:TinyLM", args=IDS, evidence="abstract", init=init))
    assert info.value.error_type == "StateDictMismatch"
    assert info.value.details["missing"] == ["blocks.0.ln.weight"]
    assert info.value.details["unexpected"] == ["extra.weight"]
    cap = run(aws, profile("absmodel:TinyLM", args=IDS, evidence="abstract", init={**init, "strict": False}))
    assert (cap.meta["checkpoint_missing"], cap.meta["checkpoint_unexpected"]) == (["blocks.0.ln.weight"], ["extra.weight"])


def test_a_legacy_pt_checkpoint_is_refused(aws):
    state = _state(aws)
    torch.save(state, aws / "runs" / "legacy.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(CaptureError) as info:
        run(aws, profile("absmodel:TinyLM", args=IDS, evidence="abstract",
                         init={"args": [], "kwargs": {}, "checkpoint": "runs/legacy.pt"}))
    assert info.value.error_type == "LegacyCheckpoint" and "evidence = \"eager\"" in info.value.message


def test_a_fixture_is_loaded_and_made_fake(aws):
    (aws / "data").mkdir()
    torch.save({"idx": torch.randint(0, 50, (2, 12))}, aws / "data" / "batch.pt")
    eager, abstract = both(aws, "absmodel:TinyLM", inputs={"fixture": "data/batch.pt"})
    assert op_rows(abstract) == op_rows(eager)


# --------------------------------------------------------------------------- libraries


@pytest.mark.slow
def test_a_library_branching_on_fake_tensors_is_reported(aws):
    pytest.importorskip("transformers")
    write(aws, {"hf.py": '''
import torch
from transformers import LlamaConfig, LlamaForCausalLM


def llama():
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=1, vocab_size=64, max_position_embeddings=32)
    return LlamaForCausalLM(config).eval()


def unmasked():
    return {"input_ids": torch.randint(0, 64, (1, 8))}


def masked():
    return {"input_ids": torch.randint(0, 64, (1, 8)), "attention_mask": torch.ones(1, 8, dtype=torch.long)}
'''})
    table = {"init": {"factory": "hf:llama"}}
    # Without a mask, transformers asks nothing: the same graph as eager.
    eager, abstract = (run(aws, profile("transformers:LlamaForCausalLM", inputs={"factory": "hf:unmasked"},
                                        **table, **ev)) for ev in ({}, {"evidence": "abstract"}))
    assert op_rows(abstract, strides=False) == op_rows(eager, strides=False)
    assert "abstract_differences" not in abstract.meta
    # With one, it builds the mask explicitly for fake tensors, and the capture says so.
    eager, abstract = (run(aws, profile("transformers:LlamaForCausalLM", inputs={"factory": "hf:masked"},
                                        **table, **ev)) for ev in ({}, {"evidence": "abstract"}))
    [diff] = abstract.meta["abstract_differences"]
    assert (diff["library"], diff["check"]) == ("transformers", "transformers.utils.import_utils.is_fake_tensor")
    assert [s["file"].rsplit("/", 1)[-1] for s in diff["sites"]] == ["masking_utils.py"]
    assert diff["ops"] > 0 and "is_causal=True" in diff["effect"]
    assert len(abstract.nodes) > len(eager.nodes)
    assert sorted(f.rsplit("transformers/", 1)[-1] for f in diff["files"]) == [
        "integrations/sdpa_attention.py", "masking_utils.py"]
    # Outside the files it names, the ops are the eager ones, in order.

    def outside(cap):
        return [r for r, n in zip(op_rows(cap, strides=False), cap.nodes)
                if n.frame is None or cap.frames[n.frame].file not in diff["files"]]

    assert outside(abstract) == outside(eager) and len(outside(eager)) > 50


PICKED = '''
import torch
from torch import nn


class Picked(nn.Module):
    """A constructor that finds a position in a small real tensor with ``nonzero`` (as
    ``init_device_mesh`` finds its rank's coordinates): the fake mode's answer makes an
    ``empty_strided`` of a data-dependent size, which is its own to run."""

    def __init__(self):
        super().__init__()
        self.at = int((torch.arange(4) == 2).nonzero()[0, 0])
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) * self.at
'''


def test_a_constructor_using_nonzero_on_a_small_tensor_builds(ws):
    write(ws, {"picked.py": PICKED})
    eager, abstract = both(ws, "picked:Picked", args=[tensor([2, 4])])
    assert op_rows(abstract) == op_rows(eager)
    assert "mul" in abstract.nodes[-1].op
