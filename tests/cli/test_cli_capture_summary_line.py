"""A CLI capture says what it captured and how to view it (issue 49, item 6): stdout keeps
only the graph file's path (scripts read it); stderr gets the node and layer count and the
command to view it."""

from __future__ import annotations

from pathlib import Path

from capture.graph.model import Capture, Coverage, Group, Node
from tensorviz_lsp.cli.commands.capture import captured_line


def _capture(nodes: int, layers: int) -> Capture:
    return Capture(backend="torch_eager", framework="torch", framework_version="2", coverage=Coverage("eager_forward"),
                   nodes=[Node(id=i, op="aten::add") for i in range(nodes)],
                   groups=[Group(id=i, kind="module", name=f"l{i}") for i in range(layers)])


def test_the_line_counts_and_says_how_to_view(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    graph = tmp_path / ".tensorviz" / "captures" / "My Net.tvg"
    assert captured_line(_capture(128, 14), graph) == (
        "captured 128 nodes, 14 layers; view it with: tensorviz view '.tensorviz/captures/My Net.tvg' "
        "(or tensorviz summary '.tensorviz/captures/My Net.tvg')")
    assert captured_line(_capture(1, 0), Path("/elsewhere/x.tvg")).startswith(
        "captured 1 node; view it with: tensorviz view /elsewhere/x.tvg")
