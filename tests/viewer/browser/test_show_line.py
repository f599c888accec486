"""Show in Graph and follow-cursor in the real app, on the checked-in Flax Linen ResNet-18
capture (Flax's ImageNet-example style; its frames name ``resnet18_linen.py`` lines): a
line's items selected, their groups opened, all in view; previous/next call; the cursor's
light outline (issue 18 items 3 and 4)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from capture.graph import graphfile
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REAL = Path(__file__).resolve().parents[1] / "real_models"
VIEW = {"width": 1500, "height": 950}


def line_no(text: str) -> int:
    src = (REAL / "resnet18_linen.py").read_text().splitlines()
    return next(i for i, line in enumerate(src, 1) if line.strip().startswith(text))


CONV = line_no("y = self.conv(self.filters, (3, 3), self.strides)")  # in the block: 8 calls
LOOP = line_no("x = self.block_cls(")  # the stage loop: one block module per call


@pytest.fixture(scope="module")
def served():
    server = ViewerServer([(graphfile.read(REAL / "captures" / "resnet18_linen.tvg"), "linen")], workspace=REAL)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def calls(server, line: int) -> list[dict]:
    from capture.analysis.lines import line_answer

    return line_answer(server._entry("1").projection().analysis, server.lines(1), "resnet18_linen.py", line)["calls"]


def in_view(app, keys: list[str]) -> list[str]:
    """The keys whose rectangles lie inside the canvas, beside the inspector when open."""
    box = app.page.locator("#graph").bounding_box()
    inset = app.js("() => { const i = document.getElementById('inspector'); return i.hidden ? 0 : i.getBoundingClientRect().width; }")
    out = []
    for k in keys:
        r = app.item_rect(k)
        if r and r["x"] >= 0 and r["y"] >= 0 and r["x"] + r["w"] <= box["width"] - inset + 1 and r["y"] + r["h"] <= box["height"] + 1:
            out.append(k)
    return out


def shown(app, line: int, call: int) -> dict:
    app.wait("([l, c]) => { const s = window.tensorviz.lineShown; return s && s.line === l && s.call === c; }", [line, call])
    return app.js("() => window.tensorviz.lineShown")


def test_show_url_selects_the_lines_items_in_view_and_steps_through_calls(browser, served, close_pages):
    want = calls(served, CONV)
    assert len(want) == 8
    app = open_app(browser, f"{served.url_for(1)}&show=resnet18_linen.py:{CONV}", viewport=VIEW)
    close_pages.append(app)
    assert app.unexpected_errors() == []
    previous = None
    for call in (0, 1, 2, 1):
        if previous is not None:
            button = "next" if call > previous else "previous"
            app.page.locator(f"[data-banner=line] [data-call={button}]").click()
        got = shown(app, CONV, call)
        previous = call
        keys = want[call]["keys"]
        assert got["keys"] == keys and got["calls"] == 8
        assert sorted(app.js("() => window.tensorviz.multiSelected")) == sorted(keys)
        assert app.js("() => window.tensorviz.selected") == keys[0]
        scene = set(app.keys())
        assert set(keys) <= scene, "the block holding the line's ops was opened"
        assert in_view(app, keys) == keys, "every item of the call is inside the viewport"
        banner = app.page.locator("[data-banner=line]").inner_text()
        assert f"resnet18_linen.py:{CONV}" in banner and f"call {call + 1} of 8" in banner
        assert f"{want[call]['ops']} op" in banner and f"(ResNetBlock_{call}.Conv_0)" in banner
    # the keys step too: ] next, [ previous (the banner is up)
    app.page.locator("#graph").focus()
    app.page.keyboard.press("]")
    assert shown(app, CONV, 2)["keys"] == want[2]["keys"]
    app.page.keyboard.press("[")
    shown(app, CONV, 1)
    # each call is another block's conv: different items
    assert not set(want[0]["keys"]) & set(want[1]["keys"])
    # the URL names a later call: FILE:LINE:CALL
    later = open_app(browser, f"{served.url_for(1)}&show=resnet18_linen.py:{LOOP}:5", viewport=VIEW)
    close_pages.append(later)
    got = shown(later, LOOP, 5)
    assert got["keys"] == calls(served, LOOP)[5]["keys"] and in_view(later, got["keys"]) == got["keys"]
    assert "call 6 of 8 (ResNetBlock_5)" in later.page.locator("[data-banner=line]").inner_text()
    if os.environ.get("TV_SCREENSHOTS"):
        app.page.screenshot(path=str(Path(os.environ["TV_SCREENSHOTS"]) / "show-in-graph.png"))


def test_a_show_event_focuses_an_open_page_and_keeps_a_called_module_closed(browser, served, close_pages):
    app = open_app(browser, served.url_for(1), viewport=VIEW)
    close_pages.append(app)
    app.js("() => localStorage.clear()")
    app.wait_subscribed(served)
    assert served.pages(1) >= 1
    want = calls(served, LOOP)
    assert len(want) == 8 and all(len(c["keys"]) == 1 and c["keys"][0].startswith("g") for c in want)
    served.publish("show", {"capture": 1, "file": "resnet18_linen.py", "line": LOOP, "call": 3, "calls": 8,
                            "keys": want[3]["keys"]})
    got = shown(app, LOOP, 3)
    [block] = want[3]["keys"]
    assert got["keys"] == [block] and block in app.keys()
    assert block not in app.js("() => window.tensorviz.expanded"), "the module the line called stays closed"
    assert in_view(app, [block]) == [block]
    assert app.js("(k) => window.tensorviz.itemInfo(k)", block)["kind"] == "group"
    # another capture's event is not this page's
    served.publish("show", {"capture": 99, "file": "resnet18_linen.py", "line": CONV, "call": 0})
    app.page.wait_for_timeout(300)
    assert app.js("() => window.tensorviz.lineShown.line") == LOOP


def test_a_cursor_event_outlines_lightly_without_the_inspector(browser, served, close_pages):
    app = open_app(browser, served.url_for(1), viewport=VIEW)
    close_pages.append(app)
    app.js("() => localStorage.clear()")
    app.wait_subscribed(served)
    expanded = app.js("() => window.tensorviz.expanded")
    want = calls(served, LOOP)[0]["keys"]
    served.publish("cursor", {"capture": 1, "file": "resnet18_linen.py", "line": LOOP, "keys": want})
    app.wait("() => window.tensorviz.cursorShown && window.tensorviz.cursorShown.keys.length > 0")
    got = app.js("() => window.tensorviz.cursorShown")
    scene = set(app.keys())
    assert got["line"] == LOOP and set(got["keys"]) <= scene
    # the first block, or the stack of blocks (or the closed stage) holding it on screen
    assert got["keys"] == want or all(k.startswith(("g", "s", "c")) for k in got["keys"])
    assert in_view(app, got["keys"]), "on screen (panned there when it was not)"
    assert app.js("() => window.tensorviz.selected") is None
    assert app.page.locator("#inspector").is_hidden(), "the cursor never opens the inspector"
    assert app.js("() => window.tensorviz.expanded") == expanded, "the cursor never opens a group"
    assert app.js("() => window.tensorviz.multiSelected") == []
    # on screen already: the view stays where the person left it
    camera = app.js("() => window.tensorviz.camera")
    seq = app.js("() => window.tensorviz.cursorShown.seq")
    served.publish("cursor", {"capture": 1, "file": "resnet18_linen.py", "line": LOOP, "keys": want})
    app.wait("(s) => window.tensorviz.cursorShown.seq > s", seq)
    assert app.js("() => window.tensorviz.camera") == camera
    # off screen: panned there, at the same zoom
    app.js("() => window.tensorviz.panBy(0, -20000)")
    seq = app.js("() => window.tensorviz.cursorShown.seq")
    served.publish("cursor", {"capture": 1, "file": "resnet18_linen.py", "line": LOOP, "keys": want})
    app.wait("(s) => window.tensorviz.cursorShown.seq > s", seq)
    assert app.js("() => window.tensorviz.camera")["s"] == camera["s"]
    assert in_view(app, app.js("() => window.tensorviz.cursorShown.keys"))
    # an op line inside closed blocks: the nearest item on screen holding its ops
    conv = calls(served, CONV)[0]["keys"]
    served.publish("cursor", {"capture": 1, "file": "resnet18_linen.py", "line": CONV, "keys": conv})
    app.wait("(l) => window.tensorviz.cursorShown.line === l", CONV)
    holders = app.js("() => window.tensorviz.cursorShown.keys")
    assert holders and set(holders) <= set(app.keys()) and not set(holders) & set(conv)
    # a line that produced nothing clears the outline
    served.publish("cursor", {"capture": 1, "file": None, "line": None, "keys": []})
    app.wait("() => window.tensorviz.cursorShown.keys.length === 0")
    assert app.unexpected_errors() == []
