"""The graph first, statistics after: a Torch capture's parameters are measured after its
graph is sent (``capture.graph.later_stats``), and their statistics, once they arrive,
are the ones measuring them in the forward gave."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from capture.graph import graphfile, later_stats  # noqa: E402
from capture.graph.model import Capture, Value  # noqa: E402
from capture.session import CaptureRequest, run_session  # noqa: E402
from capture.torch.stats import stats_now  # noqa: E402
from capture.torch.trace import TorchTrace  # noqa: E402
from capture.worker.workspace_files import WorkspaceFiles  # noqa: E402

from capture_workspace import forget_workspace_modules, write  # noqa: E402

MODELS = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 24)
        self.ln = nn.LayerNorm(24)
        self.up = nn.Linear(24, 96)
        self.down = nn.Linear(96, 24, bias=False)
        self.register_buffer("scale", torch.full((24,), 0.5))

    def forward(self, ids):
        x = self.ln(self.emb(ids))
        return self.down(torch.relu(self.up(x))) * self.scale + x


class Writes(nn.Module):
    """Writes one of its weights in the forward, after reading it."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.arange(12.0).view(3, 4))

    def forward(self, x):
        y = x @ self.w.t()
        with torch.no_grad():
            self.w.add_(100.0)
        return y + x.sum()


def make_sgd(params):
    return torch.optim.SGD(params, lr=0.5)
'''


RECIPES = '''
version = 1

[profiles.p]
kind = "model"
model = "models:Net"
seed = 0
inputs = { args = [{ kind = "tensor", shape = [2, 7], dtype = "int64", generator = { kind = "randint", low = 0, high = 50 } }], kwargs = {} }
'''


def _net():
    torch.manual_seed(0)
    ns: dict = {}
    exec(compile(MODELS, "models.py", "exec"), ns)
    return ns


def _trace(model, x, parameters):
    trace = TorchTrace(WorkspaceFiles(Path.cwd()), parameters=parameters)
    trace.label_module(model)
    inputs = {"dict": [["args", {"tuple": [trace.structure(x, label="args[0]")]}], ["kwargs", {"dict": []}]]}
    with torch.no_grad(), trace.recording():
        out = model(x)
    outputs = trace.structure(out)
    trace.finish()
    return trace, trace.build(scope="eager_forward", inputs=inputs, outputs=outputs)


def _param_stats(capture: Capture) -> dict[str, dict]:
    return {v.measured["param"]: v.measured.get("stats") for v in capture.values
            if v.measured and "param" in v.measured}


def _close(a: dict, b: dict) -> bool:
    if a["nan"] != b["nan"] or a["inf"] != b["inf"]:
        return False
    scale = max(abs(a["min"]), abs(a["max"]), 1e-30)
    return all(math.isclose(a[k], b[k], rel_tol=0, abs_tol=1e-6 * scale) for k in ("min", "max", "mean", "std"))


def test_parameters_wait_for_after_the_graph_and_then_equal_the_forwards_statistics():
    ns = _net()
    model = ns["Net"]().eval()
    x = torch.randint(0, 50, (2, 7))
    _, before = _trace(model, x, "now")
    trace, first = _trace(model, x, "later")
    waiting = _param_stats(first)
    # The graph as first written: every parameter (and its views) waits, nothing else does.
    assert set(waiting) == {"emb.weight", "ln.weight", "ln.bias", "up.weight", "up.bias", "down.weight"}
    assert all(s is None for s in waiting.values())
    assert later_stats.pending(first) >= len(waiting)
    activations = [v.id for v in first.values if v.measured and "stats" in v.measured]
    assert activations and all("param" not in first.values[i].measured for i in activations)
    # The same file as a reader sees it: pending, and the buffer measured in the forward.
    read = graphfile.decode(graphfile.encode(first))
    assert later_stats.pending(read) == later_stats.pending(first)
    assert any(v.measured.get("buffer") == "scale" and "stats" in v.measured for v in read.values if v.measured)

    rows, skipped = trace.measure_later()
    assert skipped == 0 and len(rows) == later_stats.pending(first)
    after = later_stats.complete(read, rows, skipped)
    assert not later_stats.pending(after) and "stats_missing" not in after.meta
    assert read.meta.get("stats_pending")  # the graph shown meanwhile is left as it was
    exact = _param_stats(before)
    got = _param_stats(after)
    assert set(got) == set(exact)
    for name, stats in got.items():
        assert _close(stats, exact[name]), (name, stats, exact[name])
        assert _close(stats, stats_now(dict(model.named_parameters())[name].detach())), name
    # Every value measured in the forward before has statistics now, the same ones.
    for v_before, v_after in zip(before.values, after.values):
        assert ("stats" in (v_before.measured or {})) == ("stats" in (v_after.measured or {})), v_before.id
        if v_before.measured and "stats" in v_before.measured:
            assert _close(v_after.measured["stats"], v_before.measured["stats"]), v_before.id


def test_a_parameter_written_in_the_forward_is_measured_before_the_write():
    ns = _net()
    model = ns["Writes"]()
    trace, first = _trace(model, torch.ones(2, 4), "later")
    (w,) = [v for v in first.values if v.measured and v.measured.get("param") == "w" and "version_of" not in v.measured]
    expected = stats_now(torch.arange(12.0))  # what the forward read, not the weight after add_
    assert w.measured.get("stats") is not None and _close(w.measured["stats"], expected)
    rows, _ = trace.measure_later()
    assert all(vid != w.id for vid, _ in rows)


def test_complete_refuses_a_row_that_is_not_a_value_of_the_graph():
    cap = Capture("torch_eager", "torch", "2", coverage=None, values=[Value(0, [2], "float32", {})],  # type: ignore[arg-type]
                  meta={"stats_pending": 1})
    good = {"min": 0.0, "max": 1.0, "mean": 0.5, "std": 0.5, "nan": 0, "inf": 0}
    with pytest.raises(ValueError, match="row 0"):
        later_stats.complete(cap, [[3, good]])
    with pytest.raises(ValueError, match="row 0"):
        later_stats.complete(cap, [[0, {"min": 0.0}]])
    done = later_stats.complete(cap, [[0, good]], 0, "RuntimeError: boom")
    assert done.values[0].measured == {"stats": good} and cap.values[0].measured == {}
    assert "boom" in done.meta["stats_missing"] and not later_stats.pending(done)
    gone = later_stats.missing(cap, "the worker ended before sending them")
    assert "ended before" in gone.meta["stats_missing"] and cap.meta["stats_pending"] == 1


@pytest.mark.slow
def test_through_the_worker_the_graph_file_is_written_before_the_statistics_arrive(tmp_path):
    root = write(tmp_path, {"models.py": MODELS, ".tensorviz/recipes.toml": RECIPES})
    seen: list[tuple[Capture, Path | None, Capture | None]] = []

    def on_graph(capture: Capture, path: Path | None) -> None:
        on_disk = graphfile.read(path) if path is not None else None
        seen.append((capture, path, on_disk))

    try:
        result = run_session(CaptureRequest(workspace=root, profile="p", on_graph=on_graph, history=None))
    finally:
        forget_workspace_modules(root)
    assert result.ok, result.capture.failure
    assert len(seen) == 1
    first, path, on_disk = seen[0]
    assert path == result.graph_file and on_disk is not None
    # The file written first: the graph, its parameters marked as being measured.
    n = later_stats.pending(on_disk)
    assert n > 0 and all("stats" not in (v.measured or {}) for v in on_disk.values if "param" in (v.measured or {}))
    # The file written after: complete, the parameters' statistics those of the weights.
    final = graphfile.read(result.graph_file)
    assert not later_stats.pending(final) and "stats_missing" not in final.meta, final.meta.get("stats_missing")
    params = {v.measured["param"]: v.measured["stats"] for v in final.values if "param" in (v.measured or {})}
    ns = _net()
    model = ns["Net"]()
    for name, p in model.named_parameters():
        assert _close(params[name], stats_now(p.detach())), name
    assert len(final.nodes) == len(on_disk.nodes)


class _Channel:
    """A worker channel that delivers ``chunks`` (then the end) and records what was done."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)
        self.escaped: list = []
        self.killed = False

    def send_request(self, data: bytes) -> None:
        pass

    def read(self, timeout: float) -> bytes | None:
        return self.chunks.pop(0) if self.chunks else b""

    def exited(self) -> bool:
        return not self.chunks

    def kill_group(self) -> None:
        self.killed = True

    def finish(self) -> None:
        pass

    def wait_exit(self, timeout: float) -> int | None:
        return 0

    def log_tail(self) -> str:
        return ""


def _converse(chunks: list[bytes]) -> tuple[Capture, list[Capture]]:
    from capture.recipe import parse_profile
    from capture.session.conversation import converse
    from capture.session.runner import make_job
    from capture.worker.protocol import PROTOCOL_VERSION, WorkerRequest

    recipe = parse_profile("p", {"model": "models:Net", "inputs": {"args": [], "kwargs": {}}})
    job = make_job(Path.cwd(), recipe, python="python")
    shown: list[Capture] = []
    job.graph_ready = shown.append
    request = WorkerRequest(protocol=PROTOCOL_VERSION, action="capture", workspace=str(Path.cwd()),
                            recipe=recipe.to_dict(), limits=job.limits.to_dict())
    got = converse(job, _Channel(chunks), request)
    assert got is not None
    return got, shown


def _worker_graph() -> tuple[bytes, list[list]]:
    ns = _net()
    trace, cap = _trace(ns["Net"]().eval(), torch.randint(0, 50, (2, 7)), "later")
    data = graphfile.encode(cap)
    rows, _ = trace.measure_later()
    return data, rows


@pytest.mark.parametrize("together", [True, False], ids=["in one read", "in two reads"])
def test_the_parent_shows_the_graph_then_merges_the_statistics(together):
    from capture.worker.protocol import encode_frame

    data, rows = _worker_graph()
    result = encode_frame({"kind": "result", "graph": data})
    stats = encode_frame({"kind": "statistics", "values": rows, "skipped": 0})
    got, shown = _converse([result + stats] if together else [result, stats])
    assert len(shown) == 1 and later_stats.pending(shown[0]) == len(rows)
    assert not later_stats.pending(got) and "stats_missing" not in got.meta
    params = [v for v in got.values if "param" in (v.measured or {})]
    assert params and all("stats" in v.measured for v in params)


@pytest.mark.parametrize("after", [b"", b"garbage"], ids=["worker ended", "bad message"])
def test_statistics_that_never_come_leave_the_graph_saying_why(after):
    from capture.worker.protocol import encode_frame

    data, rows = _worker_graph()
    tail = encode_frame({"kind": "statistics", "values": [[10 ** 6, rows[0][1]]], "skipped": 0}) if after else b""
    got, shown = _converse([encode_frame({"kind": "result", "graph": data}) + tail])
    assert got.failure is None and len(got.nodes) == len(shown[0].nodes)
    assert not later_stats.pending(got)
    assert ("ended before" if not after else "invalid") in got.meta["stats_missing"]


@pytest.mark.slow
def test_a_training_steps_parameters_are_measured_before_the_optimizer_writes_them(tmp_path):
    from capture_workspace import run_framework
    from torch_workspace import MODELS as WS_MODELS, FACTORY, profile, tensor as leaf

    root = write(tmp_path, {"models.py": WS_MODELS, "factories.py": FACTORY})
    table = profile("models:MLP", args=[leaf([6, 4])], kind="training_step", mode="train", grad_enabled=True,
                    step={"loss": "sum", "optimizer": {"factory": "models:make_sgd"}})
    try:
        cap, ctx = run_framework(__import__("capture.torch.framework", fromlist=["x"]), root, table, None)
        import models  # the workspace's, as the capture imported it

        torch.manual_seed(0)
        fresh = dict(models.MLP().named_parameters())
    finally:
        forget_workspace_modules(root)
    # Every parameter waited for after the graph until the optimizer step wrote it: then
    # it was measured, before the write (nothing was left for after the graph).
    assert ctx.after_result is None and "stats_pending" not in cap.meta
    firsts = {}
    for v in cap.values:
        m = v.measured or {}
        if "param" in m and "version_of" not in m and m["param"] not in firsts:
            firsts[m["param"]] = m.get("stats")
    assert set(firsts) == set(fresh)
    for name, p in fresh.items():
        assert firsts[name] is not None and _close(firsts[name], stats_now(p.detach())), name
