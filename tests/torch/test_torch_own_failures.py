"""TensorViz's own failures are never reported as the model's (issue 36, item 1).

Whisper keeps a sparse buffer (``alignment_heads``, ``register_buffer(...,
all_heads.to_sparse(), persistent=False)``); the check after the forward compared every
buffer with ``torch.equal``, which has no sparse kernel, and the user saw a model
``[trace] NotImplementedError`` with 45 lines of dispatcher registrations. The pattern
is vendored here in a model of our own."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from capture.graph.failure_text import readable_message  # noqa: E402
from capture.torch import framework as torch_framework  # noqa: E402
from capture.worker import request as worker_request  # noqa: E402
from capture.worker.errors import CaptureError, InternalError, own_step  # noqa: E402

from torch_workspace import capture_in_process, profile, tensor, write  # noqa: E402

pytestmark = pytest.mark.torch

SPARSE = '''
import torch
from torch import nn


class Aligned(nn.Module):
    """Whisper's pattern: a sparse buffer beside the layers, unused by the forward."""

    def __init__(self, layers=2, heads=2):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        all_heads = torch.zeros(layers, heads, dtype=torch.bool)
        all_heads[layers // 2:] = True
        self.register_buffer("alignment_heads", all_heads.to_sparse(), persistent=False)

    def forward(self, x):
        return self.fc(x).relu()


def bare_assert(x):
    assert x.shape[0] == 3
    return x


class Asserts(nn.Module):
    def forward(self, x):
        return bare_assert(x)
'''


def test_a_model_with_a_sparse_buffer_captures(tmp_path):
    write(tmp_path, {"aligned.py": SPARSE})
    cap, _ = capture_in_process(tmp_path, profile("aligned:Aligned", args=[tensor([2, 4])]))
    assert cap.failure is None, cap.failure
    assert [g.name for g in cap.groups if g.parent == 0] == ["fc"]


def test_a_dense_buffer_written_without_a_version_bump_is_still_seen():
    m = torch.nn.Module()
    m.register_buffer("running", torch.zeros(3))
    m.register_buffer("sparse", torch.eye(3).to_sparse())
    before = torch_framework._buffer_snapshot(torch, m)
    assert set(before) == {"running"}  # the sparse one is left out of the content check
    m.running.data[0] = 1.0  # through .data: no version bump
    assert torch_framework._untracked_buffer_writes(torch, m, before) == ["running"]


def _raise_in_own_code():
    # torch.equal on a sparse tensor, called from TensorViz's own code: no frame of a model.
    sparse = torch.eye(2).to_sparse()
    torch_framework._untracked_buffer_writes(torch, _Holder(sparse), {"b": (sparse, sparse._version, sparse)})


class _Holder:
    def __init__(self, t):
        self.t = t


def test_an_exception_from_tensorviz_code_alone_is_an_internal_failure():
    with pytest.raises(NotImplementedError) as info:
        _raise_in_own_code()
    # The frames from this test file are not TensorViz's: cut the traceback to the
    # capture package's frames, as it is in the worker (whose outermost frame is its own).
    exc = info.value
    tb = exc.__traceback__
    while tb is not None and not worker_request._is_own(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    exc.__traceback__ = tb
    failure = worker_request._failure_of(exc, None)
    assert failure.stage == "internal"
    assert failure.type == "NotImplementedError"
    assert "bug in TensorViz, not in the model" in failure.message
    assert "Could not run 'aten::equal'" in failure.message
    assert "registered at" not in failure.message  # the dispatcher's 45 lines are not the message
    assert failure.frames and all(f.library for f in failure.frames)
    assert failure.frames[-1].function == "_untracked_buffer_writes"
    assert "registered at" in failure.details["cause"]  # kept whole, for `tensorviz inspect`


def test_own_step_names_what_tensorviz_was_doing():
    with pytest.raises(InternalError) as info:
        with own_step("comparing the model's buffers after the forward"):
            raise KeyError("k")
    err = info.value
    assert err.stage == "internal" and err.details["step"] == "comparing the model's buffers after the forward"
    failure = worker_request._failure_of(err, None)
    assert (failure.stage, failure.type) == ("internal", "KeyError")
    assert failure.message.startswith("TensorViz failed while comparing the model's buffers after the forward")


@pytest.mark.parametrize("exc", [CaptureError("trace", "a known failure"), MemoryError()],
                         ids=["capture-error", "memory"])
def test_own_step_leaves_known_failures_as_they_are(exc):
    with pytest.raises(type(exc)):
        with own_step("anything"):
            raise exc


def test_a_model_error_stays_the_models(tmp_path):
    write(tmp_path, {"aligned.py": SPARSE})

    def model_code():
        raise ValueError("the model's own error")

    try:
        model_code()
    except ValueError as exc:
        failure = worker_request._failure_of(exc, None)
    assert failure.stage == "trace" and failure.type == "ValueError"


def test_a_bare_assert_says_which_assert(tmp_path):
    write(tmp_path, {"aligned.py": SPARSE})
    with pytest.raises(AssertionError) as info:
        capture_in_process(tmp_path, profile("aligned:Asserts", args=[tensor([2, 4])]))
    failure = worker_request._failure_of(info.value, None)
    assert failure.stage == "trace" and failure.type == "AssertionError"
    assert failure.message == "assert x.shape[0] == 3 failed (the assert gives no message)"


def test_the_internal_message_is_short_enough_to_read():
    try:
        _raise_in_own_code()
    except NotImplementedError as exc:
        message = InternalError("comparing the model's buffers after the forward", exc).message
    assert len(readable_message(message).text) <= 420
