"""Repeated blocks take their signatures from the first block (capture/analysis/structure.py,
``_Clones``): a stack's blocks after the first are checked against it on the flat columns
and not computed again. Whatever the check lets through must give exactly the signatures,
routing, inputs and outputs the full computation gives: each case here (regular stacks,
and stacks broken in one place the check must notice) is computed both ways."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from capture.analysis import structure as S
from capture.analysis.index import GraphIndex
from capture.graph.model import Capture, Coverage, Group, Node, Operand, Value


class Stack:
    """A model running ``blocks`` alike blocks (each: a norm call of one op, a linear call
    of a transpose and a matmul inside a Linear module, a gelu and a residual add), with
    options for what each block reads."""

    def __init__(self) -> None:
        self.values: list[Value] = []
        self.nodes: list[Node] = []
        self.groups: list[Group] = []

    def value(self, shape: tuple[int, ...] = (2, 8)) -> int:
        self.values.append(Value(len(self.values), list(shape), "float32"))
        return len(self.values) - 1

    def node(self, op: str, reads: list[int | str], group: int | None, shape: tuple[int, ...] = (2, 8)) -> int:
        out = self.value(shape)
        operands = [Operand(k, None, r) if isinstance(r, str) else Operand(k, r) for k, r in enumerate(reads)]
        self.nodes.append(Node(len(self.nodes), op, operands, [out], {}, group, None))
        return out

    def group(self, kind: str, name: str, parent: int | None, cls: str | None = None) -> int:
        attrs = {"class": cls} if cls else {}
        self.groups.append(Group(len(self.groups), kind, name, parent, attrs))
        return len(self.groups) - 1

    def block(self, parent: int, x: int, weights: tuple[int, int, int], extra: int | None = None,
              literal: bool = False, shape: tuple[int, ...] = (2, 8)) -> int:
        b = self.group("module", "block", parent, "Block")
        norm = self.group("module", "norm", b, "LayerNorm")
        h = self.node("aten::layer_norm", [x, weights[0]], norm, shape)
        fc = self.group("module", "fc", b, "Linear")
        fn = self.group("function", "linear", fc)
        t = self.node("aten::t", [weights[1]] + (["dim"] if literal else []), fn)
        h = self.node("aten::addmm", [weights[2], h, t] + ([extra] if extra is not None else []), fn, shape)
        h = self.node("aten::gelu", [h], b, shape)
        return self.node("aten::add.Tensor", [x, h], b, shape)

    def capture(self, outputs: list[int]) -> Capture:
        return Capture(backend="torch_eager", framework="torch", framework_version="0", coverage=Coverage(scope="eager_forward"),
                       values=self.values, nodes=self.nodes, groups=self.groups, frames=[],
                       inputs={"tuple": [{"value": 0}]}, outputs={"tuple": [{"value": v} for v in outputs]})


def stack(blocks: int = 12, *, weights_first: bool = False, tied: bool = False, mask: bool = False,
          literal: bool = False, before: bool = False, break_at: int | None = None, how: str = "",
          nested: int = 0) -> Capture:
    s = Stack()
    x = s.value()
    model = s.group("module", "model", None, "Model")
    if before:  # the stack's input made by an op before it: block 0 reads it from elsewhere
        x = s.node("aten::relu", [x], model)
    m = s.value() if mask else None
    made_first = [(s.value((8,)), s.value((8, 8)), s.value((8,))) for _ in range(blocks)] if weights_first else []
    shared = (s.value((8,)), s.value((8, 8)), s.value((8,))) if tied else None
    outs = []
    inner = s.group("module", "layers", model, "ModuleList")
    for k in range(blocks):
        w = shared or (made_first[k] if weights_first else (s.value((8,)), s.value((8, 8)), s.value((8,))))
        shape = (2, 9) if break_at == k and how == "shape" else (2, 8)
        extra = m
        if break_at == k and how == "mask-for-weight":
            w = (m if m is not None else w[0], w[1], w[2])
        x = s.block(inner, x, w, extra, literal, shape)
        outer = len(s.groups) - 4  # the block just made
        for _ in range(nested):
            x = s.block(outer, x, w, None, literal)
        if break_at == k and how == "op":
            s.nodes[-1] = replace(s.nodes[-1], op="aten::sub.Tensor")
        if break_at == k and how == "leaves":
            outs.append(s.nodes[-3].outputs[0])  # the matmul's output is a capture output too
    return s.capture([x] + outs)


def both(cap: Capture) -> tuple[tuple, tuple, S._Clones]:
    """(signatures and routing with repeated blocks taken from the first, the same
    computed group by group, the repeated blocks found)."""
    index = GraphIndex(cap)
    labels = [f"{v.dtype}{v.shape}" for v in cap.values]
    weights = frozenset(v for v, p in enumerate(index.producer) if p < 0 and v > 0)
    routed = S.routed_groups(cap, index)
    fast = S._signatures(cap, index, weights.__contains__, labels, routed)
    clones = S._clones(cap, index, labels, weights.__contains__, routed)
    real = S._clones
    try:
        S._clones = lambda *a: S._Clones()
        slow = S._signatures(cap, index, weights.__contains__, labels, routed)
    finally:
        S._clones = real
    return fast, slow, clones


@pytest.mark.parametrize("name, cap, repeated", [
    ("a stack of alike blocks", stack(), True),
    ("each block reads one mask too", stack(mask=True), True),
    ("every block reads the same (tied) weights", stack(tied=True), True),
    ("the weights made before the blocks, at another stride", stack(weights_first=True), True),
    ("a literal operand in every block", stack(literal=True), True),
    ("block 0 reads the stack's input from elsewhere", stack(before=True), True),
    ("blocks holding blocks", stack(6, nested=3), True),
    # a run broken in one block is computed block by block, all of it
    ("one block runs another op", stack(break_at=5, how="op"), False),
    ("one block's output has another shape", stack(break_at=5, how="shape"), False),
    ("one block's matmul is a capture output", stack(break_at=5, how="leaves"), False),
    ("one block reads the mask where the others read a weight", stack(mask=True, break_at=4, how="mask-for-weight"), False),
])
def test_repeated_blocks_get_the_signatures_computed_one_by_one(name, cap, repeated):
    fast, slow, clones = both(cap)
    assert fast == slow, name
    assert bool(clones.model) == repeated, name


def test_a_broken_block_is_computed_and_differs_from_the_others():
    cap = stack(break_at=5, how="leaves")
    (sigs, _), _, clones = both(cap)
    blocks = [g.id for g in cap.groups if g.attrs.get("class") == "Block"]
    assert len({sigs[b] for b in blocks}) == 2 and blocks[5] not in clones.clone_of


@pytest.mark.parametrize("seed", range(40))
def test_a_stack_with_one_operand_moved_anywhere_keeps_its_signatures(seed):
    """Fuzz: one operand of one node set to another value (an output of any block, a
    weight, the mask, a literal's place): the check lets only what it proves through."""
    rnd = random.Random(seed)
    cap = stack(10, mask=rnd.random() < 0.5, weights_first=rnd.random() < 0.5, before=rnd.random() < 0.5)
    nodes = list(cap.nodes)
    i = rnd.randrange(len(nodes))
    node = nodes[i]
    k = rnd.randrange(len(node.inputs))
    v = rnd.randrange(len(cap.values))
    operands = list(node.inputs)
    operands[k] = Operand(operands[k].position, v)
    nodes[i] = replace(node, inputs=operands)
    fast, slow, _ = both(replace(cap, nodes=nodes))
    assert fast == slow


def test_routed_blocks_are_not_taken_from_the_first():
    s = Stack()
    x = s.value()
    model = s.group("module", "model", None, "Model")
    for _ in range(8):
        b = s.group("module", "experts", model, "Experts")
        idx = s.node("aten::nonzero", [x], b)
        for op in ("aten::index.Tensor", "aten::mul.Tensor", "aten::add.Tensor", "aten::relu", "aten::neg"):
            x = s.node(op, [x, idx], b)
    cap = s.capture([x])
    fast, slow, clones = both(cap)
    assert fast == slow and not clones.model


@pytest.mark.parametrize("seed", range(60))
def test_a_stack_with_one_operand_moved_alike_in_every_block_keeps_its_signatures(seed):
    """Fuzz the check's own ground: in every block the same operand reads ``base + k·stride``
    (block ``k``), a stride of 0, ``V``, or another, from any base, so that the blocks
    still repeat by their columns but may read one value in two places, or what a later
    block makes."""
    rnd = random.Random(seed)
    cap = stack(10, mask=rnd.random() < 0.5, weights_first=rnd.random() < 0.5, literal=rnd.random() < 0.3)
    blocks = [g.id for g in cap.groups if g.attrs.get("class") == "Block"]
    owner = [n.group for n in cap.nodes]
    first = [owner.index(b + 1) for b in blocks]  # each block's first node: its norm's op
    per = first[1] - first[0]
    j = rnd.randrange(per)
    node = cap.nodes[first[0] + j]
    k = rnd.randrange(len(node.inputs))
    v_step = cap.nodes[first[1]].outputs[0] - cap.nodes[first[0]].outputs[0]
    stride = rnd.choice([0, v_step, 1, 3, v_step - 1, v_step + 2])
    base = rnd.randrange(len(cap.values))
    nodes = list(cap.nodes)
    for r, f in enumerate(first):
        v = base + r * stride
        if v >= len(cap.values):
            break
        n = nodes[f + j]
        operands = list(n.inputs)
        operands[k] = Operand(operands[k].position, v)
        nodes[f + j] = replace(n, inputs=operands)
    fast, slow, _ = both(replace(cap, nodes=nodes))
    assert fast == slow


@pytest.mark.parametrize("cap", [stack(), stack(6, nested=3), stack(break_at=5, how="op")])
def test_a_groups_siblings_from_its_parent_alone_are_those_of_the_whole_list(cap):
    # Structure.sibling(g) works out the children of g's parent only (a page asks about
    # the groups it shows); asked first, and after the whole list, it says what it says
    index = GraphIndex(cap)
    labels = [f"{v.dtype}{v.shape}" for v in cap.values]
    one_by_one = S.Structure(cap, index, lambda v: False, labels, lambda g: True)
    whole = S.Structure(cap, index, lambda v: False, labels, lambda g: True)
    asked = [one_by_one.sibling(g) for g in reversed(range(len(cap.groups)))][::-1]
    assert one_by_one._siblings is None  # not made by asking group by group
    assert asked == whole.siblings == one_by_one.siblings
    assert [one_by_one.sibling(g) for g in range(len(cap.groups))] == whole.siblings
    assert any(count > 1 for count, _ in whole.siblings)
