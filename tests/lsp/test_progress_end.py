"""The end of an editor progress says how it ended (issue 36 item 7): never "done" for
a capture that failed or was cancelled, or for an install that did not succeed."""

from __future__ import annotations

from types import SimpleNamespace

from tensorviz_lsp.features.progress import Progress


def _progress() -> Progress:
    server = SimpleNamespace(on_loop=lambda: False, loop=None)  # no event loop: the thread-side flag only
    return Progress(server, "Capturing net")  # type: ignore[arg-type]


def test_a_capture_that_succeeded_ends_done():
    assert _progress().end_message() == "done"


def test_an_exception_ends_failed_not_done():
    assert _progress().end_message(failed=True) == "failed"


def test_a_cancel_ends_saying_why():
    p = _progress()
    p.cancel("cancelled by the user (the editor's progress)")
    p.cancel("a later reason is the same cancel")
    assert p.end_message() == "cancelled (cancelled by the user (the editor's progress))"


def test_the_outcome_set_by_the_capture_is_said():
    p = _progress()
    p.outcome = "failed at trace: RuntimeError"
    assert p.end_message() == "failed at trace: RuntimeError"
    p.outcome = "failed (exit status 1)"
    assert p.end_message(failed=False) == "failed (exit status 1)"
