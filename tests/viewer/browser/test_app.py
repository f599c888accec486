"""The viewer app end to end: the real server on synthetic captures, driven in Chromium."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from capture.graph import graphfile
from capture.graph.model import Capture, Failure, Frame
from synthetic import synthetic_capture
from viewer.server.app import ViewerServer
from viewer.server.security import CSP

from tv_browser import make_workspace, open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("ws"))
    reveals: list[Frame] = []

    def reveal(frame: Frame) -> bool:
        reveals.append(frame)
        return False  # not shown by an editor: the viewer shows the lines itself

    grouped = synthetic_capture(1200, grouped=True, opaque_every=7)
    failed = Capture.failed_capture(
        Failure(
            type="ShapeError",
            message="dot_general requires contracting dimensions to match: 3 vs 5",
            stage="trace",
            frames=[Frame("model/layer1.py", 14, 4, "block_1"), Frame("model/layer2.py", 30, 8, "block_2")],
            details={"lhs": [2, 3], "rhs": [5, 4]},
        ),
        backend="jaxpr",
        framework="jax",
        scope="traced_program",
        recipe={"kind": "model", "framework": "jax", "model": "model:net"},
    )
    eager = synthetic_capture(300, grouped=True, framework="torch")
    for v in eager.values[:40]:  # Torch-only measured evidence on some values
        v.measured = {"device": "cpu", "bytes": 4096, "aliases": [v.id], "stats": {"min": -1.5, "max": 2.0, "mean": 0.1}}
    flat = synthetic_capture(5000, grouped=False)
    server = ViewerServer(workspace=ws, reveal_handler=reveal)
    ids = SimpleNamespace(
        grouped=server.add_capture(grouped, "synthetic grouped 1,200"),
        failed=server.add_capture(failed, "failing net"),
        eager=server.add_capture(eager, "eager torch"),
        flat=server.add_capture(flat, "flat jit 5,000"),
    )
    server.start()
    try:
        yield SimpleNamespace(server=server, ids=ids, reveals=reveals, workspace=ws, grouped=grouped)
    finally:
        server.stop()


@pytest.fixture
def app(browser, served, close_pages):
    a = open_app(browser, served.server.url_for(served.ids.grouped))
    close_pages.append(a)
    return a


def test_toolbar_title_is_not_cut_at_1400_px(browser, served, close_pages):
    """Issue 36 item 7: the name and what follows it (framework, backend, node count) both
    show whole in a 1,400 px window; the tooltip still carries all of it."""
    a = open_app(browser, served.server.url_for(served.ids.eager), viewport={"width": 1400, "height": 900})
    close_pages.append(a)
    a.js("() => { document.querySelector('#btn-setup').hidden = false; }")  # as an editor's viewer shows it
    parts = a.js(
        """() => [...document.querySelectorAll('#title > *')].map(e => ({
            text: e.textContent, cut: e.scrollWidth > e.clientWidth + 1}))"""
    )
    assert [p["text"] for p in parts] == ["eager torch", "torch · torch_eager · 300 nodes"]
    assert not any(p["cut"] for p in parts), parts
    title = a.page.locator("#title")
    assert title.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
    assert "eager torch" in title.get_attribute("title")


def test_page_loads_under_the_servers_csp_and_paints_the_graph(app, served):
    resp = app.page.request.get(served.server.url)
    assert resp.headers["content-security-policy"] == CSP
    assert app.js("() => window.tensorviz.error") is None
    assert app.page.title().startswith("synthetic grouped")
    assert "1,200 nodes" in app.page.locator("#title").inner_text()
    app.wait("() => window.tensorviz.firstPaintMs !== null")
    assert app.painted_pixels() > 2000
    stats = app.js("() => window.tensorviz.sceneStats()")
    assert stats["drawn"]["items"] > 5 and stats["drawn"]["edges"] > 0
    # The jit group and its layers are open; the layers' scopes are collapsed cards.
    keys = app.keys()
    assert "g0" in keys and "g1" in keys and "g2" in keys
    assert not any(k.startswith("n") for k in keys)
    assert app.unexpected_errors() == []


def test_coverage_banner_says_traced_program_and_partial(app):
    banner = app.page.locator("[data-banner=coverage]")
    text = banner.inner_text()
    assert banner.get_attribute("data-scope") == "traced_program"
    assert "Traced program" in text and "inferred" in text
    assert "opaque_kernel" in text and "no branch or iteration is reported as executed" in text
    assert "Effects are incomplete" in text


def test_eager_capture_banner_says_eager_execution(browser, served, close_pages):
    a = open_app(browser, served.server.url_for(served.ids.eager))
    close_pages.append(a)
    text = a.page.locator("[data-banner=coverage]").inner_text()
    assert "Eager execution" in text and "Traced program" not in text


def test_torch_measured_fields_are_shown_when_present(browser, served, close_pages):
    a = open_app(browser, served.server.url_for(served.ids.eager))
    close_pages.append(a)
    a.js("() => window.tensorviz.jump({type: 'node', id: 2, key: 'n2', item_path: ['g0', 'g1', 'g2', 'n2']})")
    a.page.wait_for_function("() => document.getElementById('insp-title').textContent === 'max'")
    measured = a.page.locator("[data-section=measured]").inner_text()
    assert "4096" in measured and "aliases" in measured and "statistics" in measured and "-1.5" in measured
    assert "not measured" not in measured


def test_a_failed_capture_event_offers_its_failure_page(app, served):
    app.wait_subscribed(served.server)
    served.server.publish("capture-failed", {"id": served.ids.failed, "message": "boom", "stage": "import"})
    banner = app.page.locator("[data-banner=capture-failed]")
    banner.wait_for()
    assert "failed at import: boom" in banner.inner_text()
    with app.page.expect_navigation():
        banner.locator("button").click()
    app.wait_ready()
    assert app.page.locator("#failure").is_visible()


def test_double_click_expands_a_group_in_place_and_enter_collapses_it(app):
    assert "n0" not in app.keys()
    before = app.scene_version
    x, y = app.item_point("g2")
    assert not app.page.locator("#inspector").is_visible()
    app.page.mouse.dblclick(x, y)
    app.wait_scene_after(before)
    keys = app.keys()
    assert "g2" in app.js("() => window.tensorviz.expanded")
    inside = [k for k in keys if k.startswith("n")]
    assert len(inside) == 100  # attention of layer 0: its 100 nodes, laid out in place
    # The expanded group stayed where it was on screen.
    r = app.item_rect("g2")
    assert abs(r["x"] + r["w"] / 2 - x + app.page.locator("#graph").bounding_box()["x"]) < r["w"]
    assert app.painted_pixels() > 2000
    # Issue 49: the double-click expanded the group; it did not also open the inspector.
    assert not app.page.locator("#inspector").is_visible()
    # Enter toggles the selected group back.
    assert app.js("() => window.tensorviz.selected") == "g2"
    before = app.scene_version
    app.page.keyboard.press("Enter")
    app.wait_scene_after(before)
    assert not any(k.startswith("n") for k in app.keys())
    assert "g2" not in app.js("() => window.tensorviz.expanded")


def test_expanding_one_group_lays_out_only_that_group_and_its_ancestors(app):
    jobs_before = app.js("() => window.tensorviz.layoutJobs")
    before = app.scene_version
    app.js("() => window.tensorviz.toggle('g3')")
    app.wait_scene_after(before)
    jobs = app.js("() => window.tensorviz.layoutJobs") - jobs_before
    # g3 itself, its parent layer g1, the jit group g0 and the root: never the siblings.
    assert jobs == 4


def test_the_newest_layout_request_wins(app):
    # Three expansions in a row, without waiting: older requests are superseded, the
    # last one lays out everything still missing, and the scene shows all three.
    app.js("() => { for (const k of ['g2', 'g5', 'g8']) window.tensorviz.toggle(k); }")
    app.wait("() => ['n0', 'n200', 'n400'].every((k) => window.tensorviz.keys().includes(k))")
    assert app.js("() => window.tensorviz.layoutSuperseded") >= 1
    assert {"g2", "g5", "g8"} <= set(app.js("() => window.tensorviz.expanded"))
    assert app.painted_pixels() > 2000


def test_search_jumps_to_a_node_inside_collapsed_groups(app):
    app.page.keyboard.press("/")
    assert app.js("() => document.activeElement.id") == "search"
    app.page.keyboard.type("layer2.py:12")
    app.page.wait_for_selector("#search-results li[role=option]")
    first = app.page.locator("#search-results li[role=option]").first
    assert "node" in first.inner_text()
    before = app.scene_version
    app.page.keyboard.press("Enter")
    app.wait_scene_after(before)
    app.wait("() => (window.tensorviz.selected || '').startsWith('n')")
    key = app.js("() => window.tensorviz.selected")
    assert key in app.keys()
    # Centred on screen, at readable detail or closer.
    r = app.item_rect(key)
    box = app.page.locator("#graph").bounding_box()
    assert abs(r["x"] + r["w"] / 2 - (box["width"] - 380) / 2) < 40  # centred beside the inspector
    assert app.js("() => window.tensorviz.camera.s") >= 1
    assert app.page.locator("#insp-title").inner_text() != ""


def test_search_finds_groups_and_shapes(app):
    app.page.fill("#search", "layer_5")
    app.page.wait_for_selector("#search-results li[role=option]")
    assert "layer_5" in app.page.locator("#search-results li[role=option]").first.inner_text()
    app.page.keyboard.press("Enter")
    app.wait("() => window.tensorviz.selected === 'g16'")
    app.page.fill("#search", "f32[128]")
    app.page.wait_for_function("() => document.querySelector('#search-results li[role=option] .rtype')?.textContent === 'value'")


def test_inspector_shows_params_positions_uses_and_no_measurements_for_jax(app):
    # n0 is dot_general in layer 0's attention: open it through search by op.
    app.js("() => window.tensorviz.toggle('g2')")
    app.wait("() => window.tensorviz.keys().includes('n0')")
    x, y = app.item_point("n0")
    app.page.mouse.click(x, y)
    insp = app.page.locator("#inspector")
    insp.wait_for(state="visible")
    app.page.wait_for_function("() => document.getElementById('insp-title').textContent === 'dot_general'")
    body = app.page.locator("#insp-body")
    inputs = body.locator("[data-section=inputs] li")
    assert inputs.count() == 2
    assert inputs.nth(0).locator(".pos").inner_text() == "#0"
    assert inputs.nth(1).locator(".pos").inner_text() == "#1"
    assert "f32[128,128]" in inputs.nth(0).inner_text()
    params = body.locator("pre.json").first.inner_text()
    assert json.loads(params) == {"dimension_numbers": [[[1], [0]], [[], []]], "precision": None}
    outs = body.locator("[data-section=outputs] li")
    assert outs.count() == 1
    uses = outs.nth(0).locator("[data-node]")
    assert uses.count() >= 1
    assert "not measured: traced program" in body.locator("[data-section=measured]").inner_text()
    # A use link jumps to the consuming node.
    target = uses.first.get_attribute("data-node")
    uses.first.click()
    app.wait("(k) => window.tensorviz.selected === k", "n" + target)


def test_opaque_nodes_are_marked_in_the_inspector(app):
    app.js("() => window.tensorviz.toggle('g2')")
    app.wait("() => window.tensorviz.keys().includes('n6')")
    x, y = app.item_point("n6")  # every 7th synthetic node is an opaque `while`
    app.page.mouse.click(x, y)
    app.page.wait_for_function("() => document.getElementById('insp-title').textContent === 'while'")
    assert app.page.locator("#insp-body .pill.opaque").inner_text() == "opaque"


def test_source_frame_click_reaches_the_reveal_hook_and_shows_lines(app, served):
    served.reveals.clear()
    app.js("() => window.tensorviz.toggle('g2')")
    app.wait("() => window.tensorviz.keys().includes('n1')")
    x, y = app.item_point("n1")
    app.page.mouse.click(x, y)
    link = app.page.locator("#insp-body [data-reveal]")
    link.wait_for()
    label = link.inner_text()
    link.click()
    app.page.locator("#source-view pre .line").first.wait_for()
    assert len(served.reveals) == 1
    frame = served.reveals[0]
    assert label.startswith(f"model/layer{int(frame.file[-4])}.py:{frame.line}")
    assert frame.file.startswith(str(served.workspace))
    current = app.page.locator("#source-view .line.current").inner_text()
    assert f"line {frame.line}" in current


def test_keyboard_fit_readable_zoom_and_pan(app):
    canvas = app.page.locator("#graph")
    canvas.click(position={"x": 5, "y": 5})
    app.page.keyboard.press("Escape")
    app.page.keyboard.press("r")
    assert app.js("() => window.tensorviz.camera.s") == 1
    app.page.keyboard.press("f")
    s_fit = app.js("() => window.tensorviz.camera.s")
    stats = app.js("() => window.tensorviz.sceneStats()")
    box = canvas.bounding_box()
    assert stats["w"] * s_fit <= box["width"] and stats["h"] * s_fit <= box["height"]
    app.page.keyboard.press("+")
    assert app.js("() => window.tensorviz.camera.s") == pytest.approx(s_fit * 1.25)
    app.page.keyboard.press("-")
    assert app.js("() => window.tensorviz.camera.s") == pytest.approx(s_fit)
    tx = app.js("() => window.tensorviz.camera.tx")
    app.page.keyboard.press("ArrowLeft")
    assert app.js("() => window.tensorviz.camera.tx") == tx + 80


def test_fit_can_zoom_out_below_the_wheel_minimum(browser, served, close_pages):
    a = open_app(browser, served.server.url_for(served.ids.flat), viewport={"width": 900, "height": 500})
    close_pages.append(a)
    # Open every chunk of the flat 5,000-node jit: a tall graph.
    keys = [k for k in a.keys() if k.startswith("c")]
    assert len(keys) == 13  # 5,000 children split into chunks of 400
    for k in keys[:4]:
        before = a.scene_version
        a.js("(k) => window.tensorviz.toggle(k)", k)
        a.wait_scene_after(before)
    a.page.locator("#graph").click(position={"x": 5, "y": 5})
    a.page.keyboard.press("f")
    s = a.js("() => window.tensorviz.camera.s")
    assert s < 0.2
    assert a.painted_pixels() > 100  # a long thin chain, a few pixels wide at this zoom
    # The overview appears for a graph this size.
    assert a.page.locator("#minimap").is_visible()
    a.page.keyboard.press("r")
    assert a.js("() => window.tensorviz.camera.s") == 1


def test_drag_pans_and_wheel_zooms(app):
    cam = app.js("() => window.tensorviz.camera")
    box = app.page.locator("#graph").bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    app.page.mouse.move(cx, cy)
    app.page.mouse.down()
    app.page.mouse.move(cx + 120, cy + 60, steps=6)
    app.page.mouse.up()
    moved = app.js("() => window.tensorviz.camera")
    assert moved["tx"] == pytest.approx(cam["tx"] + 120) and moved["ty"] == pytest.approx(cam["ty"] + 60)
    app.page.mouse.wheel(0, -300)
    app.wait("(s) => window.tensorviz.camera.s > s", moved["s"])


def test_failed_capture_shows_a_failure_page_not_an_empty_canvas(browser, served, close_pages):
    a = open_app(browser, served.server.url_for(served.ids.failed))
    close_pages.append(a)
    page = a.page
    assert page.locator("#failure").is_visible()
    assert page.locator("#failure-title").inner_text() == "ShapeError"
    assert "contracting dimensions to match" in page.locator("#failure-message").inner_text()
    frames = page.locator("#failure-frames li")
    assert frames.count() == 2
    assert "model/layer1.py:14" in frames.nth(0).inner_text()
    assert "failed at trace" in page.locator("[data-banner=failure]").inner_text()
    assert page.locator("[data-banner=coverage]").count() == 0
    # Clicking a failure frame asks the server to reveal it.
    served.reveals.clear()
    frames.nth(0).locator("button").click()
    page.locator("#source-view .line.current").wait_for()
    assert served.reveals[0].line == 14


def test_server_events_show_progress_stale_and_new_capture(app, served):
    server = served.server
    app.wait_subscribed(server)
    server.publish("progress", {"message": "Tracing net…", "fraction": 0.4})
    app.page.locator("[data-banner=progress]").wait_for()
    assert "Tracing net" in app.page.locator("[data-banner=progress]").inner_text()
    server.publish("stale", {"files": ["model/layer0.py"], "capture": served.ids.flat})
    # About another capture: this page shows no banner. Events arrive in order, so once
    # the next progress message shows, the stale event before it has been handled.
    server.publish("progress", {"message": "Still tracing…", "fraction": 0.6})
    app.page.wait_for_function("() => document.querySelector('[data-banner=progress]').textContent.includes('Still tracing')")
    assert app.page.locator("[data-banner=stale]").count() == 0
    server.publish("stale", {"files": ["model/layer0.py"], "capture": served.ids.grouped})
    app.page.locator("[data-banner=stale]").wait_for()
    assert "model/layer0.py" in app.page.locator("[data-banner=stale]").inner_text()
    server.publish("fresh", {"capture": served.ids.grouped})
    app.page.locator("[data-banner=stale]").wait_for(state="detached")
    server.publish("capture-ready", {"id": served.ids.grouped, "title": "again"})
    ready = app.page.locator("[data-banner=ready]")
    ready.wait_for()
    with app.page.expect_navigation():
        ready.locator("button").click()
    assert f"capture={served.ids.grouped}" in app.page.url
    app.wait_ready()


def test_export_png_and_svg(app):
    with app.page.expect_download() as d:
        app.page.click("#btn-png")
    png = d.value
    assert png.suggested_filename.endswith(".png")
    assert open(png.path(), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    with app.page.expect_download() as d:
        app.page.click("#btn-svg")
    svg = open(d.value.path(), encoding="utf-8").read()
    assert svg.startswith("<svg") and "<rect" in svg and "<polyline" in svg
    assert "layer_0" in svg and "tracing scope" in svg


def test_open_a_tvg_file_from_the_file_picker(app, served, tmp_path):
    path = tmp_path / "small.tvg"
    graphfile.write(synthetic_capture(60, grouped=False), path)
    before = {c["id"] for c in served.server.captures()}
    with app.page.expect_navigation():
        app.page.set_input_files("#file-input", str(path))
    app.wait_ready()
    new = {c["id"] for c in served.server.captures()} - before
    assert len(new) == 1
    assert f"capture={new.pop()}" in app.page.url
    assert "small.tvg" in app.page.locator("#title").inner_text()


def test_dropping_a_tvg_file_opens_it(app, served, tmp_path):
    data = graphfile.encode(synthetic_capture(40, grouped=False))
    handle = app.page.evaluate_handle(
        """(bytes) => {
            const dt = new DataTransfer();
            dt.items.add(new File([new Uint8Array(bytes)], 'dropped.tvg', { type: 'application/octet-stream' }));
            return dt;
        }""",
        list(data),
    )
    with app.page.expect_navigation():
        app.page.dispatch_event("#graph", "drop", {"dataTransfer": handle})
    app.wait_ready()
    assert "dropped.tvg" in app.page.locator("#title").inner_text()


def test_a_bad_dropped_file_says_why(app):
    handle = app.page.evaluate_handle(
        """() => {
            const dt = new DataTransfer();
            dt.items.add(new File([new Uint8Array([1, 2, 3, 4])], 'junk.tvg'));
            return dt;
        }"""
    )
    app.page.dispatch_event("#graph", "drop", {"dataTransfer": handle})
    banner = app.page.locator("[data-banner=open]")
    app.page.wait_for_function("() => document.querySelector('[data-banner=open]')?.classList.contains('error')")
    assert "junk.tvg" in banner.inner_text()
