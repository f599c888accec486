"""Pallas kernels (issue 47): a ``pallas_call`` opens as a body (its kernel jaxpr, one grid
point, with the blocks it sees as parameters; its grid and block shapes as attrs) instead
of an opaque node, and its cost is the author's ``pl.CostEstimate`` when the call gives
one, else its body times the grid's points, else uncounted (body closed). Kernels of our
own; they trace on the CPU (``make_jaxpr`` needs no TPU), and run there with
``interpret=True``."""

from __future__ import annotations

import numpy as np
import pytest

from capture.worker.limits import Limits

from jax_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write

pytest.importorskip("jax.experimental.pallas")

KERNELS = """
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _scale_add(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.tanh(x_ref[...] * y_ref[...]) + 1.0


def _call(x, y, cost=None, interpret=True):
    return pl.pallas_call(_scale_add, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
                          in_specs=[pl.BlockSpec((4, 8), lambda i: (i, 0))] * 2,
                          out_specs=pl.BlockSpec((4, 8), lambda i: (i, 0)), cost_estimate=cost,
                          interpret=interpret)(x, y)


def elementwise(x, y):
    return _call(x, y)


def for_the_tpu(x, y):
    return _call(x, y, interpret=False)  # traced only: make_jaxpr needs no TPU


def with_estimate(x, y):
    return _call(x, y, cost=pl.CostEstimate(flops=1000, transcendentals=64, bytes_accessed=900))


def _matmul_kernel(a_ref, b_ref, o_ref):
    o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)


def matmul(a, b):
    m, k = a.shape
    n = b.shape[1]
    return pl.pallas_call(_matmul_kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32), grid=(2, 4),
                          in_specs=[pl.BlockSpec((m // 2, k), lambda i, j: (i, 0)),
                                    pl.BlockSpec((k, n // 4), lambda i, j: (0, j))],
                          out_specs=pl.BlockSpec((m // 2, n // 4), lambda i, j: (i, j)), interpret=True)(a, b)


def around(x, y):
    return jnp.sum(elementwise(x * 2.0, y))
"""

X = tensor([8, 8], generator={"kind": "normal"})


@pytest.fixture
def ws(tmp_path):
    write(tmp_path, {"kern.py": KERNELS})
    yield tmp_path
    forget_workspace_modules(tmp_path)


def _pallas(cap):
    (node,) = [n for n in cap.nodes if n.op == "pallas_call"]
    (body,) = [g for g in cap.groups if g.kind == "body" and g.attrs.get("node") == node.id]
    inside = [n for n in cap.nodes if n.group == body.id]
    return node, body, inside


@pytest.mark.parametrize("model", ["elementwise", "for_the_tpu"])
def test_the_kernel_opens_as_a_body(ws, model):
    cap, _ = capture_in_process(ws, profile(f"kern:{model}", args=[X, X]))
    node, body, inside = _pallas(cap)
    assert not node.opaque and cap.coverage.status == "complete"
    assert body.attrs["role"] == "pallas kernel" and body.name == "pallas kernel: _scale_add"
    assert [n.op for n in inside] == ["get", "get", "mul", "tanh", "add", "swap"]
    assert [p["stands_for"] for p in body.attrs["parameters"]] == [
        "block of input 0", "block of input 1", "block of output 0 (the kernel writes it)"]
    assert [cap.values[p["value"]].shape for p in body.attrs["parameters"]] == [[4, 8]] * 3
    assert body.attrs["grid"] == [2] and body.attrs["grid_points"] == 2
    assert node.params["blocks"] == [
        {"operand": "input 0", "block_shape": [4, 8], "array_shape": [8, 8]},
        {"operand": "input 1", "block_shape": [4, 8], "array_shape": [8, 8]},
        {"operand": "output 0", "block_shape": [4, 8], "array_shape": [8, 8]},
    ]
    assert body.attrs["interpret"] is (model == "elementwise")
    # its cost: the body (one grid point: 32 mul + 32 tanh + 32 add) times the 2 grid points
    figures = cap.cost.of(node.id)
    assert figures == {"flops": 192, "bytes_read": 512, "bytes_written": 256,
                       "rule": "pallas: kernel body × grid", "estimate": True}


def test_the_authors_cost_estimate_wins(ws):
    cap, _ = capture_in_process(ws, profile("kern:with_estimate", args=[X, X]))
    node, _, _ = _pallas(cap)
    assert node.params["cost_estimate"] == {"flops": 1000, "transcendentals": 64, "bytes_accessed": 900}
    assert cap.cost.of(node.id) == {"flops": 1000, "bytes_read": 900 - 256, "bytes_written": 256,
                                    "rule": "pallas: CostEstimate"}
    assert "CostEstimate" in cap.cost.notes["rules"]["pallas: CostEstimate"]


def test_a_tiled_matmul_counts_the_whole_product(ws):
    a, b = tensor([16, 32], generator={"kind": "normal"}), tensor([32, 64], generator={"kind": "normal"})
    cap, _ = capture_in_process(ws, profile("kern:matmul", args=[a, b]))
    node, body, inside = _pallas(cap)
    assert body.attrs["grid"] == [2, 4] and body.attrs["grid_points"] == 8
    assert [n.op for n in inside if n.op == "dot_general"] == ["dot_general"]
    assert cap.cost.of(node.id)["flops"] == 2 * 16 * 32 * 64  # (8×32)·(32×16) per point × 8 points


def test_a_closed_kernel_is_listed_uncounted(ws):
    cap, _ = capture_in_process(ws, profile("kern:around", args=[X, X]), limits=Limits(max_body_ops=2))
    node, body, inside = _pallas(cap)
    assert "closed" in body.attrs and not inside and node.opaque
    assert cap.cost.of(node.id)["uncounted"] is True
    assert "pallas_call" in cap.cost.notes["uncounted"]
    assert cap.coverage.status == "partial"


def test_the_kernel_runs_on_the_cpu_in_interpret_mode(ws):
    """Our kernels compute what they say (so the graphs above are of working kernels)."""
    import importlib
    import sys

    import jax

    sys.path.insert(0, str(ws))
    try:
        kern = importlib.import_module("kern")
        rng = np.random.default_rng(0)
        x, y = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
        np.testing.assert_allclose(jax.jit(kern.elementwise)(x, y), np.tanh(x * y) + 1.0, rtol=1e-5)
        a, b = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((32, 64)).astype(np.float32)
        np.testing.assert_allclose(jax.jit(kern.matmul)(a, b), a @ b, rtol=1e-4, atol=1e-4)
    finally:
        sys.path.remove(str(ws))
        sys.modules.pop("kern", None)
