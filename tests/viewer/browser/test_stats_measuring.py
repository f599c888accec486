"""The graph first, in the browser (issue 51): a graph whose parameters' statistics follow
it (``meta.stats_pending``) shows each such parameter as "measuring…" in the inspector;
the capture that has them completes it in place (``add_capture(..., replaces=id,
in_place=True)``: the same id and URL, ``capture-ready`` with ``replaces``) and the
inspector then shows their numbers."""

from __future__ import annotations

import copy

import pytest

from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import make_workspace, open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# n2 (`max`, in layer 0's attention) reads value 2 (a parameter here) and writes value 3.
NODE = {"type": "node", "id": 2, "key": "n2", "item_path": ["g0", "g1", "g2", "n2"]}
STATS = {"min": -1.5, "max": 2.25, "mean": 0.125, "std": 0.75, "nan": 0, "inf": 0}
CELLS = """() => [...document.querySelectorAll('#insp-body [data-section=measured] tr.stats-numbers')].map((tr) =>
  [...tr.children].map((td) => [td.dataset.stat, td.textContent]))"""


def _captures():
    first = synthetic_capture(300, grouped=True, framework="torch")
    first.values[2].measured = {"device": "cpu", "bytes": 64, "strides": [1], "storage": 2, "param": "layer0.w"}
    first.values[3].measured = {"device": "cpu", "bytes": 64, "strides": [1], "storage": 3, "stats": STATS}
    first.meta["stats_pending"] = 1
    second = copy.deepcopy(first)
    second.values[2].measured["stats"] = STATS
    del second.meta["stats_pending"]
    return first, second


def test_a_parameter_is_measuring_until_the_capture_with_its_statistics_replaces_the_graph(browser, tmp_path, close_pages):
    first_cap, second_cap = _captures()
    server = ViewerServer(workspace=make_workspace(tmp_path / "ws"))
    first = server.add_capture(first_cap, "net (p)")
    server.start()
    try:
        app = open_app(browser, server.url_for(first))
        close_pages.append(app)
        app.wait_subscribed(server)
        app.js("(r) => window.tensorviz.jump(r)", NODE)
        app.page.wait_for_function("() => document.getElementById('insp-title').textContent === 'max'")
        read, written = app.js(CELLS)
        assert read[0] == ["measuring", "measuring…"] and read[1][0] == "nonfinite"
        assert [c[0] for c in written][:4] == ["min", "max", "mean", "std"]  # an activation: measured in the forward

        second = server.add_capture(second_cap, "net (p)", replaces=first, in_place=True)
        assert second == first  # the same graph completed: its id and URL
        app.wait("() => window.tensorviz.liveUpdates === 1")
        assert app.js("() => window.tensorviz.captureId") == first
        app.js("(r) => window.tensorviz.jump(r)", NODE)
        app.page.wait_for_function(
            "() => [...document.querySelectorAll('#insp-body td[data-stat=min]')].length === 2")
        read, _ = app.js(CELLS)
        assert dict(read)["min"] == "-1.5" and dict(read)["std"] == "0.75"
        assert app.unexpected_errors() == []
    finally:
        server.stop()
