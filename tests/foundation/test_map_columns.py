"""Maps stored as columns (graph files, version 3): what goes in comes back, key order and
value types included; a hostile stored form is refused with the field named."""

from __future__ import annotations

import copy
import json

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capture.graph.map_columns import MapColumns, Slices, pack_maps, unpack_maps
from capture.graph.map_columns import Strings as StringColumn
from capture.graph.packed import Invalid, pack_ints

keys = st.sampled_from(["device", "strides", "bytes", "storage", "stats", "param", "aliases", "x", "min"])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 63), (1 << 64) - 1), st.floats(allow_nan=False),
                    st.text(max_size=4))
values = st.recursive(scalars | st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=4),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
                      max_leaves=8)
maps = st.lists(st.one_of(st.none(), st.dictionaries(keys, values, max_size=6)), max_size=30)


class Strings:
    def __init__(self) -> None:
        self.table: list[str] = []

    def __call__(self, text: str) -> int:
        if text not in self.table:
            self.table.append(text)
        return self.table.index(text)


def through_file(items: list) -> tuple[MapColumns, list[str]]:
    strings = Strings()
    packed = pack_maps(items, strings)
    stored = msgpack.unpackb(msgpack.packb(packed, use_bin_type=True), raw=False)
    return unpack_maps(stored, strings.table, "m", len(items)), strings.table


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(maps)
def test_maps_come_back_equal_in_order_and_type(items):
    back, strings = through_file(items)
    # JSON text: key order and int/float/bool types all show.
    assert json.dumps(back.maps()) == json.dumps(items)
    assert json.dumps([back[i] for i in range(len(items))]) == json.dumps(items)
    assert json.dumps(list(back)) == json.dumps(items)
    assert back.any_present() == any(m is not None for m in items)
    for key in {k for m in items if m for k in m}:
        assert back.values_of(key) == [m.get(key) if m is not None else None for m in items]
    # A decoded column packs again to the same stored form.
    again = Strings()
    again.table = list(strings)
    assert pack_maps(back, again) == pack_maps(items, Strings()) or again.table == strings


def test_each_access_builds_a_fresh_map():
    back, _ = through_file([{"strides": [4, 1], "stats": {"min": 0.5}}])
    first = back[0]
    first["strides"].append(9)
    first["stats"]["min"] = 7.0
    assert back[0] == {"strides": [4, 1], "stats": {"min": 0.5}}


def test_list_columns_are_sliced_when_read():
    """Strides and aliases stay one flat column after reading: an entry is sliced when it is
    read, a fresh list each time, and the column reads like the list of lists it stands for."""
    items = [{"strides": list(range(i)), "stats": {"min": i / 2}} for i in range(6)]
    back, _ = through_file(items)
    (_, (strides, stats)), = back._patterns
    assert isinstance(strides, Slices)
    want = [list(range(i)) for i in range(6)]
    assert len(strides) == 6 and list(strides) == want and strides[-1] == want[-1] and strides[2:4] == want[2:4]
    assert strides[3] is not strides[3]
    with pytest.raises(IndexError):
        strides[6]
    assert back.values_of("strides") == want and json.dumps(back.maps()) == json.dumps(items)
    assert [back[i]["stats"]["min"] for i in range(6)] == [i / 2 for i in range(6)]


def test_string_and_integer_columns_are_read_when_asked():
    """A string column stays indices into the string table, an integer column the checked
    packed array: each entry is the string (or None) or the integer when read."""
    items = [{"device": None if i == 2 else f"cuda:{i % 2}", "bytes": (1 << 63) + i} for i in range(5)]
    back, _ = through_file(items)
    (_, (device, size)), = back._patterns
    assert isinstance(device, StringColumn) and list(device) == [m["device"] for m in items]
    assert device[-1] == "cuda:0" and device[1:3] == ["cuda:1", None] and len(device) == 5
    assert [type(x) for x in size] == [int] * 5 and list(size) == [m["bytes"] for m in items]
    assert back.maps() == items and back.values_of("device") == [m["device"] for m in items]


def test_measured_like_columns_are_typed():
    items = [{"device": "cpu", "strides": [8, 1], "bytes": 64, "storage": i, "stats": {"min": 0.0, "nan": 0}}
             for i in range(5)] + [None]
    packed = pack_maps(items, Strings())
    (pattern,) = packed["patterns"]
    assert [c[0] for c in pattern[1]] == ["s", "l", "i", "i", "m"]


def _good() -> tuple[dict, list[str]]:
    strings = Strings()
    items = [{"device": "cpu", "strides": [8, 1], "stats": {"min": 0.5, "nan": 0}, "param": "w"},
             {"device": "cpu", "strides": [1], "stats": {"min": 1.5, "nan": 2}}, None]
    packed = pack_maps(items, strings)
    return msgpack.unpackb(msgpack.packb(packed, use_bin_type=True), raw=False), strings.table


def _set(path, value):
    def change(obj):
        *head, last = path
        for k in head:
            obj = obj[k]
        obj[last] = value
    return change


@pytest.mark.parametrize("change, expected", [
    pytest.param(_set(["n"], -1), "m.n: expected a count", id="count"),
    pytest.param(_set(["n"], 4), "m.n: expected 3 entries, found 4", id="count-mismatch"),
    pytest.param(_set(["order"], pack_ints([1, 2, 7])), "m.order[2]: 7 is out of range", id="order-range"),
    pytest.param(_set(["order"], [1, 2, 0]), "m.order: expected a packed integer column", id="order-list"),
    pytest.param(_set(["patterns", 0, 0], ["device", "device", "a", "b"]), "expected distinct string keys",
                 id="repeated-key"),
    pytest.param(_set(["patterns", 0, 1, 0], ["q", b"B\x00"]), "m.device: unknown column 'q'", id="column-kind"),
    pytest.param(_set(["patterns", 0, 1, 0, 1], pack_ints([5])), "m.device[0]: 5 is out of range",
                 id="string-index"),
    pytest.param(_set(["patterns", 0, 1, 0, 1], pack_ints([0, 0])), "m.device: expected 1 entries, found 2",
                 id="column-length"),
    pytest.param(_set(["patterns", 0, 1, 1, 1], pack_ints([1, 0])), "m.strides.offsets: must start at 0 and not "
                 "decrease", id="offsets"),
    pytest.param(_set(["patterns", 0, 1, 2, 1, "n"], 5), "m.stats.n: expected 1 entries, found 5", id="nested-count"),
    pytest.param(_set(["patterns", 0, 1], []), "m.patterns[0].columns: expected 4 columns", id="missing-columns"),
    pytest.param(_set(["patterns", 0, 1, 3], ["r", ["w", "x"]]), "m.param: expected 1 values", id="raw-length"),
])
def test_hostile_columns_are_refused(change, expected):
    good, strings = _good()
    assert unpack_maps(copy.deepcopy(good), strings, "m", 3).maps()[0]["param"] == "w"
    bad = copy.deepcopy(good)
    change(bad)
    with pytest.raises(Invalid) as info:
        unpack_maps(bad, strings, "m", 3)
    assert expected in str(info.value)


def test_maps_nested_too_deeply_are_refused():
    strings = Strings()
    inner: dict = {"a": 1}
    for _ in range(8):
        inner = {"a": inner}
    packed = pack_maps([inner], strings)  # stored plainly below the nesting bound
    assert unpack_maps(msgpack.unpackb(msgpack.packb(packed), raw=False), strings.table, "m", 1)[0] == inner
    forged = {"n": 1, "order": pack_ints([1]), "patterns": [[["a"], [["m", packed]]]]}
    for _ in range(5):
        forged = {"n": 1, "order": pack_ints([1]), "patterns": [[["a"], [["m", forged]]]]}
    with pytest.raises(Invalid, match="maps nested too deeply"):
        unpack_maps(forged, strings.table, "m", 1)


def test_entries_ranked_one_by_one_then_all_at_once_read_the_same_maps():
    # the first ONE_BY_ONE_RANKS entries asked for are ranked on their own (a C-level
    # count), the later ones from every entry's rank made at once: the same maps either way
    import random

    from capture.graph.map_columns import ONE_BY_ONE_RANKS

    rng = random.Random(7)
    for _ in range(100):
        n, p = rng.randint(1, 3 * ONE_BY_ONE_RANKS), rng.randint(1, 4)
        order = [rng.randint(0, p) for _ in range(n)]
        patterns = [(("k",), [[(k, j) for j in range(order.count(k + 1))]]) for k in range(p)]
        lazy, ranked = MapColumns(n, order, patterns), MapColumns(n, order, patterns)
        ranked._ranks()
        asked = rng.sample(range(n), n)
        assert [lazy[i] for i in asked] == [ranked[i] for i in asked]
        maps = sum(1 for k in order if k)
        assert (lazy._rank is not None) == (maps > ONE_BY_ONE_RANKS)
