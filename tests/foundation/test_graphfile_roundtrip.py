"""Property tests: any capture written to a .tvg file reads back identical."""

from __future__ import annotations

import functools
import string
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from capture.graph import file_decode, graphfile
from capture.graph.model import (
    Capture, Coverage, Failure, Frame, Group, Node, NodeCosts, Operand, Source, Value, to_json,
)

names = st.text(alphabet=string.ascii_letters + string.digits + "_./:-é中", min_size=0, max_size=12)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False), names,
)
plain = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(names, inner, max_size=4)),
    max_leaves=12,
)
dims = st.one_of(st.integers(0, 2**40), st.sampled_from(["batch", "seq", "n"]))


@functools.cache
def trees(n_values: int) -> st.SearchStrategy:
    """Input/output trees over ``n_values`` values. Built once per count: hypothesis
    validates every new strategy, and building these inside each draw cost most of the
    test's time."""
    leaves = [st.builds(lambda s: {"static": s}, scalars)]
    if n_values:
        leaves.append(st.builds(lambda v: {"value": v}, st.integers(0, n_values - 1)))
    return st.recursive(
        st.one_of(*leaves),
        lambda inner: st.one_of(
            st.builds(lambda xs: {"list": xs}, st.lists(inner, max_size=3)),
            st.builds(lambda xs: {"tuple": xs}, st.lists(inner, max_size=3)),
            st.builds(
                lambda kv: {"dict": [[k, t] for k, t in kv]},
                st.lists(st.tuples(st.one_of(names, st.integers(-5, 5)), inner), max_size=3),
            ),
        ),
        max_leaves=8,
    )


# What the composite below draws again and again, built once.
shapes = st.lists(dims, max_size=4)
dtypes = st.sampled_from(["float32", "int8", "bfloat16", "bool"])
measured = st.one_of(st.none(), st.dictionaries(names, plain, max_size=3))
kinds = st.sampled_from(["jit", "remat", "custom_jvp", "scope", "module"])
params = {n: st.dictionaries(names, plain, max_size=n) for n in (2, 3)}
op_names = names.filter(bool)


@st.composite
def captures(draw) -> Capture:
    n_values = draw(st.integers(0, 12))
    values = [
        Value(i, draw(shapes), draw(dtypes), draw(measured))
        for i in range(n_values)
    ]
    n_groups = draw(st.integers(0, 5))
    groups = [
        Group(i, draw(kinds), draw(names),
              draw(st.one_of(st.none(), st.integers(0, i - 1))) if i else None,
              draw(params[2]))
        for i in range(n_groups)
    ]
    frames = [Frame(draw(names), draw(st.integers(0, 10**6)), draw(st.integers(0, 500)), draw(names))
              for _ in range(draw(st.integers(0, 3)))]
    failed = draw(st.booleans()) and draw(st.booleans())
    nodes = []
    if not failed:
        for i in range(draw(st.integers(0, 10))):
            operands = []
            for pos in range(draw(st.integers(0, 4))):
                if n_values and draw(st.booleans()):
                    operands.append(Operand(pos, draw(st.integers(0, n_values - 1))))
                else:
                    operands.append(Operand(pos, None, draw(plain)))
            outs = draw(st.lists(st.integers(0, n_values - 1), max_size=3)) if n_values else []
            nodes.append(Node(
                i, draw(op_names), operands, outs, draw(params[3]),
                draw(st.one_of(st.none(), st.integers(0, n_groups - 1))) if n_groups else None,
                draw(st.one_of(st.none(), st.integers(0, len(frames) - 1))) if frames else None,
                draw(st.booleans()),
            ))
    failure = None
    if failed:
        failure = Failure(draw(names), draw(names), draw(st.sampled_from(["trace", "import", "deadline"])),
                          frames[:], draw(params[2]))
    backend = draw(st.sampled_from(["jaxpr", "torch_eager"]))
    scope = "traced_program" if backend == "jaxpr" else draw(st.sampled_from(["eager_forward", "training_step"]))
    if failed:
        scope = draw(names)
    elif scope == "traced_program":
        for v in values:
            v.measured = None  # a traced program carries no measurements
    cost = None
    if not failed and draw(st.booleans()):  # what each node costs (absent in files written before)
        counts = st.integers(-1, (1 << 63) - 1)
        rules = draw(st.lists(names, min_size=1, max_size=4))
        cost = NodeCosts(
            [draw(counts) for _ in nodes], [draw(counts) for _ in nodes], [draw(counts) for _ in nodes],
            [draw(st.integers(0, len(rules) - 1)) for _ in nodes], rules,
            sorted(draw(st.sets(st.integers(0, len(nodes) - 1), max_size=3))) if nodes else [],
            draw(params[2]))
    meta = draw(params[3])
    if not failed and backend == "jaxpr":  # nor runtime timings
        meta = {k: v for k, v in meta.items() if not file_decode._RUNTIME_TIMING.search(k)}
    return Capture(
        backend=backend,
        framework=draw(st.sampled_from(["jax", "torch"])),
        framework_version=draw(names),
        coverage=Coverage(scope, draw(st.sampled_from(["complete", "partial"])),
                          draw(st.lists(names, max_size=2)), draw(st.sampled_from(["none", "incomplete"]))),
        values=values, nodes=nodes, groups=groups, frames=frames,
        inputs=draw(trees(n_values)), outputs=draw(trees(n_values)),
        sources=[Source(draw(names), "ab" * 32) for _ in range(draw(st.integers(0, 2)))],
        recipe=draw(measured),
        failure=failure,
        meta=meta,
        cost=cost,
    )


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(captures())
def test_roundtrip_bytes(capture: Capture) -> None:
    """Every version the reader reads (it can write each, for an older reader) round-trips.
    Each drawn capture goes through every version: drawing it costs far more than the checks."""
    for version in graphfile.READ_VERSIONS:
        _roundtrips(capture, version)


def _roundtrips(capture: Capture, version: int) -> None:
    encoded = graphfile.encode(capture, version=version)
    decoded = graphfile.decode(encoded)
    assert to_json(decoded) == to_json(capture), version
    # Iterating builds the same rows as indexing, and as the original's.
    assert list(decoded.nodes) == [decoded.nodes[i] for i in range(len(decoded.nodes))] == list(capture.nodes)
    assert list(decoded.values) == [decoded.values[i] for i in range(len(decoded.values))] == list(capture.values)
    # Reading is stable: the decoded capture encodes to the same bytes.
    assert graphfile.encode(decoded, version=version) == encoded, version
    # Rows are fresh objects: changing one changes no other row and not the table.
    for rows in (list(decoded.nodes), list(decoded.values)):
        for row in rows:
            (row.inputs if isinstance(row, Node) else row.shape).append("changed")
    assert to_json(decoded) == to_json(capture), version


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(captures())
def test_roundtrip_file(tmp_path, capture: Capture) -> None:
    path = tmp_path / "g.tvg"
    graphfile.write(capture, path)
    assert to_json(graphfile.read(path)) == to_json(capture)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_never_escape_as_other_errors(data: bytes) -> None:
    try:
        graphfile.decode(data, name="fuzz.tvg")
    except graphfile.GraphFileError as exc:
        text = str(exc)
        assert text.startswith("fuzz.tvg: ") and "\n" not in text


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(captures(), st.data())
def test_mutated_files_are_rejected_cleanly(capture: Capture, data) -> None:
    """A few bytes changed anywhere in a file of each version: a GraphFileError of one line,
    or a capture. One drawn capture serves every version (drawing it is the costly part)."""
    for version in graphfile.READ_VERSIONS:
        raw = bytearray(graphfile.encode(capture, version=version))
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
        try:
            graphfile.decode(bytes(raw), name="m.tvg")
        except graphfile.GraphFileError as exc:
            assert "\n" not in str(exc)


def test_a_version_1_file_written_before_version_2_still_reads():
    """``data/resnet18_linen.v1.tvg`` is the real-model capture of
    ``tests/viewer/real_models`` as the version-1 writer wrote it, before version 2
    existed. It reads whole; writing version 1 today gives the old file byte for byte, and
    the same capture goes through version 2 unchanged."""
    old_path = Path(__file__).resolve().parent / "data" / "resnet18_linen.v1.tvg"
    old_bytes = old_path.read_bytes()
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(old_bytes)
    assert unpacker.unpack()["version"] == 1
    old = graphfile.read(old_path)
    assert len(old.nodes) == 251 and len(old.groups) == 84 and old.backend == "jaxpr"
    assert graphfile.encode(old, version=1) == old_bytes
    assert to_json(graphfile.decode(graphfile.encode(old))) == to_json(old)
