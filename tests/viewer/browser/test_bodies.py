"""A scan boundary opens into its unexecuted body, labelled as a template (browser)."""

from __future__ import annotations

import os

import pytest

from viewer.server.app import ViewerServer

from tv_browser import make_workspace, open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOTS = os.environ.get("TENSORVIZ_SHOTS")  # a folder: save screenshots there to look at


def _capture():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from jax import lax

    from capture.jax.convert import convert

    def rnn(w, xs):
        def step(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h.sum()

        h, ys = lax.scan(step, jnp.zeros(3, jnp.float32), xs)
        return lax.cond(h.sum() > 0, lambda v: v + 1.0, lambda v: jnp.cos(v) * 2.0, h), ys

    return convert(jax.make_jaxpr(rnn)(jnp.ones((3, 3), jnp.float32), jnp.ones((5, 3), jnp.float32)))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    cap = _capture()
    server = ViewerServer(workspace=make_workspace(tmp_path_factory.mktemp("ws")))
    cid = server.add_capture(cap, "rnn with scan and cond")
    server.start()
    try:
        yield server, cid, cap
    finally:
        server.stop()


def _shot(app, name):
    if SHOTS:
        app.page.screenshot(path=os.path.join(SHOTS, name))


def test_double_click_opens_a_scan_into_its_template(browser, served, close_pages):
    server, cid, cap = served
    app = open_app(browser, server.url_for(cid))
    close_pages.append(app)
    scan = next(n.id for n in cap.nodes if n.op == "scan" and n.group is None)
    cond = next(n.id for n in cap.nodes if n.op == "cond" and n.group is None)
    body = next(g.id for g in cap.groups if g.kind == "body" and g.attrs["node"] == scan)
    n_templates = sum(1 for n in cap.nodes if n.group is not None)
    assert f"{len(cap.nodes)} nodes · {n_templates} in unexecuted bodies" in app.page.locator("#title").inner_text()
    keys = app.keys()
    # the first view shows the boundaries closed: no body is opened as if it ran
    assert f"n{scan}" in keys and f"g{body}" not in keys
    assert not any(k.startswith("g") for k in keys if k != "g-1")
    info = app.js("(k) => window.tensorviz.itemInfo(k)", f"n{scan}")
    assert "1 body · not executed" in info["lines"]
    banner = app.page.locator("[data-banner=coverage]").inner_text()
    assert "no branch or iteration is reported as executed" in banner
    assert "Their bodies open as templates, as traced, not executed." in banner
    _shot(app, "bodies-0-closed.png")

    before = app.scene_version
    x, y = app.item_point(f"n{scan}")
    app.page.mouse.dblclick(x, y)
    app.wait_scene_after(before)
    assert f"n{scan}" in app.js("() => window.tensorviz.expanded")
    card = app.js("(k) => window.tensorviz.itemInfo(k)", f"g{body}")
    assert card["kind"] == "group" and card["name"] == "scan body: step"
    assert card["lines"][:2] == ["one iteration, as traced; not executed", "5 iterations (static)"]
    assert app.js("() => window.tensorviz.error") is None
    _shot(app, "bodies-1-scan-open.png")

    # the template itself opens like a group: its ops, with parameters named
    before = app.scene_version
    app.js("(k) => window.tensorviz.toggle(k)", f"g{body}")
    app.wait_scene_after(before)
    keys = app.keys()
    ops = {app.js("(k) => window.tensorviz.itemInfo(k)", k)["name"] for k in keys if k.startswith("n")}
    assert {"dot_general", "tanh", "reduce_sum"} <= ops
    pills = [app.js("(k) => window.tensorviz.pill(k)", k) for k in keys if k.startswith("in:")]
    assert any(p and p["name"] == "xs 0 (one slice) ← args[1]" for p in pills)
    outs = [app.js("(k) => window.tensorviz.pill(k)", k) for k in keys if k.startswith("out:")]
    assert any(p and p["texts"][0] == "out  carry 0 (next iteration)" for p in outs)
    # a template op says so in the inspector
    tanh = next(k for k in keys if k.startswith("n") and app.js("(k) => window.tensorviz.itemInfo(k)", k)["name"] == "tanh")
    x, y = app.item_point(tanh)
    app.page.mouse.click(x, y)
    note = app.page.locator("[data-note=template]")
    note.wait_for()
    assert f"unexecuted body of n{scan}" in note.inner_text()
    app.js("(k) => window.tensorviz.center(k)", f"n{scan}")
    app.page.wait_for_timeout(100)
    _shot(app, "bodies-2-template-open.png")

    # branches of the cond sit side by side
    before = app.scene_version
    app.js("(k) => window.tensorviz.toggle(k)", f"n{cond}")
    app.wait_scene_after(before)
    b0, b1 = (g.id for g in cap.groups if g.kind == "body" and g.attrs["node"] == cond)
    r0, r1 = app.item_rect(f"g{b0}"), app.item_rect(f"g{b1}")
    assert abs(r0["y"] - r1["y"]) < 2 and r0["x"] + r0["w"] <= r1["x"]
    c0 = app.js("(k) => window.tensorviz.itemInfo(k)", f"g{b0}")
    assert c0["lines"][:2] == ["one branch, as traced; not executed", "runs when the index operand is 0 (lax.cond: false)"]
    app.js("(k) => window.tensorviz.center(k)", f"n{cond}")
    app.page.wait_for_timeout(100)
    _shot(app, "bodies-3-branches.png")
    assert not app.unexpected_errors()


def test_inspector_of_a_boundary_lists_its_bodies(browser, served, close_pages):
    server, cid, cap = served
    app = open_app(browser, server.url_for(cid))
    close_pages.append(app)
    scan = next(n.id for n in cap.nodes if n.op == "scan" and n.group is None)
    x, y = app.item_point(f"n{scan}")
    app.page.mouse.click(x, y)
    rows = app.page.locator("[data-section=bodies] li")
    rows.first.wait_for()
    assert "scan body" in rows.first.inner_text() and "5 iterations (static)" in rows.first.inner_text()
    assert "nothing says that a branch or an iteration ran" in app.page.locator("[data-note=bodies]").inner_text()
    before = app.scene_version
    app.page.locator("[data-action=open-bodies]").click()
    app.wait_scene_after(before)
    assert f"n{scan}" in app.js("() => window.tensorviz.expanded")
    _shot(app, "bodies-4-inspector.png")
    app.page.get_by_role("button", name="About this capture").click()
    about = app.page.locator("#inspector dl.facts")
    about.first.wait_for()
    text = app.page.locator("#inspector").inner_text()
    assert "control-flow bodies" in text and "3 as templates (" in text and "not executed)" in text


def test_expand_all_does_not_open_bodies_as_if_they_ran(browser, served, close_pages):
    server, cid, cap = served
    app = open_app(browser, server.url_for(cid))
    close_pages.append(app)
    before = app.scene_version
    app.js("() => window.tensorviz.expandAll()")
    app.wait_scene_after(before)
    expanded = app.js("() => window.tensorviz.expanded")
    assert not any(k.startswith("n") for k in expanded)
    bodies = {f"g{g.id}" for g in cap.groups if g.kind == "body"}
    assert not bodies & set(app.keys())


def _shard_map_capture():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from jax import lax
    from jax.sharding import PartitionSpec as P

    from capture.jax.convert import convert

    # an abstract mesh of 8 devices: traced as if split, in this process (JAX's CPU device
    # count is fixed once its backend starts)
    mesh = jax.sharding.AbstractMesh((8,), ("i",), axis_types=(jax.sharding.AxisType.Auto,))

    def block(a, b):
        return lax.psum(jnp.dot(a, b), "i")

    def net(a, b):
        c = jax.shard_map(block, mesh=mesh, in_specs=(P(None, "i"), P("i", None)), out_specs=P())(a, b)
        return lax.cond(c.sum() > 0, lambda v: jnp.tanh(v), lambda v: v - 1.0, c)

    return convert(jax.make_jaxpr(net)(jnp.ones((8, 16), jnp.float32), jnp.ones((16, 4), jnp.float32)))


def test_the_header_counts_a_shard_map_body_apart_from_unexecuted_bodies(browser, tmp_path, close_pages):
    # A shard_map body runs on every device: not "in unexecuted bodies" (the cond's branches are).
    cap = _shard_map_capture()
    smap = {g.id for g in cap.groups if g.kind == "body" and g.attrs["role"] == "shard_map body"}
    assert smap
    per_device = sum(1 for n in cap.nodes if n.group in smap)
    templates = sum(1 for n in cap.nodes if n.group is not None and n.group not in smap)
    server = ViewerServer(workspace=make_workspace(tmp_path))
    cid = server.add_capture(cap, "shard_map and cond")
    server.start()
    try:
        app = open_app(browser, server.url_for(cid))
        close_pages.append(app)
        title = app.page.locator("#title").inner_text()
        assert (f"{len(cap.nodes)} nodes · {templates} in unexecuted bodies · "
                f"{per_device} in shard_map bodies (run per device)") in title, title
    finally:
        server.stop()


def test_a_shard_map_body_is_per_device_in_the_summary_its_card_and_the_cost_panel(browser, tmp_path, close_pages):
    # Every device runs a shard_map body once: the capture's summary counts it apart from the
    # cond's templates, its card says its FLOPs per device (not "per iteration"), and the
    # cost panel's share is its FLOPs × its 8 devices of the program's (global) FLOPs: its
    # boundary node's share, the boundary counting the body × its devices.
    cap = _shard_map_capture()
    (body,) = [g for g in cap.groups if g.kind == "body" and g.attrs["role"] == "shard_map body"]
    (smap,) = [n for n in cap.nodes if n.op == "shard_map"]
    (dot,) = [n for n in cap.nodes if n.op == "dot_general"]
    assert body.attrs["devices"] == 8 and cap.cost.flops[dot.id] == 2 * 8 * 2 * 4
    per_device = sum(1 for n in cap.nodes if n.group == body.id)
    templates = sum(1 for n in cap.nodes if n.group is not None and n.group != body.id)
    total = sum(f for n, f in zip(cap.nodes, cap.cost.flops) if n.group is None)
    server = ViewerServer(workspace=make_workspace(tmp_path))
    cid = server.add_capture(cap, "shard_map and cond")
    server.start()
    try:
        app = open_app(browser, server.url_for(cid), viewport={"width": 1500, "height": 950})
        close_pages.append(app)
        app.page.get_by_role("button", name="About this capture").click()
        app.page.locator("#inspector dl.facts").first.wait_for()
        facts = app.page.locator("#inspector dl.facts").first.inner_text()
        assert f"control-flow bodies\n2 as templates ({templates} nodes, not executed)" in facts, facts
        assert f"shard_map bodies\n1 ({per_device} nodes, run per device)" in facts, facts
        _shot(app, "shard-map-1-summary.png")

        before = app.scene_version
        app.js("(k) => window.tensorviz.toggle(k)", f"n{smap.id}")
        app.wait_scene_after(before)
        lines = app.js("(k) => window.tensorviz.itemInfo(k)", f"g{body.id}")["lines"]
        cost = next(x for x in lines if "moved" in x)
        assert "per device" in cost and "per iteration" not in cost, lines
        app.js("(k) => window.tensorviz.center(k)", f"n{smap.id}")

        app.js("() => window.tensorviz.cost.open()")
        app.page.wait_for_function("(k) => window.tensorviz.cost.rows().some((r) => r.key === k)", arg=f"g{body.id}")
        rows = {r["key"]: r for r in app.js("() => window.tensorviz.cost.rows()")}
        row = rows[f"g{body.id}"]
        assert not row["template"] and row["perRun"] == "per device"
        assert row["share"] == pytest.approx(cap.cost.flops[dot.id] * 8 / total)
        assert row["share"] == pytest.approx(rows[f"n{smap.id}"]["share"])
        name = app.page.locator(f".cost-table tr[data-key='g{body.id}'] .cost-name").inner_text()
        assert "~1.09 kFLOPs global" in app.page.inner_text(".cost-totals"), "the total the shares are of"
        assert name.endswith("(per device)") and "per iteration" not in name, name
        app.page.wait_for_timeout(100)
        _shot(app, "shard-map-2-card-and-cost-panel.png")
        if SHOTS:
            app.page.locator(".cost-table").screenshot(path=os.path.join(SHOTS, "shard-map-3-cost-table.png"))
        assert not app.unexpected_errors()
    finally:
        server.stop()


def test_a_partial_manual_shard_map_body_is_per_shard_on_its_card_and_in_the_cost_panel(browser, tmp_path, close_pages):
    # shard_map(axis_names={"i"}) on an i=2 × j=4 mesh: each i shard runs the body once (j
    # automatic), so its card says "per-shard body ×2" and FLOPs "per shard", and the cost
    # panel's share is its FLOPs × 2 shards (not × 8 devices): the whole program's.
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from jax.sharding import PartitionSpec as P

    from capture.jax.convert import convert

    mesh = jax.sharding.AbstractMesh((2, 4), ("i", "j"), axis_types=(jax.sharding.AxisType.Auto,) * 2)

    def net(a, b):
        return jax.shard_map(jnp.dot, mesh=mesh, in_specs=(P("i"), P()), out_specs=P("i"), axis_names={"i"})(a, b)

    cap = convert(jax.make_jaxpr(net)(jnp.ones((16, 16), jnp.float32), jnp.ones((16, 16), jnp.float32)))
    (body,) = [g for g in cap.groups if g.kind == "body" and g.attrs["role"] == "shard_map body"]
    (smap,) = [n for n in cap.nodes if n.op == "shard_map"]
    server = ViewerServer(workspace=make_workspace(tmp_path))
    cid = server.add_capture(cap, "partial-manual shard_map")
    server.start()
    try:
        app = open_app(browser, server.url_for(cid), viewport={"width": 1500, "height": 950})
        close_pages.append(app)
        lines = app.js("(k) => window.tensorviz.itemInfo(k)", f"n{smap.id}")["lines"]
        assert "per-shard body ×2 · opens" in lines, lines
        before = app.scene_version
        app.js("(k) => window.tensorviz.toggle(k)", f"n{smap.id}")
        app.wait_scene_after(before)
        lines = app.js("(k) => window.tensorviz.itemInfo(k)", f"g{body.id}")["lines"]
        cost = next(x for x in lines if "moved" in x)
        assert "per shard" in cost and "per device" not in cost, lines
        app.js("() => window.tensorviz.cost.open()")
        app.page.wait_for_function("(k) => window.tensorviz.cost.rows().some((r) => r.key === k)", arg=f"g{body.id}")
        rows = {r["key"]: r for r in app.js("() => window.tensorviz.cost.rows()")}
        row = rows[f"g{body.id}"]
        assert row["perRun"] == "per shard" and row["share"] == pytest.approx(1.0)
        assert row["share"] == pytest.approx(rows[f"n{smap.id}"]["share"])
        name = app.page.locator(f".cost-table tr[data-key='g{body.id}'] .cost-name").inner_text()
        assert name.endswith("(per shard)"), name
        _shot(app, "shard-map-4-partial-manual.png")
        assert not app.unexpected_errors()
    finally:
        server.stop()
