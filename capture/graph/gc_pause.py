"""Whole-capture work with Python's cyclic garbage collector paused: building the
viewer's index, writing and reading a graph file.

An index allocates hundreds of thousands of small lists and dicts that all survive, and
every one of them makes the collector's older generations heavier: with collection on,
building the index of a 200,000-node capture spends about half its time in the collector
and grows as n^1.2, with it paused the build is linear (``benchmarks/
bench_viewer_projection.py`` measures both). Nothing an index builds is a reference
cycle, so pausing loses nothing. The graph-file writer and reader pause it too: a
100,000-op capture's encode spent most of its time in the collector (and grew as
n^1.3) while the capture's own million objects were young. A Torch trace pauses it while it
records (collecting the young generations itself every few thousand ops).

The pause is counted: two threads building two indexes at once both finish before the
collector runs again, and a collector a caller had disabled stays disabled.

``paused(settle=True)`` (reading a graph file, the viewer's warm-up) also hands what the
pause made straight to the oldest generation when the last pause ends (``gc.freeze()``
then ``gc.unfreeze()``, as the Torch trace does): otherwise the first allocation after the
pause runs a young collection that walks every object made meanwhile (a 100,000-op
capture's read: 40 ms; the viewer's warm-up of it: 70-100 ms, on the way to the first
page), then walks them again a generation up. Nothing stays frozen: cyclic garbage among
them is freed by the next full collection. Skipped where frozen objects must stay frozen
(:func:`frozen_kept`: a warm worker's child, a Torch trace recording): unfreezing would
thaw theirs.

Whether they must is kept here rather than asked of ``gc.get_freeze_count()``, which walks
the whole permanent generation: in a warm worker's child with ``transformers`` loaded
(~380,000 frozen objects, spread over pages shared with the parent) that one call cost
40-60 ms of every Torch capture.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_depth = 0
_resume = False
_settle = False
_fork_frozen = False  # this process's objects were frozen before it was forked (a warm worker's child)
_holds = 0  # recordings that froze what existed when they started (capture.torch.trace)


def freeze_for_fork() -> None:
    """Move every object to the permanent generation before forking a capture's child (the
    warm worker's parent, ``capture.worker.zygote``): the child's collections then leave
    the pages it shares with the parent alone, and nothing in the child thaws them."""
    global _fork_frozen
    gc.freeze()
    _fork_frozen = True


def frozen_kept() -> bool:
    """Whether frozen objects must stay frozen (so ``gc.unfreeze()`` must not run): in a
    child forked after :func:`freeze_for_fork`, or while a recording holds its freeze
    (:func:`hold`). O(1), unlike ``gc.get_freeze_count()``."""
    return _fork_frozen or _holds > 0


@contextmanager
def hold() -> Iterator[None]:
    """While the body runs, :func:`frozen_kept` is true (a recording that froze what
    existed when it started, and unfreezes it at its end unless kept)."""
    global _holds
    with _lock:
        _holds += 1
    try:
        yield
    finally:
        with _lock:
            _holds -= 1


@contextmanager
def paused(settle: bool = False) -> Iterator[None]:
    """Run the body with the cyclic collector off (reference counting still frees);
    ``settle``: when the body succeeds, what the pause made joins the oldest generation
    unwalked once the last pause ends (see above)."""
    global _depth, _resume, _settle
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    done = False
    try:
        yield
        done = True
    finally:
        with _lock:
            _depth -= 1
            _settle = _settle or (settle and done)
            if _depth == 0:
                if _settle and not frozen_kept():
                    gc.freeze()
                    gc.unfreeze()
                _settle = False
                if _resume:
                    gc.enable()
