"""Library frames in the app: a node whose frame is in installed library code reads
``somelib/models/layers.py:LINE (library)`` and is marked apart; go-to-source on it shows
the library file's lines (standalone, the file lies in the capture's recorded
site-packages); a module group shows where it was called and where its class is defined."""

from __future__ import annotations

from pathlib import Path

import pytest

from capture.graph.model import Frame
from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def served(tmp_path: Path):
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    lib = site / "somelib" / "models" / "layers.py"
    lib.parent.mkdir(parents=True)
    lib.write_text("".join(f"library line {i}\n" for i in range(1, 41)))
    # a real environment's marker: only the environment a capture records is served (issue 29)
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    cap = synthetic_capture(3, grouped=False)
    cap.frames = [Frame(str(lib), 12, 8, "Layer.forward", True), Frame(str(lib), 3, 0, "Layer", True)]
    for node in cap.nodes:
        node.frame = 0
    cap.groups[0].kind = "module"
    cap.groups[0].attrs = {"path": "", "class": "Layer", "call": 0, "frame": 0, "class_frame": 1}
    cap.meta["environment"] = {"prefix": str(tmp_path / "venv"), "site_packages": [str(site)]}
    server = ViewerServer()
    cid = server.add_capture(cap, "library")  # untrusted, as `tensorviz view FILE` adds it
    server.start()
    try:
        yield server, cid, lib
    finally:
        server.stop()


def test_a_library_frame_reads_distinctly_and_shows_its_lines(browser, close_pages, served):
    server, cid, lib = served
    app = open_app(browser, server.url_for(cid))
    close_pages.append(app)
    if "n0" not in app.keys():
        app.js("() => window.tensorviz.toggle('g0')")
        app.wait("() => window.tensorviz.keys().includes('n0')")
    x, y = app.item_point("n0")
    app.page.mouse.click(x, y)
    link = app.page.locator("#insp-body [data-reveal]")
    link.wait_for()
    assert link.inner_text().startswith("somelib/models/layers.py:12 (library)")
    assert link.get_attribute("data-library") == "1"
    assert str(lib) in link.get_attribute("title")
    link.click()
    app.page.locator("#source-view .line.current").wait_for()
    assert "library line 12" in app.page.locator("#source-view .line.current").inner_text()
    assert app.unexpected_errors() == []


def test_a_module_group_shows_its_call_site_and_class_definition(browser, close_pages, served):
    server, cid, _ = served
    app = open_app(browser, server.url_for(cid))
    close_pages.append(app)
    x, y = app.item_point("g0")
    app.page.mouse.click(x, y)
    rows = app.page.locator("#insp-body [data-section=group-frames]")
    rows.wait_for()
    text = rows.inner_text()
    assert "called at" in text and "somelib/models/layers.py:12 (library)" in text
    assert "class defined at" in text and "somelib/models/layers.py:3 (library)" in text
    rows.locator("[data-reveal]").nth(1).click()
    app.page.locator("#source-view .line.current").wait_for()
    assert "library line 3" in app.page.locator("#source-view .line.current").inner_text()
    assert app.unexpected_errors() == []
