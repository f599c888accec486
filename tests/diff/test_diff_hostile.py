"""Issue 52 item 9: ``diff`` on groups that share one path (10,000: 5.9 s, quadratic in
the duplicates) and on a chain nested 20,000 deep (4.1 GB: every group's path held
whole). Paths stay bounded, duplicates are numbered in one pass, and the diff is right."""

from __future__ import annotations

import gc
import tracemalloc

import hostile_captures as H
from capture.graph import diff as diff_mod
from capture.graph import graphfile
from capture.graph.diff import diff
from capture.graph.model import Group


def _read(capture):
    return graphfile.decode(graphfile.encode(capture))


def test_groups_on_one_path_are_numbered_apart_and_match():
    a = _read(H.many_on_one_path(3_000))
    side = diff_mod._Side(a, "A")
    assert side.path[1] == "same" and side.path[2] == "same#dup1" and side.path[3_000] == "same#dup2999"
    assert diff(a, _read(H.many_on_one_path(3_000))).same


def test_a_name_that_looks_like_a_duplicate_is_kept_apart():
    c = H.many_on_one_path(3)
    c.groups.append(Group(4, "module", "x", 0, {"path": "same#dup2"}))
    side = diff_mod._Side(_read(c), "A")
    assert len(set(side.path)) == len(side.path) == 5


def test_paths_of_a_deep_chain_stay_bounded_and_the_diff_is_linear_in_memory():
    a, b = _read(H.deep_chain(5_000)), _read(H.deep_chain(5_000))
    b.groups[4_999].name = "changed"
    gc.collect()
    tracemalloc.start()
    try:
        d = diff(a, b)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5_000 * 8192, peak  # whole paths: 5,000 groups x ~25 KB each
    assert {g.status for g in d.groups} == {"added", "removed"}
    side = diff_mod._Side(a, "A")
    assert max(map(len, side.path)) <= diff_mod.MAX_PATH_PREFIX + 16
    assert side.path[10] == "/".join(f"s{i}" for i in range(11))  # short paths are whole
