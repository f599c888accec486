"""The line index (``capture/analysis/lines.py``) of a real eager Torch capture: a conv stem and a
stack of 12 identical blocks, written the way GPT-style code writes them."""

from __future__ import annotations

from capture.graph import graphfile
from capture.torch import framework as fw
from capture.analysis.lines import LineIndex
from capture.analysis.analysis import Analysis
from capture.analysis.names import value_label

from torch_workspace import forget_workspace_modules, profile_table, run_framework, tensor, write
from hint_models import STACK

def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_torch_lines(tmp_path):
    root = write(tmp_path, {"stack.py": STACK})
    try:
        cap, _ = run_framework(fw, root, profile_table("stack:Net", args=[tensor([2, 3, 8, 8])]), None)
    finally:
        forget_workspace_modules(root)  # another test's workspace may have its own "stack"
    cap = graphfile.decode(graphfile.encode(cap))  # what the language server holds
    idx = LineIndex.build(Analysis(cap))
    text = (root / "stack.py").read_text()
    lines = idx.file("stack.py")

    def shown(needle):
        e = lines[line_of(text, needle)]
        return [value_label(cap.values[v].shape, cap.values[v].dtype) for v in e.first.results], e

    # conv then relu on one line: the relu's output, the conv's consumed inside the line
    vals, e = shown("h = torch.relu(self.conv(x))")
    assert vals == ["f32[2,8,8,8]"] and len(e.calls) == 1 and e.ops == 2
    assert len(e.first.groups) == 1 and cap.groups[e.first.groups[0]].attrs["path"] == "conv"
    stats = cap.values[e.first.results[0]].measured["stats"]
    assert stats["min"] >= 0.0  # measured after the relu, not the conv's
    # the loop over blocks: 12 calls, one block group each, in order
    vals, e = shown("z = blk(z)")
    assert vals == ["f32[2,16]"] and len(e.calls) == 12
    assert [cap.groups[c.groups[0]].attrs["path"] for c in e.calls] == [f"blocks.{i}" for i in range(12)]
    assert e.ops == sum(1 for n in cap.nodes if _inside(cap, n.group, e.first.groups[0]))
    # a line inside the block ran once per block
    vals, e = shown("h = F.gelu(self.fc(self.ln1(x)))")
    assert vals == ["f32[2,16]"] and len(e.calls) == 12
    # two values out of one line
    vals, e = shown("a, b = z.chunk(2, dim=-1)")
    assert vals == ["f32[2,8]", "f32[2,8]"]
    # nothing from torch's own files
    assert list(idx.files) == ["stack.py"]


def _inside(cap, g, top) -> bool:
    while g is not None:
        if g == top:
            return True
        g = cap.groups[g].parent
    return False
