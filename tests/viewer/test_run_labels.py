"""Stacks named as their authors would (issue 49, item 5): ``layers.0–3`` for a run of
blocks whose paths differ first at a number, ``head ×2 calls`` for one module called
again; the summary numbers repeated calls and counts a shared module's parameters once."""

from __future__ import annotations

import pytest

from capture.analysis.names import run_label


@pytest.mark.parametrize("first, last, count, label", [
    ("layers.0.0.0", "layers.3.1", 8, "layers.0–3"),
    ("h.0", "h.11", 12, "h.0–11"),
    ("layers.0.0", "layers.11.1", 24, "layers.0–11"),
    ("encoder.block0", "encoder.block3", 4, "encoder.block0 … encoder.block3"),
    ("head", "head", 2, "head ×2 calls"),
    ("a", "b", 2, "a … b"),
])
def test_run_label(first, last, count, label):
    assert run_label(first, last, count) == label


def test_repeated_calls_of_one_module_in_the_summary(tmp_path):
    torch = pytest.importorskip("torch")
    del torch
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "torch"))
    from torch_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write

    from capture.analysis.layer_table import layer_rows
    from capture.analysis.analysis import Analysis

    write(tmp_path, {"two.py": (
        "import torch\nfrom torch import nn\n\n\nclass Two(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.body = nn.Linear(8, 8)\n        self.head = nn.Linear(8, 4)\n\n"
        "    def forward(self, x):\n        h = self.body(x)\n        return self.head(h), self.head(h * 2)\n")})
    try:
        cap = capture_in_process(tmp_path, profile("two:Two", args=[tensor([2, 8])]))[0]
    finally:
        forget_workspace_modules(tmp_path)
    rows = layer_rows(Analysis(cap))
    stack = next(r for r in rows if "stack" in r)
    assert stack["stack"]["title"] == "Linear · head ×2 calls"
    assert stack["params"]["count"] == 36, "one module's parameters, counted once"
    block = next(r for r in rows if r.get("per_block"))
    assert (block["call"], block["calls"]) == (1, 2)
