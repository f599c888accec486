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
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_depth = 0
_resume = False


@contextmanager
def paused() -> Iterator[None]:
    """Run the body with the cyclic collector off (reference counting still frees)."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
