"""The cyclic collector while a Torch trace records (capture/torch/trace.py): paused,
so that full collections never walk the trace's growing graph, and resumed however the
recording ends; the model's cyclic garbage is still collected every CHECKPOINT_OPS ops."""

from __future__ import annotations

import gc
import weakref

import pytest

torch = pytest.importorskip("torch")

from capture.graph import gc_pause  # noqa: E402
from capture.torch import trace as trace_module  # noqa: E402
from capture.torch.trace import TorchTrace  # noqa: E402
from capture.worker.workspace_files import WorkspaceFiles  # noqa: E402


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_the_collector_is_paused_while_recording_and_resumed_after(tmp_path):
    assert gc.isenabled()
    trace = TorchTrace(WorkspaceFiles(tmp_path))
    with trace.recording():
        assert not gc.isenabled()
        torch.ones(2) + 1
    assert gc.isenabled()


def test_the_collector_is_resumed_when_the_forward_raises(tmp_path):
    trace = TorchTrace(WorkspaceFiles(tmp_path))
    with pytest.raises(ValueError), trace.recording():
        torch.ones(2) + 1
        raise ValueError("the model failed")
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled(tmp_path):
    gc.disable()
    try:
        with TorchTrace(WorkspaceFiles(tmp_path)).recording():
            torch.ones(2) + 1
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_cyclic_garbage_made_while_recording_is_collected_at_checkpoints(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_module, "CHECKPOINT_OPS", 8)
    trace = TorchTrace(WorkspaceFiles(tmp_path))
    x = torch.ones(2)
    with trace.recording():
        garbage = _Cycle()
        gone = weakref.ref(garbage)
        del garbage
        for _ in range(16):  # two checkpoints
            x = x + 1
        assert gone() is None  # collected while the collector is paused


@pytest.mark.parametrize("recorder", ["python", "native"])
def test_what_the_recording_kept_joins_the_oldest_generation_unwalked(tmp_path, monkeypatch, recorder):
    # The graph the recording made is frozen before the collector resumes and unfrozen with
    # the objects frozen at the start: nothing stays frozen, and the young generation holds
    # none of it (so the first allocation after the recording does not walk the whole graph).
    # The native recorder's graph objects are never tracked at all (data only, no cycles).
    if recorder == "native":
        from capture.torch import native as native_pkg

        missing = native_pkg.missing_tools()
        if missing is not None:
            pytest.skip(f"the native recorder needs a C++ toolchain: {missing}")
        native_pkg.load(wait=True)
    monkeypatch.setenv("TENSORVIZ_TORCH_RECORDER", recorder)
    assert gc.get_freeze_count() == 0
    trace = TorchTrace(WorkspaceFiles(tmp_path))
    x = torch.ones(2)
    with trace.recording():
        for _ in range(200):
            x = x + 1
    assert (trace.recorder_note == "native") == (recorder == "native")
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert gc.get_count()[0] < 200  # hundreds of values, nodes and their dicts were made
    node = trace.b.nodes[-1]
    assert not any(o is node for g in (0, 1) for o in gc.get_objects(generation=g))
    if recorder == "python":
        assert any(o is node for o in gc.get_objects(generation=2))  # still tracked: a later full collection sees it
    else:
        assert not gc.is_tracked(node) and not gc.is_tracked(node.inputs)


def test_labelling_a_large_model_and_finishing_run_no_collection(tmp_path):
    """label_module (a few allocations per parameter) and finish() (a list per aliased
    value, the statistics' batches) run with the collector paused: before, a model of
    57,000 parameters ran full collections over itself while it was labelled (0.36 s of
    0.44 s); 3,000 parameters ran several young ones."""
    model = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(1500)])  # 3,000 parameters
    runs: list[tuple[str, int]] = []
    where = ["none"]

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            runs.append((where[0], info["generation"]))

    trace = TorchTrace(WorkspaceFiles(tmp_path))
    gc.collect()
    gc.callbacks.append(seen)
    try:
        where[0] = "label_module"
        trace.label_module(model)
        where[0] = "recording"
        with torch.no_grad(), trace.recording():
            y = model(torch.ones(1, 2))
            y.t().sum()
        where[0] = "finish"
        trace.finish()
        where[0] = "none"
    finally:
        gc.callbacks.remove(seen)
    # At most the young collection of what the pause made, as it ends (none in a worker
    # whose imports are frozen: gc_pause settles them into the oldest generation).
    assert [g for w, g in runs if w == "label_module"] in ([], [0])
    assert [g for w, g in runs if w == "finish"] in ([], [0])
    assert sum("param" in v.measured for v in trace.b.values) == 3000


def test_objects_frozen_before_the_recording_stay_frozen(tmp_path, monkeypatch):
    """The warm worker's child runs with its parent's preloaded libraries frozen (so that
    collections leave their shared pages alone): a recording must not thaw them. It did
    (freeze, record, unfreeze all): the child's next full collections walked every one of
    them (transformers loaded: 0.46 s in the steps after a capture)."""
    gc.collect()
    monkeypatch.setattr(gc_pause, "_fork_frozen", False)
    gc_pause.freeze_for_fork()  # as the warm worker's parent, before it forks the capture's child
    try:
        before = gc.get_freeze_count()
        trace = TorchTrace(WorkspaceFiles(tmp_path))
        x = torch.ones(2)
        with trace.recording():
            for _ in range(50):
                x = x + 1
        assert gc.isenabled() and gc.get_freeze_count() >= before
        assert len(gc.get_objects(generation=2)) < before  # not thawed into the oldest generation
    finally:
        gc.unfreeze()
