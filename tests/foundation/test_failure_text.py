"""A failure's message cut to what a person reads (capture.graph.failure_text), and the
terminal's failure lines built on it (issue 36, item 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from capture.graph.failure_text import cut_note, readable_message
from capture.graph.model import Capture, Coverage, Failure, Frame
from tensorviz_lsp.cli.commands.capture import describe_failure

DISPATCHER = (
    "Could not run 'aten::equal' with arguments from the 'SparseCPU' backend. This could be because the operator "
    "doesn't exist for this backend, or was omitted during the selective/custom build process (if using custom "
    "build). If you are a Facebook employee using PyTorch on mobile, please visit https://fburl.com/ptmfixes for "
    "possible resolutions. 'aten::equal' is only available for these backends: [CPU, Meta, QuantizedCPU, "
    + ", ".join(f"Backend{i}" for i in range(40)) + "].\n\n"
    + "\n".join(f"Backend{i}: registered at /__w/pytorch/aten/src/ATen/x{i}.cpp:{i} [kernel]" for i in range(45))
)


@pytest.mark.parametrize(("message", "shown", "cut"), [
    pytest.param("shapes do not match", "shapes do not match", False, id="short"),
    pytest.param(DISPATCHER, "Could not run 'aten::equal' with arguments from the 'SparseCPU' backend.", True,
                 id="dispatcher"),
    pytest.param("first line\nsecond line\n\nTraceback follows\n  x", "first line\nsecond line", True,
                 id="first-paragraph"),
    pytest.param("\n".join(f"line {i}" for i in range(20)), "\n".join(f"line {i}" for i in range(6)), True,
                 id="many-lines"),
    pytest.param("x" * 900, "x" * 400, True, id="one-long-word"),
])
def test_readable_message(message, shown, cut):
    r = readable_message(message)
    assert r.cut is cut
    assert r.text == (shown + " …" if cut else shown)


def test_the_cut_note_says_how_much_there_is():
    r = readable_message(DISPATCHER)
    assert r.lines == 47
    assert cut_note(r, "tensorviz inspect x.tvg") == "the whole message (47 lines): tensorviz inspect x.tvg"
    assert cut_note(readable_message("short"), "x") == ""


def _failed(failure: Failure) -> Capture:
    return Capture(backend="torch_eager", framework="torch", framework_version="2", coverage=Coverage("eager_forward"),
                   failure=failure)


def test_the_terminal_shows_the_cut_message_and_where_the_whole_is(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = Failure(type="NotImplementedError", message=DISPATCHER, stage="trace",
                frames=[Frame(file="model.py", line=3, column=0, function="forward")])
    text = describe_failure(_failed(f), graph_file=tmp_path / ".tensorviz" / "captures" / "W.tvg")
    lines = text.splitlines()
    assert lines[0] == ("tensorviz capture: [trace] NotImplementedError: Could not run 'aten::equal' with arguments "
                        "from the 'SparseCPU' backend. …")
    assert lines[1] == "    at model.py:3 in forward"
    assert lines[2] == "    the whole message (47 lines): tensorviz inspect .tensorviz/captures/W.tvg"
    assert len(lines) == 3


def test_tensorviz_own_failure_says_so():
    f = Failure(type="KeyError", message="TensorViz failed while measuring the recorded values; this is a bug in "
                "TensorViz, not in the model (KeyError: 'k')", stage="internal",
                frames=[Frame(file=str(Path("/x/capture/torch/trace.py")), line=9, column=0, function="finish",
                              library=True)], details={"step": "measuring the recorded values", "cause": "'k'"})
    text = describe_failure(_failed(f), graph_file=None)
    assert "[internal] KeyError: TensorViz failed while measuring" in text
    assert "this is TensorViz's own failure, not your model's" in text
