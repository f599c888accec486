"""Python loops over repeated steps fold like repeated layers (issue 49, item 5): mamba's
selective scan (``x = deltaA[:, i] * x + deltaB_u[:, i]`` once per time step) and an RNN
cell called per time step become one stack ``× L steps`` that opens into the steps, with
the carried value and the per-step slices said on its card, costs summed and every step
linked to its source (capture/analysis/loops.py, viewer/projection/loop_steps.py).

Unit cases on captures built directly (tests/loop_models.py); then real captures of our
own models: an eager Torch forward and a traced JAX function."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loop_models import MAMBA_STEP, _Builder, loop_capture, noise_capture  # noqa: E402

from capture.analysis.loops import STEP_KIND, fold_loops  # noqa: E402
from capture.analysis.index import GraphIndex  # noqa: E402
from viewer.projection.projection import Projection  # noqa: E402


def folded(cap):
    out = fold_loops(cap, GraphIndex(cap))
    return out, [g for g in out.groups if g.kind == STEP_KIND]


def two_group_steps(steps: int, same_module: bool = True):
    """``for x_t in x.unbind(1): h = self.cell(x_t, h); y = self.proj(h)``: steps of two
    module calls and no op of their own."""
    b = _Builder()
    model = b.group("module", "RNN", None, path="", **{"class": "RNN"})
    x = b.value([2, steps, 8])
    h = b.node("aten::zeros", [], model, 10, [2, 8])
    for t in range(steps):
        for name, line in (("cell", 12), ("proj", 13)):
            path = name if same_module else f"{name}.{t}"
            g = b.group("module", name, model, path=path, frame=b.frame("model.py", line), **{"class": "Linear"})
            h = b.node("aten::addmm", [h, x], g, 3, [2, 8], file="cell.py")
            h = b.node("aten::tanh", [h], g, 4, [2, 8], file="cell.py")
    return b.capture([x], [h])


def data_dependent_steps(steps: int):
    """An experts loop: each iteration runs ``nonzero`` (routing): left to the lanes."""
    body = [("aten::nonzero", 40, "prev"), ("aten::index.Tensor", 41, "carry"), ("aten::add.Tensor", 42, "prev")]
    return loop_capture(steps, body)


@pytest.mark.parametrize("name, make, steps", [
    ("mamba's selective scan, 5 time steps", lambda: loop_capture(5), 5),
    ("two time steps", lambda: loop_capture(2), 2),
    ("one time step is no loop", lambda: loop_capture(1), 0),
    ("a map: no value carried from one step to the next", lambda: loop_capture(6, carry=False), 0),
    ("nested loops: 3 outer steps, each with 4 inner ones", lambda: loop_capture(3, inner=4), 3 + 3 * 4),
    ("steps of two module calls and no op of their own", lambda: two_group_steps(4), 4),
    ("layers (another module each time) are a stack already", lambda: two_group_steps(4, same_module=False), 0),
    ("a data-dependent loop (experts) is not folded", lambda: data_dependent_steps(4), 0),
    ("lines that almost repeat (period 50, the last line its own)", lambda: noise_capture(3000, 50), 0),
])
def test_which_runs_fold_into_steps(name, make, steps):
    _, made = folded(make())
    assert len(made) == steps, name


def test_steps_wrap_each_iteration_and_keep_every_id():
    cap = loop_capture(5)
    out, steps = folded(cap)
    assert [s.name for s in steps] == [f"step {r}" for r in range(5)]
    assert all(s.parent == 0 and s.attrs["loop"]["steps"] == 5 for s in steps)
    # the capture's own groups keep their ids; its nodes are the same, regrouped
    assert out.groups[:len(cap.groups)] == cap.groups and len(out.nodes) == len(cap.nodes)
    per = len(MAMBA_STEP)
    first_step_ops = [i for i, n in enumerate(out.nodes) if n.group == steps[0].id]
    assert first_step_ops == list(range(4, 4 + per))  # after the three sequences and the zeros
    # the carried value: what step 0's last op made enters step 1
    assert steps[1].attrs["loop"]["carried"] == [out.nodes[first_step_ops[-1]].outputs[0]]
    # the sequences every step slices, and the first step's lines
    assert sorted(steps[0].attrs["loop"]["shared"]) == [1, 2, 3]
    assert (steps[0].attrs["loop"]["file"], steps[0].attrs["loop"]["lines"]) == ("model.py", [21, 22])
    # go-to-source: a step's frame is its first op's line
    assert out.frames[steps[0].attrs["frame"]].line == 21
    # the file the viewer read is left as it was
    assert all(n.group == 0 for n in cap.nodes)


def test_a_loop_folds_into_one_stack_of_steps_that_says_what_it_carries():
    p = Projection(loop_capture(5))
    page = p.children(0)
    (stack,) = page["stacks"]
    assert (stack["label"], stack["count"], stack["period"]) == ("loop · model.py:21–22", 5, 1)
    assert stack["loop"]["lines"] == ["carries f32[2,8,4] step to step", "per step: a slice of f32[2,5,8,4] ×3"]
    assert [b["label"] for b in stack["loop"]["carried"]] == ["f32[2,8,4]"]
    members = [k for rep in stack["members"] for k in rep]
    kinds = {it["key"]: it["kind"] for it in page["items"]}
    assert len(members) == 5 and {kinds[k] for k in members} == {STEP_KIND}
    # the steps stand between what makes the sequences and the stack of what they made
    assert [it["label"] for it in page["items"] if it["key"] not in members] == ["aten::exp"] * 3 + [
        "aten::zeros", "aten::stack"]
    # the carried value is an edge from each step into the next
    edges = {(e["source"], e["target"]) for e in page["edges"]}
    assert all((a, b) in edges for a, b in zip(members, members[1:]))
    # a step opens into its ops, each linked to its line
    step = int(members[2][1:])
    ops = p.children(step)["items"]
    assert [it["label"] for it in ops] == [op for op, _, _ in MAMBA_STEP]
    assert [p.node(it["id"])["frame"]["line"] for it in ops] == [line for _, line, _ in MAMBA_STEP]
    assert p.group(step)["frame"]["line"] == 21


def alike_calls(calls: int, steps: int = 0, rotated: bool = False, carried_at: int | None = None):
    """A deep ModuleList of ``Linear`` layers: ``calls`` ``linear`` calls alike (a view,
    a transpose, a matmul, a view again: the view twice from one line, no run), then a
    loop of ``steps`` iterations in the model itself. ``rotated``: each call then rotates
    two values alike (a mul and an add from the same two lines, twice: a run the search
    checks against the nodes, no step, as q and k in an attention); the call ``carried_at``
    rotates the first's result again (a loop of two steps)."""
    b = _Builder()
    model = b.group("module", "Deep", None, path="", **{"class": "Deep"})
    x = b.value([2, 8])
    for k in range(calls):
        block = b.group("module", f"blocks.{k}", model, path=f"blocks.{k}", frame=b.frame("model.py", 3),
                        **{"class": "Linear"})
        fn = b.group("function", "linear", block, function="torch.nn.functional.linear")
        v = b.node("aten::view", [x], fn, 7)
        w = b.node("aten::t", [x], fn, 7)
        v = b.node("aten::addmm", [v, w], fn, 7)
        x = b.node("aten::view", [v], fn, 7)
        if rotated:
            q = b.node("aten::mul.Tensor", [x, x], fn, 9)
            q = b.node("aten::add.Tensor", [q, x], fn, 10)
            src = q if k == carried_at else x
            r = b.node("aten::mul.Tensor", [src, src], fn, 9)
            r = b.node("aten::add.Tensor", [r, src], fn, 10)
            x = b.node("aten::sub.Tensor", [q, r], fn, 11)
    for _ in range(steps):
        x = b.node("aten::mul.Tensor", [x, x], model, 21)
        x = b.node("aten::add.Tensor", [x, x], model, 22)
    return b.capture([0], [x])


@pytest.mark.parametrize("rotated, carried_at, searches, steps", [
    # the linear calls (view, t, addmm, view): no two adjacent children alike twice, so
    # not searched at all (_Folder._may_run); the model
    (False, None, 1, 4),
    (True, None, 2, 4),  # the same: the alike calls' runs checked against their own nodes again
    (True, 150, 3, 6),  # call 150's run carries a value: it is searched in full, and folds
])
def test_containers_alike_are_searched_once_with_the_same_budget(monkeypatch, rotated, carried_at, searches, steps):
    from capture.analysis import loops

    searched = []
    runs = loops._Folder._runs
    monkeypatch.setattr(loops._Folder, "_runs", lambda self, c, refs, tokens: searched.append(c) or runs(self, c, refs, tokens))
    cap = alike_calls(300, steps=4, rotated=rotated, carried_at=carried_at)
    out, made = folded(cap)
    assert len(made) == steps and sum(1 for g in out.groups if g.name == "linear") == 300
    assert len(searched) == searches
    # the same steps and the same budget spent as when each container is searched in full
    plain = loops._Folder(cap, GraphIndex(cap))
    plain.__class__ = type("Unmemoized", (loops._Folder,), {"_fold_container": lambda self, c, refs: self._runs(
        c, refs, self._tokens_of(refs)) if len(refs) >= 2 * loops.MIN_STEP_OPS else []})
    memo = loops._Folder(cap, GraphIndex(cap))
    assert plain.fold() and memo.fold() and plain.budget == memo.budget
    assert [(g.name, g.parent) for g in plain.groups] == [(g.name, g.parent) for g in memo.groups]
    assert plain.group == memo.group


@pytest.mark.parametrize("rotated, carried_at", [(False, None), (True, None), (True, 150)])
def test_containers_of_ops_with_no_pair_alike_twice_are_left_unsearched_at_no_change(rotated, carried_at):
    # a container of ops alone is searched only when two adjacent children are alike twice
    # (_Folder._may_run): searching every one that runs an op from a frame twice, as
    # before, makes the same steps and spends the same budget
    from capture.analysis import loops

    cap = alike_calls(300, steps=4, rotated=rotated, carried_at=carried_at)
    every = loops._Folder(cap, GraphIndex(cap))
    every.__class__ = type("EveryCandidate", (loops._Folder,), {
        "_may_run": lambda self, frames, ops, alone: len(set(zip(frames, ops))) < len(ops)})
    pruned = loops._Folder(cap, GraphIndex(cap))
    # the plain calls (view, t, addmm, view) are left out; a rotated call repeats (mul, add)
    assert len(every._candidates()) - len(pruned._candidates()) == (0 if rotated else 300)
    assert every.fold() and pruned.fold() and every.budget == pruned.budget
    assert [(g.name, g.parent, g.attrs) for g in every.groups] == [(g.name, g.parent, g.attrs) for g in pruned.groups]
    assert every.group == pruned.group


def test_the_last_step_folds_with_the_others_though_it_hands_nothing_on():
    """The last step's carried value goes nowhere (the loop ended): still the same code."""
    p = Projection(loop_capture(4))
    (stack,) = p.children(0)["stacks"]
    assert stack["count"] == 4


def test_steps_are_named_in_the_vocabulary():
    from capture.analysis.names import vocabulary

    assert vocabulary()["kinds"][STEP_KIND]["short"] == "loop step"


# --------------------------------------------------------------------------- real captures

# written without its first line break (capture_workspace.write): line 1 is "import torch"
SCAN_MODELS = '''
import torch
from torch import nn


class SelectiveScan(nn.Module):
    def __init__(self, d=8, n=4):
        super().__init__()
        self.A = nn.Parameter(torch.randn(d, n))
        self.proj = nn.Linear(d, d + 2 * n)
        self.n, self.d = n, d

    def forward(self, u):
        b, L, d = u.shape
        delta, B, C = self.proj(u).split([self.d, self.n, self.n], dim=-1)
        deltaA = torch.exp(torch.einsum("bld,dn->bldn", delta, self.A))
        deltaB_u = torch.einsum("bld,bln,bld->bldn", delta, B, u)
        x = torch.zeros(b, d, self.n)
        ys = []
        for i in range(L):
            x = deltaA[:, i] * x + deltaB_u[:, i]
            y = torch.einsum("bdn,bn->bd", x, C[:, i, :])
            ys.append(y)
        return torch.stack(ys, dim=1)


class CellRNN(nn.Module):
    def __init__(self, d=8, h=16):
        super().__init__()
        self.cell = nn.GRUCell(d, h)
        self.head = nn.Linear(h, 4)
        self.h = h

    def forward(self, x):
        h = x.new_zeros(x.shape[0], self.h)
        outs = []
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
            outs.append(h)
        return self.head(torch.stack(outs, dim=1))
'''


@pytest.fixture(scope="module")
def torch_captures(tmp_path_factory):
    pytest.importorskip("torch")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "torch"))
    from torch_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write

    root = tmp_path_factory.mktemp("loops")
    write(root, {"scan.py": SCAN_MODELS})
    try:
        return {m: capture_in_process(root, profile(f"scan:{m}", args=[tensor([2, 6, 8])]))[0]
                for m in ("SelectiveScan", "CellRNN")}
    finally:
        forget_workspace_modules(root)


def loop_stack(p: Projection) -> dict:
    (model,) = [g.id for g in p.capture.groups if g.parent is None]
    (stack,) = [st for st in p.children(model)["stacks"] if st.get("loop")]
    return stack


@pytest.mark.slow
def test_an_eager_selective_scan_is_one_stack_of_time_steps(torch_captures):
    p = Projection(torch_captures["SelectiveScan"])
    stack = loop_stack(p)
    assert (stack["label"], stack["count"]) == ("loop · scan.py:20–21", 6)
    assert stack["loop"]["lines"] == ["carries f32[2,8,4] step to step",
                                      "per step: a slice of f32[2,6,8,4] ×2 · f32[2,6,4]"]
    # costs summed over the steps: the run is six times one step
    cost = stack["cost"]
    assert cost["flops"] == 6 * cost["per_block"]["flops"] > 0
    # each step holds its own einsum call, from its own line
    step = int(stack["members"][3][0][1:])
    items = p.children(step)["items"]
    assert [it["label"] for it in items if it["type"] == "group"] == ["einsum"]
    assert {p.node(it["id"])["frame"]["line"] for it in items if it["type"] == "node"} == {20, 21}


@pytest.mark.slow
def test_an_rnn_cell_called_per_time_step_is_one_stack_and_its_weights_count_once(torch_captures):
    p = Projection(torch_captures["CellRNN"])
    stack = loop_stack(p)
    assert (stack["label"], stack["count"]) == ("loop · scan.py:37", 6)
    assert stack["loop"]["lines"] == ["carries f32[2,16] step to step", "per step: a slice of x f32[2,6,8]"]
    cost = stack["cost"]
    assert cost["params"] == cost["per_block"]["params"] == 3 * 16 * (8 + 16 + 2)  # GRUCell(8, 16), read by every step


JAX_SCAN = '''
import jax.numpy as jnp


def selective_scan(u):
    b, L, d = u.shape
    deltaA = jnp.exp(u[..., None] * jnp.ones((d, 4)))
    deltaB_u = u[..., None] * 0.5
    C = jnp.tanh(u[..., :4])
    x = jnp.zeros((b, d, 4))
    ys = []
    for i in range(L):
        x = deltaA[:, i] * x + deltaB_u[:, i]
        y = jnp.einsum("bdn,bn->bd", x, C[:, i, :])
        ys.append(y)
    return jnp.stack(ys, axis=1)
'''


@pytest.mark.slow
def test_a_python_loop_unrolled_in_a_jaxpr_folds_into_steps(tmp_path):
    pytest.importorskip("jax")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "jax"))
    from jax_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write

    write(tmp_path, {"jscan.py": JAX_SCAN})
    try:
        cap = capture_in_process(tmp_path, profile("jscan:selective_scan", args=[tensor([2, 5, 8])]))[0]
    finally:
        forget_workspace_modules(tmp_path)
    p = Projection(cap)
    page = p.children(-1)
    (stack,) = [st for st in page["stacks"] if st.get("loop")]
    assert (stack["label"], stack["count"]) == ("loop · jscan.py:12–13", 5)
    assert stack["loop"]["lines"][0] == "carries f32[2,8,4] step to step"
    # each step's einsum is its own scope (a label entered once per step), inside the step
    for rep in stack["members"]:
        (key,) = rep
        inner = p.children(int(key[1:]))["items"]
        assert [it["label"] for it in inner if it["type"] == "group"] == ["bdn,bn->bd"]
