"""JAX captures through the real worker (``capture.session.runner.run_capture``, and the
``tensorviz capture`` command once): the spec's examples verbatim, the x64 environment
rule, and a CUDA device refused before the model is imported. Each run starts a fresh
interpreter (JAX import included), so this file keeps to a handful of runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax")
pytest.importorskip("flax")

from capture.graph import graphfile  # noqa: E402
from capture.graph.model import tree_leaves  # noqa: E402
from capture.session.runner import run_capture  # noqa: E402

from jax_workspace import SPEC_INPUT, cuda_device_count, profile, skip_if_cuda, tensor, write  # noqa: E402
from spec_examples import SPEC_MLP, SPEC_RECIPE  # noqa: E402
from spec_examples import SPEC_NET as SPEC_MODEL  # noqa: E402

pytestmark = [pytest.mark.jax, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def ok(cap):
    assert cap.failure is None, cap.failure
    return cap


def test_spec_function_example_through_the_cli(tmp_path):
    write(tmp_path, {"model.py": SPEC_MODEL, ".tensorviz/recipes.toml": SPEC_RECIPE})
    out = tmp_path / "net.tvg"
    proc = subprocess.run(
        [sys.executable, "-m", "tensorviz_lsp", "capture", "--workspace", str(tmp_path), "--profile", "jax_example",
         "-o", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    cap = ok(graphfile.read(out))
    assert {"broadcast_in_dim", "dot_general", "max"} <= {cap.nodes[i].op for i in range(len(cap.nodes))}
    assert [g.name for g in cap.groups if g.kind == "jit" and g.parent is None] == ["net"]
    assert [g.name for g in cap.groups if g.kind == "custom_jvp"] == ["relu"]
    (o,) = tree_leaves(cap.outputs)
    assert (cap.values[o].shape, cap.values[o].dtype) == ([2, 4], "float32")
    assert cap.backend == "jaxpr" and cap.framework == "jax" and cap.coverage.scope == "traced_program"
    assert cap.recipe["framework"] == "jax" and cap.recipe["model"] == "model:net"
    assert [s.path for s in cap.sources] == ["model.py"]
    # A traced program cannot carry runtime timings or Torch measurements.
    assert not any("elapsed" in k or "time" in k for k in cap.meta)
    assert all(cap.values[i].measured is None for i in range(len(cap.values)))


def test_spec_flax_example(tmp_path):
    write(tmp_path, {"model.py": SPEC_MLP})
    cap = ok(run_capture(tmp_path, {"name": "mlp", **profile("model:MLP", args=[SPEC_INPUT])}, timeout=240))
    # Linen's module calls are module groups (recorded by nn.intercept_methods), not scopes
    modules = {g.attrs["path"]: g for g in cap.groups if g.kind == "module"}
    assert set(modules) == {"", "Dense_0", "Dense_1"}
    assert modules["Dense_0"].parent == modules[""].id and modules[""].attrs["class"] == "MLP"
    assert not [g for g in cap.groups if g.kind == "scope"]
    (o,) = tree_leaves(cap.outputs)
    assert (cap.values[o].shape, cap.values[o].dtype) == ([2, 4], "float32")
    assert cap.meta["state"] == "fresh_init" and cap.meta["flax_version"]
    assert all(cap.values[i].measured is None for i in range(len(cap.values)))


X64 = """\
import jax.numpy as jnp

def f(x):
    return x * 2.0
"""


def test_x64_accepted_with_the_environment(tmp_path):
    write(tmp_path, {"wide.py": X64})
    cap = ok(run_capture(tmp_path, {"name": "wide", **profile("wide:f", args=[tensor([3], "float64")])},
                         env={"JAX_ENABLE_X64": "1"}, timeout=240))
    (o,) = tree_leaves(cap.outputs)
    assert cap.values[o].dtype == "float64" and cap.meta["jax_enable_x64"] is True


MARKER = """\
import pathlib
pathlib.Path(__file__).with_name("IMPORTED").write_text("the model was imported")

def f(x):
    return x * 2.0
"""


@pytest.mark.parametrize("device", ["cuda:0", "cuda:9999"])
def test_cuda_refused_before_the_model_is_imported(tmp_path, device):
    # cuda:0 is refused only where JAX has no CUDA backend; cuda:9999 is refused on any
    # machine (missing backend, or an index out of range), before the model is imported.
    if device == "cuda:0":
        skip_if_cuda("cuda:0 is available here, so it cannot be refused")
    write(tmp_path, {"mark.py": MARKER})
    cap = run_capture(tmp_path, {"name": "gpu", **profile("mark:f", args=[SPEC_INPUT], device=device)}, timeout=240)
    assert cap.failure is not None and cap.failure.stage == "device", cap.failure
    assert device in cap.failure.message and "does not fall back" in cap.failure.message and len(cap.nodes) == 0
    n = cuda_device_count()
    if n:
        assert f"index {device[5:]}" in cap.failure.message and f"JAX sees {n} cuda device(s)" in cap.failure.message
    assert not (tmp_path / "IMPORTED").exists()


# The ordinary NNX pattern, opened from a literal init: TensorViz supplies rngs.
NNX_RNGS = """\
from flax import nnx

class N(nnx.Module):
    def __init__(self, din, dout, *, rngs: nnx.Rngs):
        self.lin = nnx.Linear(din, dout, rngs=rngs)

    def __call__(self, x):
        return nnx.relu(self.lin(x))
"""


def test_nnx_module_with_rngs_from_a_literal_init(tmp_path):
    write(tmp_path, {"model.py": NNX_RNGS})
    table = profile("model:N", args=[SPEC_INPUT], init={"args": [], "kwargs": {"din": 3, "dout": 4}})
    cap = ok(run_capture(tmp_path, {"name": "nnx", **table}, timeout=240))
    assert cap.meta["model_kind"] == "nnx" and cap.meta["state"] == "fresh_init"
    assert "freshly initialized state, not trained weights" in cap.meta["state_note"]
    assert {"dot_general", "max"} <= {cap.nodes[i].op for i in range(len(cap.nodes))}
    (o,) = tree_leaves(cap.outputs)
    assert (cap.values[o].shape, cap.values[o].dtype) == ([2, 4], "float32")
    state = dict(cap.inputs["dict"])["state"]
    kernels = [cap.values[i].shape for i in tree_leaves(state)]
    assert sorted(kernels) == [[3, 4], [4]]  # nnx.Linear(3, 4): kernel and bias, traced as arguments


BROKEN = """\
import jax.numpy as jnp

def f(x):
    return x @ jnp.ones((7, 7))
"""


def test_failed_trace_publishes_a_failure(tmp_path):
    write(tmp_path, {"bad.py": BROKEN})
    cap = run_capture(tmp_path, {"name": "bad", **profile("bad:f", args=[SPEC_INPUT])}, timeout=240)
    assert cap.failure is not None and cap.failure.stage == "trace" and len(cap.nodes) == 0
    assert any(f.file == "bad.py" and f.line == 4 for f in cap.failure.frames)
