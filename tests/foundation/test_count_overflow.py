"""Issue 52 item 11: a per-op FLOP or byte count beyond what a graph file stores (signed
64 bits) is never clipped to 2^63-1 silently: the op is uncounted, with the reason."""

from __future__ import annotations

import pytest

from capture.graph import file_decode, graphfile
from capture.graph.model import UNCOUNTED
from capture.jax import cost as jax_cost
from capture.units import COUNT_LIMIT, OVERFLOW_REASON


def test_the_file_limit_is_the_counters_limit():
    assert file_decode.MAX_COST == COUNT_LIMIT == (1 << 63) - 1


@pytest.mark.parametrize(("x", "want"), [(5, 5), (COUNT_LIMIT, COUNT_LIMIT), (COUNT_LIMIT + 1, UNCOUNTED),
                                         (1 << 100, UNCOUNTED)])
def test_jax_counts_beyond_the_limit_are_uncounted(x, want):
    reasons: dict[str, str] = {}
    assert jax_cost._fit(x, "dot_general", reasons) == want
    assert (reasons == {"dot_general": OVERFLOW_REASON}) == (want == UNCOUNTED)


def test_a_scan_body_times_its_length_beyond_the_limit_is_uncounted():
    reasons: dict[str, str] = {}
    assert jax_cost._scale(1 << 40, 1 << 30, "scan", reasons) == UNCOUNTED
    assert reasons == {"scan": OVERFLOW_REASON}
    assert jax_cost._scale(1 << 20, 1 << 10) == 1 << 30
    assert jax_cost._sum([COUNT_LIMIT, 1]) == UNCOUNTED
    assert jax_cost._sum([3, UNCOUNTED, 4]) == 7


def test_a_count_beyond_the_limit_is_refused_by_the_writer():
    import hostile_captures as H

    c = H.saturated_flops()
    assert c.cost is not None
    c.cost.flops = [COUNT_LIMIT + 1, 1]
    with pytest.raises(ValueError):
        graphfile.encode(c)
