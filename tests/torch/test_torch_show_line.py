"""``api/line`` (Show in Graph's answer) on a real eager Torch capture: a conv stem and 12
identical blocks. Each call names its block as the model does (``blocks.3``), and every
key's item path is what the viewer opens to reach it."""

from __future__ import annotations

from capture.graph import graphfile
from capture.torch import framework as fw
from capture.analysis.lines import LineIndex, line_answer
from viewer.projection.projection import Projection

from hint_models import STACK as MODEL
from test_torch_line_index import line_of
from torch_workspace import forget_workspace_modules, profile_table, run_framework, tensor, write


def test_torch_lines_name_their_blocks_and_paths_reach_every_item(tmp_path):
    # its own module name: test_torch_line_index writes the same model as `stack`
    root = write(tmp_path, {"stack12.py": MODEL})
    try:
        cap, _ = run_framework(fw, root, profile_table("stack12:Net", args=[tensor([2, 3, 8, 8])]), None)
    finally:
        forget_workspace_modules(root)
    cap = graphfile.decode(graphfile.encode(cap))
    proj = Projection(cap)
    idx = LineIndex.build(proj.analysis)
    text = (root / "stack12.py").read_text()

    loop = line_answer(proj.analysis, idx, "stack12.py", line_of(text, "z = blk(z)"))
    assert loop["calls_total"] == 12
    assert [c["where"] for c in loop["calls"]] == [f"blocks.{i}" for i in range(12)]
    for c in loop["calls"]:
        [key] = c["keys"]
        assert key.startswith("g") and c["paths"][key][-1] == key  # the block, not its insides
        assert c["ops"] == proj.node_count[int(key[1:]) + 1]

    inner = line_answer(proj.analysis, idx, "stack12.py", line_of(text, "h = F.gelu(self.fc(self.ln1(x)))"))
    assert [c["where"] for c in inner["calls"]] == [f"blocks.{i}" for i in range(12)]
    third = inner["calls"][3]
    block = next(k for k in loop["calls"][3]["keys"])
    for key in third["keys"]:
        path = third["paths"][key]
        assert path[-1] == key and block in path[:-1], "reached by opening blocks.3"
        if key.startswith("n"):
            assert path == proj.item_path(int(key[1:]))

    stem = line_answer(proj.analysis, idx, "stack12.py", line_of(text, "h = torch.relu(self.conv(x))"))
    assert stem["calls_total"] == 1 and stem["calls"][0]["ops"] == 2
    assert any(k.startswith("n") for k in stem["calls"][0]["keys"])  # the relu, beside the conv call
