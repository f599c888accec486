"""A graph file's groups build their attrs when first read (capture/graph/group_table.py):
they read, compare, print, copy and pickle as the groups written, a change to a map is
kept, and one key of every group reads from its column without building the maps."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from capture.graph import graphfile, group_table
from capture.graph.group_table import FileGroup, attr_values
from capture.graph.model import Capture, Coverage, Group


def _capture(n: int) -> Capture:
    groups = [Group(0, "module", "root", None, {"class": "Top", "path": "", "outputs": {"value": 0}})]
    for i in range(1, n):
        attrs = {"class": f"C{i % 3}", "path": f"blocks.{i}", "per_device_memory": {"param_bytes": i}}
        if i % 5 == 0:
            attrs = {"function": "torch.nn.functional.gelu", "frame": i}  # another pattern: no class
        groups.append(Group(i, "module" if "class" in attrs else "function", f"g{i}", 0 if i % 7 else None, attrs))
    groups.append(Group(n, "scope", "empty", None, {}))
    return Capture(backend="torch", framework="torch", framework_version="2", groups=groups,
                   coverage=Coverage("eager_forward", "complete", [], "none"))


def _read(cap: Capture) -> Capture:
    return graphfile.decode(graphfile.encode(cap))


def _built(groups: list[Group]) -> int:
    return sum(1 for g in groups if _has_attrs(g))


def _has_attrs(g: Group) -> bool:
    try:
        group_table._ATTRS.__get__(g, type(g))
        return True
    except AttributeError:
        return False


def test_read_groups_equal_the_written_ones_in_every_way():
    cap = _capture(40)
    back = _read(cap).groups
    assert all(type(g) is FileGroup for g in back) and _built(back) == 0
    assert back == cap.groups and cap.groups == back  # equality either way round
    assert [repr(g) for g in back] == [repr(g) for g in cap.groups]
    assert [type(g) for g in copy.deepcopy(back)] == [Group] * len(back)
    assert pickle.loads(pickle.dumps(back)) == cap.groups and copy.copy(back[3]) == cap.groups[3]
    assert dataclasses.replace(back[2], name="renamed") == dataclasses.replace(cap.groups[2], name="renamed")
    assert dataclasses.asdict(back[1]) == dataclasses.asdict(cap.groups[1])
    assert back[-1].attrs == {} and back[1] != back[2]
    with pytest.raises(TypeError):
        hash(back[0])


def test_groups_made_from_columns_are_those_the_constructor_makes():
    table = _read(_capture(12)).groups[0]._table
    kinds, names, parents = ["module", "function", "scope"], ["a", "b", "c"], [None, 0, 1]
    made = FileGroup.of_columns(iter(kinds), iter(names), parents, table)
    one_by_one = [FileGroup(i, k, n, p, table=table) for i, (k, n, p) in enumerate(zip(kinds, names, parents))]
    assert [type(g) for g in made] == [FileGroup] * 3 and _built(made) == 0
    assert [(g.id, g.kind, g.name, g.parent, g._table) for g in made] == \
        [(g.id, g.kind, g.name, g.parent, g._table) for g in one_by_one]
    assert made == one_by_one and made[1].attrs == one_by_one[1].attrs == table.get(1)


def test_attrs_are_built_when_read_and_stay_the_groups_own(monkeypatch):
    monkeypatch.setattr(group_table, "ONE_BY_ONE", 4)
    back = _read(_capture(30)).groups
    first = back[3].attrs
    assert first is back[3].attrs and _built(back) == 1  # one group asked: one map built
    first["class"] = "Changed"
    back[8].attrs = {"class": "Replaced"}
    assert [g.attrs for g in back[:5]]
    assert back[0]._table._maps is not None  # past ONE_BY_ONE maps: every map was built at once
    assert back[22].attrs == {"class": "C1", "path": "blocks.22", "per_device_memory": {"param_bytes": 22}}
    assert back[3].attrs is first and back[3].attrs["class"] == "Changed" and back[8].attrs == {"class": "Replaced"}


def test_one_key_of_every_group_reads_from_its_column():
    cap = _capture(30)
    back = _read(cap).groups
    want = [g.attrs.get("class") for g in cap.groups]
    assert attr_values(back, "class") == want and _built(back) == 0
    back[2].attrs["class"] = "Changed"  # a map built and changed is read itself
    back[4].attrs = {"path": "x"}
    want[2], want[4] = "Changed", None
    assert attr_values(back, "class") == want
    # a list of groups holding others too (loop folding appends step groups)
    mixed = back + [Group(len(back), "step", "step 0", 0, {"class": "Step"}), FileGroup(99, "x", "y", None, {})]
    assert attr_values(mixed, "class") == want + ["Step", None]
    assert attr_values(cap.groups, "class") == [g.attrs.get("class") for g in cap.groups] and attr_values([], "x") == []


def test_one_key_reads_right_from_groups_replaced_reordered_or_without_a_map():
    """The file's own groups in order read the column itself; a list with a group replaced
    (as loop folding re-parents one), reordered or shortened reads each group's own value;
    ``not_map`` stands where a group's attrs is no map."""
    cap = _capture(30)
    back = _read(cap).groups
    want = [g.attrs.get("path") for g in cap.groups]
    replaced = list(back)
    replaced[5] = dataclasses.replace(back[5], parent=None, attrs={"path": "moved"})
    assert attr_values(replaced, "path") == want[:5] + ["moved"] + want[6:]
    assert attr_values(back[::-1], "path") == want[::-1] and attr_values(back[3:], "path") == want[3:]
    assert attr_values(back, "path") == want and _built(back) == 0
    back[7].attrs = "not a map"  # type: ignore[assignment]  # a hostile change
    gone = object()
    got = attr_values(back, "path", gone)
    assert got[7] is gone and got[:7] == want[:7] and got[8:] == want[8:]
    assert attr_values(list(back), "path", gone)[7] is gone
    plain = [Group(0, "module", "m", None, "no map")]  # type: ignore[arg-type]
    assert attr_values(plain, "class", gone) == [gone] and attr_values(plain, "class") == [None]
