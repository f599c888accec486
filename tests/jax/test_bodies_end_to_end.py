"""Control-flow bodies through the framework capture the worker runs (recipe, import,
init, trace, convert, encode), on models written the way Flax's examples write them."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
flax = pytest.importorskip("flax")

from capture.graph import graphfile  # noqa: E402
from capture.worker.limits import Limits  # noqa: E402

from jax_workspace import SPEC_INPUT, capture_in_process, forget_workspace_modules, profile, tensor, write  # noqa: E402
from jaxpr_walk import in_body  # noqa: E402

pytestmark = pytest.mark.jax


@pytest.fixture
def ws(tmp_path):
    yield tmp_path
    forget_workspace_modules(tmp_path)


def run(ws, files, table, **kw):
    write(ws, files)
    cap = capture_in_process(ws, table, **kw)[0]
    back = graphfile.decode(graphfile.encode(cap))  # what a viewer reads
    assert [(g.kind, g.name, g.parent, g.attrs) for g in back.groups] == [
        (g.kind, g.name, g.parent, g.attrs) for g in cap.groups]
    return cap


def bodies(cap):
    return [g for g in cap.groups if g.kind == "body"]


SCAN_MLP = """
from flax import nnx
import jax.numpy as jnp


class Block(nnx.Module):
    def __init__(self, dim: int, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(dim, dim, rngs=rngs)
        self.norm = nnx.LayerNorm(dim, rngs=rngs)

    def __call__(self, x):
        return x + nnx.gelu(self.linear(self.norm(x)))


class ScanMLP(nnx.Module):
    \"\"\"Scan over layers (Flax NNX guide): a vmapped stack of blocks, one scan.\"\"\"

    def __init__(self, dim: int, n_layers: int, *, rngs: nnx.Rngs):
        @nnx.split_rngs(splits=n_layers)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def create_block(rngs: nnx.Rngs):
            return Block(dim, rngs=rngs)

        self.layers = create_block(rngs)

    def __call__(self, x):
        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def forward(x, block: Block):
            return block(x)

        return forward(x, self.layers)


def build():
    return ScanMLP(16, 5, rngs=nnx.Rngs(0))
"""


@pytest.mark.slow
def test_nnx_scan_over_layers_opens_into_one_block(ws):
    cap = run(ws, {"scan_mlp.py": SCAN_MLP},
              profile("scan_mlp:ScanMLP", args=[tensor([4, 16])], init={"factory": "scan_mlp:build"}))
    scans = [n for n in cap.nodes if n.op == "scan" and not in_body(cap, n.group)]
    assert len(scans) == 1 and scans[0].opaque
    (body,) = bodies(cap)
    assert body.attrs["node"] == scans[0].id and body.attrs["iterations"] == 5
    assert body.attrs["executed"] is False and body.name == "scan body: forward"
    ops = {n.op for n in cap.nodes if in_body(cap, n.group)}
    assert {"dot_general", "rsqrt"} <= ops
    # template frames point at the user's block, in the workspace file
    lines = (ws / "scan_mlp.py").read_text().splitlines()
    (dot,) = [n for n in cap.nodes if n.op == "dot_general" and in_body(cap, n.group)]
    assert cap.frames[dot.frame].file == "scan_mlp.py"
    assert any("self.linear(self.norm(x))" in lines[cap.frames[n.frame].line - 1]
               for n in cap.nodes if in_body(cap, n.group) and n.frame is not None
               and cap.frames[n.frame].file == "scan_mlp.py")
    # the kernel stack (5, 16, 16) enters as one (16, 16) slice
    slices = [(cap.values[p["value"]].shape, cap.values[p["outer"]].shape)
              for p in body.attrs["parameters"] if p["outer"] is not None]
    assert ([16, 16], [5, 16, 16]) in slices
    assert cap.coverage.status == "partial" and cap.coverage.reasons == ["opaque_kernel"]
    assert cap.meta["opaque_primitives"] == {"scan": 1}


LINEN = """
import flax.linen as nn


class Block(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x, _):
        h = nn.Dense(self.features)(nn.LayerNorm()(x))
        return x + nn.relu(h), None


class Encoder(nn.Module):
    features: int = 8
    num_layers: int = 3

    @nn.compact
    def __call__(self, x):
        block = nn.remat(Block)
        stack = nn.scan(block, variable_axes={"params": 0}, split_rngs={"params": True},
                        length=self.num_layers)
        x, _ = stack(self.features, name="layers")(x, None)
        return nn.Dense(2)(x)
"""


def test_linen_scan_of_remat_block(ws):
    cap = run(ws, {"enc.py": LINEN}, profile("enc:Encoder", args=[tensor([2, 8])]))
    (body,) = bodies(cap)
    assert body.attrs["iterations"] == 3
    inside = [g for g in cap.groups if g.parent is not None and in_body(cap, g.id) and g.kind != "body"]
    kinds = {g.kind for g in inside}
    assert "remat" in kinds  # nn.remat's checkpoint expands inside the template
    names = {g.name for g in inside}
    assert {"Dense_0", "LayerNorm_0"} <= names


LOOPS = """
import jax.numpy as jnp
from jax import lax


def step(x, n, k):
    y = lax.fori_loop(0, 4, lambda i, c: c * 0.5 + i, x)
    z = lax.fori_loop(0, n, lambda i, c: jnp.sin(c), y)
    w = lax.switch(k, [jnp.tanh, jnp.cos, lambda v: v * 2.0], z)
    return lax.cond(w.sum() > 0, lambda v: v, lambda v: -v, w)
"""


def test_plain_function_loops_and_branches(ws):
    table = profile("loops:step", args=[tensor([3]), {"kind": "tensor", "shape": [], "dtype": "int32",
                                                        "generator": {"kind": "full", "value": 2}},
                                        {"kind": "tensor", "shape": [], "dtype": "int32",
                                         "generator": {"kind": "full", "value": 1}}])
    cap = run(ws, {"loops.py": LOOPS}, table)
    roles = [(cap.nodes[b.attrs["node"]].op, b.attrs["role"], b.attrs.get("iterations", "-")) for b in bodies(cap)]
    assert roles == [
        ("scan", "scan body", 4),
        ("while", "while cond", None), ("while", "while body", None),
        ("cond", "branch 0", "-"), ("cond", "branch 1", "-"), ("cond", "branch 2", "-"),
        ("cond", "branch 0", "-"), ("cond", "branch 1", "-"),
    ]
    assert cap.meta["bodies"]["converted"] == 8 and cap.meta["bodies"]["closed"] == 0


def test_limits_close_bodies_in_the_worker_path(ws):
    cap = run(ws, {"scan_mlp.py": SCAN_MLP},
              profile("scan_mlp:ScanMLP", args=[tensor([4, 16])], init={"factory": "scan_mlp:build"}),
              limits=Limits(max_body_ops=5))
    (body,) = bodies(cap)
    assert body.attrs["closed_limit"] == "max_body_ops"
    assert "per-body budget of 5" in body.attrs["closed"]
    assert not any(in_body(cap, n.group) for n in cap.nodes)
    assert cap.meta["bodies"]["closed_reasons"] == {"max_body_ops": 1}


def test_spec_input_still_traces_without_bodies(ws):
    # a program without control flow has no bodies and no "bodies" meta
    cap = run(ws, {"plain.py": "import jax.numpy as jnp\ndef f(x):\n    return jnp.tanh(x)\n"},
              profile("plain:f", args=[SPEC_INPUT]))
    assert not bodies(cap) and "bodies" not in cap.meta and cap.coverage.status == "complete"
