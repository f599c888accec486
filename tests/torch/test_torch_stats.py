"""Activation statistics in one pass over memory (issue 25 item 4,
``capture.torch.stats``): the same figures as a float64 reference, on large tensors too,
and the NaN/Inf, overflow and half-precision cases through the chunked path."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from capture.torch.stats import CHUNK, moments, stats_now  # noqa: E402

pytestmark = pytest.mark.torch


def reference(x):
    d = x.double()
    finite = torch.isfinite(d)
    f = d[finite]
    return {"min": f.min().item(), "max": f.max().item(), "mean": f.mean().item(), "std": f.std(correction=0).item(),
            "nan": int(torch.isnan(d).sum()), "inf": int(torch.isinf(d).sum())}


@pytest.mark.parametrize("make", [
    pytest.param(lambda g: torch.randn(1000, generator=g), id="small"),
    pytest.param(lambda g: torch.randn(3 * CHUNK + 17, generator=g) * 0.02 + 0.001, id="chunked weights"),
    # A large offset against a small spread: a float32 sum of squares loses the variance.
    pytest.param(lambda g: torch.rand(40 * CHUNK, generator=g) + 3.0, id="offset"),
    pytest.param(lambda g: torch.randn(64, 3 * CHUNK // 64 + 1, generator=g).t(), id="non-contiguous"),
    pytest.param(lambda g: (torch.randn(2 * CHUNK + 5, generator=g) * 4).to(torch.bfloat16), id="bfloat16"),
    pytest.param(lambda g: torch.randn(2 * CHUNK, generator=g, dtype=torch.float64) * 1e6, id="float64"),
])
def test_the_same_figures_as_float64(make):
    x = make(torch.Generator().manual_seed(1))
    got, want = stats_now(x), reference(x)
    assert (got["nan"], got["inf"]) == (0, 0)
    assert got["min"] == want["min"] and got["max"] == want["max"]
    assert got["mean"] == pytest.approx(want["mean"], rel=1e-5, abs=1e-7)
    assert got["std"] == pytest.approx(want["std"], rel=1e-5)


def test_nan_and_inf_in_a_later_chunk_are_counted_and_skipped():
    x = torch.arange(3 * CHUNK, dtype=torch.float32)
    x[2 * CHUNK + 3] = math.nan
    x[CHUNK + 1] = math.inf
    x[5] = -math.inf
    got, want = stats_now(x), reference(x)
    assert (got["nan"], got["inf"]) == (1, 2)
    assert got["min"] == want["min"] and got["max"] == want["max"]
    assert got["mean"] == pytest.approx(want["mean"], rel=1e-9) and got["std"] == pytest.approx(want["std"], rel=1e-9)
    mn, mx, _, _ = moments(x)
    assert math.isnan(mn) and math.isnan(mx)  # NaN wins over ±inf in any chunk


def test_float32_overflow_is_summed_again_in_float64():
    x = torch.full((2 * CHUNK,), 3e38, dtype=torch.float32)
    x[::2] = -1e38
    got = stats_now(x)
    assert got["mean"] == pytest.approx(1e38, rel=1e-6) and got["std"] == pytest.approx(2e38, rel=1e-6)
    assert (got["nan"], got["inf"]) == (0, 0)


def test_a_constant_tensor_has_zero_spread():
    got = stats_now(torch.full((5 * CHUNK,), 7.25))
    assert (got["min"], got["max"], got["mean"], got["std"]) == (7.25, 7.25, 7.25, 0.0)
