"""The coverage banner explains each partial-coverage reason in words: an eager
capture whose run changed buffers that no recorded op shows names those buffers."""

from __future__ import annotations

import pytest

from capture.graph.model import Coverage
from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import make_workspace, open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_untracked_buffer_updates_are_named_in_the_banner(browser, close_pages, tmp_path):
    cap = synthetic_capture(40, framework="torch")
    cap.coverage = Coverage("eager_forward", "partial", ["untracked_buffer_update"], "none")
    cap.meta = {"untracked_buffer_updates": ["bn1.running_mean", "bn1.running_var"]}
    server = ViewerServer(workspace=make_workspace(tmp_path))
    cid = server.add_capture(cap, "SmallCNN (train)")
    server.start()
    try:
        app = open_app(browser, server.url_for(cid))
        close_pages.append(app)
        text = app.page.locator("[data-banner=coverage]").inner_text()
        assert "Partial coverage (untracked_buffer_update)" in text
        assert "changed buffers that no recorded op shows: bn1.running_mean, bn1.running_var" in text
        assert app.unexpected_errors() == []
    finally:
        server.stop()
