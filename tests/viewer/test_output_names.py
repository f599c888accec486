"""Outputs named by their place in what the call returned (issue 49, item 5): a model that
returns its logits and a dict of auxiliary outputs (big_vision's ViT: ``return x, out``)
has out pills that say which is which, not a row of unnamed ``out``."""

from __future__ import annotations

import pytest

from capture.analysis.names import output_paths


@pytest.mark.parametrize("tree, paths", [
    ({"value": 3}, [(3, "")]),
    ({"tuple": [{"value": 1}, {"dict": [["pre_logits", {"value": 2}], ["stem", {"value": 4}]]}]},
     [(1, "[0]"), (2, "[1].pre_logits"), (4, "[1].stem")]),
    ({"dict": [["logits", {"value": 5}], ["aux", {"list": [{"value": 6}, {"none": None}]}]]},
     [(5, "logits"), (6, "aux[0]")]),
    ("not a tree", []),
])
def test_output_paths(tree, paths):
    assert list(output_paths(tree)) == paths


def test_a_dict_of_auxiliary_outputs_names_its_pills(tmp_path):
    pytest.importorskip("torch")
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "torch"))
    from torch_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write

    from viewer.projection.projection import Projection

    write(tmp_path, {"vitish.py": (
        "import torch\nfrom torch import nn\n\n\nclass ViT(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.stem = nn.Linear(8, 8)\n        self.head = nn.Linear(8, 4)\n\n"
        "    def forward(self, x):\n        out = {}\n        out['stem'] = h = self.stem(x)\n"
        "        out['pre_logits'] = h = h.relu()\n        x = out['logits'] = self.head(h)\n        return x, out\n")})
    try:
        cap = capture_in_process(tmp_path, profile("vitish:ViT", args=[tensor([2, 8])]))[0]
    finally:
        forget_workspace_modules(tmp_path)
    proj = Projection(cap)
    named = {proj.values.brief(v).get("name") for v, _ in output_paths(cap.outputs)}
    # the logits are one value reached twice: named where first returned
    assert named == {"[0]", "[1].stem", "[1].pre_logits"}
    assert all(proj.values.brief(v).get("role") == "output" for v, _ in output_paths(cap.outputs))


def test_the_layer_table_gives_the_returned_output_first():
    """A group whose call recorded no outputs (a Linen module's top) lists what the capture
    returned first, in the order returned, not the lowest value id (an early aux tensor)."""
    from types import SimpleNamespace

    from capture.analysis.layer_table import _output_label

    group = SimpleNamespace(attrs={})
    labels = {3: "f32[1,8]", 9: "f32[1,10]"}
    proj = SimpleNamespace(
        capture=SimpleNamespace(groups=[group], outputs={"tuple": [{"value": 9}, {"dict": [["stem", {"value": 3}]]}]}),
        index=SimpleNamespace(bout=[None, {3, 9}], n_values=10),
        values=SimpleNamespace(label=lambda v: labels[v]),
    )
    assert _output_label(proj, 0) == "f32[1,10] +1"
