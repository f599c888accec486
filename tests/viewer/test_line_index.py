"""The line → nodes/values index (``capture/analysis/lines.py``) on the checked-in real captures.

The Flax Linen ResNet-18 (``real_models/resnet18_linen.py``, Flax's ImageNet-example
style) was captured from a workspace file, so its frames name the user's lines; the
``transformers`` captures ran library code only, whose lines are never indexed.
"""

from __future__ import annotations

from pathlib import Path

from capture.graph import graphfile
from capture.analysis.lines import LineIndex
from capture.analysis.analysis import Analysis
from viewer.projection.projection import Projection
from capture.analysis.names import value_label

REAL = Path(__file__).resolve().parent / "real_models"


def index(name: str) -> tuple[LineIndex, object]:
    capture = graphfile.read(REAL / "captures" / f"{name}.tvg")
    return LineIndex.build(Analysis(capture)), capture


def labels(capture, values) -> list[str]:
    return [value_label(capture.values[v].shape, capture.values[v].dtype) for v in values]


def source_line(n: int) -> str:
    return (REAL / "resnet18_linen.py").read_text().splitlines()[n - 1].strip()


def test_linen_resnet_lines_show_what_each_line_made():
    idx, cap = index("resnet18_linen")
    lines = idx.file("resnet18_linen.py")
    # the stem: one call each, in the order the model runs them
    stem = {n: lines[n] for n in lines if source_line(n).startswith("x = ")}
    conv_init = next(e for n, e in stem.items() if 'name="conv_init"' in source_line(n))
    assert len(conv_init.calls) == 1 and labels(cap, conv_init.first.results) == ["f32[1,16,16,8]"]
    # the module call is the line's call: its ops are every op inside the Conv
    assert conv_init.first.groups and not conv_init.first.nodes
    bn = next(e for n, e in stem.items() if 'name="bn_init"' in source_line(n))
    assert bn.ops == 10 and len(bn.calls) == 1  # batch norm's ops, once, not once per op
    # the block loop: one call per block, first call's shapes shown
    loop = next(e for n, e in stem.items() if "self.block_cls(" in source_line(n))
    assert len(loop.calls) == 8
    assert labels(cap, loop.first.results) == ["f32[1,8,8,8]"]
    assert labels(cap, loop.calls[-1].results) == ["f32[1,1,1,64]"]
    assert all(len(c.groups) == 1 for c in loop.calls)
    # a line inside the block: once per block (8), never twice per block (the Conv's own
    # ops run "on" the call line too, and belong to that call)
    first_conv = next(n for n in lines if source_line(n).startswith("y = self.conv(self.filters, (3, 3), self.strides)"))
    assert len(lines[first_conv].calls) == 8
    # the residual projection only runs in 3 of the 8 blocks
    proj = next(n for n in lines if 'name="conv_proj"' in source_line(n))
    assert len(lines[proj].calls) == 3
    # the return line: the add and the relu it feeds, one value out
    ret = next(n for n in lines if source_line(n) == "return self.act(residual + y)")
    assert lines[ret].ops == 2 and labels(cap, lines[ret].first.results) == ["f32[1,8,8,8]"]
    # the mean over space: the capture's pooled features
    mean = next(n for n in lines if source_line(n).startswith("x = jnp.mean"))
    assert labels(cap, lines[mean].first.results) == ["f32[1,64]"]
    assert not any(e.traced_body for e in idx)


def test_keys_name_viewer_items_and_lookups_accept_any_spelling_of_the_file():
    idx, cap = index("resnet18_linen")
    lines = idx.file("resnet18_linen.py")
    n, entry = min(lines.items())
    keys = entry.first.keys()
    assert keys and all(k[0] in "gn" and k[1:].isdigit() for k in keys)
    for k in keys:
        if k[0] == "n":
            assert cap.frames[cap.nodes[int(k[1:])].frame].line == n
        else:
            assert cap.frames[cap.groups[int(k[1:])].attrs["frame"]].line == n
    assert idx.file("/some/where/resnet18_linen.py") is lines
    assert idx.file("./resnet18_linen.py") is lines
    assert idx.at("resnet18_linen.py", n) is entry
    assert idx.file("other.py") == {} and idx.at("resnet18_linen.py", 10_000) is None


def test_library_lines_are_not_indexed():
    for name in ("gpt2_torch", "resnet18_torch"):
        idx, cap = index(name)
        assert any(f.library for f in cap.frames)
        assert len(idx) == 0, name


def test_search_by_a_line_that_calls_modules_finds_its_calls():
    """Issue 36 item 7: ``transformer.py:164`` found nothing, though the editor showed that
    line's hint: its ops' own lines are inside the modules it calls."""
    capture = graphfile.read(REAL / "captures" / "resnet18_linen.tvg")
    proj = Projection(capture)
    lines = proj.line_index().file("resnet18_linen.py")
    loop = next(n for n in lines if "self.block_cls(" in source_line(n))
    found = proj.searcher.search(f"resnet18_linen.py:{loop}", limit=100)
    groups = [r for r in found["results"] if r["type"] == "group"]
    assert len(groups) == 8, found  # the eight blocks the loop line called
    assert groups[0]["why"] == f"source resnet18_linen.py:{loop} (called there)"
