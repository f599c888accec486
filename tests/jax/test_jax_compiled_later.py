"""The graph first, the compiled program after (issue 46): a JAX capture whose XLA compile
has not finished once the graph is converted sends the graph with ``compiled`` pending;
the parent writes its file, tells the front end, and writes it again, complete, when the
compiled record arrives (``capture.graph.later_compiled``). A compile that fails, runs
out of time or never arrives is a clear record; the graph is never lost.

A program of our own split over 8 simulated devices (a tensor-parallel loss in the
pattern of JAX's shard_map documentation); the compile is held back by the worker's test
knob (``TENSORVIZ_TEST_COMPILE_DELAY_S``) so that it ends after the graph. The merge and
the parent's reading are tested without a worker too (fast)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from capture.graph import graphfile, later_compiled
from capture.graph.compiled import summary_lines, words
from capture.graph.model import Capture, Coverage, Node, Operand, Value

from capture_workspace import write

ROOT = Path(__file__).resolve().parents[2]

MODEL = '''
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def predict_tp(w1, w2, x):
    return jax.lax.psum(jnp.maximum(x @ w1, 0) @ w2, "model")


def loss_tp(w1, w2, x, y):
    pred = jax.shard_map(predict_tp, in_specs=(P(None, "model"), P("model", None), P("data", None)),
                         out_specs=P("data", None))(w1, w2, x)
    return jnp.sum((pred - y) ** 2)


def inputs():
    w1 = jax.device_put(jnp.ones((64, 128)), P(None, "model"))
    w2 = jax.device_put(jnp.ones((128, 64)), P("model", None))
    x = jax.device_put(jnp.ones((32, 64)), P("data", None))
    y = jax.device_put(jnp.ones((32, 64)), P("data", None))
    return {"args": (w1, w2, x, y)}
'''

RECIPE = '''
version = 1

[profiles.tp]
kind = "model"
framework = "jax"
model = "model:loss_tp"
mesh = { data = { size = 4, type = "auto" }, model = { size = 2, type = "auto" } }
inputs = { factory = "model:inputs" }
'''


# ----------------------------------------------------------------------- the merge (fast)


def _graph(compiled, backend: str = "jaxpr") -> Capture:
    nodes = [Node(0, "dot_general", [Operand(0, 0)], [1]), Node(1, "psum", [Operand(0, 1)], [2])]
    values = [Value(i, [4, 4], "float32") for i in range(3)]
    return Capture(backend=backend, framework="jax", framework_version="0.0-test",
                   coverage=Coverage(scope="traced_program" if backend == "jaxpr" else "executed_path"),
                   nodes=nodes, values=values,
                   inputs={"tuple": [{"value": 0}]}, outputs={"tuple": [{"value": 2}]},
                   recipe={"kind": "model", "framework": "jax", "model": "m:f"}, compiled=compiled)


RECORD = {"status": "compiled", "seconds": 3.5, "scope": "per device", "devices": 8, "attributed": 1,
          "unattributed": 0, "cost": {"flops": 1.0e6}, "memory": {"arguments": 10, "outputs": 10,
                                                                  "temporaries": 5, "peak": 25},
          "collectives": [{"kind": "all-reduce", "axes": ["data"], "devices": 4, "node": 1,
                           "bytes_sent_per_device": 48}]}


def test_a_pending_record_is_merged_once_and_checked_like_a_file():
    shown = _graph(later_compiled.pending_record(8, 1.25, 40.0))
    assert later_compiled.pending(shown)
    # what readers say meanwhile
    assert "compiling for 8 devices…" in summary_lines(shown.compiled, str)[0]
    assert words(shown.compiled)["status"] == "pending" and words(shown.compiled)["limit_seconds"] == 40.0
    # a pending record is a valid graph file
    assert later_compiled.pending(graphfile.decode(graphfile.encode(shown)))
    done = later_compiled.complete(shown, dict(RECORD), {"per_device_memory": {"param_bytes": 1}})
    assert not later_compiled.pending(done) and done.compiled["collectives"][0]["node"] == 1
    assert done.meta["per_device_memory"] == {"param_bytes": 1}
    assert later_compiled.pending(shown), "the capture shown meanwhile is left as it is"
    assert graphfile.decode(graphfile.encode(done)).compiled["status"] == "compiled"


@pytest.mark.parametrize("record, meta, says", [
    ({**RECORD, "collectives": [{"kind": "all-reduce", "node": 7}]}, None, "node id below 2"),
    ({**RECORD, "status": "pending"}, None, "still pending"),
    ({**RECORD, "status": "done"}, None, "compiled.status"),
    ("compiled", None, "expected a map"),
    (RECORD, {"stats_pending": 3}, "meta may hold only per_device_memory"),
], ids=["node out of range", "still pending", "unknown status", "not a map", "meta key"])
def test_a_bad_compiled_message_is_refused_naming_what_is_wrong(record, meta, says):
    with pytest.raises(ValueError, match=says):
        later_compiled.complete(_graph(later_compiled.pending_record(8, 0, 40)), record, meta)


def test_a_compiled_program_that_never_comes_leaves_the_graph_saying_why():
    shown = _graph(later_compiled.pending_record(8, 0.5, 40))
    gone = later_compiled.missing(shown, "the worker ended before sending them")
    assert gone.compiled["status"] == "failed" and gone.compiled["devices"] == 8
    assert gone.compiled["reason"] == "the compiled program did not arrive: the worker ended before sending them"
    assert summary_lines(gone.compiled, str) == [f"compiled:    not compiled (failed): {gone.compiled['reason']}"]
    late = later_compiled.missing(shown, "the deadline passed", "timeout")
    assert late.compiled["status"] == "timeout"
    done = _graph(dict(RECORD))
    assert later_compiled.missing(done, "x") is done, "nothing was pending: nothing changes"


# ------------------------------------------------------------ the parent's reading (fast)


class _Channel:
    """A worker channel that delivers ``chunks`` (then the end)."""

    def __init__(self, chunks: list[bytes], code: int = 0) -> None:
        self.chunks = list(chunks)
        self.escaped: list = []
        self.killed = False
        self.code = code

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
        return self.code

    def log_tail(self) -> str:
        return ""


def _converse(chunks: list[bytes], code: int = 0) -> tuple[Capture, list[Capture], list[str]]:
    from capture.recipe import parse_profile
    from capture.session.conversation import converse
    from capture.session.runner import make_job
    from capture.worker.protocol import PROTOCOL_VERSION, WorkerRequest

    recipe = parse_profile("p", {"model": "m:f", "framework": "jax", "inputs": {"args": [], "kwargs": {}}})
    said: list[str] = []
    job = make_job(Path.cwd(), recipe, python="python", progress=lambda m, f: said.append(m))
    shown: list[Capture] = []
    job.graph_ready = shown.append
    request = WorkerRequest(protocol=PROTOCOL_VERSION, action="capture", workspace=str(Path.cwd()),
                            recipe=recipe.to_dict(), limits=job.limits.to_dict())
    got = converse(job, _Channel(chunks, code), request)
    assert got is not None
    return got, shown, said


def _frames(*messages) -> list[bytes]:
    from capture.worker.protocol import encode_frame

    return [encode_frame(m) for m in messages]


@pytest.mark.parametrize("together", [True, False], ids=["in one read", "in three reads"])
def test_the_parent_shows_the_graph_then_merges_the_compiled_program(together):
    data = graphfile.encode(_graph(later_compiled.pending_record(8, 0.2, 40)))
    frames = _frames({"kind": "result", "graph": data},
                     {"kind": "progress", "message": "compiling for 8 devices (XLA; the graph is shown)",
                      "fraction": 0.99},
                     {"kind": "compiled", "compiled": RECORD})
    got, shown, said = _converse([b"".join(frames)] if together else frames)
    assert len(shown) == 1 and later_compiled.pending(shown[0])
    assert got.compiled["status"] == "compiled" and got.compiled["attributed"] == 1
    assert "compiling for 8 devices (XLA; the graph is shown)" in said


@pytest.mark.parametrize("after, says", [
    ([], "the worker ended before sending them"),
    ([{"kind": "compiled", "compiled": {"status": "compiled", "collectives": [{"kind": "all-gather", "node": 99}]}}],
     "invalid"),
], ids=["worker ended", "bad record"])
def test_a_compiled_program_that_never_comes_is_a_failed_record_beside_the_graph(after, says):
    data = graphfile.encode(_graph(later_compiled.pending_record(8, 0.2, 40)))
    got, shown, _ = _converse([b"".join(_frames({"kind": "result", "graph": data}, *after))])
    assert got.failure is None and len(got.nodes) == len(shown[0].nodes) == 2
    assert got.compiled["status"] == "failed" and says in got.compiled["reason"]


def test_a_worker_killed_while_compiling_says_how():
    data = graphfile.encode(_graph(later_compiled.pending_record(8, 0.2, 40)))
    got, _, _ = _converse(_frames({"kind": "result", "graph": data}), code=-9)
    assert got.failure is None and got.compiled["reason"] == (
        "the compiled program did not arrive: the worker ended before sending them, killed by SIGKILL (possibly out "
        "of memory)")


def test_statistics_and_the_compiled_program_may_both_follow_in_either_order():
    cap = _graph(later_compiled.pending_record(8, 0.2, 40), backend="eager")  # measured: not a traced program
    cap.values[0].measured = {"param": "w"}
    cap.meta["stats_pending"] = 1
    stats = {"kind": "statistics", "values": [[0, {"min": 0.0, "max": 1.0, "mean": 0.5, "std": 0.1, "nan": 0,
                                                   "inf": 0}]], "skipped": 0}
    for order in ([stats, {"kind": "compiled", "compiled": RECORD}], [{"kind": "compiled", "compiled": RECORD}, stats]):
        got, shown, _ = _converse(_frames({"kind": "result", "graph": graphfile.encode(cap)}, *order))
        assert len(shown) == 1
        assert got.compiled["status"] == "compiled" and "stats" in got.values[0].measured
        assert "stats_pending" not in got.meta


# ------------------------------------------------------------- through the worker (slow)


def _cli(root: Path, *extra: str, delay: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TENSORVIZ_TEST_COMPILE_DELAY_S": str(delay)}
    return subprocess.run([sys.executable, "-m", "tensorviz_lsp", "capture", "--workspace", str(root),
                           "--profile", "tp", "-o", str(root / "tp.tvg"), *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.jax
def test_through_the_worker_the_graph_file_is_written_before_the_compiled_program_arrives(tmp_path, monkeypatch):
    pytest.importorskip("jax")
    from capture.session import CaptureRequest, run_session

    root = write(tmp_path, {"model.py": MODEL, ".tensorviz/recipes.toml": RECIPE})
    monkeypatch.setenv("TENSORVIZ_TEST_COMPILE_DELAY_S", "3")
    seen: list[tuple[Capture, Capture | None]] = []
    said: list[str] = []

    def on_graph(capture: Capture, path: Path | None) -> None:
        seen.append((capture, graphfile.read(path) if path is not None else None))

    result = run_session(CaptureRequest(workspace=root, profile="tp", on_graph=on_graph, history=None,
                                        progress=lambda m, f: said.append(m)))
    assert result.ok, result.capture.failure
    assert len(seen) == 1
    first, on_disk = seen[0]
    assert on_disk is not None and later_compiled.pending(on_disk)
    assert on_disk.compiled["devices"] == 8 and on_disk.compiled["limit_seconds"] == 40.0
    final = graphfile.read(result.graph_file)
    c = final.compiled
    assert c["status"] == "compiled" and c["devices"] == 8 and c["seconds"] >= 3
    assert c["collectives"] and c["attributed"] + c["unattributed"] == len(c["collectives"])
    assert c["lower_seconds"] >= 0 and len(final.nodes) == len(on_disk.nodes)
    assert any(m.startswith("compiling for 8 devices") for m in said)


@pytest.mark.slow
@pytest.mark.jax
@pytest.mark.parametrize("timeout, delay, last", [
    ((), 3, "compiled by XLA for 8 devices in "),
    (("--compile-timeout", "1"), 4, "not compiled for 8 devices (timeout): XLA had not finished compiling after 1 s"),
], ids=["compiled", "compile timed out"])
def test_the_cli_prints_the_graph_first_then_the_compiled_line(tmp_path, timeout, delay, last):
    pytest.importorskip("jax")
    root = write(tmp_path, {"model.py": MODEL, ".tensorviz/recipes.toml": RECIPE})
    done = _cli(root, *timeout, delay=delay)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(root / "tp.tvg")], "the path once, for scripts"
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("tensorviz capture: ")]
    first = next(i for i, ln in enumerate(lines) if ln.startswith("tensorviz capture: captured "))
    assert "XLA is compiling it for 8 devices" in lines[first] and "written again when they arrive" in lines[first]
    assert lines[first + 1].startswith("tensorviz capture: " + last), lines
    cap = graphfile.read(root / "tp.tvg")
    assert cap.failure is None and cap.nodes
    assert cap.compiled["status"] == ("compiled" if not timeout else "timeout")
    if not timeout:
        _summary_scopes(root / "tp.tvg", cap)


def _summary_scopes(path: Path, cap: Capture) -> None:
    """A shard_map program's total holds its body × its devices (global), its body's row is
    per device and says so, and that row agrees with XLA's per-device FLOPs within 5 %."""
    import json

    done = subprocess.run([sys.executable, "-m", "tensorviz_lsp", "summary", str(path), "--json"], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    (body,) = [r for r in doc["rows"] if r["kind"] == "body"]
    assert body["flops_scope"] == "per device" and body["flops"] > 0
    assert doc["totals"]["flops"] >= 8 * body["flops"] and not doc["totals"].get("uncounted")
    assert "a shard_map as its body × the shards of its manual axes" in doc["figure_scopes"]["flops"]
    assert abs(body["flops"] / cap.compiled["cost"]["flops"] - 1) < 0.05
    assert doc["per_device"]["scope"] == "per device" and abs(doc["per_device"]["flops_ratio"] - 1) < 0.05
    done = subprocess.run([sys.executable, "-m", "tensorviz_lsp", "inspect", str(path)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    (cost,) = [ln for ln in done.stdout.splitlines() if ln.startswith("cost:")]
    assert " global (a multiply-add counts 2)" in cost, cost


def test_the_hover_and_the_cli_say_compiling_then_what_xla_runs():
    from tensorviz_lsp.cli.commands.capture import compiled_line, following
    from tensorviz_lsp.features.hover import _compiled

    shown = _graph(later_compiled.pending_record(8, 0.2, 40))
    assert _compiled(shown) == "; compiling for 8 devices… (XLA's figures follow)"
    assert following(shown) == ("; XLA is compiling it for 8 devices (at most 40 s, --compile-timeout); the file is "
                                "written again when they arrive")
    done = later_compiled.complete(shown, dict(RECORD))
    assert following(done) == ""
    assert compiled_line(done) == ("compiled by XLA for 8 devices in 3.5 s: 1 collective (all-reduce(data)×1), "
                                   "1 drawn on their nodes, 0 unattributed; per device: 1 MFLOPs, peak 25 B")
    gone = later_compiled.missing(shown, "the worker ended before sending them")
    assert compiled_line(gone) == ("not compiled for 8 devices (failed): the compiled program did not arrive: the "
                                   "worker ended before sending them")


@pytest.mark.slow
@pytest.mark.jax
def test_open_serves_the_graph_first_then_completes_it_in_place(tmp_path):
    """``tensorviz open``: the URL comes with the graph, while XLA compiles; the same capture
    id then holds the compiled program."""
    import json
    import signal
    import time
    import urllib.request

    pytest.importorskip("jax")
    root = write(tmp_path, {"model.py": MODEL, ".tensorviz/recipes.toml": RECIPE})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TENSORVIZ_TEST_COMPILE_DELAY_S": "6", "DISPLAY": "",
           "WAYLAND_DISPLAY": "", "BROWSER": ""}
    proc = subprocess.Popen([sys.executable, "-m", "tensorviz_lsp", "open", "--workspace", str(root), "--profile", "tp",
                             "--no-browser"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)

    def api() -> dict:
        with urllib.request.urlopen(url + "api/capture", timeout=30) as res:
            return json.load(res)

    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.poll() is not None else url
        first = api()
        assert first["compiled"]["status"] == "pending" and first["compiled"]["devices"] == 8
        end = time.monotonic() + 120
        while (now := api())["compiled"]["status"] == "pending" and time.monotonic() < end:
            time.sleep(0.5)
        assert now["compiled"]["status"] == "compiled" and now["id"] == first["id"]
        assert now["compiled"]["count"] >= 1
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stdout.read() == "", "the URL once"


def test_a_hovered_calls_flops_say_their_scope():
    """Issue 46: on a program split across devices the hover's FLOPs say global, per device
    (inside a shard_map body) or, for a split Torch program, per rank."""
    from types import SimpleNamespace

    from capture.analysis.lines import LineCall
    from capture.graph.model import Group
    from tensorviz_lsp.features.line_values import cost_text

    groups = [Group(0, "jit", "step"), Group(1, "body", "shard_map body", 0, {"role": "shard_map body"})]
    split = SimpleNamespace(meshes=[{"axes": []}], groups=groups)
    whole = SimpleNamespace(meshes=[], groups=groups)
    call = LineCall(nodes=[0], flops=2_420_000_000, bytes=45 << 20, container=0)
    assert cost_text(call, split) == "2.42 GFLOPs global · 45 MiB moved"
    assert cost_text(call, whole) == "2.42 GFLOPs · 45 MiB moved"
    call.container = 1
    assert cost_text(call, split) == "2.42 GFLOPs per device · 45 MiB moved"
    call.rank_flops = 605_000_000
    assert cost_text(call, split) == "605 MFLOPs per rank · 45 MiB moved"
