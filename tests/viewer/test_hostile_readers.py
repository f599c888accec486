"""Issue 52 items 7-10: graph files the decoder accepts but that once crashed the readers.
Every viewer endpoint answers them (200, or a clear 4xx), ``inspect`` and ``summary``
print a result, memory stays linear in the file, and a broken devices.toml is one line."""

from __future__ import annotations

import gc
import http.client
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

import hostile_captures as H
from capture.graph import graphfile
from capture.analysis import devices as device_table
from capture.analysis.index import GraphIndex
from viewer.projection.projection import Projection
from viewer.server import app
from viewer.server.app import ViewerServer

ROOT = Path(__file__).resolve().parents[2]
ENDPOINTS = ["capture", "children?group=-1", "subtree?group=-1", "search?q=s9", "search?q=s&class=M", "group?id=0",
             "cost", "node?id=0", "value?id=0", "nodes", "diff"]


def _get(server: ViewerServer, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    try:
        conn.request("GET", f"/{server.token}/api/{path}", headers={"Host": f"127.0.0.1:{server.port}"})
        res = conn.getresponse()
        return res.status, res.read()
    finally:
        conn.close()


HOSTILE = {
    "chain of 1,000 groups": lambda: H.deep_chain(1000),
    "17 dims of 2^62": H.huge_dims,
    "meta.bodies of every type": H.odd_bodies,
    "FLOPs at the int64 limit": H.saturated_flops,
}


@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_every_endpoint_answers_a_hostile_file(make, tmp_path):
    capture = graphfile.decode(graphfile.encode(make()), name="hostile.tvg")
    server = ViewerServer([(capture, "hostile")], workspace=tmp_path)
    server.start()
    try:
        for path in ENDPOINTS:
            status, body = _get(server, path)
            assert status == 200 or (400 <= status < 500 and json.loads(body).get("error")), (path, status, body[:300])
    finally:
        server.stop()


def test_huge_dimensions_are_exact_in_the_cost_answer():
    """17 dims of 2^62: api/cost and api/group carry the exact bytes (an OverflowError, a
    500, before)."""
    proj = Projection(graphfile.decode(graphfile.encode(H.huge_dims())))
    totals = proj.cost_summary()
    assert totals["activations"] == 4 * (1 << (62 * 17))
    assert proj.group(0)["cost"]["activations"] == 4 * (1 << (62 * 17))


def _run(cmd: str, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tensorviz_lsp", cmd, str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_inspect_and_summary_print_a_result(make, tmp_path):
    path = tmp_path / "hostile.tvg"
    path.write_bytes(graphfile.encode(make()))
    for cmd in ("inspect", "summary"):
        done = _run(cmd, path)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (cmd, done.stderr[-2000:])


def test_the_index_keeps_no_ancestor_chains():
    """Issue 52 item 9: a 20,000-deep chain made the group index hold 1.55 GB (every
    group's chain). Memory held is linear in the groups: under 3 KiB a group."""
    capture = graphfile.decode(graphfile.encode(H.deep_chain(5_000)))
    gc.collect()
    tracemalloc.start()
    try:
        index = GraphIndex(capture)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 5_000 * 3072, held  # each chain kept: 100 MB
    assert index.chain[4_999] == list(range(5_000))
    assert index.child_under(4_999, 1_999) == 2_000 and index.child_under(4_999, -1) == 0
    assert index.child_under(3, 10) is None and index.ancestor(4_999, 4_999) == 0


def test_an_upload_is_counted_by_its_groups():
    """Item 9: the held-uploads estimate counts a file of groups by its groups, so two
    uploads of a deep chain cannot pass the bound unseen."""
    assert app.held_upload_bytes(250_000, 20_000) >= 20_000 * 2048
    assert app.held_upload_bytes(250_000, 0) == app.HELD_BYTES_PER_FILE_BYTE * 250_000 + app.HELD_BYTES_PER_CAPTURE


# --------------------------------------------------------------------------- devices.toml


def _table(tmp_path: Path, body: str) -> Path:
    ws = tmp_path / "ws"
    (ws / ".tensorviz").mkdir(parents=True, exist_ok=True)
    (ws / ".tensorviz" / "devices.toml").write_text(body)
    return ws


FIGURES = [("inf", "bandwidth"), ("nan", "bandwidth"), ("1e-310", "bandwidth"), ("0", "bandwidth"),
           ("-5", "bandwidth"), ("1e30", "bandwidth"), ('"fast"', "bandwidth")]


@pytest.mark.parametrize(("figure", "key"), FIGURES)
def test_devices_toml_refuses_figures_that_are_not_finite_positive_and_normal(tmp_path, figure, key):
    ws = _table(tmp_path, f'[devices.x]\nbandwidth = {figure}\npeak_flops = {{ float32 = 1e12 }}\n')
    with pytest.raises(device_table.DeviceError, match=r"devices\.x\.bandwidth must be a number"):
        device_table.load(ws)
    ws = _table(tmp_path, f'[devices.x]\nbandwidth = 1e12\npeak_flops = {{ float32 = {figure} }}\n')
    with pytest.raises(device_table.DeviceError, match=r"devices\.x\.peak_flops\.float32 must be a number"):
        device_table.load(ws)


def test_a_deeply_nested_devices_toml_is_one_clear_error(tmp_path):
    ws = _table(tmp_path, "[devices.x]\nnote = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(device_table.DeviceError, match="nested too deeply"):
        device_table.load(ws)


def test_a_broken_workspace_table_leaves_summary_and_the_cost_panel_working(tmp_path):
    ws = _table(tmp_path, "[devices.x]\nbandwidth = inf\npeak_flops = { float32 = 1e12 }\n")
    path = ws / "g.tvg"
    path.write_bytes(graphfile.encode(H.deep_chain(3)))
    done = subprocess.run([sys.executable, "-m", "tensorviz_lsp", "summary", "--workspace", str(ws), str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Total FLOPs" in done.stdout, done.stderr
    assert done.stderr.count("\n") == 1 and "devices.x.bandwidth" in done.stderr
    server = ViewerServer([(graphfile.decode(path.read_bytes()), "g")], workspace=ws)
    server.start()
    try:
        status, body = _get(server, "cost")
        assert status == 200 and "devices.x.bandwidth" in json.loads(body)["devices_problem"]
    finally:
        server.stop()


# --------------------------------------------------------------------------- generated


def _generated(draw) -> object:
    from hypothesis import strategies as st

    from capture.graph.model import Capture, Coverage, Frame, Group, Node, NodeCosts, Operand, Value

    n_groups = draw(st.integers(0, 60))
    deep = draw(st.booleans())
    groups = []
    for i in range(n_groups):
        if not i:
            parent = None
        elif deep:
            parent = i - 1
        else:
            parent = draw(st.one_of(st.none(), st.integers(0, i - 1)))
        kind = draw(st.sampled_from(["scope", "module", "jit", "body", "backward", "function"]))
        attrs = draw(st.sampled_from([{}, {"class": "M"}, {"path": "same"}, {"role": "scan body", "iterations": 3}]))
        groups.append(Group(i, kind, draw(st.sampled_from(["a", "b", "same", ""])), parent, dict(attrs)))
    dim = st.one_of(st.integers(0, 4), st.just(1 << 62), st.sampled_from(["batch", "n"]))
    n_values = draw(st.integers(1, 8))
    dtypes = st.sampled_from(["float32", "int4", "float4_e2m1fn", "weird", "bfloat16"])
    values = [Value(i, draw(st.lists(dim, max_size=17)), draw(dtypes)) for i in range(n_values)]
    nodes = []
    for i in range(draw(st.integers(0, n_values - 1))):
        grp = draw(st.one_of(st.none(), st.integers(0, n_groups - 1))) if n_groups else None
        nodes.append(Node(i, draw(st.sampled_from(["tanh", "dot_general", "scan", "reshape"])), [Operand(0, i)],
                          [i + 1], {}, grp, 0))
    n = len(nodes)
    big = (1 << 63) - 1
    cost = NodeCosts([draw(st.sampled_from([-1, 0, 7, big])) for _ in range(n)],
                     [draw(st.sampled_from([-1, 8, big])) for _ in range(n)], [8] * n, [0] * n, ["r"])
    meta = {"bodies": draw(st.sampled_from([{}, {"converted": "x"}, {"converted": 2, "template_nodes": 1.5}]))}
    return Capture(backend="jax", framework="jax", framework_version="0", coverage=Coverage("forward"),
                   values=values, nodes=nodes, groups=groups, frames=[Frame("m.py", 1, 0, "f")],
                   inputs={"list": [{"value": 0}]}, outputs={"list": [{"value": n_values - 1}]}, meta=meta, cost=cost)


@pytest.mark.slow
def test_generated_hostile_captures_are_answered():
    """Random group trees (chains, forests, bodies, duplicate paths), dimensions of 2^62,
    symbolic ones, unknown and sub-byte dtypes, costs at the int64 limit, odd meta: each
    file the decoder accepts gets an answer from every projection endpoint, inspect's
    summary and diff."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from capture.graph.diff import diff
    from tensorviz_lsp.cli.commands import inspect as cli_inspect

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data):
        capture = _generated(data.draw)
        try:
            decoded = graphfile.decode(graphfile.encode(capture), name="gen.tvg")
        except (graphfile.GraphFileError, ValueError):
            return  # refused with one line
        p = Projection(decoded)
        p.summary()
        p.children(-1, None)
        p.subtree(-1, 60_000)
        p.search("a", 50)
        p.search("", 50, cls="m")
        p.cost_summary()
        for g in range(min(len(decoded.groups), 5)):
            p.group(g)
        cli_inspect.summary(decoded)
        diff(decoded, decoded)

    check()


def test_values_crossing_a_deep_chain_are_refused_in_one_line(tmp_path, monkeypatch):
    """The index's boundary sets grow as crossings x depth (20,000 x 20,000 from a file of
    about 1 MB): past a bound linear in the file the viewer answers 413 with one line, and
    summary says it; a graph under the bound is indexed."""
    from capture.analysis import index as index_mod

    monkeypatch.setattr(index_mod, "BOUNDARY_ENTRIES_BASE", 10_000)
    capture = graphfile.decode(graphfile.encode(H.crossing_chain(2_000, 2_000)))
    with pytest.raises(index_mod.TooDeep, match="cross more nesting levels than the viewer indexes"):
        GraphIndex(capture)
    server = ViewerServer([(capture, "deep")], workspace=tmp_path)
    server.start()
    try:
        for path in ("capture", "children?group=-1", "search?q=s"):
            status, body = _get(server, path)
            assert status == 413 and "nesting levels" in json.loads(body)["error"], (path, status, body[:300])
    finally:
        server.stop()
    GraphIndex(graphfile.decode(graphfile.encode(H.crossing_chain(50, 50))))  # 2,500 entries: indexed
