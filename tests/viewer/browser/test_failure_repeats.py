"""A failure page for deep recursion: the repeated frames are kept three times and the
rest counted, in Python's words (issue 17 item 9)."""

from __future__ import annotations

import pytest

from capture.graph.frame_repeats import collapse_failure
from capture.graph.model import Capture, Failure, Frame
from viewer.projection.projection import Projection
from viewer.server.app import ViewerServer

from tv_browser import make_workspace, open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def recursion_failure() -> Capture:
    frames = [Frame("model.py", 3, 4, "net")] + [Frame("model.py", 6, 4, "even"), Frame("model.py", 9, 4, "odd")] * 400
    return Capture.failed_capture(
        collapse_failure(Failure("RecursionError", "maximum recursion depth exceeded", stage="trace", frames=frames)),
        backend="jaxpr", framework="jax", scope="traced_program", recipe={"kind": "model", "model": "model:net"},
    )


def test_api_capture_words_the_repeats():
    f = Projection(recursion_failure()).summary()["failure"]
    assert len(f["frames"]) == 7
    assert f["repeated_frames"] == [{"after": 6, "text": "[Previous 2 lines repeated 397 more times]"}]


def test_the_failure_page_lists_the_frames_once_with_the_count(browser, tmp_path, close_pages):
    server = ViewerServer(workspace=make_workspace(tmp_path))
    cid = server.add_capture(recursion_failure(), "recursion")
    server.start()
    try:
        app = open_app(browser, server.url_for(cid))
        close_pages.append(app)
        items = app.page.locator("#failure-frames li")
        items.first.wait_for()
        texts = [items.nth(i).inner_text() for i in range(items.count())]
        assert len(texts) == 8
        assert "model.py:3:4" in texts[0] and "net" in texts[0]
        assert texts[7] == "[Previous 2 lines repeated 397 more times]"
        assert app.page.locator("#failure-frames li.frame-repeat").count() == 1
    finally:
        server.stop()
