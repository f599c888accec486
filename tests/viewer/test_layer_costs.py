"""What each layer costs, derived on read (capture/analysis/cost.py), the layer table and
``tensorviz summary`` (tensorviz_lsp/cli/commands/summary.py), api/cost."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from capture.graph import graphfile
from capture.graph.model import (
    UNCOUNTED, Capture, Coverage, Group, Node, NodeCosts, Operand, Value,
)
from capture.analysis.cost import executed_totals
from capture.analysis.layer_table import layer_rows
from viewer.projection.projection import Projection

REPO = Path(__file__).resolve().parents[2]
CAPTURES = REPO / "tests" / "viewer" / "real_models" / "captures"


def _read(name: str) -> Capture:
    return graphfile.read(CAPTURES / f"{name}.tvg")


def _sums_hold(proj: Projection) -> None:
    """A group's figures are its own ops' and its children's (bodies apart)."""
    costs = proj.costs()
    ix = proj.index
    for g in range(len(proj.capture.groups)):
        if g in ix.body_node:
            continue
        own = sum(max(costs.cost.flops[i], 0) for i in ix.direct_nodes[g + 1])
        kids = sum(costs.flops[c + 1] for c in ix.child_groups[g + 1])
        assert costs.flops[g + 1] == own + kids


@pytest.mark.parametrize("name", ["gpt2_torch", "llama_torch", "vit_torch", "resnet50_torch", "t5_torch",
                                  "resnet18_torch", "vit_linen", "resnet18_linen"])
def test_real_captures_are_counted_whole(name):
    capture = _read(name)
    assert capture.cost is not None, "regenerate the real captures (make_captures.py)"
    proj = Projection(capture)
    costs = proj.costs()
    assert costs.uncounted_ops() == []
    assert costs.flops[0] == sum(f for f in capture.cost.flops if f > 0) > 0
    assert executed_totals(capture)["flops"] == costs.flops[0]
    _sums_hold(proj)
    totals = costs.totals()
    assert totals["params"]["count"] > 0 and 0 < totals["peak_live"] <= totals["activations"]


def test_a_stack_of_identical_blocks_is_one_row_with_its_sums_and_one_block():
    proj = Projection(_read("gpt2_torch"))
    rows = layer_rows(proj.analysis, depth=3)
    stack = next(r for r in rows if "stack" in r)
    assert stack["stack"]["count"] == 12 and stack["class"] == "GPT2Block"
    assert stack["flops"] == 12 * stack["stack"]["per_block"]["flops"]
    assert stack["params"]["count"] == 12 * stack["stack"]["per_block"]["params"]
    deeper = layer_rows(proj.analysis, depth=4)
    first = deeper[deeper.index(next(r for r in deeper if "stack" in r)) + 1]
    assert first["per_block"] and first["flops"] == stack["stack"]["per_block"]["flops"]
    # the table's share column is of the whole program
    top = rows[0]
    assert top["share"] == pytest.approx(1.0)


def _chain_capture() -> Capture:
    """v0 -> n0 -> v1 -> n1 -> v2 -> n2 -> v3 (output); v1 is also read by n2.

    Each value f32[256] (1 KiB); one module group holds n0 and n1, n2 sits at the top."""
    values = [Value(i, [256], "float32") for i in range(4)]
    nodes = [
        Node(0, "neg", [Operand(0, 0)], [1], {}, 0),
        Node(1, "exp", [Operand(0, 1)], [2], {}, 0),
        Node(2, "add", [Operand(0, 2), Operand(1, 1)], [3], {}, None),
    ]
    cap = Capture("jaxpr", "jax", "0", Coverage("traced_program"), values=values, nodes=nodes,
                  groups=[Group(0, "module", "block", None, {"path": "block", "class": "Block"})],
                  inputs={"list": [{"value": 0}]}, outputs={"list": [{"value": 3}]})
    cap.cost = NodeCosts([256, 256, UNCOUNTED], [1024, 1024, 2048], [1024, 1024, 1024], [0, 0, 1],
                         ["elementwise", "no rule"], [], {"uncounted": {"add": "a test"}})
    return cap


def test_sums_peak_live_and_an_uncounted_op_listed_not_zero():
    proj = Projection(_chain_capture())
    costs = proj.costs()
    assert costs.flops[0] == 512 and costs.uncounted[0] == 1
    assert costs.flops[1] == 512 and costs.uncounted[1] == 0
    # v1 lives from n0 to n2, v2 from n1 to n2, v3 from n2 to the end: 3 KiB at n2
    assert costs.totals()["peak_live"] == 3 * 1024
    assert costs.totals()["activations"] == 3 * 1024
    assert costs.uncounted_ops() == [{"op": "add", "count": 1, "in_bodies": 0, "reason": "a test"}]
    # the op's card says it is uncounted, not 0
    page = proj.children(-1)
    add = next(it for it in page["items"] if it["type"] == "node")
    assert add["cost"]["flops"] is None and add["cost"]["uncounted"] == 1


def test_roofline_times_are_estimates_per_op_summed_per_layer():
    from capture.analysis.devices import Device

    proj = Projection(_chain_capture())
    dev = Device("d", "a device", bandwidth=1e9, peak_flops={"float32": 1e9})
    times = proj.costs().times(dev)
    # each counted op: max(256 / 1e9, 2048 / 1e9); the uncounted one adds nothing
    assert times[1] == pytest.approx(2 * 2048 / 1e9)
    assert times[0] == pytest.approx(times[1])
    answer = proj.cost_times(dev)
    assert answer["groups"]["g0"] == pytest.approx(times[1], rel=1e-3) and "n2" not in answer["nodes"]


def test_an_unexecuted_body_is_one_iteration_and_stays_out_of_the_totals():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    from capture.jax.convert import convert

    def prog(x, ws):
        return jax.lax.scan(lambda c, w: (jnp.tanh(c @ w), None), x, ws)[0]

    capture = convert(jax.make_jaxpr(prog)(jnp.ones((4, 8)), jnp.ones((6, 8, 8))))
    proj = Projection(capture)
    costs = proj.costs()
    body = next(iter(proj.index.body_node))
    scan = proj.index.body_node[body]
    one = 2 * 4 * 8 * 8 + 4 * 8
    assert costs.flops[body + 1] == one
    assert capture.cost.flops[scan] == 6 * one
    assert costs.flops[0] == 6 * one and costs.estimate[0]
    rows = layer_rows(proj.analysis, depth=None, all_groups=True)
    templ = next(r for r in rows if r.get("template"))
    assert templ["flops"] == one and templ["iterations"] == 6 and templ["share"] is None


def test_a_capture_without_costs_reads_and_says_so():
    capture = _chain_capture()
    capture.cost = None
    proj = Projection(capture)
    assert proj.costs().totals() == {"available": False}
    assert "cost" not in proj.children(-1)["items"][0]
    assert executed_totals(capture) is None


# --------------------------------------------------------------------------- the command


def _summary(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tensorviz_lsp", "summary", *args], capture_output=True, text=True,
                          cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=120)


@pytest.mark.slow
def test_summary_command_table_json_csv_and_devices(tmp_path):
    path = str(CAPTURES / "gpt2_torch.tvg")
    text = _summary(path)
    assert text.returncode == 0, text.stderr
    assert "GPT2Block · transformer.h.0–11 ×12" in text.stdout
    assert "a multiply-add counts 2" in text.stdout and "Uncounted ops:    none" in text.stdout
    data = json.loads(_summary(path, "--json", "--depth", "0", "--device", "h100-sxm").stdout)
    assert data["totals"]["flops"] == data["rows"][0]["flops"] and data["uncounted"] == []
    assert "estimated, not measured" in data["device"]["estimate"] and data["rows"][0]["time"] > 0
    table = list(csv.DictReader(io.StringIO(_summary(path, "--csv", "--sort", "flops").stdout)))
    assert list(table[0])[:4] == ["depth", "path", "name", "class"]
    flops = [int(r["flops"]) for r in table]
    assert flops == sorted(flops, reverse=True)
    unknown = _summary(path, "--device", "nope")
    assert unknown.returncode == 2 and "no device profile 'nope'" in unknown.stderr
    listing = _summary(path, "--device", "list")
    assert "h100-sxm" in listing.stdout and "cpu" in listing.stdout
    old = _chain_capture()
    old.cost = None
    graphfile.write(old, tmp_path / "old.tvg")
    none = _summary(str(tmp_path / "old.tvg"))
    assert none.returncode == 2 and "holds no costs" in none.stderr
    devices = tmp_path / "devices.toml"
    devices.write_text("[devices.mine]\nbandwidth = -1\npeak_flops = { float32 = 1e12 }\n")
    bad = _summary(path, "--devices", str(devices))
    assert bad.returncode == 2 and "devices.mine.bandwidth" in bad.stderr


def test_summary_lists_an_uncounted_op_by_name(tmp_path, capsys):
    from tensorviz_lsp.cli import main

    graphfile.write(_chain_capture(), tmp_path / "c.tvg")
    assert main(["summary", str(tmp_path / "c.tvg")]) == 0
    out = capsys.readouterr().out
    assert "Uncounted ops:    1 (not in the totals):" in out and "add ×1: a test" in out
    assert "Total FLOPs:      512 FLOPs + 1 uncounted op (listed below)" in out  # beside, never added as 0


def test_api_cost_answers_totals_devices_and_times(tmp_path):
    from viewer.server.app import ViewerServer
    import urllib.request

    server = ViewerServer([(_chain_capture(), "chain")], workspace=tmp_path)
    server.start()
    try:
        base = server.url.rstrip("/")

        def get(path: str) -> dict:
            with urllib.request.urlopen(f"{base}/{path}") as r:
                return json.loads(r.read())

        plain = get("api/cost")
        assert plain["flops"] == 512 and plain["uncounted_ops"][0]["op"] == "add"
        assert any(d["name"] == "cpu" for d in plain["devices"]) and "times" not in plain
        timed = get("api/cost?device=h100-sxm")
        assert timed["times"]["groups"]["g0"] > 0 and "estimated, not measured" in timed["estimate_note"]
        capture = get("api/capture")
        assert capture["cost"] == {"available": True}  # the totals are api/cost's
    finally:
        server.stop()


def test_the_device_table_is_editable_from_the_workspace(tmp_path):
    from capture.analysis import devices

    shipped = devices.load()
    assert {"h100-sxm", "a100-sxm-80gb", "tpu-v5e", "cpu"} <= set(shipped)
    assert "measured on this machine" in shipped["cpu"].note or "nominal" in shipped["cpu"].note
    (tmp_path / ".tensorviz").mkdir()
    (tmp_path / ".tensorviz" / "devices.toml").write_text(
        '[devices.cpu]\nlabel = "my laptop"\nbandwidth = 50e9\npeak_flops = { float32 = 1e12 }\n'
        '[devices.mine]\nbandwidth = 1e12\npeak_flops = { bfloat16 = 2e14 }\n')
    table = devices.load(tmp_path)
    assert table["cpu"].label == "my laptop" and table["cpu"].peak("bfloat16") == 1e12  # float32's, none given
    assert table["mine"].peak("bfloat16") == 2e14 and table["h100-sxm"].bandwidth == 3.35e12
    (tmp_path / ".tensorviz" / "devices.toml").write_text("[devices.x\n")
    with pytest.raises(devices.DeviceError, match="devices.toml: not valid TOML"):
        devices.load(tmp_path)


def test_a_lines_call_says_what_it_costs():
    from tensorviz_lsp.features.line_values import cost_text
    from capture.analysis.lines import LineCall

    call = LineCall(nodes=[1], flops=2_420_000_000, bytes=45_100_000, params=2_360_000)
    assert cost_text(call) == "2.42 GFLOPs · 43 MiB moved · 2.36 M params"
    call.uncounted, call.estimate = 2, True
    assert cost_text(call) == "~2.42 GFLOPs · 43 MiB moved · 2.36 M params · 2 ops uncounted (not in the FLOPs)"
    assert cost_text(LineCall(nodes=[1])) is None  # a capture without costs says nothing


def test_flops_by_kind_split_a_scan_by_its_body_and_add_up_to_the_total():
    """A scan boundary's body × length is split as its body's kinds: matmul and pointwise (tanh);
    every layer's kinds add up to its FLOPs."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    from capture.jax.convert import convert

    def prog(x, ws):
        return jnp.sum(jax.lax.scan(lambda c, w: (jnp.tanh(c @ w), None), x, ws)[0])

    capture = convert(jax.make_jaxpr(prog)(jnp.ones((4, 8)), jnp.ones((6, 8, 8))))
    proj = Projection(capture)
    totals = proj.costs().totals()
    assert totals["flops_by_kind"] == {"matmul": 6 * 2 * 4 * 8 * 8, "pointwise": 6 * 4 * 8,
                                       "reduction/norm": 4 * 8 - 1}
    assert sum(totals["flops_by_kind"].values()) == totals["flops"]
    for r in layer_rows(proj.analysis, depth=None, all_groups=True):
        assert sum((r.get("flops_by_kind") or {}).values()) == r["flops"], r


def test_flops_by_kind_split_a_shard_map_by_its_body():
    """A shard_map boundary (its body × its devices) is its body's kinds, not ``other``."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    from jax.sharding import PartitionSpec as P

    from capture.jax.convert import convert

    mesh = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))

    def prog(x, w):
        body = jax.shard_map(lambda a, b: jnp.tanh(a @ b), mesh=mesh, in_specs=(P("x"), P()), out_specs=P("x"))
        return body(x, w)

    capture = convert(jax.make_jaxpr(prog)(jnp.ones((4, 8)), jnp.ones((8, 8))))
    totals = Projection(capture).costs().totals()
    assert totals["flops_by_kind"] == {"matmul": 2 * 4 * 8 * 8, "pointwise": 4 * 8}, totals["flops_by_kind"]
    assert sum(totals["flops_by_kind"].values()) == totals["flops"]


def test_a_capture_counted_before_kinds_were_named_has_no_split():
    proj = Projection(_read("gpt2_torch"))
    assert "kinds" not in proj.capture.cost.notes
    assert proj.costs().totals()["flops_by_kind"] == {}
    assert all("flops_by_kind" not in r for r in layer_rows(proj.analysis, depth=2))


@pytest.mark.parametrize("paths, title, label", [
    # Issue 49: a run going up is named by the range of its paths' first differing number.
    (["blocks.0", "blocks.1", "blocks.2"], "blocks.0–2 ×3", "blocks.0 … blocks.2"),
    (["blocks.5", "blocks.4", "blocks.3"], "3 … 5 ×3, last first", "blocks.3 … blocks.5, last first"),
    (["layers.0.5", "layers.11.1"], "layers.0–11 ×2", "layers.0.5 … layers.11.1"),
])
def test_a_backward_stack_title_reads_up(paths, title, label):
    """The backward pass runs the last block first: its stack reads up and says so."""
    from capture.analysis.layer_table import _stack_title
    from capture.analysis.names import span_label

    groups = [Group(i, "module", p.rsplit(".", 1)[-1], None, {"path": p}) for i, p in enumerate(paths)]
    assert _stack_title(groups, list(range(len(paths))), len(paths)) == title
    assert span_label(paths[0], paths[-1]) == label
