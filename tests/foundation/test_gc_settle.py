"""gc_pause's ``settle``: what a graph file's read (and the viewer's warm-up) made joins the
oldest generation unwalked, so the first allocation after it does not walk it all; nothing
stays frozen, and nothing is thawed that someone else froze."""

from __future__ import annotations

import contextlib
import gc
import weakref

import pytest

from capture.graph import gc_pause, graphfile
from capture.graph.model import Capture

from synthetic import synthetic_capture


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def _young() -> int:
    return gc.get_count()[0]


def _oldest(obj: object) -> bool:
    """``obj`` is in the oldest generation (a young collection walked what is not: the
    first allocation after a pause runs one at once, so the young count shows nothing)."""
    return any(o is obj for o in gc.get_objects(generation=2))


def test_read_leaves_the_young_generation_empty_and_nothing_frozen(tmp_path):
    path = tmp_path / "g.tvg"
    graphfile.write(synthetic_capture(2000, grouped=True), path)
    assert gc.get_freeze_count() == 0
    cap = graphfile.read(path)
    assert isinstance(cap, Capture)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert _young() < 200  # tens of thousands of nodes, values and lists were made
    assert _oldest(cap) and _oldest(cap.nodes)


def test_without_settle_the_young_generation_holds_what_the_pause_made():
    with gc_pause.paused():
        kept = [[i] for i in range(5000)]
    assert not _oldest(kept)


def test_settled_cyclic_garbage_is_still_collected():
    with gc_pause.paused(settle=True):
        garbage = _Cycle()
        gone = weakref.ref(garbage)
        del garbage
    assert gc.get_freeze_count() == 0 and gone() is not None
    gc.collect()
    assert gone() is None


def test_a_failed_body_settles_nothing():
    try:
        with gc_pause.paused(settle=True):
            kept = [[i] for i in range(5000)]
            raise ValueError("refused")
    except ValueError:
        pass
    assert not _oldest(kept)


@pytest.mark.parametrize("why", ["forked", "held"])
def test_objects_that_must_stay_frozen_stay_frozen(why, monkeypatch):
    """In a child forked after freeze_for_fork (the warm worker's), or while a recording
    holds its freeze, a settling pause thaws nothing; the check is O(1), not
    gc.get_freeze_count() (a walk of the whole permanent generation: 40-60 ms per Torch
    capture in a warm worker's child)."""
    gc.collect()
    if why == "forked":
        monkeypatch.setattr(gc_pause, "_fork_frozen", False)
        gc_pause.freeze_for_fork()
        assert gc_pause.frozen_kept()
        holding = contextlib.nullcontext()
    else:
        gc.freeze()
        holding = gc_pause.hold()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with holding:
            assert gc_pause.frozen_kept()
            with gc_pause.paused(settle=True):
                kept = [[i] for i in range(5000)]
        assert gc.get_freeze_count() == frozen  # not thawed, and the pause's objects not frozen
        assert not _oldest(kept)
    finally:
        gc.unfreeze()
    monkeypatch.undo()
    assert not gc_pause.frozen_kept()
    gc.collect()


def test_nested_pauses_settle_once_the_last_one_ends():
    with gc_pause.paused():
        with gc_pause.paused(settle=True):
            inner = [[i] for i in range(3000)]
        assert not gc.isenabled()
        outer = [[i] for i in range(3000)]
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert _young() < 200 and _oldest(inner) and _oldest(outer)
