"""Function groups (issue 26 item 1, capture side): the ``torch.*`` /
``torch.nn.functional`` call each kernel ran under, recorded by
``capture.torch.functions`` beside the dispatch mode."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from capture.graph import graphfile  # noqa: E402
from capture.graph.diff import diff  # noqa: E402
from capture.graph.model import Capture  # noqa: E402
from capture.torch.functions import public_name  # noqa: E402

from torch_workspace import capture_in_process, profile, tensor, write  # noqa: E402

pytestmark = pytest.mark.torch

MODEL = '''
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        h = self.fc(x)
        h = torch.relu(h)
        u = F.normalize(h, dim=-1)
        a = F.scaled_dot_product_attention(u, u, u)
        return self.norm(a + h)


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x).sum()
'''


@pytest.fixture
def fws(ws):
    write(ws, {"fnmodel.py": MODEL})
    return ws


def run(ws, table, **kw):
    return capture_in_process(ws, table, **kw)[0]


def function_groups(cap):
    return [g for g in cap.groups if g.kind == "function"]


def kernels(cap, gid):
    return [n.op for n in cap.nodes if n.group == gid]


def test_a_call_of_several_kernels_is_a_function_group_holding_them(fws):
    cap = run(fws, profile("fnmodel:Net", args=[tensor([2, 3, 8])]))
    fc = next(g for g in cap.groups if g.kind == "module" and g.name == "fc")
    [linear] = [g for g in function_groups(cap) if g.parent == fc.id]
    assert (linear.name, linear.attrs["function"]) == ("linear", "torch.nn.functional.linear")
    # A 3-d input: the kernels of F.linear, every one of them kept in the capture.
    assert kernels(cap, linear.id) == ["aten::view", "aten::t", "aten::addmm", "aten::view"]
    assert kernels(cap, fc.id) == []
    # Its frame is the call site: nn.Linear's own code is Torch's, so the line of the
    # workspace that called the module.
    frame = cap.frames[linear.attrs["frame"]]
    assert (frame.file, frame.function) == ("fnmodel.py", "Net.forward")
    assert "self.fc(x)" in (fws / "fnmodel.py").read_text().splitlines()[frame.line - 1]


def test_only_the_outermost_call_and_its_public_names(fws):
    cap = run(fws, profile("fnmodel:Net", args=[tensor([2, 3, 8])]))
    root = next(g for g in cap.groups if g.parent is None)
    names = {g.name: g for g in function_groups(cap) if g.parent == root.id}
    # F.normalize runs torch.linalg.vector_norm, clamp_min, expand_as and div inside
    # itself: one group, no nested function groups.
    assert names["normalize"].attrs["function"] == "torch.nn.functional.normalize"
    assert len(kernels(cap, names["normalize"].id)) >= 3
    assert all(g.parent not in {f.id for f in function_groups(cap)} for g in cap.groups)
    frame = cap.frames[names["normalize"].attrs["frame"]]
    assert "F.normalize" in (fws / "fnmodel.py").read_text().splitlines()[frame.line - 1]


def test_a_one_kernel_call_names_its_function_on_the_node(fws):
    cap = run(fws, profile("fnmodel:Net", args=[tensor([2, 3, 8])]))
    relu = next(n for n in cap.nodes if n.op == "aten::relu")
    assert relu.params["function"] == "torch.relu"
    assert cap.groups[relu.group].kind == "module"
    add = next(n for n in cap.nodes if n.op == "aten::add.Tensor")
    assert add.params["function"] == "torch.Tensor.add"
    layer_norm = next(n for n in cap.nodes if n.op == "aten::native_layer_norm")
    assert layer_norm.params["function"] == "torch.nn.functional.layer_norm"
    # The capture keeps every kernel: a single-kernel call makes no group.
    assert all(len(kernels(cap, g.id)) >= 2 for g in function_groups(cap))


def test_the_graph_file_keeps_function_groups(fws):
    cap = run(fws, profile("fnmodel:Net", args=[tensor([2, 3, 8])]))
    back = graphfile.decode(graphfile.encode(cap))
    assert [(g.kind, g.name, g.attrs.get("function")) for g in back.groups] == [
        (g.kind, g.name, g.attrs.get("function")) for g in cap.groups]


def in_memory(cap):
    """A copy of a capture read from a file, with rows that can be edited."""
    return Capture(backend=cap.backend, framework=cap.framework, framework_version=cap.framework_version,
                   coverage=cap.coverage, values=list(cap.values), inputs=cap.inputs, outputs=cap.outputs,
                   frames=list(cap.frames), nodes=[dataclasses.replace(n, params=dict(n.params)) for n in cap.nodes],
                   groups=[dataclasses.replace(g, attrs=dict(g.attrs)) for g in cap.groups])


def test_diff_compares_kernels_not_the_grouping(fws):
    """A capture with function groups against the same forward without them (an older
    file): the same kernels, so no difference."""
    with_groups = run(fws, profile("fnmodel:Net", args=[tensor([2, 3, 8])]))
    plain = in_memory(with_groups)
    by_id = {g.id: g for g in plain.groups}
    keep = [g for g in plain.groups if g.kind != "function"]
    new_id = {g.id: i for i, g in enumerate(keep)}

    def holder(gid):
        while gid is not None and by_id[gid].kind == "function":
            gid = by_id[gid].parent
        return None if gid is None else new_id[gid]

    for n in plain.nodes:
        n.group = holder(n.group)
        n.params.pop("function", None)
    for g in keep:
        g.parent = holder(g.parent)
        g.id = new_id[g.id]
    plain.groups = keep
    assert not function_groups(plain) and function_groups(with_groups)
    d = diff(plain, with_groups)
    assert d.same, d
    # A real change inside a function group is still a change of the module's kernels.
    changed = in_memory(with_groups)
    next(n for n in changed.nodes if n.op == "aten::addmm").op = "aten::mm"
    d = diff(with_groups, changed)
    assert [(n.group, n.status, n.op) for n in d.nodes] == [("fc", "changed", "aten::mm")]
    assert [g.path for g in d.groups] == ["fc"]


def test_backward_ops_land_in_module_mirrors_not_function_groups(fws):
    cap = run(fws, profile("fnmodel:Tiny", args=[tensor([3, 4])], kind="training_step", grad_enabled=True))
    backward = [g for g in cap.groups if g.kind == "backward"]
    assert backward and not any(g.kind == "function" for g in cap.groups
                                if g.parent in {b.id for b in backward})
    fc_mirror = next(g for g in backward if g.attrs.get("path") == "fc")
    assert cap.groups[fc_mirror.attrs["forward_group"]].kind == "module"


@pytest.mark.parametrize("func, expected", [
    pytest.param(torch.nn.functional.linear, ("torch.nn.functional.linear", "linear"), id="F.linear"),
    pytest.param(torch.nn.functional.conv2d, ("torch.nn.functional.conv2d", "conv2d"), id="F.conv2d is torch.conv2d"),
    pytest.param(torch.relu, ("torch.relu", "relu"), id="torch.relu"),
    pytest.param(torch.Tensor.softmax, ("torch.Tensor.softmax", "softmax"), id="method"),
    pytest.param(torch.Tensor.T.__get__, ("torch.Tensor.T", "T"), id="property"),
    pytest.param(torch.nn.init.normal_, ("torch.nn.init.normal_", "normal_"), id="torch submodule"),
    pytest.param(len, None, id="not torch"),
])
def test_public_names(func, expected):
    assert public_name(func) == expected
