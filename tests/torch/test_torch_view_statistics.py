"""A view over exactly the elements of its input shares the input's statistics (no
reductions of its own): transposes and permutations, and views that split or merge the
dimensions of a slice with gaps (one of q, k, v split from one projection, then
``view(B, T, heads, hs)``), which were measured again before."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from capture.torch.trace import TorchTrace  # noqa: E402
from capture.torch.trace_values import _dense_layout  # noqa: E402
from capture.worker.workspace_files import WorkspaceFiles  # noqa: E402


def _slice():
    return torch.randn(2, 4, 12).split(4, dim=2)[1]  # [2, 4, 4] with gaps between rows


@pytest.mark.parametrize("a, b, same", [
    pytest.param(lambda: torch.randn(3, 4), lambda t: t.t(), True, id="transpose"),
    pytest.param(lambda: torch.randn(2, 3, 4), lambda t: t.permute(2, 0, 1), True, id="permute"),
    pytest.param(_slice, lambda t: t.view(2, 4, 2, 2), True, id="split-dims-of-gapped-slice"),
    pytest.param(_slice, lambda t: t.view(2, 4, 2, 2).transpose(1, 2), True, id="split-then-transpose"),
    pytest.param(lambda: torch.randn(2, 4, 2, 2), lambda t: t.view(2, 16), True, id="merge-dims"),
    pytest.param(lambda: torch.randn(4, 6), lambda t: t[:, :3], False, id="narrower-slice"),
    pytest.param(lambda: torch.randn(4, 6), lambda t: t[::2], False, id="every-other-row"),
    pytest.param(lambda: torch.randn(3), lambda t: t.expand(2, 3), False, id="expanded"),
])
def test_same_memory_runs_mean_the_same_elements(a, b, same):
    t = a()
    assert (_dense_layout(b(t)) == _dense_layout(t)) is same


def test_a_view_of_a_slice_with_gaps_shares_the_slices_statistics(tmp_path):
    trace = TorchTrace(WorkspaceFiles(tmp_path))
    x = torch.randn(2, 4, 12)
    trace.label(x, "input", "x")
    with torch.no_grad(), trace.recording():
        k = x.mul(2).split(4, dim=2)[1]
        k.view(2, 4, 2, 2).transpose(1, 2)
    trace.finish()
    b = trace.b
    ops = [n.op for n in b.nodes]
    assert ops == ["aten::mul.Tensor", "aten::split.Tensor", "aten::view", "aten::transpose.int"]
    sliced = b.nodes[1].outputs[1]
    viewed, transposed = b.nodes[2].outputs[0], b.nodes[3].outputs[0]
    stats = b.values[sliced].measured["stats"]
    assert stats["min"] is not None
    # the same statistics, not measured again
    assert b.values[viewed].measured["stats"] is stats and b.values[transposed].measured["stats"] is stats


def test_a_layout_of_unhashable_sizes_is_walked_each_time():
    # Layouts are kept per (shape, strides); a symbolic size cannot be a key, so such a
    # tensor's runs are walked afresh (a stand-in with list sizes, unhashable like a SymInt).
    from types import SimpleNamespace

    t = torch.randn(2, 3, 4).permute(2, 0, 1)
    stand_in = SimpleNamespace(shape=list(t.shape), stride=lambda: list(t.stride()))
    assert _dense_layout(stand_in) == _dense_layout(t) == ((1, 24),)
