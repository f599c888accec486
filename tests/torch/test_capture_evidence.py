"""No loss of evidence: the Torch capture, however it is made faster, records what it
recorded before, on real model code nobody here wrote.

The "before" is the real-model captures checked in under ``tests/viewer/real_models/``
(made by ``make_captures.py`` through the worker, one thread). Each is captured again
here, in this process and on one thread as the worker runs it, written and read back
through the graph file, and compared with the checked-in one: the same ops with the same
operands, outputs, params, groups and frames; the same values with the same shapes,
dtypes, strides, storages, aliases, bytes, labels and activation statistics; the same
groups (module and function calls) with the same attributes. Only what differs between
two runs of the same code is left out: the machine's memory figures and wall-clock times
in ``meta``, and where an installed library's files live (library frames are compared
by their path below ``site-packages``).

Statistics: the NaN/Inf counts are the same numbers; min, max, mean and std may differ
in their last bits, within a hundred-thousandth of the data's scale (its largest magnitude), far
below what any reading of them could tell apart. The mean and std do as float32 sums taken
in another order do (values measured in a batch sum in float64, :mod:`capture.torch.stats`);
the values themselves do on another CPU, whose vector width orders a matmul's float32
sums otherwise (an AVX-512 machine's GPT-2 differs from the files' in the ninth digit).
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from capture.graph import graphfile, later_stats  # noqa: E402
from capture.graph.model import Capture  # noqa: E402
from capture.recipe import load_profile  # noqa: E402
from capture.worker.context import CaptureContext  # noqa: E402
from torch_workspace import forget_workspace_modules  # noqa: E402

REAL = Path(__file__).resolve().parents[1] / "viewer" / "real_models"

# Real code: transformers' GPT-2 (a library: library frames on every op), Llama (rotary
# embeddings, grouped-query attention, function groups) and ResNet (batch norm, in-place
# ReLU: new versions of a storage), and a ResNet-50 written the way torchvision writes it
# (workspace frames, in-place residual adds).
MODELS = ("gpt2_torch", "llama_torch", "resnet18_torch", "resnet50_torch")


def capture_again(name: str) -> Capture:
    """``name`` captured in this process as the worker captures it, through the file."""
    from capture.graph.device_memory import annotate
    from capture.torch import framework

    ctx = CaptureContext(load_profile(REAL / ".tensorviz" / "recipes.toml", name), REAL)
    framework.probe_device(ctx)
    try:
        cap = framework.capture(ctx)
        # Statistics compared once they have arrived: the parameters' are measured after
        # the graph is sent (the worker's second message), merged as the parent does.
        assert later_stats.pending(cap) > 0 and ctx.after_result is not None
        rows, skipped = ctx.after_result()
        cap = later_stats.complete(cap, rows, skipped)
    finally:
        forget_workspace_modules(REAL)
    annotate(cap)  # what one device holds: the worker adds it after the capture
    return graphfile.decode(graphfile.encode(cap))


def frame_key(frame) -> tuple:
    """A frame, with an installed library's file named from ``site-packages`` on."""
    path = frame.file
    if frame.library and "site-packages/" in path:
        path = "site-packages/" + path.split("site-packages/", 1)[1]
    return (path, frame.line, frame.column, frame.function, frame.library)


# The mean and std of a value agree to this share of its scale (its largest magnitude).
STATS_TOLERANCE = 1e-5


class Stats(dict):
    """A value's statistics, equal to another's when the counts are the same and min, max,
    mean and std agree to :data:`STATS_TOLERANCE` of the data's scale."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, dict) or set(self) != set(other):
            return False
        if any(self[k] != other[k] for k in ("nan", "inf")):
            return False
        keys = [k for k in ("min", "max", "mean", "std") if self[k] is not None or other[k] is not None]
        if any(self[k] is None or other[k] is None for k in keys):
            return False
        scale = max([abs(self[k]) for k in ("min", "max") if self[k] is not None] + [1e-30])
        return all(abs(self[k] - other[k]) <= STATS_TOLERANCE * scale for k in keys)

    __hash__ = None  # type: ignore[assignment]


def measured(m: dict | None) -> dict | None:
    if not m or "stats" not in m:
        return m
    return {**m, "stats": Stats(m["stats"])}


def rows(cap: Capture) -> dict[str, list]:
    return {
        "nodes": [(n.op, [(o.position, o.value, o.literal) for o in n.inputs], list(n.outputs), n.params, n.group,
                   n.frame, n.opaque) for n in cap.nodes],
        "values": [(v.shape, v.dtype, measured(v.measured)) for v in cap.values],
        "groups": [(g.kind, g.name, g.parent, g.attrs) for g in cap.groups],
        "frames": [frame_key(f) for f in cap.frames],
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_capture_records_the_same_evidence_as_before(name):
    before = graphfile.read(REAL / "captures" / f"{name}.tvg")
    after = capture_again(name)
    assert (after.backend, after.coverage, after.inputs, after.outputs) == (
        before.backend, before.coverage, before.inputs, before.outputs)
    old, new = rows(before), rows(after)
    for part in ("frames", "groups", "values", "nodes"):
        assert len(new[part]) == len(old[part]), f"{name}: {len(new[part])} {part}, {len(old[part])} before"
        for i, (a, b) in enumerate(zip(new[part], old[part])):
            assert a == b, f"{name}: {part}[{i}] differs:\n now    {a}\n before {b}"
    # The statistics are there to compare at all: a capture without them would pass above
    # only if the checked-in one had none either.
    assert sum("stats" in (v.measured or {}) for v in after.values) > len(after.values) // 2
    assert any("aliases" in (v.measured or {}) for v in after.values)
