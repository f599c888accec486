"""Does it fit (capture/analysis/fit.py): the memory a training step needs, in parts,
against torch's own memory tracker (Torch, CPU) and XLA's compiled memory analysis
(JAX); what outlives the program (gradients, optimizer state, a cache held by a returned
object) kept alive; the fit line of ``tensorviz summary --device``."""

from __future__ import annotations

import pytest
import torch

from torch_workspace import capture_in_process, profile, tensor, write

pytestmark = pytest.mark.torch

MODEL = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(256, 1024)
        self.b = nn.Linear(1024, 256)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def adam(params):
    return torch.optim.Adam(params, lr=1e-3)


class Cache:
    def __init__(self):
        self.keys, self.values = [], []


class Decoder(nn.Module):
    """Returns its output and an object holding each layer's keys and values (a KV cache)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(64, 128) for _ in range(4))

    def forward(self, x):
        cache = Cache()
        for layer in self.layers:
            k, v = layer(x).chunk(2, dim=-1)
            cache.keys.append(k.contiguous() * 1.0)
            cache.values.append(v.contiguous() * 1.0)
            x = torch.tanh(x + k)
        return x, cache
'''


@pytest.fixture
def mws(ws):
    write(ws, {"fitm.py": MODEL})
    return ws


def _plan(cap, optimizer=None):
    from capture.analysis.fit import input_bytes, memory_plan
    from viewer.projection.projection import Projection

    proj = Projection(cap)
    return memory_plan(proj.costs().totals(), input_bytes(proj.analysis), optimizer)


def test_a_training_step_is_within_10_percent_of_torch_s_memory_tracker(mws):
    import sys

    from torch.distributed._tools.mem_tracker import MemTracker

    cap = capture_in_process(mws, profile("fitm:Net", args=[tensor([8, 256])], kind="training_step",
                                          grad_enabled=True, mode="train",
                                          step={"loss": "sum", "optimizer": {"factory": "fitm:adam"}}))[0]
    plan = _plan(cap)
    mod = sys.modules["fitm"]
    net = mod.Net()
    opt = mod.adam(net.parameters())
    x = torch.randn(8, 256)
    tracker = MemTracker()
    tracker.track_external(net, opt, x)
    with tracker:
        net(x).sum().backward()
        opt.step()
    measured = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]
    assert abs(plan["peak"] / measured - 1) < 0.10, (plan, measured)
    params = 4 * (256 * 1024 + 1024 + 1024 * 256 + 256)
    assert plan["parameters"] == params == plan["gradients"]
    assert plan["optimizer_state"] == 2 * params and plan["optimizer"] == "as captured"
    assert plan["kind"] == "training step"


def test_a_cache_held_by_a_returned_object_is_kept_alive(mws):
    """Its tensors are read by no op after they are made: the lower bound frees them, the
    peak with what outlives the call keeps them (4 layers × keys and values, 2 × 8 × 64 floats)."""
    from viewer.projection.projection import Projection

    cap = capture_in_process(mws, profile("fitm:Decoder", args=[tensor([8, 64])]))[0]
    totals = Projection(cap).costs().totals()
    cache = 4 * 2 * 8 * 64 * 4
    assert totals["kept"]["unread results"] >= cache
    assert totals["peak_live_kept"] >= totals["peak_live"] + cache - 8 * 64 * 4 * 2


def test_a_forward_with_a_chosen_optimizer_estimates_its_step():
    from capture.analysis.fit import memory_plan

    totals = {"available": True, "params": {"bytes": 1000}, "peak_live": 300, "peak_live_kept": 400,
              "activations": 500, "kept": {}}
    plan = memory_plan(totals, 10, "adam")
    assert plan["kind"].startswith("training step (estimated") and plan["estimate"]
    assert (plan["gradients"], plan["optimizer_state"], plan["saved_for_backward"]) == (1000, 2000, 500)
    assert plan["peak"] == 1000 + 10 + 400 + 1000 + 2000 + 500
    assert memory_plan(totals, 10)["peak"] == 1410


def test_the_summary_says_whether_it_fits(mws, tmp_path, capsys):
    import json

    from capture.graph import graphfile
    from tensorviz_lsp.cli import main

    cap = capture_in_process(mws, profile("fitm:Net", args=[tensor([8, 256])]))[0]
    path = tmp_path / "net.tvg"
    graphfile.write(cap, path)
    devices = tmp_path / "devices.toml"
    devices.write_text('[devices.tiny]\nlabel = "Tiny"\nbandwidth = 1e9\npeak_flops = { float32 = 1e9 }\n'
                       'memory = 1048576\n')
    assert main(["summary", str(path), "--device", "h100-sxm"]) == 0
    assert "Fits:             fits on NVIDIA H100 SXM (80 GiB): needs" in capsys.readouterr().out
    assert main(["summary", str(path), "--devices", str(devices), "--device", "tiny", "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)["memory"]["fit"]
    assert not fit["fits"] and fit["margin"] < 0 and fit["needs"] > 2 * (256 * 1024) * 4
    assert main(["summary", str(path), "--devices", str(devices), "--device", "tiny"]) == 0
    assert "does not fit on Tiny (1 MiB): needs" in capsys.readouterr().out


@pytest.mark.slow
def test_a_jax_adam_step_is_within_5_percent_of_xla_s_memory_analysis():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    from capture.jax.convert import convert

    def loss(ps, x, y):
        h = x
        for i, p in enumerate(ps):
            h = h @ p["w"] + p["b"]
            h = jax.nn.relu(h) if i < len(ps) - 1 else h
        return jnp.mean((h - y) ** 2)

    def step(ps, m, v, t, x, y):
        g = jax.grad(loss)(ps, x, y)
        t = t + 1
        m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        ps = jax.tree.map(lambda p, m, v: p - 1e-3 * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8),
                          ps, m, v)
        return ps, m, v, t

    sizes = [512, 1024, 1024, 512]
    ps = [{"w": jnp.ones((a, b)) * 0.01, "b": jnp.zeros(b)} for a, b in zip(sizes[:-1], sizes[1:])]
    m = jax.tree.map(jnp.zeros_like, ps)
    v = jax.tree.map(jnp.zeros_like, ps)
    args = (ps, m, v, jnp.zeros((), jnp.int32), jnp.ones((16, 512)), jnp.ones((16, 512)))
    ma = jax.jit(step).lower(*args).compile().memory_analysis()
    xla = ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes - ma.alias_size_in_bytes
    cap = convert(jax.make_jaxpr(step)(*args))
    plan = _plan(cap)
    assert abs(plan["peak"] / xla - 1) < 0.05, (plan["peak"], xla)


TP_MODEL = '''
import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class MLP(nn.Module):
    def __init__(self, dim: int = 16, hidden: int = 64):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))


def tensor_parallel():
    mesh = init_device_mesh("cpu", (4,), mesh_dim_names=("tp",))
    return parallelize_module(MLP(), mesh, {"gate": ColwiseParallel(), "up": ColwiseParallel(),
                                            "down": RowwiseParallel()})
'''


@pytest.mark.slow
def test_a_tensor_parallel_mlp_fits_per_device(tmp_path_factory, capsys):
    """Four tensor-parallel ranks: each holds a quarter of every weight, and the fit line is
    for one device of the mesh."""
    from capture.graph import graphfile
    from capture_workspace import profile_table
    from sharded_captures import capture_all, read
    from tensorviz_lsp.cli import main
    from capture.analysis.fit import per_device
    from capture.analysis.analysis import Analysis

    root = write(tmp_path_factory.mktemp("ws"), {"tp.py": TP_MODEL})
    out = tmp_path_factory.mktemp("out")
    got = capture_all({"tp": {"framework": "torch", "root": str(root), "table": profile_table(
        "tp:MLP", args=[tensor([2, 16])], init={"factory": "tp:tensor_parallel"}, mesh={"tp": 4})}}, out)
    cap = read(got["tp"])
    split = per_device(Analysis(cap))
    whole = 3 * 16 * 64 * 4
    assert split["devices"] == 4 and split["parameters"] == whole // 4
    path = out / "tp.tvg"
    graphfile.write(cap, path)
    assert main(["summary", str(path), "--device", "l4"]) == 0
    text = capsys.readouterr().out
    assert "per device of the mesh (4 devices)" in text and "Fits:             fits on each of 4 × NVIDIA L4" in text
    import json

    assert main(["summary", str(path), "--json", "--optimizer", "adam"]) == 0
    each = json.loads(capsys.readouterr().out)["memory"]["per_device"]
    assert each["optimizer_state"] == 2 * whole // 4 and each["gradients"] == whole // 4
