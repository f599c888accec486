"""The inspector (issue 26 item 6, the page's part): an eager capture's measured statistics
in a small table to 4 significant digits (min, max, mean, std, NaN/Inf, bytes; the full
number in each cell's title), where each value lived under it, the op's source first
(above the per-value blocks), and no failed request in the console on a page without a
setup form."""

from __future__ import annotations

import re

import pytest

from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# n2 (`max`, in layer 0's attention) reads value 2 and writes value 3.
NODE = {"type": "node", "id": 2, "key": "n2", "item_path": ["g0", "g1", "g2", "n2"]}
READ = {"min": -4.0937371253967285, "max": 4.101493358612061, "mean": -0.0017602344353993733,
        "std": 1.002325977715603, "nan": 0, "inf": 0}
WRITTEN = {"min": None, "max": None, "mean": None, "std": None, "nan": 16380, "inf": 4}  # nothing finite

TABLE = """() => {
  const t = document.querySelector('#insp-body [data-section=measured] table.stats');
  if (!t) return null;
  const rows = [...t.querySelectorAll('tr.stats-numbers')].map((tr) =>
    [...tr.children].map((td) => ({stat: td.dataset.stat, text: td.textContent, title: td.title, warn: td.classList.contains('warn')})));
  return {
    caption: t.querySelector('caption').textContent,
    head: [...t.querySelectorAll('thead th')].map((th) => th.textContent),
    labels: [...t.querySelectorAll('tr.stats-value th')].map((th) => th.textContent),
    rows,
    where: [...t.querySelectorAll('tr.stats-where td')].map((td) => td.textContent),
  };
}"""
SECTIONS = "() => [...document.querySelectorAll('#insp-body h3')].map((h) => h.textContent)"


@pytest.fixture(scope="module")
def served():
    cap = synthetic_capture(300, grouped=True, framework="torch")
    cap.values[2].measured = {"device": "cpu", "bytes": 65536, "strides": [128, 1], "storage": 2, "stats": READ}
    cap.values[3].measured = {"device": "cpu", "bytes": 65536, "strides": [128, 1], "storage": 2, "aliases": [2, 9],
                              "stats": WRITTEN}
    server = ViewerServer([(cap, "eager torch")])
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _node(browser, served, close_pages):
    app = open_app(browser, served.url)
    close_pages.append(app)
    app.js("(r) => window.tensorviz.jump(r)", NODE)
    app.page.wait_for_function("() => document.getElementById('insp-title').textContent === 'max'")
    return app


def test_measured_statistics_are_a_table_to_four_significant_digits(browser, served, close_pages):
    app = _node(browser, served, close_pages)
    table = app.js(TABLE)
    assert table["caption"] == "statistics"
    assert table["head"] == ["min", "max", "mean", "std", "NaN/Inf", "bytes"]
    assert [re.sub(r"\s+", " ", t).strip() for t in table["labels"]] == ["in #0 %2 f32[128,128]", "out 0 %3 f32[128,128]"]
    read, written = ({c["stat"]: c for c in row} for row in table["rows"])
    assert {k: c["text"] for k, c in read.items()} == {
        "min": "-4.094", "max": "4.101", "mean": "-0.00176", "std": "1.002", "nonfinite": "0 / 0", "bytes": "65536"}
    # The full number stays a hover away; the bytes' title says them in units.
    assert read["min"]["title"] == "-4.0937371253967285" and read["bytes"]["title"] == "64 KiB"
    assert not read["nonfinite"]["warn"]
    # Nothing finite: no statistic, and the NaN/Inf count stands out.
    assert [written[k]["text"] for k in ("min", "max", "mean", "std")] == ["—"] * 4
    assert written["nonfinite"]["text"] == "16380 / 4" and written["nonfinite"]["warn"]
    # Where each value lived, in words under it.
    assert table["where"] == ["cpu · strides [128, 1] · storage 2", "cpu · strides [128, 1] · storage 2 · aliases %2 %9"]
    for c in read.values():  # no 17-digit floats: at most 4 significant digits in a statistic
        if c["stat"] in ("min", "max", "mean", "std"):
            mantissa = c["text"].split("e")[0]
            assert len(re.sub(r"^[-−0.]+", "", mantissa).replace(".", "")) <= 4, c
    assert app.unexpected_errors() == []


def test_the_source_comes_before_the_values(browser, served, close_pages):
    app = _node(browser, served, close_pages)
    sections = app.js(SECTIONS)
    assert sections[0] == "Source"
    assert sections.index("Source") < sections.index("Inputs") < sections.index("Outputs") < sections.index("Measured")
    # A value of its own (a weight line, a pill) has the same table, one row.
    app.js("() => window.tensorviz.store.selectWeight('n2', 2)")
    app.page.wait_for_function("() => document.getElementById('inspector').dataset.kind === 'value'")
    table = app.js(TABLE)
    assert [c["text"] for c in table["rows"][0]] == ["-4.094", "4.101", "-0.00176", "1.002", "0 / 0", "65536"]


def test_a_page_without_a_setup_asks_for_none_and_logs_no_failed_request(browser, served, close_pages):
    asked = []

    def prepare(context):
        context.on("request", lambda r: asked.append(r.url))

    app = open_app(browser, served.url, prepare=prepare)
    close_pages.append(app)
    app.js("() => window.tensorviz.store.select('g2')")  # the page at work: details fetched
    app.page.wait_for_function("() => document.getElementById('inspector').dataset.kind === 'group'")
    assert app.js("() => window.tensorviz.store.capture.setup") is False
    assert app.page.locator("#btn-setup").is_hidden()
    assert [u for u in asked if "api/capture" in u] and not [u for u in asked if "api/setup" in u]
    assert app.console == [] and app.errors == []  # no "Failed to load resource: … 404"
