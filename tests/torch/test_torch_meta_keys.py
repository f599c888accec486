"""Real Torch captures hold only declared ``meta`` keys (``capture/graph/meta.py``): an
eager forward that writes buffers, a training step, an abstract capture, with the
worker's own additions (per-device memory, the interpreter's environment) and through a
graph file, as a viewer reads them. The static scan of the writers:
tests/foundation/test_capture_meta.py; through the worker process: the slow test below."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from capture.graph import graphfile  # noqa: E402
from capture.graph.device_memory import annotate  # noqa: E402
from capture.graph.meta import unknown_keys  # noqa: E402
from capture.recipe import parse_profile  # noqa: E402
from capture.worker.libframes import environment  # noqa: E402

from torch_workspace import capture_in_process, profile, tensor  # noqa: E402

pytestmark = pytest.mark.torch

CASES = [
    (profile("models:SmallCNN", args=[tensor([2, 3, 16, 16])], mode="train"),
     {"state", "state_note", "module_class", "state_writes", "capture_s", "stats", "torch_version"}),
    (profile("models:MLP", args=[tensor([6, 4])], kind="training_step", mode="train", grad_enabled=True,
             step={"loss": "sum", "optimizer": {"factory": "models:make_sgd"}}),
     {"loss", "optimizer", "grads", "mode", "grad_enabled", "seed"}),
    (profile("models:SmallCNN", args=[tensor([2, 3, 16, 16])], evidence="abstract"),
     {"evidence", "evidence_note", "state"}),
]


@pytest.mark.parametrize("table,expect", CASES)
def test_a_real_torch_capture_holds_only_declared_meta_keys(ws, table, expect):
    cap = capture_in_process(ws, table)[0]
    annotate(cap)
    cap.meta["environment"] = environment()
    cap = graphfile.decode(graphfile.encode(cap))
    assert cap.failure is None
    assert expect <= set(cap.meta), sorted(cap.meta)  # the capture is the one meant
    assert unknown_keys(cap.meta) == []


@pytest.mark.slow
def test_a_capture_through_the_worker_holds_only_declared_meta_keys(ws):
    from capture.session.runner import run_capture

    cap = run_capture(ws, parse_profile("p", CASES[0][0]), timeout=120)
    assert cap.failure is None, cap.failure
    assert {"environment", "per_device_memory", "elapsed_s", "state_writes"} <= set(cap.meta), sorted(cap.meta)
    assert unknown_keys(cap.meta) == []
