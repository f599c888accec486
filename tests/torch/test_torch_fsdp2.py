"""Torch FSDP2 (``fully_shard``) and tensor parallelism on a fake process group (issue 46).

Models of our own, in the patterns of PyTorch's FSDP2 and 2-D (FSDP + TP) examples: a
small residual network sharded at the root only, per block and then the root (the usual
recipe), as a training step, on a 2x2 mesh with a tensor-parallel MLP in each block, and
a tensor-parallel attention whose local heads go through a workspace function.

What must hold: the sharded parameters are the module's parameters (their DTensor
placements and this rank's shape; per-rank bytes exactly the analytic shard sizes), the
all-gathers and reduce-scatters name their mesh axis and carry this rank's bytes, with
the counts per module that ``CommDebugMode`` gives for the same forward in plain PyTorch,
the gather chain feeds the forward (no orphan value, and no dead-end value the unsharded
model does not have), ``to_local`` sits between the groups it joins, and DTensor ops
report FLOPs per rank beside the global count. The captures run in one fresh interpreter
(``tests/sharded_captures.py``); CommDebugMode's reference runs in another."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from collections import Counter

import pytest

pytest.importorskip("torch")

from capture.graph.model import tree_leaves  # noqa: E402
from capture.graph.sharding import check_sharding  # noqa: E402
from capture.torch.cost import count  # noqa: E402

from capture_workspace import profile_table, tensor, write  # noqa: E402
from sharded_captures import capture_all, read  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]

MODELS = '''
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

DIM, HIDDEN, IN, OUT = 32, 64, 8, 6


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.up = nn.Linear(DIM, HIDDEN)
        self.down = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self, depth: int = 2):
        super().__init__()
        self.embed = nn.Linear(IN, DIM)
        self.blocks = nn.ModuleList(Block() for _ in range(depth))
        self.head = nn.Linear(DIM, OUT)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def fsdp_root():
    """fully_shard on the root alone: one all-gather for every parameter."""
    model = Net()
    fully_shard(model, mesh=init_device_mesh("cpu", (4,), mesh_dim_names=("dp",)))
    return model


def fsdp_blocks():
    """The usual recipe: each block, then the root (which takes the rest)."""
    mesh = init_device_mesh("cpu", (4,), mesh_dim_names=("dp",))
    model = Net()
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def fsdp_blocks_own_group():
    """The model's code starts the fake process group itself (no recipe mesh: statistics on)."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=4)
    return fsdp_blocks()


def fsdp_tp():
    """2-D: each block's MLP tensor-parallel over tp, then FSDP over dp."""
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = Net()
    for block in model.blocks:
        parallelize_module(block, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def sgd(params):
    return torch.optim.SGD(params, lr=0.1)


def split_heads(x, heads):
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 8):
        super().__init__()
        self.heads = heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        heads = self.heads // 4 if isinstance(self.wq.weight, torch.distributed.tensor.DTensor) else self.heads
        q, k, v = (split_heads(w(x), heads) for w in (self.wq, self.wk, self.wv))
        y = F.scaled_dot_product_attention(q, k, v)
        return self.wo(y.transpose(1, 2).flatten(2))


def tp_attention():
    mesh = init_device_mesh("cpu", (4,), mesh_dim_names=("tp",))
    plan = {"wq": ColwiseParallel(), "wk": ColwiseParallel(), "wv": ColwiseParallel(), "wo": RowwiseParallel()}
    return parallelize_module(Attention(), mesh, plan)
'''

X = tensor([2, 5, 8])
STEP = {"kind": "training_step", "grad_enabled": True, "mode": "train",
        "step": {"loss": "sum", "optimizer": {"factory": "models:sgd"}}}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return write(tmp_path_factory.mktemp("ws"), {"models.py": MODELS})


@pytest.fixture(scope="module")
def caps(root, tmp_path_factory):
    def case(model, factory=None, mesh=None, **fields):
        init = {"factory": f"models:{factory}"} if factory else None
        return {"framework": "torch", "root": str(root),
                "table": profile_table(model, args=[X], init=init, mesh=mesh, **fields)}

    cases = {
        "plain": case("models:Net"),
        "plain_step": case("models:Net", **STEP),
        "root": case("models:Net", "fsdp_root", {"dp": 4}),
        "blocks": case("models:Net", "fsdp_blocks", {"dp": 4}),
        "blocks_step": case("models:Net", "fsdp_blocks", {"dp": 4}, **STEP),
        "blocks_abstract": case("models:Net", "fsdp_blocks", {"dp": 4}, evidence="abstract"),
        "fsdp_tp": case("models:Net", "fsdp_tp", {"dp": 2, "tp": 2}),
        "attn_plain": {"framework": "torch", "root": str(root),
                       "table": profile_table("models:Attention", args=[tensor([2, 5, 32])])},
        "attn_tp": {"framework": "torch", "root": str(root), "table": profile_table(
            "models:Attention", args=[tensor([2, 5, 32])], init={"factory": "models:tp_attention"}, mesh={"tp": 4})},
    }
    for case_ in cases.values():
        if case_["table"].get("mesh") is None:
            case_["table"].pop("mesh", None)
    return capture_all(cases, tmp_path_factory.mktemp("out"))


REFERENCE = '''
import json, sys
import torch
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
from torch.distributed.tensor.debug import CommDebugMode

sys.path.insert(0, sys.argv[1])
import models

out = {}
for factory, world in (("fsdp_root", 4), ("fsdp_blocks", 4), ("fsdp_tp", 4)):
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    model = getattr(models, factory)()
    mode = CommDebugMode()
    with mode:
        model(torch.randn(2, 5, 8)).sum().backward()
    out[factory] = {
        module: {key: {str(op).split("'")[1] if "'" in str(op) else str(op): n for op, n in ops.items()}
                 for key, ops in counts.items()}
        for module, counts in mode.comm_module_counts.items()}
    dist.destroy_process_group()
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def reference(root):
    """CommDebugMode's collective counts per module for each factory's forward and backward
    in plain PyTorch, on the same fake process group (a fresh interpreter)."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(REFERENCE), str(root)], capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- helpers


def loose_ends(cap):
    """(orphans, dead ends): values no node made that the capture does not name (an input,
    a parameter, a buffer), and values a node made that nothing reads and no output holds."""
    produced, consumed = set(), set()
    for n in cap.nodes:
        produced.update(n.outputs)
        consumed.update(o.value for o in n.inputs if o.value is not None)
    outputs = set(tree_leaves(cap.outputs))
    orphans, dead = [], []
    for v in cap.values:
        m = v.measured or {}
        if v.id not in produced and not any(k in m for k in ("input", "param", "buffer")):
            orphans.append(v.id)
        if v.id in produced and v.id not in consumed and v.id not in outputs:
            dead.append(v.id)
    return orphans, dead


def dead_end_ops(cap):
    """What made each dead-end value, by op (a LayerNorm's saved mean and rstd in eval mode,
    a training step's updated parameters: the unsharded model has them too)."""
    producer = {v: n.op for n in cap.nodes for v in n.outputs}
    return Counter(producer[v] for v in loose_ends(cap)[1])


def params(cap):
    return {v.measured["param"]: v for v in cap.values if v.measured and "param" in v.measured}


def collectives(cap):
    return [n for n in cap.nodes if (n.params or {}).get("collective")]


def subtree(cap, gid):
    """Group ``gid`` and every group inside it."""
    out, todo = set(), [gid]
    while todo:
        g = todo.pop()
        out.add(g)
        todo += [c.id for c in cap.groups if c.parent == g]
    return out


def module_group(cap, path):
    (g,) = [g for g in cap.groups if g.kind == "module" and g.attrs.get("path") == path and g.parent is not None
            or g.kind == "module" and path == "" and g.parent is None]
    return g


def shard_bytes(shape, ranks, itemsize=4):
    """This rank's padded shard of a parameter FSDP splits on dim 0 over ``ranks``: what it
    sends to the all-gather."""
    return math.ceil(shape[0] / ranks) * math.prod(shape[1:]) * itemsize


def local_bytes(shape, ranks, itemsize=4):
    """Rank 0's unpadded shard (torch.chunk on dim 0): what its DTensor parameter holds."""
    return min(math.ceil(shape[0] / ranks), shape[0]) * math.prod(shape[1:]) * itemsize


# --------------------------------------------------------------------------- parameters


@pytest.mark.parametrize("case", ["root", "blocks"])
def test_sharded_parameters_are_the_modules_parameters(caps, case):
    plain, cap = read(caps["plain"]), read(caps[case])
    whole = {name: v.shape for name, v in params(plain).items()}
    got = params(cap)
    assert set(got) == set(whole) and len(got) == 16
    for name, v in got.items():
        assert not v.measured.get("external")
        assert v.shape == whole[name]  # global
        s = v.sharding
        assert s["placements"] == ["S(0)"] and s["spec"][0] == ["dp"]
        assert s["per_device_shape"] == [math.ceil(whole[name][0] / 4)] + whole[name][1:]
        assert v.measured["bytes"] == local_bytes(whole[name], 4)
        check_sharding(s, v.shape, cap.meshes, name)
    expected = sum(local_bytes(shape, 4) for shape in whole.values())
    assert cap.meta["per_device_memory"]["param_bytes"] == expected
    assert plain.meta["per_device_memory"]["param_bytes"] == sum(math.prod(s) * 4 for s in whole.values())
    assert not [v for v in cap.values if (v.measured or {}).get("external")]
    # FSDP swapping a parameter's sharded and gathered forms (the root keeps them gathered
    # after the forward) writes nothing
    assert "state_writes" not in cap.meta and cap.coverage.effects == "none"


def test_each_parameter_enters_its_gather_through_to_local(caps):
    cap = read(caps["blocks"])
    by_id = {v.id: name for name, v in params(cap).items()}
    to_local = [n for n in cap.nodes if n.op == "dtensor::to_local"]
    assert sorted(by_id[n.inputs[0].value] for n in to_local) == sorted(by_id.values())
    copy_in = [n for n in cap.nodes if n.op == "fsdp::all_gather_copy_in"]
    assert len(copy_in) == 3
    fed = {o.value for n in copy_in for o in n.inputs if o.value is not None}
    for n in to_local:
        assert n.outputs[0] in fed  # the flat, padded shard FSDP sends
        assert n.params["placements"] == ["S(0)"]
        param, sent = cap.values[n.inputs[0].value], cap.values[n.outputs[0]]
        if len(param.shape) > 1:  # flattened: a view of the shard, not its shape
            assert "shard_view" in n.params and sent.sharding is None and len(sent.shape) == 1
        else:
            assert sent.sharding["local"] is True and sent.shape == param.sharding["per_device_shape"]
    block0 = module_group(cap, "blocks.0")
    gathers_in_block0 = [n for n in to_local if n.group == block0.id]
    assert {by_id[n.inputs[0].value] for n in gathers_in_block0} == {
        f"blocks.0.{p}" for p in ("norm.weight", "norm.bias", "up.weight", "up.bias", "down.weight", "down.bias")}


# --------------------------------------------------------------------------- collectives


@pytest.mark.parametrize("case, factory", [("root", "fsdp_root"), ("blocks", "fsdp_blocks")])
def test_collectives_carry_axis_and_bytes_per_module_as_comm_debug_mode(caps, reference, case, factory):
    plain, cap = read(caps["plain"]), read(caps[case])
    whole = {name: v.shape for name, v in params(plain).items()}
    ref = reference[factory]
    units = {"": [n for n in whole if not n.startswith("blocks.")]} if case == "blocks" else {"": list(whole)}
    if case == "blocks":
        units.update({f"blocks.{i}": [n for n in whole if n.startswith(f"blocks.{i}.")] for i in range(2)})
    for path, names in units.items():
        g = module_group(cap, path)
        inside = subtree(cap, g.id)
        got = [n for n in collectives(cap) if n.group in inside]
        key = "FSDPNet" + (f".{path}" if path else "")
        assert len(got) == ref[key]["forward"]["c10d._allgather_base_"], key
        own = [n for n in got if n.group == g.id]
        (gather,) = own
        c = gather.params["collective"]
        assert (c["op"], c["axes"], c["devices"]) == ("all_gather", ["dp"], 4)
        assert c["operand_bytes"] == sum(shard_bytes(whole[n], 4) for n in names)
        assert c["bytes_sent_per_device"] == 3 * c["operand_bytes"]


def test_training_step_gathers_and_reduce_scatters_as_comm_debug_mode(caps, reference):
    cap = read(caps["blocks_step"])
    ref = reference["fsdp_blocks"]["FSDPNet"]
    kinds = Counter(n.params["collective"]["op"] for n in collectives(cap))
    expected = Counter()
    for key in ("forward", "backward"):
        for op, n in ref[key].items():
            expected["all_gather" if "allgather" in op else "reduce_scatter"] += n
    assert kinds == expected and kinds["reduce_scatter"] == 3
    plain = read(caps["plain"])
    whole = {name: v.shape for name, v in params(plain).items()}
    sizes = sorted(n.params["collective"]["operand_bytes"] for n in collectives(cap)
                   if n.params["collective"]["op"] == "reduce_scatter")
    block = sum(4 * shard_bytes(whole[n], 4) for n in whole if n.startswith("blocks.0."))
    rest = sum(4 * shard_bytes(whole[n], 4) for n in whole if not n.startswith("blocks."))
    assert sizes == sorted([block, block, rest])  # each rank reduces its unit's whole (padded) gradient
    for n in collectives(cap):
        assert n.params["collective"]["axes"] == ["dp"] and n.params["collective"]["devices"] == 4
    grads = [v for v in cap.values if v.measured and "grad_of" in v.measured]
    assert {v.measured["grad_of"] for v in grads} == set(whole)
    assert cap.meta["per_device_memory"]["gradient_bytes"] == cap.meta["per_device_memory"]["param_bytes"]


# --------------------------------------------------------------------------- connected


@pytest.mark.parametrize("case, plain", [("root", "plain"), ("blocks", "plain"), ("blocks_step", "plain_step"),
                                         ("fsdp_tp", "plain"), ("blocks_abstract", "plain")])
def test_the_gather_chain_feeds_the_forward(caps, case, plain):
    cap, ref = read(caps[case]), read(caps[plain])
    orphans, _ = loose_ends(cap)
    assert orphans == []
    assert dead_end_ops(cap) == dead_end_ops(ref)
    # each gathered parameter names its parameter; each layer reads its own
    gathered = {v.measured["gathered"]: v for v in cap.values if "gathered" in (v.measured or {})}
    assert set(gathered) == set(params(cap))
    for n in cap.nodes:
        for o in n.inputs:
            name = (cap.values[o.value].measured or {}).get("gathered") if o.value is not None else None
            if not name or n.op in ("aten::detach", "dtensor::from_local") or n.group is None:
                continue  # FSDP over TP makes a DTensor parameter of the gathered tensor first
            if cap.groups[n.group].kind == "module":
                assert name.rsplit(".", 1)[0] == cap.groups[n.group].attrs["path"], name
    # every forward op that reads a weight reads the gathered one: the chain made it
    producer = {v: n for n in cap.nodes for v in n.outputs}
    forward = subtree(cap, module_group(cap, "").id)
    for n in cap.nodes:
        if n.op == "aten::t" and n.group in forward:
            chain, p = [], producer[n.inputs[0].value]
            while p.op != "fsdp::split_with_sizes_copy" and len(chain) < 4:
                chain.append(p.op)
                p = producer[p.inputs[0].value]
            assert p.op == "fsdp::split_with_sizes_copy" and chain[-1] == "aten::as_strided", chain
    for v in cap.values:
        if v.sharding is not None:
            check_sharding(v.sharding, v.shape, cap.meshes, f"values[{v.id}]")


def test_per_block_and_root_captures_in_the_worker(root):
    """The usual recipe in a real worker process (the capture the issue saw die)."""
    from capture.recipe import parse_profile
    from capture.session.runner import run_capture

    for factory, mesh in (("fsdp_blocks", {"dp": 4}), ("fsdp_tp", {"dp": 2, "tp": 2}),
                          ("fsdp_blocks_own_group", None)):
        table = profile_table("models:Net", args=[X], init={"factory": f"models:{factory}"},
                              **({"mesh": mesh} if mesh else {}))
        c = run_capture(root, parse_profile("p", table), timeout=180)
        assert c.failure is None, c.failure
        assert len(params(c)) == 16 and not loose_ends(c)[0]
        if mesh is None:  # statistics on (the process group is the model's): measured, never of freed memory
            assert c.meta["stats"] is True
            assert [v for v in c.values if "stats" in (v.measured or {})]


# --------------------------------------------------------------------------- FSDP + TP


def test_fsdp_and_tensor_parallel_on_a_2x2_mesh(caps, reference):
    plain, cap = read(caps["plain"]), read(caps["fsdp_tp"])
    whole = {name: v.shape for name, v in params(plain).items()}
    got = params(cap)
    assert set(got) == set(whole)
    assert [a["name"] for a in cap.meshes[got["blocks.0.up.weight"].sharding["mesh"]]["axes"]] == ["dp", "tp"]
    # the slices mesh["dp"] and mesh["tp"] are axes of that one mesh, not meshes of their own
    assert len(cap.meshes) == 1 and {v.sharding["mesh"] for v in cap.values if v.sharding} == {0}
    up = got["blocks.0.up.weight"].sharding  # [64, 32]: Shard(0) over tp, FSDP's _StridedShard(0) within
    assert up["spec"] == [["tp", "dp"], []] and up["per_device_shape"] == [16, 32]
    assert up["placements"] == ["_S(0, 2)", "S(0)"]
    down = got["blocks.0.down.weight"].sharding  # [32, 64]: dp on rows, tp on columns
    assert down["spec"] == [["dp"], ["tp"]] and down["per_device_shape"] == [16, 32]

    def per_rank(name, shape):
        if name.endswith(("up.weight", "up.bias", "down.weight")):  # split over tp and dp
            return math.prod(shape) * 4 // 4
        return local_bytes(shape, 2)  # dp only (down's bias is replicated over tp)

    assert cap.meta["per_device_memory"]["param_bytes"] == sum(per_rank(n, s) for n, s in whole.items())
    kinds = Counter((n.params["collective"]["op"], tuple(n.params["collective"]["axes"])) for n in collectives(cap))
    ref = reference["fsdp_tp"]["FSDPNet"]["forward"]
    assert kinds[("all_gather", ("dp",))] == ref["c10d._allgather_base_"] == 3
    assert kinds[("all_reduce", ("tp",))] == sum(n for op, n in ref.items() if "all_reduce" in op) == 2
    for n in collectives(cap):
        assert n.params["collective"]["devices"] == 2 and n.params["collective"]["operand_bytes"] > 0


@pytest.mark.parametrize("case", ["root", "blocks", "blocks_step", "fsdp_tp", "attn_tp"])
def test_every_op_of_a_split_program_is_counted(caps, case):
    """Boundaries cost nothing, FSDP's copies are data movement, collectives communication."""
    cap = read(caps[case])
    costs = count(cap)
    assert "uncounted" not in costs.notes and costs.notes["per_rank"]["uncounted"] == 0
    rule = {n.op: costs.rules[costs.rule[i]] for i, n in enumerate(cap.nodes)}
    assert rule["dtensor::to_local"] == "DTensor boundary"
    if case != "attn_tp":
        assert rule["fsdp::all_gather_copy_in"] == rule["fsdp::split_with_sizes_copy"] == "data movement"
        assert rule["c10d::_allgather_base_"] == "communication"
    for i, n in enumerate(cap.nodes):
        if n.op.startswith("dtensor::"):
            assert costs.flops[i] == costs.bytes_read[i] == costs.bytes_written[i] == 0


def test_dtensor_ops_report_flops_per_rank_and_globally(caps):
    cap = read(caps["fsdp_tp"])
    costs = count(cap)
    per_rank = costs.notes["per_rank"]
    assert "global for DTensor ops" in per_rank["flops_scope"] and per_rank["scope"].startswith("per rank")
    rank = dict(zip(per_rank["nodes"], per_rank["flops"]))
    ups = [i for i, n in enumerate(cap.nodes) if n.op == "aten::addmm"
           and cap.values[n.outputs[0]].sharding is not None and cap.values[n.outputs[0]].shape == [10, 64]]
    assert len(ups) == 2  # each block's column-parallel up projection, a DTensor op
    for i in ups:
        assert costs.flops[i] == 2 * 10 * 32 * 64  # global: [10, 32] x [32, 64]
        assert rank[i] == costs.flops[i] // 2  # one rank's [10, 32] x [32, 32]
    plain_ops = [i for i, n in enumerate(cap.nodes) if n.op == "aten::addmm" and i not in rank]
    assert plain_ops  # the embedding and head run on FSDP's gathered, plain tensors: per rank already
    counted = [f for f in costs.flops if f >= 0]
    assert per_rank["total"] == sum(counted) - sum(costs.flops[i] - rank[i] for i in ups) - sum(
        costs.flops[i] - rank[i] for i in rank if i not in ups and costs.flops[i] >= 0 and rank[i] >= 0)


def test_inspect_says_flops_per_rank_and_what_the_total_covers(caps, capsys):
    from tensorviz_lsp.cli import main

    assert main(["inspect", str(caps["fsdp_tp"])]) == 0
    out = capsys.readouterr().out
    per_rank = count(read(caps["fsdp_tp"])).notes["per_rank"]["total"]
    (line,) = [x for x in out.splitlines() if x.startswith("per rank:")]
    assert "on one rank" in line and f"{per_rank / 1e3:.3g} kFLOPs" in line.replace("\u2009", " ")
    assert "global for DTensor ops" in out


# --------------------------------------------------------------------------- TP boundaries


def test_to_local_sits_between_the_groups_it_joins(caps):
    cap, plain = read(caps["attn_tp"]), read(caps["attn_plain"])
    assert loose_ends(cap)[0] == []
    assert dead_end_ops(cap) == dead_end_ops(plain)
    assert not [n for n in cap.nodes if n.op == "_c10d_functional::_wrap_tensor_autograd"]
    root = module_group(cap, "")
    for n in cap.nodes:
        if n.op not in ("dtensor::to_local", "dtensor::from_local"):
            continue
        src, out = cap.values[n.inputs[0].value], cap.values[n.outputs[0]]
        if n.op == "dtensor::to_local":
            assert out.shape == src.sharding["per_device_shape"] and out.sharding["local"] is True
        # never inside the function group of the op that first read it
        assert cap.groups[n.group].kind == "module", (n, cap.groups[n.group])
        if src.shape == [2, 5, 32] and n.op == "dtensor::to_local" and src.sharding["spec"][2] == ["tp"]:
            assert n.group == root.id  # between a projection and split_heads' view, in the module holding both
    # split_heads' view reads this rank's tensor, made by the to_local beside it
    producer = {v: n for n in cap.nodes for v in n.outputs}
    splits = [n for n in cap.nodes if n.op == "aten::view" and len(cap.values[n.outputs[0]].shape) == 4]
    assert len(splits) == 3
    for n in splits:
        entering = cap.values[n.inputs[0].value]
        assert entering.sharding["local"] is True and entering.shape == [2, 5, 8]
        assert producer[entering.id].op == "dtensor::to_local" and producer[entering.id].group == n.group == root.id
    linears = {g.id for g in cap.groups if g.kind == "function" and g.name == "linear"}
    assert len(linears) == 4 and not [n for n in cap.nodes if n.op.startswith("dtensor::") and n.group in linears]


# --------------------------------------------------------------------------- scopes shown (issue 46)


def _all_items(proj, g=-1, out=None):
    """Every card of the capture's pages, opened all the way down (chunks too)."""
    out = [] if out is None else out
    page = proj.children(g)
    out.extend({**st, "type": "stack"} for st in page.get("stacks") or [])
    for it in page["items"]:
        out.append(it)
        if it["type"] == "group" and it.get("child_count"):
            _all_items(proj, it["id"], out)
    return out


@pytest.mark.parametrize("case", ["blocks", "fsdp_tp"])
def test_cards_say_flops_per_rank_and_global_for_dtensor_ops(caps, case):
    """A split Torch program's cards: a DTensor op's FLOPs global with its per-rank figure,
    a plain op's per rank, a group's per rank (the sum of its ops' per-rank figures), never
    the two scopes summed; the cost panel's total and the summary say the same."""
    from viewer.projection.projection import Projection

    cap = read(caps[case])
    proj = Projection(cap)
    per_rank = cap.cost.notes["per_rank"]
    rank = dict(zip(per_rank["nodes"], per_rank["flops"]))
    items = _all_items(proj)
    nodes = [it for it in items if it["type"] == "node" and "cost" in it]
    groups = [it for it in items if it["type"] == "group" and "cost" in it]
    assert nodes and groups
    for it in nodes:
        c, i = it["cost"], it["id"]
        if i in rank:
            assert c["scope"] == "global" and c["per_rank"] == rank[i] and c["flops"] == cap.cost.flops[i], it
        else:
            assert c["scope"] == "per rank" and "per_rank" not in c, it
    group_of = [n.group for n in cap.nodes]
    for it in groups:
        g = it["id"]
        inside = [i for i in range(len(cap.nodes)) if _within(cap, group_of[i], g)]
        want = sum(max(rank.get(i, cap.cost.flops[i]), 0) for i in inside)
        assert it["cost"]["scope"] == "per rank" and it["cost"]["flops"] == want, it
    below = [it for it in groups if it["cost"]["flops"] < sum(max(cap.cost.flops[i], 0) for i in range(len(cap.nodes))
                                                             if _within(cap, group_of[i], it["id"]))]
    # FSDP alone computes on gathered plain tensors (per rank already); with tensor
    # parallel, the blocks' DTensor matmuls make their groups' per-rank figures smaller
    assert bool(below) == (case == "fsdp_tp")
    stacks = [it for it in items if it["type"] == "stack" and it.get("cost")]
    assert stacks and all(it["cost"]["scope"] == "per rank" for it in stacks)  # the repeated blocks' card
    summary = proj.cost_summary()
    assert summary["flops_per_rank"] == per_rank["total"]


def _within(cap, g, target):
    while g is not None:
        if g == target:
            return True
        g = cap.groups[g].parent
    return False


def test_summary_and_hover_say_flops_per_rank(caps, capsys):
    import json as _json

    from tensorviz_lsp.cli import main
    from tensorviz_lsp.features.line_values import cost_text
    from capture.analysis.analysis import Analysis
    from capture.analysis.lines import LineIndex

    path = caps["fsdp_tp"]
    per_rank = read(path).cost.notes["per_rank"]["total"]
    assert main(["summary", str(path), "--json"]) == 0
    doc = _json.loads(capsys.readouterr().out)
    assert doc["totals"]["flops_per_rank"] == per_rank
    assert doc["figure_scopes"]["flops"] == "global for DTensor ops, per rank for plain-tensor ops"
    assert doc["figure_scopes"]["flops_per_rank"].startswith("per rank")
    assert all("flops_per_rank" in r for r in doc["rows"]) and doc["rows"]
    (stack,) = [r for r in doc["rows"] if "stack" in r]  # the two blocks: each's per-rank FLOPs, the run's sum
    assert stack["flops_per_rank"] == stack["stack"]["count"] * stack["stack"]["per_block"]["flops_per_rank"]
    assert stack["flops_per_rank"] < stack["flops"]  # their tensor-parallel matmuls are DTensor ops
    assert abs(sum(r["share"] for r in doc["rows"] if r["depth"] == 1) - 1) < 1e-6
    assert main(["summary", str(path)]) == 0
    text = capsys.readouterr().out
    assert "FLOPs/rank" in text.splitlines()[0]
    (line,) = [x for x in text.splitlines() if x.startswith("FLOPs per rank:")]
    assert line.replace("\u2009", " ").startswith(f"FLOPs per rank:   {per_rank / 1e3:.3g} kFLOPs (per rank:")
    cap = read(path)
    index = LineIndex.build(Analysis(cap))
    calls = [c for entry in index for c in entry.calls if c.rank_flops > 0]
    assert calls, "the model's lines carry per-rank FLOPs"
    said = cost_text(calls[0], cap)
    assert said is not None and said.split(" · ")[0].endswith(" per rank")
