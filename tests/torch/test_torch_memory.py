"""Memory and Torch (issue 25 item 2, worker side): an eager capture that cannot fit
fails before it takes the machine, with the figures and abstract evidence offered
(``capture.torch.memory``), and running out during a capture is the ``MemoryError``
failure naming the limit and the bytes asked for (``capture.worker.main``)."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from capture.recipe import parse_profile  # noqa: E402
from capture.session.runner import run_capture  # noqa: E402
from capture.torch.memory import ESTIMATE_KEYS, FAILURE_KEYS, check_fits, data_in_use, model_bytes  # noqa: E402
from capture.worker.errors import CaptureError  # noqa: E402
from capture.worker.limits import Limits  # noqa: E402

from torch_workspace import capture_in_process, profile, tensor, write  # noqa: E402

pytestmark = [pytest.mark.torch,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="MemAvailable and VmData from /proc")]

MODEL = '''
import torch
from torch import nn


class Lazy(nn.Module):
    """2 GiB of float32 weights by default; torch.empty allocates them without touching a page."""

    def __init__(self, width=16384, layers=2):
        super().__init__()
        self.weights = nn.ParameterList([nn.Parameter(torch.empty(width, width)) for _ in range(layers)])

    def forward(self, x):
        for w in self.weights:
            x = x @ w
        return x


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)


class Hoarder(nn.Module):
    """Keeps 2 GiB of plain tensors (no parameters, no buffers) in a list of lists; torch.empty
    touches no page."""

    def __init__(self, pieces=8):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.cache = [[torch.empty(1 << 26)] for _ in range(pieces)]

    def forward(self, x):
        return self.fc(x)


class Greedy(nn.Module):
    """Asks the allocator for 64 TiB in its forward."""

    def forward(self, x):
        return x + torch.empty(1 << 44, dtype=torch.float32).sum()
'''


@pytest.fixture
def mws(ws):
    write(ws, {"memmodel.py": MODEL})
    return ws


def test_a_model_that_cannot_fit_fails_before_it_is_built(mws):
    room = 768 << 20
    limits = Limits(max_memory_bytes=(data_in_use() or 0) + room)
    with pytest.raises(CaptureError) as info:
        capture_in_process(mws, profile("memmodel:Lazy", args=[tensor([1, 16384])]), limits=limits)
    err = info.value
    assert (err.error_type, err.stage) == ("MemoryError", "limit")
    d = err.details
    assert set(FAILURE_KEYS) | set(ESTIMATE_KEYS) <= set(d)
    assert (d["limit"], d["maximum"], d["phase"]) == ("max_memory_bytes", limits.max_memory_bytes, "estimate")
    assert d["requested"] == d["parameter_bytes"] == 2 << 30 and d["parameters"] == 2
    assert d["abstract"] == {"evidence": "abstract", "key_path": "profiles.p.evidence"}
    assert "needs at least 2 GiB" in err.message and 'evidence = "abstract"' in err.message
    assert "capture memory limit of" in err.message
    # The way out works: the same model captured abstractly.
    cap, _ = capture_in_process(mws, profile("memmodel:Lazy", args=[tensor([1, 16384])], evidence="abstract"),
                                limits=limits)
    assert [n.op for n in cap.nodes] == ["aten::mm", "aten::mm"]


def test_a_small_model_is_not_estimated(mws):
    cap, _ = capture_in_process(mws, profile("memmodel:Small", args=[tensor([2, 8])]))
    est = cap.meta["memory_estimate"]
    assert est["status"] == "not_needed" and 0 < est["allocated_bytes"] < 1 << 20 and est["budget_bytes"] > 0


def test_a_large_model_that_fits_is_estimated_and_built(mws):
    limits = Limits(max_memory_bytes=(data_in_use() or 0) + (6 << 30))
    table = profile("memmodel:Lazy", args=[tensor([1, 8192])], init={"args": [], "kwargs": {"width": 8192, "layers": 6}})
    cap, _ = capture_in_process(mws, table, limits=limits)
    est = cap.meta["memory_estimate"]
    assert est["status"] == "ok" and est["parameter_bytes"] == 6 * 8192 * 8192 * 4
    assert est["allocated_before_check"] >= 1 << 30  # checked once the build passed 1 GiB, not before


def test_check_fits_names_the_machine_when_it_is_the_smaller_bound():
    estimate = {"parameter_bytes": 1 << 50, "buffer_bytes": 0, "parameters": 1, "buffers": 0}
    with pytest.raises(CaptureError) as info:
        check_fits(estimate, checkpoint_bytes=0, memory_limit=0, evidence_key_path="profiles.p.evidence",
                   offer_abstract=True)
    d = info.value.details
    assert d["limit"] == "available_memory" and d["maximum"] == d["available_bytes"] > 0
    assert d["memory_limit_bytes"] == 0 and "this machine has available" in info.value.message
    # A checkpoint counts twice (its bytes and the tensors loaded from them).
    small = {"parameter_bytes": 1 << 20, "buffer_bytes": 0, "parameters": 1, "buffers": 0}
    with pytest.raises(CaptureError) as info:
        check_fits(small, checkpoint_bytes=1 << 49, memory_limit=0, evidence_key_path="k", offer_abstract=False)
    assert info.value.details["requested"] == (1 << 20) + (1 << 50) and info.value.details["abstract"] is None
    check_fits(small, checkpoint_bytes=0, memory_limit=0, evidence_key_path="k", offer_abstract=True)  # fits


def test_model_bytes_counts_tied_weights_once():
    with torch.device("meta"):
        emb = torch.nn.Embedding(1000, 64)
        head = torch.nn.Linear(64, 1000, bias=False)
    head.weight = emb.weight
    counts = model_bytes(torch.nn.ModuleDict({"emb": emb, "head": head}))
    assert counts == {"parameter_bytes": 1000 * 64 * 4, "buffer_bytes": 0, "parameters": 1, "buffers": 0,
                      "other_bytes": 0, "others": 0}


@pytest.mark.slow
def test_an_allocator_error_is_the_memory_error_failure(mws):
    """Not DefaultCPUAllocator's own words: the limit and the bytes asked for."""
    c = run_capture(mws, parse_profile("p", profile("memmodel:Greedy", args=[tensor([2])])), timeout=120)
    f = c.failure
    assert (f.type, f.stage) == ("MemoryError", "trace"), f
    assert "DefaultCPUAllocator" not in f.message
    assert "(70,368,744,177,664 bytes) failed" in f.message
    d = f.details
    assert set(FAILURE_KEYS) <= set(d)
    assert (d["limit"], d["requested"], d["phase"], d["allocator"]) == ("available_memory", 1 << 46, "capture", "cpu")
    assert d["maximum"] == d["available_bytes"] > 0 and d["memory_limit_bytes"] == 0
    assert d["abstract"] == {"evidence": "abstract", "key_path": "profiles.p.evidence"}
    assert [fr.file for fr in f.frames][-1:] == ["memmodel.py"]
    c = run_capture(mws, parse_profile("p", profile("memmodel:Greedy", args=[tensor([2])])), timeout=120,
                    limits=Limits(max_memory_bytes=3 << 30))
    d = c.failure.details
    assert (c.failure.type, d["limit"], d["maximum"], d["requested"]) == (
        "MemoryError", "max_memory_bytes", 3 << 30, 1 << 46)
    assert "the capture memory limit is 3072 MiB" in c.failure.message


def test_plain_tensors_a_constructor_keeps_are_counted_before_the_build(mws):
    """Issue 52 item 13: tensors kept in a list (not parameters, not buffers) passed the
    check and reached 7.4 GB; the abstract build now counts them."""
    room = 768 << 20
    limits = Limits(max_memory_bytes=(data_in_use() or 0) + room)
    with pytest.raises(CaptureError) as info:
        capture_in_process(mws, profile("memmodel:Hoarder", args=[tensor([1, 8])]), limits=limits)
    err = info.value
    d = err.details
    assert (err.error_type, err.stage, d["phase"]) == ("MemoryError", "limit", "estimate")
    assert d["other_bytes"] == 2 << 30 and d["others"] == 8
    assert "2 GiB of other tensors its modules keep (8)" in err.message


def test_the_build_guard_counts_each_new_storage_once():
    """What the eager build allocates: each new storage's bytes once (a tensor, the
    tensors of a list an op returns), not a view of what an op was given, not an in-place
    write; past the threshold it calls ``on_trip`` once."""
    from capture.torch.memory import BuildGuard

    trips: list[int] = []
    with BuildGuard(4_000, trips.append) as guard:
        a = torch.empty(100)  # 400 bytes
        a.uniform_()  # in place: nothing new
        a.view(10, 10).t()  # views: nothing new
        parts = torch.split(a, 50)  # views, returned as a list
        b, c = torch.ones(2, 50).unbind(0)  # ones: 400 bytes; unbind's views: nothing new
        copies = [p.clone() for p in parts]  # 2 x 200 bytes
        assert (guard.allocated, trips) == (400 + 400 + 400, [])
        big = torch.zeros(1000)  # 4,000 bytes: past the threshold
        assert trips == [5_200] and guard.tripped
        torch.zeros(1000)  # after the trip: no more counting, no second call
    assert trips == [5_200] and guard.allocated == 5_200
    del b, c, copies, big
