"""The warm-up's shortcuts (issue 51) change no answer the server gives.

What the viewer server answers for a capture (the summary, the first view's pages as the
warm-up encodes them, every group's page in both weight modes with its first chunks, the
structure, group, node and value details, search, costs) is computed twice: as it is now,
and with each shortcut replaced by the plain computation it stands for (the reference
versions below are the implementations before the shortcuts): the signatures of repeated
blocks computed block by block instead of taken from the first (capture/analysis/structure.py,
``_Clones``; without them, each block's costs are summed node by node too, not taken from
the first block's: capture/analysis/cost.py), a page's flow looking at each weight entering instead of counting the weights
by columns (viewer/projection/views.py), the trunk looking at every child
(viewer/projection/trunk.py). The boundary sets of the index are checked against their
definition, group by group. Captures of our own with runs of identical blocks: Torch
models (a ``ModuleList`` of identical blocks long enough to be chunked, runs of blocks nested
three levels, a run with one block that differs in the middle, blocks sharing one Linear
and a tied embedding) and hand-built ones (capture/analysis tests' stacks).
"""

from __future__ import annotations

import contextlib
from bisect import bisect_left
from typing import Any, Iterator

import pytest

from capture.analysis import structure as S
from capture.analysis.devices import Device
from capture.analysis.index import ROOT, GraphIndex
from capture.graph import graphfile
from capture_workspace import forget_workspace_modules, profile_table, run_framework, tensor, write
from test_structure_clones import Stack, stack
from viewer.projection import presentation as Pr
from viewer.projection import projection as P
from viewer.projection import views as V
from viewer.projection.page_flow import _Flow, _Wiring
from viewer.server.security import _dumps
from viewer.server.served import _Entry

TORCH_MODELS = """
import torch
from torch import nn


class Step(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return x + nn.functional.gelu(self.fc(self.norm(x)))


class Odd(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return x + torch.relu(self.fc(self.norm(x))) * 2


class Deep(nn.Module):
    def __init__(self, blocks=420, width=8):
        super().__init__()
        self.blocks = nn.ModuleList(Step(width) for _ in range(blocks))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


class Stage(nn.Module):
    def __init__(self, width, n):
        super().__init__()
        self.blocks = nn.ModuleList(Step(width) for _ in range(n))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


class Part(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.stages = nn.ModuleList(Stage(width, 8) for _ in range(3))

    def forward(self, x):
        for stage in self.stages:
            x = stage(x)
        return x


class Nested(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.parts = nn.ModuleList(Part(width) for _ in range(3))
        self.head = nn.Linear(width, 4)

    def forward(self, x):
        for part in self.parts:
            x = part(x)
        return self.head(x)


class OneDiffers(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.blocks = nn.ModuleList(Odd(width) if k == 9 else Step(width) for k in range(19))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


class SharedStep(nn.Module):
    def __init__(self, width, fc):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = fc

    def forward(self, x):
        return x + nn.functional.gelu(self.fc(self.norm(x)))


class Tied(nn.Module):
    def __init__(self, width=8, vocab=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.fc = nn.Linear(width, width)
        self.blocks = nn.ModuleList(SharedStep(width, self.fc) for _ in range(12))  # one Linear in every block
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)
"""

X = tensor([2, 3, 8])  # three dimensions: each Linear reshapes on its way in and out (elided)


def each_torch_model(test: Any) -> Any:
    """A test run on each of the Torch models above (slow: they are captured in a worker)."""
    return pytest.mark.torch(pytest.mark.slow(pytest.mark.parametrize("model", ["Deep", "Nested", "OneDiffers", "Tied"])(test)))


@pytest.fixture(scope="module")
def torch_captures(tmp_path_factory) -> Iterator[dict[str, Any]]:
    pytest.importorskip("torch")
    from capture.torch import framework as fw

    ws = tmp_path_factory.mktemp("warmup")
    write(ws, {"wmodels.py": TORCH_MODELS})
    caps = {}
    for name, inputs in [("Deep", [X]), ("Nested", [X]), ("OneDiffers", [X]),
                         ("Tied", [tensor([2, 6], "int64", generator={"kind": "randint", "low": 0, "high": 32})])]:
        cap, _ = run_framework(fw, ws, profile_table(f"wmodels:{name}", args=inputs), None)
        caps[name] = graphfile.decode(graphfile.encode(cap))  # as the viewer reads it: through the file
    yield caps
    forget_workspace_modules(ws)


# --------------------------------------------------------------------------- the references


def _reference_flow(self: Any, g: int, lo: int, hi: int, span: int, kernels: bool, weights: bool = False) -> _Flow:
    """Pages._flow before the weights were counted by columns: every entry looked at."""
    ix = self.index
    deps = self._deps(g, kernels)
    flow = _Flow(span, deps.near)
    producer, source = ix.producer, self.present.source
    src, dst, val = deps.src, deps.dst, deps.val
    skip = None if weights else self.names.is_weight

    def outside(v: int) -> None:
        s = source(v, kernels)
        flow.in_vals[v] = producer[s] if s >= 0 else -1

    for k in range(bisect_left(dst, lo), bisect_left(dst, hi)):
        s, v = src[k], val[k]
        ti = (dst[k] - lo) // span
        if lo <= s < hi:
            flow.between((s - lo) // span, ti, v)
        elif skip is not None and skip(v):
            flow.hidden_weights[v] = None
        else:
            outside(v)
            flow.add(("in", v), ti, v)
    leaving = (k for k in sorted(range(len(src)), key=src.__getitem__) if lo <= src[k] < hi)
    crossings = [(src[k], val[k]) for k in leaving if not lo <= dst[k] < hi]
    crossings += [(s, v) for s, v in deps.outs if lo <= s < hi]
    for s, v in crossings:
        flow.leaves((s - lo) // span, v)
    for h, u, v in deps.through:
        if lo <= h < hi:
            outside(u)
            flow.out_vals[v] = None
            flow.add(("in", u), ("out", v), u)
    if g == ROOT and lo == 0 and hi == len(ix.ordered(g)[1]):
        for v in ix.output_values:
            if producer[v] < 0:
                flow.in_vals[v] = -1
                flow.out_vals[v] = None
                flow.add(("in", v), ("out", v), v)
    return flow


def _reference_build_deps(self: Any, g: int, kernels: bool) -> Any:
    """Pages._build_deps before: each operand through ``made_at``, no split by weight."""
    w = _Wiring(self.index, self.present, g, kernels)
    refs, hidden, made_at, producer = w.refs, w.hidden, w.made_at, self.index.producer
    near: dict[int, int] = {}
    src: list[int] = []
    dst: list[int] = []
    val: list[int] = []
    for pos, ref in enumerate(refs):
        if ref >= 0 and hidden(ref):
            continue
        for v in w.operands(ref):
            if v < 0:
                continue
            s = made_at(v) if producer[v] >= 0 else -1
            if s >= 0 and hidden(refs[s]):
                near.setdefault(s, pos)
                via = w.drawn(v)
                if via is None:
                    continue
                s, v = via
            src.append(s)
            dst.append(pos)
            val.append(v)
    outs, through = self._group_outs(w)
    if not kernels:
        self._near_elided(w, near)
    return V._Deps(src, dst, val, [], [], outs, through, near, [], list(range(len(val))))


def _reference_trunk(index: Any, present: Any) -> list[int]:
    """trunk() before: every child of each container looked at."""
    count = index.node_count
    out: list[int] = []
    g = ROOT
    while True:
        _, refs, _ = index.ordered(g)
        kids: list[int] = []
        ops_shown = False
        for r in refs:
            if not present.drawn(r, False):
                continue
            if r >= 0:
                ops_shown = True
                continue
            c = ~r
            if present.is_function_card(c) or present.single(c, False) is not None:
                ops_shown = True
            else:
                kids.append(c)
        total = count[g + 1]
        if len(kids) == 1 and not ops_shown:
            nxt: int | None = kids[0]
        else:
            nxt = next((c for c in kids if 2 * count[c + 1] > total and count[c + 1] > 1), None)
        if nxt is None:
            return out
        out.append(nxt)
        g = nxt


@contextlib.contextmanager
def plain() -> Iterator[None]:
    """Every shortcut replaced by the computation it stands for."""
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(S, "_clones", lambda *a, **k: S._Clones())
        mp.setattr(V.Pages, "_flow", _reference_flow)
        mp.setattr(V.Pages, "_build_deps", _reference_build_deps)
        mp.setattr(P, "trunk", _reference_trunk)
        yield
    finally:
        mp.undo()


# --------------------------------------------------------------------------- the answers


def answers(cap: Any) -> dict[str, bytes]:
    """What the server answers, asked in the warm-up's order first (as ``tensorviz view``
    serves a capture), then page by page."""
    entry = _Entry(1, "t", cap)
    entry.prepared(_dumps)
    p = entry.projection()
    out = {"summary": _dumps(entry.summary())}
    out.update({f"first {key}": data for key, data in entry.first_pages.items()})
    st = p.structure()
    out["structure"] = _dumps([st.signature, st.routing, sorted(st.routed), st.siblings,
                               sorted(st.twins.all().items())])
    ng = len(p.capture.groups)
    for g in [ROOT, *range(ng)]:
        for w in (False, True):
            page = p.children(g, None, weights=w)
            out[f"children {g} {w}"] = _dumps(page)
            for it in [it for it in page["items"] if it["type"] == "chunk"][:2]:
                out[f"chunk {it['id']} {w}"] = _dumps(p.children(g, it["id"].split(":")[1], weights=w))
        if g != ROOT:
            out[f"group {g}"] = _dumps(p.group(g))
    step = max(1, p.index.n_nodes // 60)
    for i in range(0, p.index.n_nodes, step):
        out[f"node {i}"] = _dumps(p.node(i))
    for v in range(0, p.index.n_values, max(1, p.index.n_values // 60)):
        out[f"value {v}"] = _dumps(p.value(v))
    out["nodes"] = _dumps(p.nodes_page(0, 1000))
    for q in ("Linear", "addmm", "gelu", "blocks.3", "norm"):
        out[f"search {q}"] = _dumps(p.search(q, 50))
    if p.capture.cost is not None:
        out["cost"] = _dumps(p.cost_summary())
        out["times"] = _dumps(p.cost_times(Device("d", "a device", bandwidth=1e9, peak_flops={"float32": 1e9})))
    return out


def same_answers(cap: Any) -> dict[str, bytes]:
    now = answers(cap)
    with plain():
        before = answers(cap)
    assert list(now) == list(before)
    differ = [key for key in now if now[key] != before[key]]
    assert not differ, differ[:10]
    return now


@each_torch_model
def test_a_torch_model_with_repeated_blocks_gets_the_same_answers(torch_captures, model):
    cap = torch_captures[model]
    got = same_answers(cap)
    if model == "Deep":  # the 420 blocks: a chunked page folded into one stack of alike blocks
        first = [key for key in got if key.startswith("first")]
        assert any(b'"stack"' in got[key] and b'"chunks"' in got[key] for key in first)


@pytest.mark.parametrize("name, cap", [
    ("a stack of alike blocks", stack(30)),
    ("blocks holding blocks", stack(6, nested=3)),
    ("every block reads the same (tied) weights", stack(12, tied=True)),
    ("the weights made before the blocks", stack(12, weights_first=True, mask=True)),
    ("one block differs in the middle", stack(12, break_at=6, how="op")),
    ("one block's output leaves the capture", stack(12, break_at=6, how="leaves")),
])
def test_a_hand_built_stack_gets_the_same_answers(name, cap):
    same_answers(cap)


def test_a_block_drawn_otherwise_is_not_taken_from_the_first():
    """Blocks alike by structure whose elided ops differ (one block's empty op is not known
    to be empty) are drawn block by block: the odd block's call is a frame with twins of its
    own, the others' calls are drawn as their add."""
    cap = padded_stack(odd=5)
    got = same_answers(cap)
    p = P.Projection(cap)
    pads = [g.id for g in cap.groups if g.name == "pad"]
    assert [p._can_twin(g) for g in pads] == [k == 5 for k in range(len(pads))]
    assert p.structure().clones.runs  # the blocks repeat by structure all the same
    assert got


def padded_stack(blocks: int = 12, odd: int | None = None) -> Any:
    """A stack whose blocks each hold a ``pad`` call of an ``aten::new_empty`` and an add:
    an empty result (a 0 dimension) is elided, and the call drawn as its add alone. In
    block ``odd`` the 0 is the string ``"0"`` (a hostile file's): the same label, so the
    blocks still repeat by structure, but that op makes nothing known to be empty, is drawn,
    and that block's call is a frame."""
    s = Stack()
    x = s.value()
    model = s.group("module", "model", None, "Model")
    for k in range(blocks):
        b = s.group("module", "block", model, "Block")
        h = s.node("aten::layer_norm", [x, s.value((8,))], b)
        pad = s.group("module", "pad", b, "Pad")
        e = s.node("aten::new_empty", [h], pad, ("0", 8) if k == odd else (0, 8))
        h = s.node("aten::add.Tensor", [h, e], pad)
        h = s.node("aten::gelu", [h], b)
        x = s.node("aten::add.Tensor", [x, h], b)
    return s.capture([x])


# --------------------------------------------------------------------------- the presentation


def _reference_presentation(cap: Any, ix: GraphIndex) -> tuple[frozenset[int], frozenset[int]]:
    """The function cards and the elided ops by the rules, op by op and group by group."""
    cards = frozenset(g for g, grp in enumerate(cap.groups)
                      if grp.kind == Pr.FUNCTION_KIND and ix.parent[g] != -1 and g not in ix.body_node)
    elided = set()
    group, producer, cols = ix.cols.group, ix.producer, ix.cols
    for i, op in enumerate(cols.op):
        outs = ix.outputs_of(i)
        if op in Pr.BOOKKEEPING_OPS:
            elided.add(i)
        elif op.startswith(Pr.EMPTY_PREFIXES):
            if outs and all(any(type(d) is int and d == 0 for d in cap.values[v].shape) for v in outs):
                elided.add(i)
        elif op in Pr.RESHAPE_OPS and group[i] in cards:
            g = group[i]
            leaving = ix.bout[g + 1] or {}
            v = next((u for u in ix.operands_of(i) if u >= 0), -1)
            if v < 0:
                if any(o in leaving for o in outs):
                    elided.add(i)
            elif producer[v] < 0 or group[producer[v]] != g or any(o in leaving for o in outs):
                elided.add(i)
    return cards, frozenset(elided)


@each_torch_model
def test_the_elided_ops_and_function_cards_are_those_of_the_rules(torch_captures, model):
    cap = torch_captures[model]
    ix = GraphIndex(cap)
    present = Pr.Presentation(cap, ix)
    cards, elided = _reference_presentation(cap, ix)
    assert present.function_cards == cards and present.elided == elided
    assert cards and elided  # the Linear calls and their reshapes


# --------------------------------------------------------------------------- the index


def _entering_and_leaving(cap: Any, ix: GraphIndex) -> tuple[list[list[int]], list[list[int]]]:
    """Each group's boundary by its definition: a value read inside the group (by an
    operand, in operand order) and made outside it (or by nothing) enters it; a value made
    inside it and read outside it leaves it, then the capture's outputs made inside it."""
    ng = len(cap.groups)
    inside = [set(ix.chain[g]) if g != ROOT else set() for g in range(ng)]

    def holds(g: int, h: int) -> bool:  # group g's subtree holds group h (ROOT: every group)
        return g == ROOT or (h != ROOT and g in inside[h])

    enter: list[dict[int, None]] = [{} for _ in range(ng + 1)]
    leave: list[dict[int, None]] = [{} for _ in range(ng + 1)]
    for node in cap.nodes:
        x = ROOT if node.group is None else node.group
        for o in node.inputs:
            v = o.value
            if v is None:
                continue
            p = ix.producer[v]
            y = None if p < 0 else ix.cols.group[p]
            for g in [ROOT, *range(ng)]:
                if holds(g, x) and (y is None or not holds(g, y)):
                    enter[g + 1][v] = None
                if y is not None and holds(g, y) and not holds(g, x):
                    leave[g + 1][v] = None
    for v in ix.output_values:
        p = ix.producer[v]
        if p >= 0:
            for g in [ROOT, *range(ng)]:
                if holds(g, ix.cols.group[p]):
                    leave[g + 1][v] = None
    return [list(d) for d in enter], [list(d) for d in leave]


@pytest.mark.parametrize("cap", [stack(8), stack(4, nested=2), stack(6, tied=True, mask=True, literal=True)])
def test_the_index_boundaries_are_those_of_their_definition(cap):
    ix = GraphIndex(cap)
    enter, leave = _entering_and_leaving(cap, ix)
    assert [list(d or ()) for d in ix.bin] == enter
    assert [list(d or ()) for d in ix.bout] == leave
    assert list(ix.in_owner) == [i for i, n in enumerate(cap.nodes) for _ in n.inputs]
