"""The editor hover on a program split across devices (issue 34): a value's split and what
one device holds of it; a module call's per-device memory; the mesh and that its devices
were simulated. A Torch tensor-parallel MLP on 4 fake ranks, captured in a fresh
interpreter (``tests/sharded_captures.py``)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from capture_workspace import profile_table, tensor, write  # noqa: E402
from sharded_captures import capture_all, read  # noqa: E402
from tensorviz_lsp.backends import Pos, Span  # noqa: E402
from tensorviz_lsp.features import assigned_names  # noqa: E402
from tensorviz_lsp.features.freshness import Record  # noqa: E402
from tensorviz_lsp.features.hover import value_of  # noqa: E402
from tensorviz_lsp.features.captured_lines import FileLines, line_map  # noqa: E402
from capture.analysis.lines import LineIndex  # noqa: E402
from capture.analysis.analysis import Analysis  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]


class Lines:
    """What the hover reads: one capture's lines of one file."""

    def __init__(self, rec, idx, rel, captured):
        self.rec, self.idx, self.rel, self.captured = rec, idx, rel, captured.splitlines()

    def file_lines(self, path, text=None):
        return [FileLines(self.rec, self.idx.file(self.rel), line_map(self.captured, text.splitlines()))]


def line_no(text, needle):
    return next(i for i, line in enumerate(text.splitlines()) if needle in line)

MODEL = '''
import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(16, 64, bias=False)
        self.down = nn.Linear(64, 16, bias=False)

    def forward(self, x):
        h = self.up(x)
        out = self.down(torch.relu(h))
        return out


def tp():
    mesh = init_device_mesh("cpu", (4,), mesh_dim_names=("tp",))
    return parallelize_module(MLP(), mesh, {"up": ColwiseParallel(use_local_output=False), "down": RowwiseParallel()})
'''


@pytest.fixture(scope="module")
def lines(tmp_path_factory):
    root = write(tmp_path_factory.mktemp("ws"), {"tp.py": MODEL})
    table = profile_table("tp:MLP", args=[tensor([2, 16])], init={"factory": "tp:tp"}, mesh={"tp": 4})
    files = capture_all({"tp": {"framework": "torch", "root": str(root), "table": table}},
                        tmp_path_factory.mktemp("out"))
    cap = read(files["tp"])
    rec = Record(root, "p", (root / "tp.py").as_uri(), "MLP", cap, {"tp.py"}, Span(Pos(0, 0), Pos(0, 1)), capture_id=1)
    text = (root / "tp.py").read_text()
    return Lines(rec, LineIndex.build(Analysis(cap)), "tp.py", text), text, root


def hover(lines, text, root, needle, name):
    idx = line_no(text, needle)
    hit = assigned_names.parse(text).at(idx + 1, text.splitlines()[idx].index(name))
    return value_of(lines.file_lines(root / "tp.py", text), hit.target, root / "tp.py")


def test_a_dtensor_value_shows_its_split_and_what_one_device_holds(lines):
    ls, text, root = lines
    said = hover(ls, text, root, "h = self.up(x)", "h =")
    assert "- `h`: `f32[2,64]` · float32 · split `f32[2,64@tp]` · per device `f32[2,16]` (128 B)" in said, said
    assert "What one device holds:\n- `up` per device: params 1 KiB · inputs 128 B · activations 128 B" in said, said
    assert "Mesh `tp=4` on 4 cpu devices, simulated" in said


def test_a_module_call_line_shows_per_device_memory(lines):
    ls, text, root = lines
    said = hover(ls, text, root, "out = self.down(", "out =")
    assert "- `down` per device: params 1 KiB" in said, said


def test_without_a_mesh_the_hover_says_memory_not_per_device(tmp_path_factory):
    """Issue 49: with no mesh, nothing is per device: the hover says ``Memory``."""
    plain = MODEL.split("\n\ndef tp():")[0] + "\n"
    root = write(tmp_path_factory.mktemp("plain"), {"tp.py": plain})
    table = profile_table("tp:MLP", args=[tensor([2, 16])])
    files = capture_all({"plain": {"framework": "torch", "root": str(root), "table": table}},
                        tmp_path_factory.mktemp("out_plain"))
    cap = read(files["plain"])
    rec = Record(root, "p", (root / "tp.py").as_uri(), "MLP", cap, {"tp.py"}, Span(Pos(0, 0), Pos(0, 1)), capture_id=1)
    text = (root / "tp.py").read_text()
    ls = Lines(rec, LineIndex.build(Analysis(cap)), "tp.py", text)
    said = hover(ls, text, root, "h = self.up(x)", "h =")
    assert "What one device holds" not in said and "per device" not in said, said
    assert "Memory:\n- `up`: params 4 KiB" in said, said


def test_a_split_call_says_its_flops_per_rank(lines):
    """Issue 46: a DTensor call's FLOPs in the hover are one rank's, and say so (its recorded
    figure is global: [2,16] x [16,64] is 4.1 kFLOPs, a quarter of it per rank of 4)."""
    from capture.units import flops_text
    from tensorviz_lsp.features.line_values import calls_text

    lines, text, root = lines
    entry = lines.idx.file("tp.py")[line_no(text, "h = self.up(x)") + 1]
    said = calls_text(lines.rec.capture, entry)
    assert f"({flops_text(2 * 2 * 16 * 64 // 4)} per rank · " in said, said
