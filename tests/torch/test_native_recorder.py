"""The native Torch recorder (``capture.torch.native``) makes the same graph as the Python
path (the ``TorchDispatchMode``), pattern by pattern, on models written here; and when it
cannot be used, the Python path records and the capture says why.

The recorder is compiled once per test session (``native`` fixture: the synchronous
build, ~40-80 s the first time on a machine, then loaded from the per-user cache). A
machine without g++ and ninja skips these tests with that reason (CI installs both:
``.ci/run``)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, NamedTuple

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from capture.torch import native as native_pkg
from capture.torch.native import NativeUnavailable
from capture.torch.trace import TorchTrace
from capture.torch.trace_values import MAX_STRUCTURE_LEAVES
from capture.worker.errors import LimitExceeded
from capture.worker.limits import Limits
from capture.worker.workspace_files import WorkspaceFiles

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import torch_graph_dump as dump  # noqa: E402

ENV = native_pkg.ENV
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def native() -> Any:
    """The compiled recorder (built synchronously once per session)."""
    missing = native_pkg.missing_tools()
    if missing is not None:
        pytest.skip(f"the native recorder needs a C++ toolchain: {missing}")
    return native_pkg.load(wait=True)


@pytest.mark.slow
def test_the_native_recorder_builds_and_loads(native):
    """First in this file: on a machine with no build yet it compiles here (~40-80 s of one
    core), later sessions load the cached build."""
    assert hasattr(native, "Recorder") and not native.busy()


def capture(model: nn.Module, args: tuple, recorder: str, monkeypatch: pytest.MonkeyPatch, *, stats: bool = True,
            parameters: str = "now", functions: bool = True, limits: Limits | None = None,
            train: bool = False) -> tuple[Any, TorchTrace]:
    monkeypatch.setenv(ENV, recorder)
    trace = TorchTrace(WorkspaceFiles(HERE), stats=stats, parameters=parameters, functions=functions, limits=limits)
    trace.label_module(model)
    inputs = {"tuple": [trace.structure(a, label=f"args[{i}]") for i, a in enumerate(args)]}
    model.train(train)
    with torch.no_grad(), trace.recording():
        out = model(*args)
    outputs = trace.structure(out)
    trace.finish()
    return trace.build(scope="eager_forward", inputs=inputs, outputs=outputs), trace


def same_graph(build: Callable[[], nn.Module], make_args: Callable[[], tuple], monkeypatch: pytest.MonkeyPatch,
               **kw: Any) -> Any:
    """Capture a fresh model twice (Python path, native recorder) from the same seed; the
    two graphs as the graph file holds them must not differ (statistics within 1e-5 of
    the data's scale, as tools/torch_graph_dump.py compares)."""
    got = []
    for recorder in ("python", "native"):
        torch.manual_seed(0)
        model, args = build(), make_args()
        cap, trace = capture(model, args, recorder, monkeypatch, **kw)
        assert trace.recorder_note == ("native" if recorder == "native" else "python (TENSORVIZ_TORCH_RECORDER=python)")
        data = dump.as_data(cap)
        data["meta"].pop("recorder", None)
        got.append(data)
    diffs = dump.differences(got[0], got[1])
    assert not diffs, "\n".join(diffs)
    return got[1]


# --------------------------------------------------------------------------- models


class InPlace(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        y.add_(1.5)
        y.relu_()
        z = y.view(-1)
        z.mul_(2)  # through a view: y's next read is a new version written by this op
        out = y.new_zeros(4, 8)
        out[:2] = y  # written through slices (new_empty, then copy_)
        out[2:] = y * 2
        return out.sum(0) + y[0]


class Views(nn.Module):
    """Views over the same elements share statistics; ones over fewer do not."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = x @ self.w  # [3, 4]
        t = a.t()
        v = t.reshape(-1)  # not contiguous: a copy
        d = a.detach()
        p = a.unsqueeze(0).permute(2, 0, 1)
        s = a[:, :2]
        q, k = a.split(2, dim=1)
        raw = a.data  # no op natively, an aten::detach under a dispatch mode
        return v.sum() + d.mean() + p.std() + s.sum() + q.sum() + k.sum() + self.w.t().sum() + raw.sum()


class Norms(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.ln = nn.LayerNorm(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn(self.conv(x))
        return self.ln(y.flatten(2))


class Lists(nn.Module):
    def forward(self, x: torch.Tensor) -> Any:
        parts = torch.split(x, 2, dim=1)
        a, b, c = torch.chunk(x, 3, dim=0)
        mx, idx = torch.max(x, dim=1)
        srt = torch.sort(x, dim=0)
        rows = x.unbind(0)
        cat = torch.cat([parts[0], parts[1]], dim=1)
        stk = torch.stack(rows[:2])
        return {"cat": cat, "stk": stk, "max": (mx, idx), "sorted": srt.values, "first": a + b + c}


class Pair(nn.Module):
    """An attention's kind of result: a plain tuple of tensors and constants."""

    def __init__(self, *, as_list: bool = False) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.as_list = as_list

    def forward(self, x: torch.Tensor) -> Any:
        y = self.fc(x)
        return [y, None, 3, 0.5, "mean", True, y, x] if self.as_list else (y, None)


class Named(NamedTuple):
    out: torch.Tensor
    extra: Any


class ModuleResults(nn.Module):
    """Module results of every shape: plain tuples and lists of tensors and constants (one
    tensor twice), a named tuple, a nested tuple, an empty tuple, a parameter in a tuple
    and alone, more tensors than a group's outputs list holds."""

    def __init__(self) -> None:
        super().__init__()
        self.pair, self.listed = Pair(), Pair(as_list=True)
        self.named = _Returns(lambda x: Named(x * 2, (x + 1, 4)))
        self.nested = _Returns(lambda x: (x - 1, (x * 3, None)))
        self.empty = _Returns(lambda x: ())
        self.weight = nn.Parameter(torch.randn(6))
        self.with_param = _Returns(lambda x: (x.sum(0), self.weight))
        self.bias = nn.Parameter(torch.randn(6))
        self.param_alone = _Returns(lambda x: self.bias)
        self.many = _Returns(lambda x: tuple(x.reshape(-1)[i % x.numel()] for i in range(MAX_STRUCTURE_LEAVES + 1)))

    def forward(self, x: torch.Tensor) -> Any:
        y, _ = self.pair(x)
        listed = self.listed(y)
        n = self.named(listed[0])
        a, (b, _) = self.nested(n.out)
        self.empty(a)
        s, w = self.with_param(b)
        w = w + self.param_alone(s)
        many = self.many(a)
        return s + w + many[-1]


class _Returns(nn.Module):
    def __init__(self, fn: Callable[[torch.Tensor], Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> Any:
        return self.fn(x)


class Literals(nn.Module):
    def forward(self, x: torch.Tensor) -> Any:
        y = x.to(torch.float64)
        z = torch.zeros(2, 3, dtype=torch.float32, device="cpu", layout=torch.strided)
        c = x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x.contiguous()
        g = F.gelu(x, approximate="tanh")
        i = F.interpolate(x.unsqueeze(0), scale_factor=2.0, mode="nearest")
        k = x * (1 + 2j)
        m = (x > 0.25) & (x < 2)
        w = torch.where(m, x, -1.0)
        n = x.sum().item()  # a non-tensor result
        e = torch.equal(x, x)
        h = torch.full((2,), n if e else 0.0)
        const = torch.tensor([1.0, 2.0, 3.0])
        # wrapped numbers of each kind (int, float, bool), and int lists (shapes, dims)
        s = ((x + 1) * 0.5).view(-1).reshape(x.shape).permute(*reversed(range(x.dim()))).sum(dim=(0,))
        b = (m ^ True).sum()
        return (y.sum() + z.sum() + c.sum() + g.sum() + i.sum() + k.real.sum() + w.sum() + h.sum() + const.sum()
                + s.sum() + b)


class Twice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 4), nn.GELU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(self.block(x)) + x


class Functions(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, self.w)  # 3-d input: view, mm, view: a function group
        y = F.layer_norm(y, (8,))
        y = torch.softmax(y, dim=-1)  # one kernel: params["function"]
        return F.scaled_dot_product_attention(y, y, y).T


class Integers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 4)

    def forward(self, ids: torch.Tensor) -> Any:
        pos = torch.arange(ids.shape[1])
        e = self.emb(ids) + pos.unsqueeze(-1)
        best = e.argmax(-1)
        picked = e[0, best[0]]
        counts = torch.bincount(ids.flatten(), minlength=10)
        return picked, counts, ids.cumsum(1), best.to(torch.int32)


class Odd(nn.Module):
    """NaN and inf, a mean far above the spread, half precision, empty tensors."""

    def forward(self, x: torch.Tensor) -> Any:
        nan = x.log()  # negative elements: NaN
        inf = x / 0.0
        big = x * 1e-3 + 1e4
        half = x.half() * 2
        bf = x.bfloat16() + 1
        empty = x[:0] * 3
        same = torch.ones(5) * 7
        return nan, inf, big, half, bf, empty, same


class Sdpa(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).split(8, dim=-1)
        q = q.view(1, 3, 2, 4).transpose(1, 2)
        k = k.view(1, 3, 2, 4).transpose(1, 2)
        v = v.view(1, 3, 2, 4).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(1, 3, 8)


class LastAfterWrite(nn.Module):
    """The forward's last call, one kernel, reads a tensor written through a view: its
    new version is a late output of the write, so the recorder has more than rows to hand
    over and the function mode syncs before it names the call's node."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        y.view(-1).add_(1.0)
        return y.relu()


class _CallsShared(nn.Module):
    def __init__(self, shared: nn.Module) -> None:
        super().__init__()
        self.inner = shared  # also the parent's own "shared": that path is its name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x).tanh()


class _DictResult(nn.Module):
    def forward(self, x: torch.Tensor) -> dict[str, Any]:
        return {"y": x * 2, "n": 3, "pair": (x.sum(), None)}


class _NoResult(nn.Module):
    def forward(self, x: torch.Tensor) -> None:
        x.abs()


class ModuleCalls(nn.Module):
    """Module groups named and closed every way the hooks know: nested containers, a
    module shared by two parents (called from the one whose path it does not have), one
    made in the forward (no path: its class name), results that are a dict, None and one
    tensor, and a module whose forward raises inside another that catches it."""

    def __init__(self) -> None:
        super().__init__()
        self.shared = nn.Linear(8, 8)
        self.blocks = nn.ModuleDict({"a": nn.Sequential(nn.Linear(8, 8), nn.GELU()), "b": nn.Sequential(nn.Linear(8, 8))})
        self.user = _CallsShared(self.shared)
        self.dicty = _DictResult()
        self.nothing = _NoResult()
        self.fails = Raises()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks["a"](x) + self.blocks["b"](x)
        x = self.user(x)
        d = self.dicty(x)
        self.nothing(x)
        try:
            self.fails(x[:, :4])
        except RuntimeError:
            pass
        made_here = nn.Identity()
        return made_here(d["y"]) + self.shared(x)


class OtherThread(nn.Module):
    """Ops another thread runs mid-forward (on the forward's own input and on tensors of
    its own) are not the recording's: a dispatch mode is per thread, and the native
    recorder's callback is registered for the recording's thread alone."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        got: list[torch.Tensor] = []
        worker = threading.Thread(target=lambda: got.append(torch.relu(x * 2) + torch.ones(2, 4).sum()))
        worker.start()
        worker.join()
        return torch.tanh(y) + got[0].detach().clone()


class OwnHooks(nn.Module):
    """Module calls the native recorder leaves to ``Module._call_impl``: a child with hooks
    of its own (a pre-hook changing its argument, a hook changing its result), a hook
    registered in the forward and removed again, and a global hook registered in the
    forward (every module call after it goes through ``_call_impl`` until it is removed)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c, self.d = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)
        self.a.register_forward_pre_hook(lambda m, args: (args[0] + 1,))
        self.a.register_forward_hook(lambda m, args, out: out * 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.a(x)
        handle = self.b.register_forward_hook(lambda m, args, out: out.relu())
        y = self.b(y)
        handle.remove()
        y = self.b(y)
        seen = torch.nn.modules.module.register_module_forward_hook(lambda m, args, out: None)
        try:
            y = self.c(y)
        finally:
            seen.remove()
        return self.d(y)


PATTERNS: dict[str, tuple[Callable[[], nn.Module], Callable[[], tuple]]] = {
    "in-place ops and writes through views": (InPlace, lambda: (torch.randn(2, 8),)),
    "views and their statistics": (Views, lambda: (torch.randn(3, 6),)),
    "BatchNorm and LayerNorm": (Norms, lambda: (torch.randn(2, 3, 4, 4),)),
    "list and tuple outputs": (Lists, lambda: (torch.randn(6, 6),)),
    "module results: tuples, lists, named and nested": (ModuleResults, lambda: (torch.randn(3, 6),)),
    "literals of every type": (Literals, lambda: (torch.rand(3, 4) * 3 - 0.5,)),
    "a module called twice": (Twice, lambda: (torch.randn(2, 4),)),
    "function groups and one-kernel functions": (Functions, lambda: (torch.randn(2, 3, 8),)),
    "int tensors": (Integers, lambda: (torch.randint(0, 10, (2, 5)),)),
    "NaN, inf, cancellation, half precision, empty": (Odd, lambda: (torch.randn(4, 5),)),
    "attention": (Sdpa, lambda: (torch.randn(1, 3, 8),)),
    "a one-kernel call last, after a write through a view": (LastAfterWrite, lambda: (torch.randn(2, 3),)),
    "module calls named and closed every way": (ModuleCalls, lambda: (torch.randn(2, 8),)),
    "module calls with hooks of their own": (OwnHooks, lambda: (torch.randn(2, 4),)),
    "ops another thread runs mid-forward": (OtherThread, lambda: (torch.randn(2, 4),)),
}


@pytest.mark.parametrize("stats", [False, True], ids=["stats off", "stats on"])
@pytest.mark.parametrize("name", list(PATTERNS))
def test_the_native_recorder_makes_the_python_paths_graph(native, name, stats, monkeypatch):
    build, make_args = PATTERNS[name]
    same_graph(build, make_args, monkeypatch, stats=stats)


class WritesInPlace(nn.Module):
    """Arguments written but not returned (``_foreach_mul_`` returns nothing), and a
    BatchNorm in training (its running statistics updated, num_batches_tracked added to)."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = x * 1, x + 1
        torch._foreach_mul_([a, b], 2.0)
        return self.bn(a + b)


def test_the_models_module_calls_skip_call_impl_while_recording_and_are_restored(native, monkeypatch):
    """While the native recorder records, the model's modules are called from C++ (their
    ``_compiled_call_impl``), not by ``Module._call_impl``; afterwards they are as they
    were, and a module given a ``_compiled_call_impl`` of its own keeps it throughout."""
    callers: list[str] = []

    class Probe(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            callers.append(sys._getframe(1).f_code.co_name)
            return x + 1

    class Holder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.p, self.q = Probe(), Probe()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.q(self.p(x))

    model = Holder()
    own_calls: list[int] = []

    def own(*args: Any, **kwargs: Any) -> Any:
        own_calls.append(1)
        return nn.Module._call_impl(model.q, *args, **kwargs)

    model.q._compiled_call_impl = own
    for recorder, caller in (("python", "inner"), ("native", "_wrapped_call_impl")):
        callers.clear()
        cap, _ = capture(model, (torch.randn(2, 3),), recorder, monkeypatch)
        assert callers == [caller, "inner"], recorder  # p: as the recorder calls it; q: through its own
        assert "_compiled_call_impl" not in model.__dict__ and "_compiled_call_impl" not in model.p.__dict__
        assert model.q._compiled_call_impl is own
        assert [g.name for g in cap.groups if g.kind == "module"] == ["Holder", "p", "q"]
    assert len(own_calls) == 2


def test_arguments_written_but_not_returned_are_new_versions(native, monkeypatch):
    data = same_graph(WritesInPlace, lambda: (torch.randn(3, 4),), monkeypatch, train=True)
    foreach = next(n for n in data["nodes"] if n["op"] == "aten::_foreach_mul_.Scalar")
    assert len(foreach["outputs"]) == 2
    for vid in foreach["outputs"]:
        assert data["values"][vid]["measured"]["version_of"] is not None


def test_parameters_measured_later_wait_the_same_way(native, monkeypatch):
    data = same_graph(Views, lambda: (torch.randn(3, 6),), monkeypatch, parameters="later")
    assert data["meta"]["stats_pending"] >= 2  # the weight and its transpose
    got = []
    for recorder in ("python", "native"):
        torch.manual_seed(0)
        model, args = Views(), (torch.randn(3, 6),)
        _, trace = capture(model, args, recorder, monkeypatch, parameters="later")
        rows, _ = trace.measure_later()
        got.append(sorted((vid, round(s["mean"], 5)) for vid, s in rows))
    assert got[0] == got[1] and got[0]



class ReadThenWritten(nn.Module):
    """Parameters waiting for after the graph: one read, then written in place before the
    forward ends (its statistics are of the data it had when read), and views of them."""

    def __init__(self, depth: int = 6) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(depth))
        self.scale = nn.Parameter(torch.rand(8) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x)) * self.scale
        self.scale.mul_(3.0)  # read by every layer above, written now
        return x + self.scale.t() + self.layers[0].weight.t().sum(0)


def test_parameters_read_then_written_keep_the_statistics_they_had_when_read(native, monkeypatch):
    data = same_graph(ReadThenWritten, lambda: (torch.randn(2, 8),), monkeypatch, parameters="later")
    scale = next(v for v in data["values"] if v["measured"].get("param") == "scale")
    assert scale["measured"]["stats"]["min"] >= 0.5  # measured before the write (x3 would give >= 1.5)
    got = []
    for recorder in ("python", "native"):
        torch.manual_seed(0)
        _, trace = capture(ReadThenWritten(), (torch.randn(2, 8),), recorder, monkeypatch, parameters="later")
        rows, _ = trace.measure_later()
        got.append(sorted((vid, round(s["mean"], 5)) for vid, s in rows))
    assert got[0] == got[1] and len(got[0]) >= 12  # every layer's weight and bias, after the graph


def test_statistics_hand_overs_make_no_sync_of_their_own(native, monkeypatch):
    """A module that first reads its parameters hands them to Python with the next sync
    made for another reason (or the last), not with one of its own: the syncs of a
    capture do not grow with its depth."""
    from capture.torch.native import recording

    counts = []
    for depth in (2, 12):
        calls = []
        real = recording.NativeRecording.sync

        def counted(self: Any, real: Any = real, calls: list = calls) -> None:
            calls.append(1)
            real(self)

        monkeypatch.setattr(recording.NativeRecording, "sync", counted)
        torch.manual_seed(0)
        cap, trace = capture(ReadThenWritten(depth), (torch.randn(2, 8),), "native", monkeypatch, parameters="later")
        assert trace.recorder_note == "native" and trace.statistics is not None
        assert trace.statistics.pending >= 2 * depth  # every weight and bias still waits for after the graph
        counts.append(len(calls))
        monkeypatch.setattr(recording.NativeRecording, "sync", real)
    assert counts[0] == counts[1], counts


def test_graph_objects_made_natively_are_left_out_of_the_cyclic_collector(native, monkeypatch):
    """Values, nodes, operands and groups (and their lists and dicts) hold data only: the
    recorder takes them off the collector's lists as it makes them, so the young
    collection a long capture runs every CHECKPOINT_OPS ops does not walk the graph made
    so far (it did: ~125,000 objects at 8,192 ops of a deep model, 30-90 ms)."""
    import gc

    from capture.torch import trace as trace_mod

    seen: list[list[str]] = []
    real = TorchTrace._checkpoint

    def checkpoint(self: TorchTrace, n_ops: int) -> None:
        if not seen:  # the first: every group so far was made natively
            b = self.b
            objects: list[Any] = [g for g in b.groups if g.kind in ("module", "function")]
            assert {g.kind for g in objects} == {"module", "function"}  # nn.Linear's calls, torch.tanh's
            objects += [g.attrs for g in objects]
            for v in b.values[1:]:  # [0]: the input, made by Python before the recording
                objects += [v, v.shape, v.measured]
            for n in b.nodes:
                objects += [n, n.inputs, n.outputs, n.params, *n.inputs]
            seen.append([type(o).__name__ for o in objects if gc.is_tracked(o)])
        real(self, n_ops)

    monkeypatch.setattr(trace_mod, "CHECKPOINT_OPS", 32)
    monkeypatch.setattr(TorchTrace, "_checkpoint", checkpoint)
    torch.manual_seed(0)
    cap, trace = capture(ReadThenWritten(12), (torch.randn(2, 8),), "native", monkeypatch, parameters="later")
    assert trace.recorder_note == "native" and len(cap.nodes) > 32, len(cap.nodes)
    assert seen, "no checkpoint ran"
    assert not seen[0], seen[0][:10]

@pytest.mark.parametrize("limit", ["max_ops", "max_values", "max_groups"])
def test_a_limit_reached_mid_forward_stops_the_capture_the_same_way(native, limit, monkeypatch):
    errors = []
    for recorder in ("python", "native"):
        torch.manual_seed(0)
        model = nn.Sequential(*[nn.Sequential(nn.Linear(4, 4), nn.ReLU()) for _ in range(6)])
        limits = Limits(**{limit: 7})
        with pytest.raises(LimitExceeded) as info:
            capture(model, (torch.randn(2, 4),), recorder, monkeypatch, limits=limits)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


class Raises(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        return y @ torch.ones(5, 2)  # shapes do not match: the op raises


def test_an_op_raising_inside_the_forward_is_a_failure_with_the_ops_before_it(native, monkeypatch):
    got = []
    for recorder in ("python", "native"):
        monkeypatch.setenv(ENV, recorder)
        torch.manual_seed(0)
        model, x = Raises(), torch.randn(2, 4)
        trace = TorchTrace(WorkspaceFiles(HERE), stats=True)
        trace.label_module(model)
        trace.structure(x, label="args[0]")
        with pytest.raises(RuntimeError, match="cannot be multiplied"):
            with torch.no_grad(), trace.recording():
                model(x)
        got.append([n.op for n in trace.b.nodes])
    assert got[0] == got[1] and got[0]


class OneKernelCalls(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x.relu().T, dim=-1).sum(0)


@pytest.mark.parametrize("build", [OneKernelCalls, Functions], ids=["one kernel each", "function groups"])
def test_the_native_function_mode_runs_no_python_per_call(native, build, monkeypatch):
    """Under the native recorder the function mode's handler is the recorder's own
    (Recorder::torch_function, bound to the mode): no call runs Python of
    capture.torch.functions, neither one that ran one kernel (named when its row becomes a
    node) nor one that ran several (its function group made while they are rows)."""
    import collections

    from capture.torch import functions as functions_mod

    torch.manual_seed(0)
    model, x = build(), torch.randn(2, 3, 8)
    capture(model, (x,), "native", monkeypatch)  # the functions' public names, seen once per process
    calls: collections.Counter = collections.Counter()
    path = functions_mod.__file__

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename == path:
            calls[frame.f_code.co_name] += 1

    trace = TorchTrace(WorkspaceFiles(HERE), stats=False)
    trace.label_module(model)
    trace.structure(x, label="args[0]")
    with torch.no_grad(), trace.recording():
        sys.setprofile(profile)
        try:
            model(x)
        finally:
            sys.setprofile(None)
    assert trace.recorder_note == "native"
    assert not calls, calls
    made = sorted(g.name for g in trace.b.groups if g.kind == functions_mod.GROUP_KIND)
    assert made == ([] if build is OneKernelCalls else ["linear", "scaled_dot_product_attention"])


def test_a_parameter_returned_by_a_module_adds_no_op_on_either_path(native, monkeypatch):
    """A module that returns a parameter (in a tuple, or alone): the post-hook meets it
    first and measures its statistics. On the Python path that ``detach`` reached the
    dispatch mode and was recorded as an op of the enclosing module; no op ran."""
    for recorder in ("python", "native"):
        torch.manual_seed(0)
        cap, trace = capture(ModuleResults(), (torch.randn(3, 6),), recorder, monkeypatch, stats=True)
        ops = [n.op for n in trace.b.nodes]
        assert "aten::detach" not in ops, (recorder, ops)
        outputs = {g.name: g.attrs.get("outputs") for g in trace.b.groups}
        weight = outputs["with_param"]["tuple"][1]["value"]
        assert trace.b.values[weight].measured["param"] == "weight"
        bias = outputs["param_alone"]["value"]
        assert trace.b.values[bias].measured["param"] == "bias"


def test_a_function_group_after_a_sync_inside_the_call_is_made_by_python_the_same_way(native, monkeypatch):
    """A checkpoint every op: each call's kernels are nodes already when it returns, so
    its group is made by FunctionCalls._ran (the fallback of Recorder::torch_function),
    and the graph is still the Python path's."""
    import capture.torch.trace as trace_module
    from capture.torch import functions as functions_mod

    ran = []
    original = functions_mod.FunctionCalls._ran
    monkeypatch.setattr(functions_mod.FunctionCalls, "_ran", lambda self, *a: (ran.append(a[0][1]), original(self, *a)))
    monkeypatch.setattr(trace_module, "CHECKPOINT_OPS", 1)
    data = same_graph(Functions, lambda: (torch.randn(2, 3, 8),), monkeypatch)
    assert {"linear", "scaled_dot_product_attention"} <= set(ran)
    assert {g["name"] for g in data["groups"] if g["kind"] == "function"} == {"linear", "scaled_dot_product_attention"}


# --------------------------------------------------------------------------- when it is not used


def test_python_forced_records_with_the_dispatch_mode(monkeypatch):
    _, trace = capture(nn.Linear(2, 2), (torch.randn(1, 2),), "python", monkeypatch)
    assert trace.recorder_note == "python (TENSORVIZ_TORCH_RECORDER=python)"


def test_an_unknown_recorder_name_is_an_error(monkeypatch):
    with pytest.raises(ValueError, match="TENSORVIZ_TORCH_RECORDER must be one of auto, python, native, not 'fast'"):
        capture(nn.Linear(2, 2), (torch.randn(1, 2),), "fast", monkeypatch)


def test_native_forced_where_it_cannot_be_used_names_why(native, monkeypatch):
    monkeypatch.setenv(ENV, "native")
    trace = TorchTrace(WorkspaceFiles(HERE))
    trace.track_autograd = True
    with pytest.raises(NativeUnavailable, match="autograd is tracked"):
        with trace.recording():
            pass


@pytest.mark.parametrize("setup, reason", [
    (lambda t: setattr(t, "track_autograd", True), "autograd is tracked"),
    (lambda t: setattr(t, "run_op", lambda f, a, k: f(*a, **k)), "run_op"),
    (lambda t: t.label(torch.ones(1, requires_grad=True), "param", "w"), "autograd records the forward"),
    (lambda t: t.statistics.__setattr__("mode", "deferred"), "statistics are deferred"),
    (lambda t: setattr(t, "functions", False), "function groups are off"),
    (lambda t: t.label(torch.empty(1, device="meta"), "input", "x"), "a tensor on meta"),
])
def test_auto_falls_back_to_the_python_path_with_the_reason(native, setup, reason, monkeypatch):
    monkeypatch.setenv(ENV, "auto")
    trace = TorchTrace(WorkspaceFiles(HERE))
    setup(trace)
    with trace.recording():
        pass
    assert trace.recorder_note is not None and trace.recorder_note.startswith("python: ")
    assert reason in trace.recorder_note
    assert trace.build(scope="eager_forward", inputs=None, outputs=None).meta["recorder"] == trace.recorder_note


def test_auto_never_waits_for_a_compile(monkeypatch, tmp_path):
    """No build yet: the capture records with the Python path at once, a background
    build is started (logging into the cache folder), and the capture says so."""
    started = []
    monkeypatch.setenv(ENV, "auto")
    monkeypatch.setenv("TENSORVIZ_NATIVE_CACHE", str(tmp_path))
    monkeypatch.setattr(native_pkg, "_loaded", [])
    monkeypatch.setattr(native_pkg, "missing_tools", lambda: None)
    monkeypatch.setattr(native_pkg, "start_background_build", lambda folder: started.append(folder))
    _, trace = capture(nn.Linear(2, 2), (torch.randn(1, 2),), "auto", monkeypatch)
    assert trace.recorder_note is not None
    assert "being built in the background" in trace.recorder_note and "build.log" in trace.recorder_note
    assert started and started[0].parent == tmp_path


def test_no_toolchain_is_the_python_path_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("TENSORVIZ_NATIVE_CACHE", str(tmp_path))
    monkeypatch.setattr(native_pkg, "_loaded", [])
    monkeypatch.setattr(native_pkg, "missing_tools", lambda: "no C++ compiler (c++ / g++ not on PATH)")
    _, trace = capture(nn.Linear(2, 2), (torch.randn(1, 2),), "auto", monkeypatch)
    assert trace.recorder_note == "python: the native recorder cannot be built here: no C++ compiler (c++ / g++ not on PATH)"


def test_a_python_without_its_headers_is_named_as_what_the_build_lacks(monkeypatch, tmp_path):
    """A Debian system Python has no Python.h until python3-dev: said before any compile."""
    import sysconfig

    paths = dict(sysconfig.get_paths())
    paths["include"] = str(tmp_path)
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: paths)
    got = native_pkg.missing_tools()
    if got is not None and got.startswith("no ninja"):
        pytest.skip("this machine has no ninja: the headers are checked after it")
    assert got == f"no Python headers ({tmp_path}/Python.h: on Debian, apt-get install python3-dev)"
    (tmp_path / "Python.h").write_text("", encoding="utf-8")
    assert native_pkg.missing_tools() is None or "compiler" in native_pkg.missing_tools()


def test_a_failed_build_is_not_retried_in_auto_mode(monkeypatch, tmp_path):
    monkeypatch.setenv("TENSORVIZ_NATIVE_CACHE", str(tmp_path))
    monkeypatch.setattr(native_pkg, "_loaded", [])
    (native_pkg.cache_dir() / "failed").write_text("RuntimeError: g++ said no", encoding="utf-8")
    _, trace = capture(nn.Linear(2, 2), (torch.randn(1, 2),), "auto", monkeypatch)
    assert trace.recorder_note is not None and "did not build: RuntimeError: g++ said no" in trace.recorder_note



def test_one_native_recording_at_a_time(native, monkeypatch):
    monkeypatch.setenv(ENV, "auto")
    outer, inner = TorchTrace(WorkspaceFiles(HERE)), TorchTrace(WorkspaceFiles(HERE))
    with torch.no_grad(), outer.recording():
        with inner.recording():
            pass
    assert outer.recorder_note == "native"
    assert inner.recorder_note == "python: another native recording is running in this process"


def test_an_unusable_cache_folder_is_the_python_path_with_the_reason(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv("TENSORVIZ_NATIVE_CACHE", str(blocker / "cache"))
    monkeypatch.setattr(native_pkg, "_loaded", [])
    _, trace = capture(nn.Linear(2, 2), (torch.randn(1, 2),), "auto", monkeypatch)
    assert trace.recorder_note is not None
    assert trace.recorder_note.startswith("python: the native recorder could not be loaded: NotADirectoryError")


def test_progress_is_reported_at_the_same_op_counts(native, monkeypatch):
    import capture.torch.trace as trace_module

    monkeypatch.setattr(trace_module, "CHECKPOINT_OPS", 8)
    got = []
    for recorder in ("python", "native"):
        monkeypatch.setenv(ENV, recorder)
        seen: list[int] = []
        torch.manual_seed(0)
        model = nn.Sequential(*[nn.Sequential(nn.Linear(4, 4), nn.ReLU()) for _ in range(10)])
        trace = TorchTrace(WorkspaceFiles(HERE), progress=seen.append)
        trace.label_module(model)
        x = torch.randn(2, 4)
        trace.structure(x, label="args[0]")
        with torch.no_grad(), trace.recording():
            model(x)
        got.append(seen)
    assert got[0] == got[1] == [8, 16, 24]


@pytest.mark.slow
def test_a_compiled_module_runs_eagerly_while_the_native_recorder_records(native):
    """With a dispatch mode active Dynamo compiles nothing (the Python path); the native
    recorder has none, so compiled code is made to run eagerly while it records: the same
    ops, no graph compiled (run in a fresh process: Dynamo's state is process-wide)."""
    import os
    import subprocess

    code = (
        "import torch, torch._dynamo, sys, warnings\n"
        "sys.path.insert(0, '.')\n"
        "from capture.torch.trace import TorchTrace\n"
        "lin = torch.nn.Linear(3, 2)\n"
        "x = torch.ones(1, 3)\n"
        "tr = TorchTrace(None, stats=False)\n"
        "graphs = []\n"
        "def backend(gm, example_inputs):\n"
        "    graphs.append(gm)\n"
        "    return gm.forward\n"
        "compiled = torch.compile(lin, backend=backend)\n"
        "with warnings.catch_warnings():\n"
        "    warnings.simplefilter('ignore')\n"
        "    with torch.no_grad(), tr.recording():\n"
        "        lin(x)\n"
        "        compiled(x)\n"
        "    compiled(x)\n"
        "print(tr.recorder_note, len(graphs), [n.op for n in tr.b.nodes])\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, TENSORVIZ_TORCH_RECORDER="native")
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    # recorded eagerly (one graph compiled after the recording, when compiled code runs again)
    assert proc.stdout.split()[:2] == ["native", "1"], proc.stdout
    assert "['aten::t', 'aten::addmm', 'aten::t', 'aten::addmm']" in proc.stdout


@pytest.mark.slow
def test_a_finished_build_is_imported_without_cpp_extension_or_ninja(native):
    """A worker's first capture loads the cached build straight from its library: neither
    ``torch.utils.cpp_extension`` (setuptools, ~0.15 s) nor a ninja run."""
    code = ("import sys, torch; from capture.torch import native; m = native.load(wait=False); "
            "print(m.__file__); print('torch.utils.cpp_extension' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=str(HERE.parents[1]), env={**os.environ, ENV: "native"})
    assert proc.returncode == 0, proc.stderr
    library, imported = proc.stdout.split()
    assert Path(library).parent == native_pkg.cache_dir() and Path(library).name.startswith(native_pkg._name())
    assert imported == "False"


def test_a_ready_mark_of_another_source_is_not_imported(native, tmp_path):
    """The ``ready`` mark names the source's digest: a folder whose mark names another
    (written by hand, or half-copied), or has none, is built, not imported as it stands.
    (Nothing is imported here: a second copy of the library in this process would be
    another recorder.)"""
    folder = native_pkg.cache_dir()
    assert (folder / "ready").read_text(encoding="utf-8") == native_pkg._digest()
    other = tmp_path / "other"
    other.mkdir()
    for f in folder.iterdir():
        if f.is_file():
            (other / f.name).write_bytes(f.read_bytes())
    (other / "ready").write_text("0" * 64, encoding="utf-8")
    assert native_pkg._import_built(other, native_pkg._digest()) is None
    (other / "ready").unlink()
    assert native_pkg._import_built(other, native_pkg._digest()) is None


def test_a_cache_folder_others_can_write_is_not_loaded_from(monkeypatch, tmp_path):
    monkeypatch.setenv("TENSORVIZ_NATIVE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(native_pkg, "_loaded", [])
    folder = native_pkg.cache_dir()
    folder.chmod(0o777)
    _, trace = capture(nn.Linear(2, 2), (torch.randn(1, 2),), "auto", monkeypatch)
    assert trace.recorder_note is not None
    assert "is writable by others (mode 777); make it private (chmod 700) to use it" in trace.recorder_note


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm, self.fc = nn.LayerNorm(8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + F.gelu(self.fc(self.norm(x)))


@pytest.mark.parametrize("recorder", ["python", "native"])
def test_a_dropped_trace_and_its_graph_are_freed_at_once_not_by_a_later_full_collection(recorder, native, monkeypatch):
    """No reference cycle through the trace (its joins, the native recording and its C++
    callbacks): dropped, the trace, its graph and the recorder's tables are freed there
    and then. Before, they waited for a full cyclic collection (the native recorder's
    for ever: its callbacks made a cycle the collector cannot see), pinning the heap
    beside the freed activations, so that the next forward in the process faulted in
    fresh pages."""
    import gc
    import weakref

    model, x = nn.Sequential(_Block(), _Block()), torch.randn(2, 8)
    gc.collect()
    gc.disable()
    try:
        cap, trace = capture(model, (x,), recorder, monkeypatch, stats=True)
        assert (trace.recorder_note == "native") == (recorder == "native")
        ref = weakref.ref(trace)
        del cap, trace
        assert ref() is None
        assert gc.collect() == 0  # nothing of it (graph objects included) is left to the collector
    finally:
        gc.enable()


def test_the_native_recorder_is_released_when_the_graph_is_built(native, monkeypatch):
    """build() frees the recorder's tables; the trace records nothing after it, and a
    late lookup says so instead of answering from empty tables."""
    x = torch.randn(2, 8)
    _, trace = capture(_Block(), (x,), "native", monkeypatch)
    with pytest.raises(RuntimeError, match="released when the graph was built"):
        trace.value_of(x)


def test_graph_objects_made_natively_are_whole_dataclasses(native, monkeypatch):
    """The recorder fills the slots of Value / Node / Operand straight from C++ (their
    ``__init__`` bypassed): every field is set, and each object equals the one its class
    makes from the same fields."""
    import dataclasses

    torch.manual_seed(0)
    cap, _ = capture(WritesInPlace(), (torch.randn(3, 4),), "native", monkeypatch, stats=True)
    objects = [*cap.values, *cap.nodes, *(o for n in cap.nodes for o in n.inputs)]
    assert {type(o).__name__ for o in objects} == {"Value", "Node", "Operand"}
    for o in objects:
        fields = {f.name: getattr(o, f.name) for f in dataclasses.fields(o)}  # AttributeError: a slot left unset
        assert type(o)(**fields) == o


def test_a_graph_class_with_post_init_is_made_through_its_init(native, monkeypatch):
    """A class whose construction does more than fill its fields (a ``__post_init__``) is
    called as usual, so what it does still happens."""
    import dataclasses

    from capture.graph.model import Operand
    from capture.torch.native import recording

    made = []

    @dataclasses.dataclass(slots=True)
    class CountedOperand(Operand):
        def __post_init__(self) -> None:
            made.append(self.position)

    monkeypatch.setattr(recording, "Operand", CountedOperand)
    torch.manual_seed(0)
    cap, _ = capture(WritesInPlace(), (torch.randn(3, 4),), "native", monkeypatch, stats=False)
    operands = [o for n in cap.nodes for o in n.inputs]
    assert operands and all(type(o) is CountedOperand for o in operands)
    assert made == [o.position for o in operands]


def test_ops_another_thread_runs_mid_forward_are_not_recorded(native, monkeypatch):
    """The recorder's callback is the recording thread's: the other thread's ReLU, mul,
    ones and sum are not ops of the graph; what the forward itself runs after the thread
    joined (tanh, the add, the copy of the thread's result) is."""
    data = same_graph(OtherThread, lambda: (torch.randn(2, 4),), monkeypatch)
    ops = [n["op"] for n in data["nodes"]]
    assert not any(op.startswith(("aten::relu", "aten::mul", "aten::ones", "aten::sum")) for op in ops), ops
    assert any(op.startswith("aten::tanh") for op in ops) and any(op.startswith("aten::clone") for op in ops), ops
