"""A JAX model in a file no dotted module can name (``scripts/06_scan_over_layers.py``,
no ``__init__.py``), opened with the path form through the real worker; its init
factory lives in another path-form file and imports the model file by its stem."""

from __future__ import annotations

import pytest

pytest.importorskip("jax")
pytest.importorskip("flax")

from capture.session.runner import run_capture  # noqa: E402

from jax_workspace import profile, tensor, write  # noqa: E402

pytestmark = [pytest.mark.jax, pytest.mark.slow]

# Written the way Flax's own NNX example "scan over layers" writes it.
SCAN_OVER_LAYERS = """
    import jax
    from flax import nnx


    class Block(nnx.Module):
        def __init__(self, dim: int, *, rngs: nnx.Rngs):
            self.linear = nnx.Linear(dim, dim, rngs=rngs)
            self.norm = nnx.LayerNorm(dim, rngs=rngs)

        def __call__(self, x: jax.Array) -> jax.Array:
            return nnx.gelu(self.norm(self.linear(x)))


    class ScanMLP(nnx.Module):
        def __init__(self, dim: int, *, n_layers: int, rngs: nnx.Rngs):
            self.n_layers = n_layers

            @nnx.split_rngs(splits=n_layers)
            @nnx.vmap(in_axes=(0,), out_axes=0)
            def create_block(rngs: nnx.Rngs):
                return Block(dim, rngs=rngs)

            self.layers = create_block(rngs)

        def __call__(self, x: jax.Array) -> jax.Array:
            @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
            def forward(x, block):
                return block(x)

            return forward(x, self.layers)
"""

FACTORY = """
    import importlib

    from flax import nnx

    scan_over_layers = importlib.import_module("06_scan_over_layers")


    def build():
        return scan_over_layers.ScanMLP(8, n_layers=5, rngs=nnx.Rngs(0))
"""


def test_scan_over_layers_by_path_with_a_path_form_factory(tmp_path):
    write(tmp_path, {"scripts/06_scan_over_layers.py": SCAN_OVER_LAYERS, "setup/make-model.py": FACTORY})
    table = profile("scripts/06_scan_over_layers.py:ScanMLP", args=[tensor([2, 8])],
                    init={"factory": "setup/make-model.py:build"})
    cap = run_capture(tmp_path, {"name": "scan", **table}, timeout=240)
    # The NNX plan refuses an object whose type is not exactly the selected class: the
    # factory's class is the one the model file was loaded with.
    assert cap.failure is None, cap.failure
    assert "scan" in {n.op for n in cap.nodes}
    assert [s.path for s in cap.sources] == ["scripts/06_scan_over_layers.py", "setup/make-model.py"]
    assert cap.recipe["model"] == "scripts/06_scan_over_layers.py:ScanMLP"
    assert cap.meta["state"] == "factory_state"
    # the stacked kernels of the 5 layers are traced inputs named by attribute path
    names = dict((name, vid) for vid, name in cap.meta["input_names"])
    kernel = cap.values[names["layers.linear.kernel"]]
    assert kernel.shape == [5, 8, 8]
