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


# --------------------------------------------------------------------------- issue 51
# The copies a measurement makes (a slice with gaps made dense, a half-precision run
# converted, the batch's rows) go into one buffer kept from value to value, and the
# tensors no op is seen writing (buffers, inputs) are copied into the batch when first
# read: the same figures as before, whatever the dtype and layout.

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]


def _gapped(rows, cols):
    """Columns [cols, 2 cols) of a [rows, 3 cols] matrix: a slice with gaps between rows."""
    return lambda g, dtype: (torch.randn(rows, 3 * cols, generator=g) * 3 + 0.5).to(dtype)[:, cols:2 * cols]


def _with_nonfinite(make):
    def made(g, dtype):
        x = make(g, dtype)
        x[0, 1] = math.nan
        x[-1, -1] = math.inf
        x[x.shape[0] // 2, 0] = -math.inf
        return x
    return made


LAYOUTS = [
    pytest.param(lambda g, dtype: torch.randn(3000, generator=g).to(dtype), id="contiguous"),
    pytest.param(lambda g, dtype: torch.randn(2 * CHUNK + 11, generator=g).to(dtype), id="contiguous-chunked"),
    pytest.param(lambda g, dtype: torch.randn(64, 48, generator=g).to(dtype).t(), id="transposed"),
    pytest.param(_gapped(128, 96), id="gapped-slice"),
    pytest.param(_gapped(3 * CHUNK // 512 + 1, 512), id="gapped-slice-chunked"),
    pytest.param(lambda g, dtype: torch.randn(40, 30, generator=g).to(dtype)[::3, 1::2], id="strided-both-dims"),
    pytest.param(lambda g, dtype: torch.tensor([[-2.5]]).to(dtype), id="one-element"),
    pytest.param(_with_nonfinite(_gapped(64, 40)), id="gapped-nan-inf"),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("make", LAYOUTS)
def test_every_dtype_and_layout_gives_the_float64_figures(make, dtype):
    x = make(torch.Generator().manual_seed(3), dtype)
    got, want = stats_now(x), reference(x)
    assert (got["nan"], got["inf"]) == (want["nan"], want["inf"])
    assert got["min"] == want["min"] and got["max"] == want["max"]
    assert got["mean"] == pytest.approx(want["mean"], rel=1e-5, abs=1e-6)
    assert got["std"] == pytest.approx(want["std"], rel=1e-5, abs=1e-6)


def test_the_kept_buffer_never_lends_one_values_data_to_the_next():
    # A large gapped slice fills the kept buffer; a smaller one then, of other values,
    # reads only its own elements (then a half-precision run converted into the same
    # buffer, then a float64 one: one buffer per dtype).
    g = torch.Generator().manual_seed(5)
    big = (torch.randn(600, 1500, generator=g) + 100.0)[:, :500]
    small = (torch.randn(40, 90, generator=g) - 7.0)[:, 10:40]
    half = torch.randn(CHUNK + 9, generator=g).to(torch.bfloat16)
    wide = (torch.randn(30, 20, generator=g, dtype=torch.float64) * 1e3)[:, ::2]
    for x in (big, small, half, wide, small, big):
        got, want = stats_now(x), reference(x)
        assert got["min"] == want["min"] and got["max"] == want["max"]
        assert got["mean"] == pytest.approx(want["mean"], rel=1e-5, abs=1e-6)


def _statistics(n):
    from capture.graph.model import Value
    from capture.torch.stats import ActivationStatistics

    return ActivationStatistics([Value(i, [], "float32", {}) for i in range(n)])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_values_measured_in_a_batch_equal_their_own_measurement(dtype):
    g = torch.Generator().manual_seed(7)
    tensors = [(torch.randn(6, 50, generator=g) * (i + 1) + i).to(dtype) for i in range(5)]
    tensors += [tensors[0][:, ::2].contiguous(), (torch.randn(300, generator=g)).to(dtype)[::2]]  # sizes 150
    tensors += [torch.tensor([4.0]).to(dtype), torch.tensor([-1.0, math.nan, 2.0]).to(dtype)]
    stats = _statistics(len(tensors))
    for vid, t in enumerate(tensors):
        stats.measure(vid, t, key=("storage", vid))
    assert all("stats" not in v.measured for v in stats.values)  # waiting in the batch
    stats.finish()
    for vid, t in enumerate(tensors):
        got, want = stats.values[vid].measured["stats"], stats_now(t)
        assert (got["nan"], got["inf"], got["min"], got["max"]) == (want["nan"], want["inf"], want["min"], want["max"])
        assert got["mean"] == pytest.approx(want["mean"], rel=1e-6, abs=1e-7)
        assert got["std"] == pytest.approx(want["std"], rel=1e-6, abs=1e-7)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_a_tensor_no_op_is_seen_writing_is_measured_as_first_read(dtype):
    # A buffer (no storage key: a kernel may write it without saying so) waits in the
    # batch as a copy: a write after it was read, which no one reports, does not change
    # its statistics.
    buf = torch.arange(1.0, 9.0).to(dtype)
    view = torch.arange(24.0).view(4, 6).to(dtype)[:, 1:4]
    stats = _statistics(3)
    stats.measure(0, buf)
    stats.measure(1, view)
    stats.measure(2, torch.empty(0, 3, dtype=dtype))  # nothing to measure
    buf.mul_(-100.0)
    view.fill_(math.nan)
    stats.finish()
    assert stats.values[0].measured["stats"] == {"min": 1.0, "max": 8.0, "mean": 4.5, "std": pytest.approx(math.sqrt(5.25)),
                                                 "nan": 0, "inf": 0}
    got = stats.values[1].measured["stats"]
    assert (got["min"], got["max"], got["nan"]) == (1.0, 21.0, 0)
    assert "stats" not in stats.values[2].measured


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("value, n", [(1.0, 64), (0.1, 3 * CHUNK + 5), (-3.5, 1), (0.0, 7)])
def test_equal_elements_have_that_mean_and_no_spread_exactly(value, n, dtype):
    x = torch.full((n,), value).to(dtype)
    exact = x[0].item()
    for got in (stats_now(x), stats_now(x.view(1, n).expand(3, n))):  # contiguous, and an expanded view
        assert (got["min"], got["max"], got["mean"], got["std"]) == (exact, exact, exact, 0.0)
    stats = _statistics(2)
    stats.measure(0, x[:64], key="s")
    stats.measure(1, x[:64].clone(), key="t")
    stats.finish()
    assert stats.values[0].measured["stats"] == {"min": exact, "max": exact, "mean": exact, "std": 0.0, "nan": 0, "inf": 0}


def test_two_threads_measuring_at_once_keep_their_own_copies():
    import threading

    g = torch.Generator().manual_seed(11)
    # Large slices with gaps: each copy takes long enough for the other thread to run.
    slices = [(torch.randn(1024, 3000, generator=g) + 50.0 * i)[:, 1000:2000] for i in range(2)]
    wants = [stats_now(x) for x in slices]
    wrong: list = []

    def work(i):
        for _ in range(20):
            got = stats_now(slices[i])
            if (got["min"], got["max"], got["mean"]) != (wants[i]["min"], wants[i]["max"], wants[i]["mean"]):
                wrong.append((i, got))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong
