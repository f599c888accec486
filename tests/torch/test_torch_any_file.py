"""A Torch model in files no dotted module can name (``train-model.py``,
``scripts/06_scan_over_layers.py`` in a folder without ``__init__.py``), opened with
the path form through the real worker."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from capture.recipe import parse_profile  # noqa: E402
from capture.session.runner import run_capture  # noqa: E402

from torch_workspace import profile, tensor, write  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]

TRAIN_MODEL = """
    import torch
    from torch import nn

    from blocks import ResidualMLP


    class Net(nn.Module):
        def __init__(self, dim: int = 16, depth: int = 3):
            super().__init__()
            self.stem = nn.Linear(dim, dim)
            self.layers = nn.ModuleList([ResidualMLP(dim) for _ in range(depth)])
            self.head = nn.Linear(dim, 4)

        def forward(self, x):
            x = self.stem(x)
            for layer in self.layers:
                x = layer(x)
            return self.head(x)


    if __name__ == "__main__":
        raise SystemExit("training is not run on import")
"""

BLOCKS = """
    from torch import nn


    class ResidualMLP(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.fc = nn.Linear(dim, dim)
            self.act = nn.GELU()

        def forward(self, x):
            return x + self.act(self.fc(x))
"""

FACTORY = """
    import importlib

    train_model = importlib.import_module("train-model")


    def build():
        return train_model.Net(dim=16, depth=2)
"""


def test_a_dashed_file_with_a_path_form_factory(tmp_path: Path):
    write(tmp_path, {"train-model.py": TRAIN_MODEL, "blocks.py": BLOCKS, "tools/make-net.py": FACTORY})
    table = profile("train-model.py:Net", args=[tensor([2, 16])], init={"factory": "tools/make-net.py:build"})
    c = run_capture(tmp_path, parse_profile("p", table), timeout=120)
    # Torch refuses a factory object that is not an instance of the selected class.
    assert c.failure is None, c.failure
    assert [g.name for g in c.groups if g.parent == 0] == ["stem", "layers.0", "layers.1", "head"]
    assert [s.path for s in c.sources] == ["blocks.py", "tools/make-net.py", "train-model.py"]
    assert c.recipe["model"] == "train-model.py:Net"


def test_a_script_folder_without_init(tmp_path: Path):
    write(tmp_path, {"scripts/06_scan_over_layers.py": TRAIN_MODEL, "scripts/blocks.py": BLOCKS})
    c = run_capture(tmp_path, parse_profile("p", profile("scripts/06_scan_over_layers.py:Net", args=[tensor([3, 16])])),
                    timeout=120)
    assert c.failure is None, c.failure
    assert [g.name for g in c.groups if g.parent == 0] == ["stem", "layers.0", "layers.1", "layers.2", "head"]
    assert {f.file for f in c.frames} >= {"scripts/06_scan_over_layers.py", "scripts/blocks.py"}
