"""A container too big for one page (its children in chunks of 400) on the first view:
chunks of alike blocks (a ``ModuleList`` of thousands of identical layers) fold into one
stack card that counts blocks, and the first view opens a first chunk only when it is a
flat run of ops (a chunk of ``generate``'s bookkeeping around the model's calls stays a
card), so that the server's warm-up makes no 400-item page the first view does not show."""

from __future__ import annotations

import pytest

from capture.graph.model import Capture, Coverage, Frame, Group, Node, Operand, Source, Value
from viewer.projection.projection import ROOT, Projection

W = [1, 8, 16]


def _capture(children: list[str]) -> Capture:
    """A module ``Net`` whose children, in order, are ``"block"`` (a ``Step`` module of
    two ops on the running value, every one alike), ``"other"`` (a ``Step`` with three
    ops: not alike) or ``"op"`` (one op of ``Net`` itself, each from a line of its own:
    not a Python loop's steps)."""
    values = [Value(0, W, "float32")]
    groups = [Group(0, "module", "net", None, {"class": "Net", "path": ""})]
    nodes: list[Node] = []
    x = 0

    def op(name: str, group: int) -> None:
        nonlocal x
        values.append(Value(len(values), W, "float32"))
        line = len(nodes) + 1 if group == 0 else 0
        nodes.append(Node(len(nodes), name, [Operand(0, x), Operand(1, None, 1.0)], [len(values) - 1], {}, group, line))
        x = len(values) - 1

    blocks = 0
    for kind in children:
        if kind == "op":
            op("aten::add.Tensor", 0)
            continue
        g = len(groups)
        groups.append(Group(g, "module", f"blocks.{blocks}", 0, {"class": "Step", "path": f"blocks.{blocks}"}))
        blocks += 1
        for name in ("aten::mul.Tensor", "aten::add.Tensor") + (("aten::relu",) if kind == "other" else ()):
            op(name, g)
    return Capture(backend="torch_eager", framework="torch", framework_version="0-test",
                   coverage=Coverage(scope="eager_forward", status="complete", reasons=[], effects="none"),
                   values=values, nodes=nodes, groups=groups, frames=[Frame("net.py", 3 + i, 0, "forward") for i in range(len(nodes) + 1)],
                   inputs={"tuple": [{"value": 0}]}, outputs={"value": x}, sources=[Source("net.py", "0" * 64)],
                   recipe={"kind": "model", "framework": "torch", "model": "net:Net"}, meta={})


@pytest.mark.parametrize("children, stacked, opened", [
    # 900 alike blocks: three chunks in one stack of 900 blocks; no chunk opened
    (["block"] * 900, True, False),
    # one block differs: chunks, no stack (and chunks of calls stay closed)
    (["block"] * 450 + ["other"] + ["block"] * 449, False, False),
    # a block among ops (generate's bookkeeping around the model's calls): closed
    (["op"] * 300 + ["block"] + ["op"] * 500, False, False),
    # a flat run of ops: the first chunk opens, as before
    (["op"] * 900, False, True),
])
def test_the_first_view_of_a_chunked_container(children, stacked, opened):
    proj = Projection(_capture(children))
    proj.prepare()
    (trunk,) = proj.trunk()
    page = proj.children(trunk)
    assert page["chunked"] and len(page["items"]) >= 2 and {it["type"] for it in page["items"]} == {"chunk"}
    _, refs, _ = proj.index.ordered(trunk)
    assert [it["groups"] for it in page["items"]] == [sum(r < 0 for r in refs[a:b]) for a, b in
                                                      (it["range"] for it in page["items"])]
    assert sum(it["groups"] for it in page["items"]) == sum(k != "op" for k in children)
    made = proj.first_pages()
    assert ((trunk, 0) in made) is opened
    assert made[:2] == [(ROOT, None), (trunk, None)]
    if not stacked:
        assert page["stacks"] == [] and all("stack" not in it for it in page["items"])
        return
    (stack,) = page["stacks"]
    assert stack["count"] == 900 and stack["chunks"] == 3 and stack["period"] == 1
    assert stack["members"] == [[it["key"]] for it in page["items"]]
    assert stack["key"] == "s" + page["items"][0]["key"]
    assert stack["label"] == "blocks.0–899"
    assert stack["pattern"] == ["Step"]
    block = stack["block"]
    assert block["type"] == "group" and block["label"] == "blocks.0" and block["node_count"] == 2
    assert [it["stack"] for it in page["items"]] == [{"key": stack["key"], "repetition": r, "offset": 0} for r in range(3)]
    # a chunk's own page is its 400 blocks, folded as any page's run of blocks
    inner = proj.children(trunk, 0)
    assert [(s["count"], s["label"]) for s in inner["stacks"]] == [(400, "blocks.0–399")]
