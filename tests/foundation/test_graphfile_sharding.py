"""Meshes, devices and value shardings in graph files (issue 34): written once per
distinct map, read back equal in both file versions, checked as hostile input (every
reference into the meshes, every axis name, every dimension), and absent from older files."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capture.graph import graphfile
from capture.graph.model import Capture, Coverage, Node, Operand, Value, to_json
from capture.graph.sharding import (
    MeshTable,
    ShardingError,
    check_meshes,
    collective_record,
    mesh_record,
    per_device_shape,
    sharding_record,
    split_label,
)

SIZES = {"data": 4, "model": 2}


def sharded_capture() -> Capture:
    meshes = MeshTable()
    m = meshes.add(mesh_record([("data", 4, "auto"), ("model", 2, "auto")], "Mesh", "recipe"))
    values = [
        Value(0, [8, 16], "float32", None, sharding_record(m, [8, 16], [["data"], []], SIZES, source="placement")),
        Value(1, [16, 32], "bfloat16", None, sharding_record(m, [16, 32], [[], ["model"]], SIZES)),
        Value(2, [8, 32], "float32"),
        Value(3, [8, 32], "float32", None, sharding_record(m, [8, 32], [["data"], ["model"]], SIZES,
                                                             partial=["model"])),
        Value(4, [2, 16], "float32", None, {"mesh": 0, "spec": [[], []], "per_device_shape": [2, 16], "local": True,
                                            "global_shape": [8, 16]}),
    ]
    nodes = [Node(0, "dot_general", [Operand(0, 0), Operand(1, 1)], [2]),
             Node(1, "sharding_constraint", [Operand(0, 2)], [3]), Node(2, "neg", [Operand(0, 4)], [])]
    cap = Capture("jaxpr", "jax", "0.10", Coverage("traced_program"), values=values, nodes=nodes,
                  meshes=meshes.meshes, devices={"platform": "cpu", "count": 8, "simulated": True})
    return cap


@pytest.mark.parametrize("version", [1, 2])
def test_round_trip(version):
    cap = sharded_capture()
    back = graphfile.decode(graphfile.encode(cap, version=version))
    assert back.meshes == cap.meshes and back.devices == cap.devices
    assert [v.sharding for v in back.values] == [v.sharding for v in cap.values]
    assert [v.sharding for v in list(back.values)] == [v.sharding for v in cap.values]
    assert to_json(back)["values"][0]["sharding"]["per_device_shape"] == [2, 16]
    assert "sharding" not in to_json(back)["values"][2]


def test_equal_shardings_are_stored_once():
    cap = sharded_capture()
    record = cap.values[0].sharding
    cap.values += [Value(i, [8, 16], "float32", None, dict(record)) for i in range(5, 505)]
    data = graphfile.encode(cap)
    body = msgpack.Unpacker(raw=False)
    body.feed(data)
    body.unpack()
    assert len(body.unpack()["values"]["sharding_table"]) == 4


def test_a_capture_without_meshes_has_none_and_older_files_read():
    cap = Capture("jaxpr", "jax", "0.10", Coverage("traced_program"), values=[Value(0, [2], "float32")],
                  nodes=[Node(0, "neg", [Operand(0, 0)], [])])
    back = graphfile.decode(graphfile.encode(cap))
    assert back.meshes == [] and back.devices is None and back.values[0].sharding is None


def _tampered(change) -> bytes:
    data = graphfile.encode(sharded_capture())
    u = msgpack.Unpacker(raw=False)
    u.feed(data)
    header, body = u.unpack(), u.unpack()
    change(body)
    return msgpack.packb(header) + msgpack.packb(body, use_bin_type=True)


@pytest.mark.parametrize("change, expected", [
    pytest.param(lambda b: b["values"]["sharding_table"][0].update(mesh=3), "meshes", id="mesh-out-of-range"),
    pytest.param(lambda b: b["values"]["sharding_table"][0].update(spec=[["pipe"], []]), "is not an axis",
                 id="unknown-axis"),
    pytest.param(lambda b: b["values"]["sharding_table"][0].update(spec=[["data"]]), "one entry per dimension",
                 id="spec-rank"),
    pytest.param(lambda b: b["values"]["sharding_table"][0].update(spec=[["data"], ["data"]]), "splits two",
                 id="axis-twice"),
    pytest.param(lambda b: b["values"]["sharding_table"][0].update(per_device_shape=[2, -1]), "size or a name",
                 id="negative-dim"),
    pytest.param(lambda b: b["values"]["sharding_table"][0].update(partial=["x"]), "partial", id="partial-axis"),
    pytest.param(lambda b: b["values"]["sharding_table"].__setitem__(0, [1]), "expected maps", id="not-a-map"),
    pytest.param(lambda b: b["values"].__setitem__("sharding_index", None), "sharding_index", id="no-index"),
    pytest.param(lambda b: b["meshes"][0]["axes"][0].update(size=0), "size", id="zero-axis"),
    pytest.param(lambda b: b["meshes"][0]["axes"][1].update(name="data"), "named twice", id="axis-name-twice"),
    pytest.param(lambda b: b["meshes"][0].update(devices=9), "product of the axis sizes", id="device-count"),
    pytest.param(lambda b: b["meshes"][0].update(kind="Grid"), "kind", id="mesh-kind"),
    pytest.param(lambda b: b["meshes"][0]["axes"][0].update(type="sideways"), "type", id="axis-type"),
    pytest.param(lambda b: b.__setitem__("meshes", {"a": 1}), "expected a list", id="meshes-map"),
    pytest.param(lambda b: b["devices"].update(count=0), "devices.count", id="devices-count"),
    pytest.param(lambda b: b["devices"].update(simulated="yes"), "simulated", id="devices-simulated"),
    pytest.param(lambda b: b["meshes"][0]["axes"].extend({"name": f"a{i}", "size": 1 << 20} for i in range(2)),
                 "devices", id="device-bomb"),
])
def test_hostile_shardings_are_refused(change, expected):
    with pytest.raises(graphfile.GraphFileError) as err:
        graphfile.decode(_tampered(change), name="bad.tvg")
    assert str(err.value).startswith("bad.tvg: invalid field") and expected in str(err.value)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 64), st.text(min_size=1, max_size=3)), max_size=4),
       st.lists(st.lists(st.sampled_from(["data", "model"]), max_size=2, unique=True), max_size=4))
def test_per_device_shape_divides_and_rounds_up(shape, spec):
    got = per_device_shape(shape, spec, SIZES)
    for d, axes, out in zip(shape, spec + [[]] * len(shape), got):
        k = 1
        for a in axes:
            k *= SIZES[a]
        assert out == (-(-d // k) if type(d) is int else d)
    assert len(got) == len(shape)


def test_labels_and_collectives():
    v = sharding_record(0, [8, 16], [["data", "model"], []], SIZES, partial=["model"])
    assert split_label([8, 16], "float32", v) == "f32[8@data*model,16]+partial(model)"
    assert split_label([8, 16], "float32", v, per_device=True) == "f32[1,16]"
    local = {"mesh": 0, "spec": [["data"], []], "per_device_shape": [2, 16], "local": True, "global_shape": [8, 16]}
    assert split_label([2, 16], "bfloat16", local) == "bf16[8@data,16]"
    assert split_label([3], "int32", None) == "i32[3]"
    assert collective_record("all_reduce", ["tp"], 4, 128)["bytes_sent_per_device"] == 192
    assert collective_record("all_gather", ["x"], 4, 128)["bytes_sent_per_device"] == 384
    assert collective_record("reduce_scatter", ["x"], 4, 128)["bytes_sent_per_device"] == 96
    assert collective_record("permute", ["x"], 4, 128)["bytes_sent_per_device"] == 128
    assert collective_record("axis_index", ["x"], 4, 0)["bytes_sent_per_device"] == 0
    assert collective_record("all_reduce", ["x"], 4, None)["bytes_sent_per_device"] is None


def test_mesh_table_merges_equal_meshes():
    t = MeshTable()
    a = t.add(mesh_record([("x", 2, "auto")], "AbstractMesh", "program"))
    b = t.add(mesh_record([("x", 2, "auto")], "Mesh", "recipe"))
    c = t.add(mesh_record([("x", 2, "explicit")], "Mesh", "program"))
    assert (a, b, c) == (0, 0, 1) and t.meshes[0]["origin"] == "recipe"
    with pytest.raises(ShardingError):
        check_meshes([{"axes": [{"name": "x", "size": 2, "type": None}], "devices": 2, "kind": "Mesh",
                       "origin": "elsewhere"}])
