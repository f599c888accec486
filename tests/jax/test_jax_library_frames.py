"""Library frames in JAX captures (issue 14, item 2): an equation whose traceback holds
no workspace frame records the innermost frame in library code, such as a Flax layer's
``__call__`` in ``flax/linen/linear.py``; never JAX's own internals or Flax's module
machinery. A workspace frame, when there is one, still wins."""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
from pathlib import Path

import pytest

jax = pytest.importorskip("jax")
flax = pytest.importorskip("flax")
jnp = pytest.importorskip("jax.numpy")

import flax.linen as nn  # noqa: E402
from flax import nnx  # noqa: E402

from capture.graph import graphfile  # noqa: E402
from capture.jax.convert import convert  # noqa: E402
from capture.worker.libframes import LibraryFiles, class_location  # noqa: E402
from jax_workspace import capture_in_process, profile, tensor, write  # noqa: E402

pytestmark = pytest.mark.jax

FLAX_DIR = Path(flax.__file__).resolve().parent
JAX_DIR = Path(jax.__file__).resolve().parent

LINEN_LIBRARY_MODEL = '''
import jax
import jax.numpy as jnp
import flax.linen as nn


def bound():
    """A model made only of library layers: no workspace code runs in its forward."""
    model = nn.Sequential([nn.Dense(16), nn.relu, nn.Dense(4)])
    variables = model.init(jax.random.key(0), jnp.zeros((2, 8), jnp.float32))
    return model.bind(variables)


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Dense(16)(x)
        return nn.Dense(4)(nn.relu(x))


def bound_mlp():
    model = MLP()
    return model.bind(model.init(jax.random.key(0), jnp.zeros((2, 8), jnp.float32)))
'''


def frames_of(cap):
    return [cap.frames[n.frame] for n in cap.nodes if n.frame is not None]


@pytest.mark.slow
def test_a_linen_model_of_library_layers_gets_frames_in_flax_linen(tmp_path):
    ws = write(tmp_path, {"lin.py": LINEN_LIBRARY_MODEL})
    table = profile("lin:bound", init={"factory": "lin:bound"}, args=[tensor([2, 8])])
    table["model"] = "flax.linen:Sequential"
    cap, _ = capture_in_process(ws, table)
    framed = frames_of(cap)
    assert len(framed) == len(cap.nodes), [n.op for n in cap.nodes if n.frame is None]
    assert all(f.library and os.path.isabs(f.file) for f in framed)
    files = {Path(f.file).relative_to(FLAX_DIR).as_posix() for f in framed}
    assert "linen/linear.py" in files and files <= {"linen/linear.py", "linen/combinators.py"}, files
    dense = [f for f in framed if f.function == "Dense.__call__"]
    assert dense and all(linecache.getline(f.file, f.line).strip() for f in dense)
    # The library flag survives the graph file.
    back = graphfile.decode(graphfile.encode(cap))
    assert [f.library for f in back.frames] == [f.library for f in cap.frames]


def test_a_workspace_linen_model_keeps_workspace_frames(tmp_path):
    ws = write(tmp_path, {"linmlp.py": LINEN_LIBRARY_MODEL})  # its own module name: one import per test
    cap, _ = capture_in_process(ws, profile("linmlp:MLP", init={"factory": "linmlp:bound_mlp"}, args=[tensor([2, 8])]))
    framed = frames_of(cap)
    assert framed and all(not f.library and f.file == "linmlp.py" for f in framed)


def test_nnx_layers_are_library_frames(tmp_path):
    layer = nnx.Linear(8, 4, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(layer)

    def apply(state, x):
        return nnx.merge(graphdef, state)(x)

    closed = jax.make_jaxpr(apply)(state, jnp.ones((2, 8)))
    cap = convert(closed, workspace=tmp_path)
    framed = frames_of(cap)
    assert framed and all(f.library for f in framed)
    assert {Path(f.file).relative_to(FLAX_DIR).as_posix() for f in framed} == {"nnx/nn/linear.py"}


def test_which_files_are_library_code():
    lib = LibraryFiles()
    flax_file = lambda rel: str(FLAX_DIR / rel)  # noqa: E731
    assert lib.path(flax_file("linen/linear.py")) == str((FLAX_DIR / "linen/linear.py").resolve())
    assert lib.path(flax_file("nnx/nn/linear.py")) is not None
    for internal in ("linen/module.py", "linen/transforms.py", "core/scope.py", "nnx/module.py", "nnx/graph.py"):
        assert lib.path(flax_file(internal)) is None, internal
    assert lib.path(str(JAX_DIR / "_src" / "lax" / "lax.py")) is None
    assert lib.path(os.path.join(sysconfig.get_path("stdlib"), "functools.py")) is None
    import capture.worker.libframes as mod

    assert lib.path(mod.__file__) is None and lib.is_capture(mod.__file__)
    assert lib.path("<string>") is None and lib.path("/no/such/site-packages/pkg/x.py") is None
    if "torch" in sys.modules:
        assert lib.path(sys.modules["torch"].nn.functional.__file__) is None


def test_class_location_finds_the_class_statement():
    path, line = class_location(nn.Dense)
    assert path.endswith(os.path.join("flax", "linen", "linear.py"))
    assert linecache.getline(path, line).lstrip().startswith("class Dense")
    assert class_location(int) is None
