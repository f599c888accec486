"""Hostile and broken graph files: each rejected with one clear line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tracemalloc
from array import array
from pathlib import Path

import msgpack
import pytest

from capture.graph import atomic, file_budgets, graphfile, packed
from capture.graph.map_columns import pack_maps, unpack_maps
from capture.graph.model import FORMAT_NAME, Capture, Coverage, Failure, Node, NodeCosts, Operand, Value
from synthetic import synthetic_capture


@pytest.fixture(scope="module", params=[1, 2, 3], ids=["v1", "v2", "v3"])
def version(request) -> int:
    """Every file version the reader reads: 1 (integer columns as lists), 2 (packed), 3
    (measured maps and groups in columns)."""
    return request.param


def for_version(expected, version: int) -> str:
    """The expected text: one for every version, or by version (the newest at or below)."""
    if not isinstance(expected, dict):
        return expected
    return expected[max(v for v in expected if v <= version)]


@pytest.fixture(scope="module")
def good_bytes(version) -> bytes:
    capture = synthetic_capture(300, opaque_every=40)
    n = len(capture.nodes)
    capture.cost = NodeCosts([2 * i for i in range(n)], [8] * n, [4] * n, [i % 2 for i in range(n)],
                             ["pointwise", "view"], [5, 9], {"flops": "a multiply-add counts 2"})
    return graphfile.encode(capture, version=version)


def _header(version=1, fmt=FORMAT_NAME) -> bytes:
    return msgpack.packb({"format": fmt, "version": version, "counts": {}})


def _reject(data: bytes, expected: str) -> str:
    with pytest.raises(graphfile.GraphFileError) as info:
        graphfile.decode(data, name="bad.tvg")
    text = str(info.value)
    assert text.startswith("bad.tvg: ")
    assert "\n" not in text
    assert expected in text, text
    return text


def test_truncated_body(good_bytes):
    _reject(good_bytes[: len(good_bytes) // 2], "truncated")


def test_truncated_header(good_bytes):
    _reject(good_bytes[:5], "truncated")


def test_empty():
    _reject(b"", "empty file")


@pytest.mark.parametrize("data", [
    pytest.param(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, id="png"),
    pytest.param(b'{"format": "tensorviz-graph"}', id="json-text"),
    pytest.param(msgpack.packb([1, 2, 3]), id="msgpack-list"),
    pytest.param(msgpack.packb({"format": "other", "version": 1}), id="other-format"),
    pytest.param(bytes(range(256)) * 4, id="random-ish"),
])
def test_not_a_graph(data):
    _reject(data, "not a TensorViz graph file")


def test_newer_version(good_bytes):
    _reject(_header(version=99) + b"\x80", "version 99 is newer than this TensorViz reads (versions 1, 2, 3)")


def test_older_version():
    _reject(_header(version=0) + b"\x80", "version 0 is older")


def test_version_not_int():
    _reject(_header(version="1"), "no integer version")


def test_oversized_file(tmp_path, good_bytes):
    path = tmp_path / "big.tvg"
    path.write_bytes(good_bytes)
    with pytest.raises(graphfile.GraphFileError) as info:
        graphfile.read(path, max_bytes=1000)
    assert "over the 1,000-byte limit" in str(info.value)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(("body", "expected"), [
    pytest.param(b"\xdd\x7f\xff\xff\xff", "corrupt graph body", id="array32"),
    pytest.param(b"\xdf\x7f\xff\xff\xff", "corrupt graph body", id="map32"),
    pytest.param(b"\xdb\x7f\xff\xff\xff", "truncated", id="str32"),
    pytest.param(b"\xc6\x7f\xff\xff\xff", "truncated", id="bin32"),
    pytest.param(b"\x91" * 10 + b"\xdd\x7f\xff\xff\xff", "corrupt graph body", id="nested-array32"),
])
@pytest.mark.parametrize("file_version", [1, 2, 3])
def test_huge_declared_container_is_bounded(body, expected, file_version):
    """A container header claiming 2**31 entries in a tiny file must not allocate for
    them: the decoder's peak (Python and msgpack's C allocations alike) stays small.
    For scale, msgpack building a list of 2**20 Nones takes about 8 MB. Version 2 files
    may hold binary blobs (packed columns); a claimed 2 GiB one is bounded all the same."""
    data = _header(file_version) + body
    tracemalloc.start()
    try:
        _reject(data, expected)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, f"decoding {len(data)} bytes peaked at {peak:,} bytes"


def test_trailing_data(good_bytes):
    _reject(good_bytes + msgpack.packb(1), "trailing")


def test_ext_types_refused():
    body = {"strings": msgpack.ExtType(1, b"x")}
    _reject(_header() + msgpack.packb(body), "corrupt graph body")


def _deep(levels: int) -> list:
    x: list = []
    for _ in range(levels):
        x = [x]
    return x


def _unpacked(column: bytes) -> list:
    """A version-2 packed integer column's entries (a type code byte, then little-endian)."""
    entries = array(packed.ARRAY_CODE[chr(column[0])])
    entries.frombytes(column[1:])
    if packed.BIG_ENDIAN:
        entries.byteswap()
    return entries.tolist()


def _repacked(col: list):
    """A mutated column packed again, or left a list when it holds what no packed column
    can (the version-2 reader refuses that list)."""
    if all(type(x) is int for x in col) and all(-(1 << 63) <= x < 1 << 64 for x in col):
        return packed.pack_ints(col)
    return col


_PACKED = {"values": ("shape_offsets", "shape_dims", "dtype"),
           "nodes": ("op", "input_offsets", "input_positions", "input_refs", "output_offsets", "output_ids",
                     "param_nodes", "param_index", "group", "frame", "opaque"),
           "cost": ("flops", "bytes_read", "bytes_written", "rule", "estimates")}


def _body_mutation(good: bytes, mutate) -> bytes:
    """``good`` with its body changed by ``mutate``, which sees the body as version 1 lays
    it out (integer columns as lists, one params map per node with params, the groups as
    lists, one measured map per value). A version-2 or 3 body is unpacked for it and
    packed again after."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(good)
    header, body = unpacker.unpack(), unpacker.unpack()
    if header["version"] >= 3:
        _rows_of_map_columns(body)
    if header["version"] >= 2:
        _unpack_columns(body)
    mutate(body)
    if header["version"] >= 2:
        _pack_columns(body)
    if header["version"] >= 3:
        _map_columns_of_rows(body)
    return msgpack.packb(header) + msgpack.packb(body)


def _rows_of_map_columns(body) -> None:
    """Version 3's groups and measured maps as version 2 lays them out."""
    strings = body["strings"]
    g = body["groups"]
    attrs = unpack_maps(g["attrs"], strings, "groups.attrs").maps()
    body["groups"] = [[strings[k], strings[n], p, a] for k, n, p, a in zip(
        _unpacked(g["kind"]), _unpacked(g["name"]), _unpacked(g["parent"]), attrs)]
    if body["values"]["measured"] is not None:
        body["values"]["measured"] = unpack_maps(body["values"]["measured"], strings, "values.measured").maps()


def _map_columns_of_rows(body) -> None:
    """The groups and measured maps as version 3 stores them (after a mutation)."""
    strings = body["strings"]

    def string(text):
        if text not in strings:
            strings.append(text)
        return strings.index(text)

    groups = body["groups"]
    body["groups"] = {"kind": _repacked([string(x[0]) for x in groups]),
                      "name": _repacked([string(x[1]) for x in groups]),
                      "parent": _repacked([x[2] for x in groups]),
                      "attrs": pack_maps([x[3] for x in groups], string)}
    if isinstance(body["values"]["measured"], list):
        body["values"]["measured"] = pack_maps(body["values"]["measured"], string)


def _unpack_columns(body) -> None:
    """Version 2's packed integer columns as lists, its params as one map per node."""
    for table, columns in _PACKED.items():
        for name in columns:
            if type(body.get(table, {}).get(name)) is bytes:
                body[table][name] = _unpacked(body[table][name])
    nodes = body["nodes"]
    nodes["param_maps"] = [nodes["param_table"][k] for k in nodes.pop("param_index")]
    del nodes["param_table"]


def _pack_columns(body) -> None:
    """The integer columns packed again, the params through a table of distinct maps."""
    nodes = body["nodes"]
    nodes["param_table"] = table = []
    nodes["param_index"] = index = []
    for pm in nodes.pop("param_maps"):
        if pm not in table:
            table.append(pm)
        index.append(table.index(pm))
    for name, columns in _PACKED.items():
        for column in columns:
            if type(body.get(name)) is dict and column in body[name]:
                body[name][column] = _repacked(body[name][column])


@pytest.mark.parametrize("mutate, expected", [
    pytest.param(lambda b: b["nodes"]["output_ids"].__setitem__(0, 10**9), "nodes.output_ids[0]", id="value-ref-out-of-range"),
    pytest.param(lambda b: b["nodes"]["input_refs"].__setitem__(0, "x"),
                 {1: "nodes.input_refs[0]: expected an integer", 2: "nodes.input_refs: expected a packed integer column"},
                 id="operand-type"),
    pytest.param(lambda b: b["nodes"]["input_refs"].__setitem__(0, True),
                 {1: "nodes.input_refs[0]: expected an integer", 2: "nodes.input_refs: expected a packed integer column"},
                 id="operand-bool"),
    pytest.param(lambda b: b["nodes"]["input_refs"].__setitem__(0, 1.0),
                 {1: "nodes.input_refs[0]: expected an integer", 2: "nodes.input_refs: expected a packed integer column"},
                 id="operand-float"),
    pytest.param(lambda b: b["nodes"]["input_refs"].__setitem__(0, -10**6), "nodes.input_refs[0]: -1000000 is out of range",
                 id="operand-literal-ref-out-of-range"),
    pytest.param(lambda b: b["nodes"]["group"].__setitem__(5, -2), "nodes.group[5]: -2 is out of range", id="group-below-none"),
    pytest.param(lambda b: b["nodes"]["frame"].__setitem__(7, 10**4), "nodes.frame[7]: 10000 is out of range", id="frame-ref"),
    pytest.param(lambda b: b["values"]["dtype"].__setitem__(1, 999), "values.dtype[1]: 999 is out of range", id="dtype-string-index"),
    pytest.param(lambda b: b["nodes"]["input_positions"].__setitem__(2, 1 << 40), "nodes.input_positions[2]",
                 id="operand-position"),
    pytest.param(lambda b: b["nodes"]["opaque"].__setitem__(0, 10**6), "nodes.opaque[0]", id="opaque-node-ref"),
    pytest.param(lambda b: b["nodes"]["param_nodes"].__setitem__(0, 10**6), "nodes.param_nodes[0]", id="params-node-ref"),
    pytest.param(lambda b: b["nodes"]["input_offsets"].__setitem__(0, 1), "nodes.input_offsets: must start at 0",
                 id="offsets-start"),
    pytest.param(lambda b: b["nodes"]["op"].__setitem__(3, 10**6), "nodes.op[3]", id="op-string-index"),
    # one byte per entry in a packed column (its bytes are checked at once): still each entry
    pytest.param(lambda b: b["nodes"]["op"].__setitem__(7, 200), "nodes.op[7]: 200 is out of range",
                 id="op-string-index-one-byte"),
    pytest.param(lambda b: b["nodes"]["group"].__setitem__(9, 120), "nodes.group[9]: 120 is out of range",
                 id="group-one-byte"),
    pytest.param(lambda b: b["nodes"]["group"].pop(), "nodes.group", id="column-length"),
    pytest.param(lambda b: b["values"]["shape_offsets"].__setitem__(2, 0), "offsets must not decrease", id="offsets-decrease"),
    pytest.param(lambda b: b["values"]["shape_dims"].__setitem__(0, -4), "dimensions are sizes or names", id="negative-dim"),
    pytest.param(lambda b: b["groups"][1].__setitem__(2, 1), "groups[1].parent", id="group-self-parent"),
    pytest.param(lambda b: b.__setitem__("coverage", ["x", "sometimes", [], "none"]), "coverage.status", id="coverage-status"),
    pytest.param(lambda b: b.__setitem__("outputs", {"value": 10**9}), "outputs", id="tree-ref"),
    pytest.param(lambda b: b.__setitem__("inputs", {"set": []}), "unknown structure kind", id="tree-kind"),
    pytest.param(lambda b: b.__setitem__("backend", 7), "backend: expected a string", id="backend-type"),
    pytest.param(lambda b: b.__setitem__("strings", [1]), "strings", id="string-table"),
    pytest.param(lambda b: b.__setitem__("frames", [[0, 1, 2]]), "frames[0]", id="frame-arity"),
    pytest.param(lambda b: b["nodes"].__setitem__("param_maps", [1] * len(b["nodes"]["param_maps"])),
                 {1: "nodes.param_maps: expected maps", 2: "nodes.param_table: expected maps"}, id="params-not-map"),
    # Every nested field is bounded: a reader (inspect --json, the viewer) recurses.
    pytest.param(lambda b: b["nodes"]["param_maps"].__setitem__(0, {"p": _deep(200)}),
                 {1: "nodes.param_maps[0]: nested too deeply", 2: "nodes.param_table[0]: nested too deeply"},
                 id="params-deep"),
    pytest.param(lambda b: b["nodes"]["param_maps"].__setitem__(-1, {"p": _deep(64)}),
                 {1: "nodes.param_maps[", 2: "nodes.param_table["}, id="params-just-too-deep"),
    pytest.param(lambda b: b.__setitem__("literals", [_deep(200)]), "literals: nested too deeply", id="literal-deep"),
    # what each node costs: every column as long as the nodes, every figure -1 (uncounted) or a count
    pytest.param(lambda b: b["cost"]["flops"].pop(), "cost.flops", id="cost-column-length"),
    pytest.param(lambda b: b["cost"]["flops"].__setitem__(0, -2), "cost.flops[0]: -2 is out of range",
                 id="cost-negative-flops"),
    pytest.param(lambda b: b["cost"]["bytes_read"].__setitem__(1, "x"),
                 {1: "cost.bytes_read[1]: expected an integer", 2: "cost.bytes_read: expected a packed integer column"},
                 id="cost-bytes-type"),
    pytest.param(lambda b: b["cost"]["rule"].__setitem__(2, 99), "cost.rule[2]: 99 is out of range", id="cost-rule-ref"),
    pytest.param(lambda b: b["cost"].__setitem__("rules", [1]), "cost.rules: expected a list of strings", id="cost-rules"),
    pytest.param(lambda b: b["cost"].__setitem__("estimates", [3, 3]), "cost.estimates: node ids must be sorted",
                 id="cost-estimates-twice"),
    pytest.param(lambda b: b["cost"].__setitem__("estimates", [10**6]), "cost.estimates[0]", id="cost-estimate-ref"),
    pytest.param(lambda b: b["cost"].__setitem__("notes", {"n": _deep(200)}), "cost.notes", id="cost-notes-deep"),
    pytest.param(lambda b: b.__setitem__("cost", []), "cost: expected a map", id="cost-not-a-map"),
])
def test_field_validation(good_bytes, version, mutate, expected):
    _reject(_body_mutation(good_bytes, mutate), for_version(expected, version))


@pytest.mark.parametrize("mutate, expected", [
    pytest.param(lambda b: b["coverage"].__setitem__(0, "eager_forward"), "does not match backend 'jaxpr'",
                 id="traced-program-claims-eager-scope"),
    pytest.param(lambda b: b["values"].__setitem__("measured", [{"stats": {"min": 0}}] * len(b["values"]["dtype"])),
                 "carries no measured evidence", id="traced-program-with-measurements"),
])
def test_traced_program_and_eager_evidence_stay_distinct(good_bytes, mutate, expected):
    """Spec: a Jaxpr capture cannot carry runtime evidence or claim PyTorch execution
    coverage, and portable graph files retain this distinction."""
    _reject(_body_mutation(good_bytes, mutate), expected)


def test_group_cycle(good_bytes):
    def mutate(b):
        b["groups"][0][2] = 2  # 0 -> 2 -> 1 -> 0
    _reject(_body_mutation(good_bytes, mutate), "cycle")


def _ordered_groups_capture():
    from capture.graph.model import Capture, Coverage, Group

    groups = [Group(i, "module", f"g{i}", None if i == 0 else 0, {"class": "C"}) for i in range(5)]
    return Capture(backend="torch", framework="torch", framework_version="2", groups=groups,
                   coverage=Coverage("eager_forward", "complete", [], "none"))


def test_groups_listed_before_their_parent_are_checked_for_cycles():
    """Parents listed first (as writers list them) need no cycle check; any other order is
    checked: a child before its parent reads, a cycle is refused with the group named."""
    cap = _ordered_groups_capture()
    cap.groups[1].parent, cap.groups[3].parent = 3, None  # group 1 under group 3, listed first
    assert [g.parent for g in graphfile.decode(graphfile.encode(cap)).groups] == [g.parent for g in cap.groups]
    cap.groups[3].parent = 1  # 1 -> 3 -> 1
    with pytest.raises(graphfile.GraphFileError, match=r"groups\[\d\]\.parent: groups form a cycle"):
        graphfile.decode(graphfile.encode(cap))


def test_failed_capture_with_nodes_is_invalid():
    cap = Capture.failed_capture(Failure("RuntimeError", "boom"))
    cap.values = [Value(0, [1], "float32")]
    cap.nodes = [Node(0, "add", [Operand(0, 0)], [0])]
    _reject(graphfile.encode(cap), "a failed capture carries no nodes")


def test_non_dense_ids_refused_on_write(tmp_path):
    cap = Capture("jaxpr", "jax", "0", Coverage("traced_program"), values=[Value(5, [], "float32")])
    with pytest.raises(graphfile.GraphFileError) as info:
        graphfile.write(cap, tmp_path / "x.tvg")
    assert "ids must be dense" in str(info.value)
    assert not (tmp_path / "x.tvg").exists()


def test_failed_write_leaves_old_file(tmp_path, monkeypatch):
    path = tmp_path / "g.tvg"
    graphfile.write(synthetic_capture(10), path)
    before = path.read_bytes()

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", boom)
    with pytest.raises(graphfile.GraphFileError) as info:
        graphfile.write(synthetic_capture(20), path)
    assert "No space left" in str(info.value)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["g.tvg"]  # no temp file left behind


def test_unserialisable_param_is_a_clear_write_error(tmp_path):
    cap = synthetic_capture(3)
    cap.nodes[0].params = {"fn": object()}
    with pytest.raises(graphfile.GraphFileError) as info:
        graphfile.write(cap, tmp_path / "x.tvg")
    assert "cannot store" in str(info.value)


def test_lazy_tables_behave_like_sequences(good_bytes):
    cap = graphfile.decode(good_bytes)
    original = synthetic_capture(300, opaque_every=40)
    assert len(cap.nodes) == 300
    assert cap.nodes[-1] == original.nodes[-1]
    assert cap.nodes[10:12] == original.nodes[10:12]
    assert cap.values[3] == original.values[3]
    with pytest.raises(IndexError):
        cap.nodes[300]


@pytest.mark.parametrize("file_version, where", [(1, "values.measured[0]"), (2, "values.measured[0]"),
                                                 (3, "values.measured.stats[0]")])
def test_deeply_nested_measured_evidence_is_refused(file_version, where):
    cap = synthetic_capture(20)
    cap.backend = "torch_eager"
    cap.coverage.scope = "eager_forward"
    cap.values[0].measured = {"stats": {"min": 0.0}}
    good = graphfile.encode(cap, version=file_version)

    def mutate(b):
        b["values"]["measured"][0] = {"stats": _deep(200)}

    _reject(_body_mutation(good, mutate), f"{where}: nested too deeply")


def test_a_fifo_or_a_device_named_as_a_graph_file_is_refused_without_blocking(tmp_path):
    import os

    fifo = tmp_path / "pipe.tvg"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero"):
        with pytest.raises(graphfile.GraphFileError) as info:
            graphfile.read(path)
        assert "is not a regular file" in str(info.value)
    with pytest.raises(graphfile.GraphFileError) as info:
        graphfile.read(tmp_path)
    assert "is a directory" in str(info.value)


def test_temporaries_left_by_killed_writes_are_removed_by_the_next_write(tmp_path):
    import os
    import time

    path = tmp_path / "recipes.toml"
    stale = tmp_path / ".recipes.toml.0123456789ab.tmp"  # a writer killed an hour ago
    young = tmp_path / ".recipes.toml.ba9876543210.tmp"  # a write running elsewhere now
    other = tmp_path / ".other.toml.0123456789ab.tmp"  # another file's: not ours to judge
    for p in (stale, young, other):
        p.write_text("partial")
    hour_ago = time.time() - 3600
    os.utime(stale, (hour_ago, hour_ago))
    os.utime(other, (hour_ago, hour_ago))
    atomic.atomic_write(path, b"version = 1\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, young.name, other.name])


def test_overwriting_keeps_the_existing_files_mode(tmp_path):
    import os
    import stat

    path = tmp_path / "g.tvg"
    graphfile.write(synthetic_capture(10), path)
    os.chmod(path, 0o640)
    graphfile.write(synthetic_capture(12), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def _empty_lists_bomb(n: int, nodes: int) -> bytes:
    header = msgpack.packb({"format": FORMAT_NAME, "version": 1, "counts": {"nodes": nodes, "values": nodes}})
    return header + b"\x81" + msgpack.packb("literals") + b"\xdd" + n.to_bytes(4, "big") + b"\x90" * n


# A header that declares a small graph bounds the body by its counts; one that claims a
# billion nodes lifts nothing: the body's own bytes bound it (issue 39 item 3).
EMPTY_LISTS_REFUSAL = {10: "lists and maps, more than a graph of the size its header declares can",
                       10**9: "more than 10x the body's"}


@pytest.mark.parametrize("declared", [10, 10**9], ids=["honest-small-header", "header-claims-a-billion-nodes"])
def test_a_file_of_empty_lists_is_refused_with_memory_bounded_by_its_size(declared):
    data = _empty_lists_bomb(4_000_000, declared)  # 4 MB; each empty list is 64 bytes decoded
    tracemalloc.start()
    try:
        _reject(data, EMPTY_LISTS_REFUSAL[declared])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Unbounded, this decodes to about 75x the file (300 MB); with the budget it stays
    # within the copy of the bytes plus a quarter of them as containers.
    assert peak < 20 * len(data), f"peak {peak:,} bytes for a {len(data):,}-byte file"


@pytest.mark.parametrize("declared", [10, 10**9], ids=["honest-small-header", "header-claims-a-billion-nodes"])
def test_a_version_2_file_of_empty_lists_is_refused_the_same(declared):
    """Version 2 may hold binary blobs, but its lists and maps have the same budget."""
    data = _empty_lists_bomb(4_000_000, declared)
    data = data.replace(b"\xa7version\x01", b"\xa7version\x02", 1)
    assert b"\xa7version\x02" in data
    tracemalloc.start()
    try:
        _reject(data, EMPTY_LISTS_REFUSAL[declared])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * len(data), f"peak {peak:,} bytes for a {len(data):,}-byte file"


def _v2_file(**changes) -> bytes:
    """A valid version-2 file of a 40-node capture, with ``changes`` made to its nodes' columns."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(graphfile.encode(synthetic_capture(40, opaque_every=9), version=2))
    header, body = unpacker.unpack(), unpacker.unpack()
    assert header["version"] == 2
    body["nodes"].update(changes)
    return msgpack.packb(header, use_bin_type=True) + msgpack.packb(body, use_bin_type=True)


def _v2_nodes() -> dict:
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(graphfile.encode(synthetic_capture(40, opaque_every=9), version=2))
    unpacker.unpack()
    return unpacker.unpack()["nodes"]


def test_the_version_2_fixture_is_valid_and_packed():
    nodes = _v2_nodes()
    assert type(nodes["op"]) is bytes and len(nodes["op"]) == 41 and len(nodes["param_table"]) < len(
        _unpacked(nodes["param_nodes"]))
    assert len(graphfile.decode(_v2_file()).nodes) == 40


@pytest.mark.parametrize("changes, expected", [
    pytest.param({"op": b"x" + bytes(40)}, "nodes.op: unknown packed integer type 'x'", id="unknown-type-code"),
    pytest.param({"op": b""}, "nodes.op: expected a packed integer column", id="empty-blob"),
    pytest.param({"op": list(range(40))}, "nodes.op: expected a packed integer column", id="a-list-column"),
    pytest.param({"group": b"H" + bytes(81)}, "nodes.group: 81 bytes are not a whole number of 2-byte entries",
                 id="ragged-entries"),
    pytest.param({"group": b"B" + bytes(39)}, "nodes.group: expected 40 entries, found 39", id="short-column"),
    pytest.param({"frame": b"q" + (-(1 << 62)).to_bytes(8, "little", signed=True) + bytes(8 * 39)},
                 f"nodes.frame[0]: {-(1 << 62)} is out of range", id="wide-signed-entry"),
    pytest.param({"output_offsets": b"B" + bytes(41)}, "nodes.output_ids: expected 0 entries",
                 id="offsets-and-column-disagree"),
    pytest.param({"param_index": "out-of-range"}, "is out of range", id="param-index-out-of-range"),
    pytest.param({"param_index": [0]}, "nodes.param_index: expected a packed integer column", id="param-index-a-list"),
    pytest.param({"param_table": None}, "nodes.param_table: expected a list", id="no-param-table"),
])
def test_version_2_packed_columns(changes, expected):
    if changes.get("param_index") == "out-of-range":
        n = len(_unpacked(_v2_nodes()["param_nodes"]))
        changes["param_index"] = b"B" + bytes([200]) * n
    _reject(_v2_file(**changes), expected)


def test_a_version_1_file_holds_no_binary_blobs():
    """Packed columns belong to version 2: in a file that says version 1 they are corrupt."""
    good = graphfile.encode(synthetic_capture(40), version=2)
    assert b"\xa7version\x02" in good
    _reject(good.replace(b"\xa7version\x02", b"\xa7version\x01", 1), "corrupt graph body")


def test_nesting_exactly_at_the_bound_is_accepted(version):
    """The nesting bound did not move: 64 levels of containers pass, 65 are refused."""
    cap = synthetic_capture(20)
    cap.nodes[3].params = {"p": _deep(62)}  # the map, then 63 lists: 64 levels
    decoded = graphfile.decode(graphfile.encode(cap, version=version))
    assert decoded.nodes[3].params == {"p": _deep(62)}
    cap.nodes[3].params = {"p": _deep(63)}
    _reject(graphfile.encode(cap, version=version), "nested too deeply")


def test_packed_columns_are_little_endian_with_the_narrowest_type():
    assert packed.pack_ints([1, 256]) == b"H\x01\x00\x00\x01"
    assert packed.pack_ints([]) == b"B"
    assert packed.pack_ints([-1, 5]) == b"b\xff\x05"
    assert packed.pack_ints([1 << 40]) == b"Q" + (1 << 40).to_bytes(8, "little")
    assert packed.pack_ints([-(1 << 40)]) == b"q" + (-(1 << 40)).to_bytes(8, "little", signed=True)
    with pytest.raises(ValueError, match="cannot store"):
        packed.pack_ints([1 << 64])


@pytest.mark.slow
def test_a_refused_packed_column_never_becomes_a_list():
    """A packed column is range-checked as packed bytes: 1M two-byte entries of 300 (the
    list of them would take about 36 MB, 18 times the file) are refused at a few times
    the file's size."""
    body = {"strings": ["a"], "coverage": ["traced_program", "complete", [], "none"],
            "values": {"dtype": b"B", "shape_offsets": b"B\x00", "shape_dims": b"B"},
            "groups": [], "frames": [], "nodes": {"op": b"H" + (300).to_bytes(2, "little") * 1_000_000}}
    data = _header(2) + msgpack.packb(body, use_bin_type=True)
    tracemalloc.start()
    try:
        _reject(data, "nodes.op[0]: 300 is out of range")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 6 * len(data), f"peak {peak:,} bytes for a {len(data):,}-byte file"


def _scalars_bomb(version: int, meta: object, nodes: int = 10) -> bytes:
    """A graph file of a small graph (as its header says) whose ``meta`` holds ``meta``."""
    header = msgpack.packb({"format": FORMAT_NAME, "version": version, "counts": {"nodes": nodes, "values": nodes}})
    return header + msgpack.packb({"meta": meta})


def _short_strings(n: int) -> list[str]:
    return [f"{i % 60000:x}"[-3:].rjust(2, "s") for i in range(n)]  # 2-3 characters: not interned


# Issue 29 item 8: 13 M short strings in a 37 MB file's meta peaked at 28x the file.
SCALAR_BOMBS = [
    pytest.param(lambda n: _short_strings(n), id="one-list-of-strings"),
    pytest.param(lambda n: [_short_strings(200) for _ in range(n // 200)], id="many-small-lists-of-strings"),
    pytest.param(lambda n: {s + str(i): 1.5 for i, s in enumerate(_short_strings(n // 2))}, id="a-map-of-strings-to-floats"),
    pytest.param(lambda n: [[i * 1000 + 70000, 0.25] for i in range(n // 2)], id="pairs-of-numbers"),
]


@pytest.mark.slow
@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("make", SCALAR_BOMBS)
def test_strings_and_numbers_count_in_the_decode_budget(version, make):
    data = _scalars_bomb(version, make(1_000_000))
    tracemalloc.start()
    try:
        _reject(data, "strings, numbers, lists and maps, more than a graph of the size its header declares can")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Unbounded, each short string costs about 56 bytes decoded (28x a 2-byte element).
    assert peak < 6 * len(data), f"peak {peak:,} bytes for a {len(data):,}-byte file"


@pytest.mark.parametrize("version", [1, 2, 3])
def test_real_sized_meta_stays_within_the_budget(version):
    cap = synthetic_capture(2000)
    cap.meta["notes"] = {f"layer{i}": {"kind": "dense", "shape": [64, 64], "scale": 0.5} for i in range(300)}
    back = graphfile.decode(graphfile.encode(cap, version=version), name="ok.tvg")
    assert back.meta["notes"]["layer299"]["shape"] == [64, 64]


# ---------------------------------------------------------------- a header that lies (issue 39 item 3)

_LETTERS = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"


def _runs(items: list[bytes], per_list: int = 4096) -> list[bytes]:
    """``items`` (msgpack-encoded elements) cut into lists of ``per_list``: lists no
    longer than a reader allows, so that only what they hold in all can refuse them."""
    out = []
    for i in range(0, len(items), per_list):
        run = items[i:i + per_list]
        out.append(b"\xdc" + len(run).to_bytes(2, "big") + b"".join(run))
    return out


def _two_letters(n):
    return [b"\xa2" + bytes([_LETTERS[i % 64], _LETTERS[(i // 64) % 64]]) for i in range(n)]


# Each shape takes many times its bytes in memory once decoded (13-64x, measured).
LYING_SHAPES = {
    "short strings": lambda n: _runs(_two_letters(n)),
    "one-character strings outside Latin-1": lambda n: _runs([b"\xa2\xc4\x80"] * n),
    "small negative integers": lambda n: _runs([b"\xd0\x9c"] * n),
    "16-bit integers": lambda n: _runs([b"\xcd\x10\x00"] * n),
    "one-string lists": lambda n: _runs([b"\x91" + s for s in _two_letters(n)]),
    "one-entry maps": lambda n: _runs([b"\x81\xa1a\xc0"] * n),
    "maps with new keys": lambda n: _runs([b"\x81" + k + b"\xc0" for k in _two_letters(n)]),
    "empty lists": lambda n: _runs([b"\x90"] * n),
}


def _lying_file(shape: str, n: int, version: int) -> bytes:
    """A file whose header declares ten million nodes, and whose body is only ``meta``:
    ``n`` elements of ``shape``."""
    header = msgpack.packb({"format": FORMAT_NAME, "version": version,
                            "counts": {"nodes": 10**7, "values": 10**7, "groups": 10**6, "frames": 10**6}})
    runs = LYING_SHAPES[shape](n)
    return header + b"\x81" + msgpack.packb("meta") + b"\xdd" + len(runs).to_bytes(4, "big") + b"".join(runs)


# Measured in a fresh interpreter: the decode's own allocations, not the state earlier
# tests left (msgpack interns map keys, and growing the process's table of interned
# strings, full after a few hundred tests, once overshot the bound by half a megabyte).
_TRACED_DECODE = """
import json, sys, tracemalloc
from capture.graph import graphfile
data = open(sys.argv[1], "rb").read()
tracemalloc.start()
try:
    graphfile.decode(data, name="bad.tvg")
    text = None
except graphfile.GraphFileError as exc:
    text = str(exc)
_, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
print(json.dumps({"text": text, "peak": peak}))
"""


@pytest.mark.slow  # about 1 s each, traced, in a fresh interpreter
@pytest.mark.parametrize("shape", list(LYING_SHAPES))
def test_a_header_that_lies_about_its_counts_lifts_no_budget(shape, version, tmp_path):
    """A 39 MB file declaring 10^7 nodes peaked at 1.08 GB (28x) before its refusal: the
    decode's budget came from the header's counts, capped only by a count of elements
    per byte. It follows what is decoded now: at most 10x the body's bytes, plus one list
    not yet complete."""
    data = _lying_file(shape, 300_000, version)
    path = tmp_path / "lying.tvg"
    path.write_bytes(data)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-c", _TRACED_DECODE, str(path)], capture_output=True, text=True,
                         timeout=120, env=env, cwd=root)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    text, peak = got["text"], got["peak"]
    assert text is not None, f"{shape}: the lying file was decoded"
    assert text.startswith("bad.tvg: ") and "a hostile or corrupt file" in text, text
    assert "10x" in text or "lists and maps" in text, text
    # The budget, overshot by at most the list whose completion went over it.
    bound = file_budgets.MEMORY_PER_BYTE * len(data) + file_budgets.MEMORY_BASE + (2 << 20)
    assert peak <= bound, f"{shape}: peak {peak:,} bytes ({peak / len(data):.1f}x) for a {len(data):,}-byte file"


@pytest.mark.slow
def test_real_graph_files_decode_within_the_budget():
    """What TensorViz writes stays well inside it: every real model capture of the tests
    (both file versions), and a 20,000-node synthetic one with Torch's measured fields."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = sorted((root / "tests" / "viewer" / "real_models" / "captures").glob("*.tvg"))
    files.append(root / "tests" / "foundation" / "data" / "resnet18_linen.v1.tvg")
    datas = [f.read_bytes() for f in files]
    real = graphfile.read(files[0])
    measured = [v.measured for v in real.values if v.measured]
    synthetic = synthetic_capture(20_000, framework="torch")
    for i, v in enumerate(synthetic.values):
        v.measured = dict(measured[i % len(measured)])
    datas += [graphfile.encode(synthetic, version=1), graphfile.encode(synthetic, version=2),
              graphfile.encode(real, version=1)]
    for data in datas:
        head = msgpack.Unpacker()
        head.feed(data)
        head.unpack()
        size = len(data) - head.tell()
        charge = file_budgets._MemoryCharge(1 << 60, 1 << 60, 1 << 60)
        msgpack.unpackb(data[head.tell():], list_hook=charge.list_hook, object_hook=charge.object_hook,
                        strict_map_key=True)
        assert charge.used < 0.95 * file_budgets.memory_budget(size), (charge.used / size)
        graphfile.decode(data)


def test_short_lists_are_charged_in_batches_exactly():
    """Short lists (literal operands) are charged a batch at a time: the same bytes,
    elements and containers as one at a time, and a body whose last short lists go over
    its budget is refused when msgpack is done (the batch not full yet)."""
    lists = [[1, 2.0, "x"][: i % 4] for i in range(10_000)]
    charge = file_budgets._MemoryCharge(1 << 60, 1 << 60, 1 << 60)
    for x in lists:
        charge.list_hook(x)
    one_by_one = sum(64 + 8 * len(x) + sum(file_budgets._ELEMENT_BYTES[type(e)] for e in x) for x in lists)
    assert charge.used == one_by_one and charge._left[0] == (1 << 60) - len(lists)
    tight = file_budgets._MemoryCharge(1 << 60, 1 << 60, 64 * 10)
    for _ in range(11):
        tight.list_hook([])  # under a batch: not charged yet
    with pytest.raises(file_budgets._OverBudget):
        tight.settle()
    data = _header(2) + msgpack.packb({"literals": [[] for _ in range(200_000)]}, use_bin_type=True)
    _reject(data, "more than 10x the body's")


@pytest.mark.parametrize("strings", [
    [f"aten::op_{i}" for i in range(500)],  # ASCII: charged by lengths
    ["", "x" * 3000, "a.b"] * 20,
    [f"op_{i}" for i in range(100)] + ["ü", "名前", "😀"],  # not all ASCII: by getsizeof
])
def test_a_string_column_is_charged_each_strings_size(strings):
    """A long column of strings is charged 64 + 8 per entry, plus each string's own size
    (sys.getsizeof), less the 64 per entry an element estimate would be: the ASCII fast
    path (by lengths) charges exactly that."""
    charge = file_budgets._MemoryCharge(1 << 60, 1 << 60, 1 << 60)
    charge.list_hook(strings)
    expected = 64 + 8 * len(strings) + 80 * len(strings) + sum(map(sys.getsizeof, strings)) - 64 * len(strings)
    assert charge.used == expected


# ---------------------------------------------------------------- killed writes (issue 39 item 6)

_BLOCKED_WRITER = """
import os, sys, time
sys.path[:0] = sys.argv[3:]
from pathlib import Path
from capture.graph import atomic, graphfile
from synthetic import synthetic_capture
data = graphfile.encode(synthetic_capture(int(sys.argv[2])))
real_fsync = os.fsync
def stuck(fd):  # the write has its bytes out and waits: a kill now leaves its temporary
    Path(sys.argv[1] + '.stuck').write_text('')
    time.sleep(120)
os.fsync = stuck
atomic.atomic_write(Path(sys.argv[1]), data)
"""


def _stuck_writer(target, nodes=2000):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", _BLOCKED_WRITER, str(target), str(nodes), str(root),
                             str(root / "tests")], env={**os.environ})
    marker = Path(str(target) + ".stuck")
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the writer never got to its fsync"
        time.sleep(0.02)
    marker.unlink()
    return proc


def _temporaries(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.slow  # real writers, killed
def test_a_killed_writes_temporary_goes_at_the_next_write_and_a_running_ones_stays(tmp_path):
    """Killed .tvg writes left their temporaries for ten minutes (55 files, 130 MB): the
    next write of the same file removes those of writes that were killed, at once, and
    never one a write still under way holds, however old."""
    import os
    import signal

    target = tmp_path / "g.tvg"
    killed = [_stuck_writer(target) for _ in range(3)]
    for proc in killed:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    running = _stuck_writer(target)
    try:
        assert len(_temporaries(tmp_path)) == 4
        time.sleep(atomic.ABANDONED_AFTER_SECONDS)  # the killed ones are a few seconds old, not ten minutes
        graphfile.write(synthetic_capture(10), target)
        (held,) = _temporaries(tmp_path)  # the running write's, only
        old = time.time() - 3600  # age alone decides nothing while a writer holds it
        os.utime(tmp_path / held, (old, old))
        graphfile.write(synthetic_capture(12), target)
        assert _temporaries(tmp_path) == [held]
        assert len(graphfile.read(target).nodes) == 12
    finally:
        running.kill()
        running.wait()
    # Its writer gone too: the next write takes it.
    graphfile.write(synthetic_capture(10), target)
    assert _temporaries(tmp_path) == []
