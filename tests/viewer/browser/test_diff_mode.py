"""Diff mode in the app (``viewer/static/panels/diff.js``): a capture with a baseline offers the
diff; the change list steps through the changes, opening each one's group and centring it;
added / changed items are outlined in their colours on the canvas, and the groups on the way
down to a change say "a change is inside". Real captures: GPT-2 from ``transformers``
configs at 2 and 3 blocks and at a wider hidden size (``tests/diff/models``)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from capture.graph import graphfile
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CAPTURES = Path(__file__).resolve().parents[2] / "diff" / "models" / "captures"
SHOTS = os.environ.get("TENSORVIZ_SCREENSHOTS")  # a folder: the tests save what they saw there
ADDED = (21, 128, 61)  # --diff-added (light theme)
CHANGED = (194, 65, 12)  # --diff-changed


@pytest.fixture(scope="module")
def served():
    two = graphfile.read(CAPTURES / "gpt2_2_layers.tvg")
    server = ViewerServer()
    ids = SimpleNamespace(
        deeper=server.add_capture(graphfile.read(CAPTURES / "gpt2_3_layers.tvg"), "gpt2 (3 blocks)",
                                  baseline=(two, "previous capture of gpt2")),
        wider=server.add_capture(graphfile.read(CAPTURES / "gpt2_wider.tvg"), "gpt2 (wider)",
                                 baseline=(two, "previous capture of gpt2")),
        plain=server.add_capture(two, "gpt2 (no baseline)"),
    )
    server.start()
    try:
        yield SimpleNamespace(server=server, ids=ids)
    finally:
        server.stop()


def _open(browser, served, close_pages, which, query=""):
    app = open_app(browser, served.server.url_for(getattr(served.ids, which)) + query)
    close_pages.append(app)
    return app


def _shot(app, name):
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        app.page.screenshot(path=str(Path(SHOTS) / f"{name}.png"))


def _colour_near(app, key, colour) -> int:
    """How many of 8 sample points just outside the item's corner badge have ``colour``."""
    r = app.item_rect(key)
    assert r is not None
    return app.js(
        """async ([x, y, c]) => {
            await new Promise((res) => requestAnimationFrame(() => requestAnimationFrame(res)));
            const canvas = document.getElementById('graph');
            const k = canvas.width / canvas.clientWidth;
            const ctx = canvas.getContext('2d');
            let n = 0;
            for (const [dx, dy] of [[-4, -4], [4, -4], [-4, 4], [4, 4], [-3, -5], [5, -3], [-5, 3], [3, 5]]) {
              const d = ctx.getImageData(Math.round((x + dx) * k), Math.round((y + dy) * k), 1, 1).data;
              if (Math.abs(d[0] - c[0]) + Math.abs(d[1] - c[1]) + Math.abs(d[2] - c[2]) < 60) n++;
            }
            return n;
        }""",
        [r["x"] - 5 * app.js("() => window.tensorviz.camera.s"), r["y"] - 5 * app.js("() => window.tensorviz.camera.s"),
         list(colour)],
    )


def test_the_offer_then_the_added_block(browser, served, close_pages):
    app = _open(browser, served, close_pages, "deeper")
    assert app.js("() => window.tensorviz.diff.offered") and not app.js("() => window.tensorviz.diff.active")
    banner = app.page.locator('[data-banner="diff"]')
    assert "previous capture of gpt2" in banner.inner_text()
    _shot(app, "diff-offer")
    banner.get_by_role("button", name="Show changes").click()
    app.wait("() => window.tensorviz.diff.active")
    changes = app.js("() => window.tensorviz.diff.changes")
    assert [(c["status"], c["path"]) for c in changes] == [("added", "lm.transformer.h.2")]
    panel = app.page.locator("#diff-panel")
    assert "lm.transformer.h.2 (GPT2Block)" in panel.inner_text()
    assert "groups: 1 added" in panel.inner_text()
    # Before stepping: the groups down to the change, and the stack of blocks holding it.
    drawn = app.js("() => window.tensorviz.diff.drawn()")
    assert drawn and set(drawn.values()) == {"contains"}
    assert any(k.startswith("s") for k in drawn), drawn  # "h.0 … h.2 ×3" says a change is inside
    _shot(app, "diff-shown")
    panel.locator(".diff-item").first.click()
    key = changes[0]["key"]
    app.wait("(k) => window.tensorviz.selected === k", key)
    assert app.js("() => window.tensorviz.diff.drawn()")[key] == "added"
    assert app.js("(k) => window.tensorviz.itemInfo(k).path", key).endswith("h.2")
    assert panel.locator('.diff-item[aria-selected="true"]').count() == 1
    assert _colour_near(app, key, ADDED) >= 4  # the green badge is painted on the block
    _shot(app, "diff-step-added-block")
    assert app.unexpected_errors() == []


def test_stepping_through_changed_shapes_with_the_keyboard(browser, served, close_pages):
    app = _open(browser, served, close_pages, "wider", "&diff=previous")
    app.wait("() => window.tensorviz.diff.active")
    changes = app.js("() => window.tensorviz.diff.changes")
    counts = app.js("() => window.tensorviz.diff.counts")
    assert counts["groups_added"] == 0 and counts["nodes_changed"] > 20 and counts["parameters_changed"] > 20
    assert {c["status"] for c in changes} == {"changed"}
    app.page.locator("#graph").focus()
    for _ in range(4):
        app.page.keyboard.press("n")
    app.wait("() => window.tensorviz.diff.index === 3")
    target = changes[3]
    app.wait("(k) => window.tensorviz.selected === k", target["key"])
    assert app.js("() => window.tensorviz.diff.drawn()")[target["key"]] == "changed"
    assert _colour_near(app, target["key"], CHANGED) >= 4
    # The active change in full, under the list.
    current = app.page.locator("#diff-current").inner_text()
    assert current.startswith(f"4 of {len(changes)}: {target['title']}")
    assert target["detail"].split("; ")[0] in current
    app.page.keyboard.press("p")
    app.wait("() => window.tensorviz.diff.index === 2")
    _shot(app, "diff-wider-step")
    # Leaving diff mode removes the highlights and offers it again.
    app.page.get_by_role("button", name="Close changes").click()
    assert app.js("() => window.tensorviz.diff.active") is False
    assert app.js("() => window.tensorviz.diff.drawn()") == {}
    assert app.page.locator('[data-banner="diff"]').is_visible()
    assert app.unexpected_errors() == []


def test_no_baseline_no_offer(browser, served, close_pages):
    app = _open(browser, served, close_pages, "plain")
    assert not app.js("() => window.tensorviz.diff.offered")
    assert app.page.locator('[data-banner="diff"]').count() == 0
    # Asked for anyway: a clear message instead of a diff.
    app2 = _open(browser, served, close_pages, "plain", "&diff=previous")
    app2.wait("() => window.tensorviz.diff.error !== null")
    assert "no previous capture" in app2.page.locator('[data-banner="diff"]').inner_text()
