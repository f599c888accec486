"""The viewer's store (viewer/static/model/store.js): its named actions change the state and
fire change events, the panels and the renderer follow those events, and nothing outside
the store can write its state. One panel pattern (panels/panel.js) for every panel."""

from __future__ import annotations

import re

import pytest

from synthetic import synthetic_capture
from viewer.server.app import STATIC_DIR, ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Records every change event of the page's store from now on, as [topic, detail] with
# Sets as sorted lists and the scene as its item count.
RECORD = """() => {
  const store = window.tensorviz.store;
  window.__events = [];
  const plain = (d) => Object.fromEntries(Object.entries(d).map(([k, v]) =>
    [k, v instanceof Set ? [...v].sort() : k === 'scene' ? (v ? v.count : null) : k === 'capture' ? v.id : v]));
  for (const topic of ['capture', 'status', 'selection', 'outline', 'panels', 'options', 'expansion', 'scene']) {
    store.on(topic, (d) => window.__events.push([topic, plain(d)]));
  }
}"""
EVENTS = "() => window.__events.splice(0)"
SHOWN = """() => ({
  inspector: !document.getElementById('inspector').hidden,
  setup: !document.getElementById('setup').hidden,
  results: !document.getElementById('search-results').hidden,
  sideOpen: document.querySelector('.workspace').classList.contains('panel-open'),
})"""


@pytest.fixture(scope="module")
def served():
    server = ViewerServer([(synthetic_capture(1200, grouped=True, opaque_every=7), "synthetic grouped")])
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def app(browser, served, close_pages):
    a = open_app(browser, served.url)
    close_pages.append(a)
    a.js(RECORD)
    return a


def topics(events) -> list[str]:
    return [t for t, _ in events]


def test_selecting_fires_a_selection_event_and_the_inspector_and_side_follow(app):
    app.js("() => window.tensorviz.store.select('g2')")
    events = app.js(EVENTS)
    # The inspector follows the selection and opens: the panels' event comes from inside it.
    assert sorted(topics(events)) == ["panels", "selection"]
    assert ["selection", {"key": "g2", "value": None, "multi": None}] in events
    assert ["panels", {"open": ["inspector"], "side": "inspector"}] in events
    assert app.js(SHOWN) == {"inspector": True, "setup": False, "results": False, "sideOpen": True}
    assert app.js("() => window.tensorviz.selected") == "g2"
    app.page.wait_for_function("() => document.getElementById('inspector').dataset.kind === 'group'")
    # A weight line's value keeps the op selected and says which value is shown.
    app.js("() => window.tensorviz.store.selectWeight('g2', 7)")
    assert app.js(EVENTS) == [["selection", {"key": "g2", "value": 7, "multi": None}]]
    app.js("() => window.tensorviz.store.select(null)")
    events = app.js(EVENTS)
    assert sorted(map(str, events)) == sorted(map(str, [["selection", {"key": None, "value": None, "multi": None}],
                                                         ["panels", {"open": [], "side": None}]]))
    assert app.js(SHOWN) == {"inspector": False, "setup": False, "results": False, "sideOpen": False}


def test_side_panels_share_the_side_one_at_a_time(app):
    app.js("() => window.tensorviz.store.select('g2')")
    app.js("() => window.tensorviz.store.openPanel('setup')")
    assert app.js(SHOWN) == {"inspector": False, "setup": True, "results": False, "sideOpen": True}
    assert app.js(EVENTS)[-1] == ["panels", {"open": ["setup"], "side": "setup"}]
    app.js("() => window.tensorviz.store.closePanel('setup')")
    assert app.js(SHOWN)["sideOpen"] is False
    # The search results are a panel too, not a side one: they open beside the inspector.
    app.js("() => window.tensorviz.store.select('g2')")
    app.page.fill("#search", "layer_5")
    app.page.wait_for_selector("#search-results li[role=option]")
    assert app.js("() => window.tensorviz.store.isOpen('search')")
    assert app.js(SHOWN) == {"inspector": True, "setup": False, "results": True, "sideOpen": True}
    app.page.keyboard.press("Escape")
    assert app.js(SHOWN) == {"inspector": False, "setup": False, "results": False, "sideOpen": False}


def test_expansion_actions_lay_out_then_fire_scene_and_expansion(app):
    assert "g3" not in app.js("() => window.tensorviz.expanded")
    app.js(EVENTS)
    assert app.js("() => window.tensorviz.store.expand('g3')") is True
    events = app.js(EVENTS)
    assert topics(events) == ["scene", "expansion"]
    assert events[0][1]["scene"] == len(app.keys())
    assert "g3" in app.js("() => window.tensorviz.expanded")
    assert any(k.startswith("n") for k in app.keys())  # g3's ops are laid out and drawn
    assert app.js("() => window.tensorviz.store.collapse('g3')") is True
    assert topics(app.js(EVENTS)) == ["scene", "expansion"]
    assert "g3" not in app.js("() => window.tensorviz.expanded")
    assert app.js("() => window.tensorviz.store.setDepth(3)") is True
    assert topics(app.js(EVENTS)) == ["scene", "expansion"]
    assert {"g0", "g1", "g2", "g3"} <= set(app.js("() => window.tensorviz.expanded"))
    # Two changes at once: the older one is superseded (false), the newer one shows both.
    both = app.js("""async () => {
      const s = window.tensorviz.store;
      const a = s.collapseAll();
      const b = s.expand('g1');
      return [await a, await b];
    }""")
    assert both == [False, True]
    assert set(app.js("() => window.tensorviz.expanded")) == {"g-1", "g1"}
    assert topics(app.js(EVENTS)) == ["scene", "expansion"]


def test_how_the_graph_is_drawn_is_an_option_with_its_own_event(app):
    assert app.js("() => window.tensorviz.store.setWeightPills(true)") is True
    events = app.js(EVENTS)
    assert events[0] == ["options", {"weightPills": True, "kernels": False, "perDevice": False}]
    assert "scene" in topics(events)
    assert app.page.locator("#btn-weights").get_attribute("aria-pressed") == "true"
    assert app.js("() => window.tensorviz.weightPills") is True


def test_nothing_outside_the_store_writes_its_state(app):
    app.js("() => window.tensorviz.store.select('g2')")
    changed = app.js("""() => {
      const s = window.tensorviz.store;
      const tries = {selected: 'g5', capture: null, model: null, ready: false, weightPills: true};
      const refused = [];
      for (const [k, v] of Object.entries(tries)) {
        try { s[k] = v; } catch (e) { refused.push(k); }
      }
      return {refused, selected: s.selected, capture: s.capture !== null, model: s.model !== null, ready: s.ready, weightPills: s.weightPills};
    }""")
    assert changed["selected"] == "g2" and changed["capture"] and changed["model"] and changed["ready"]
    assert changed["weightPills"] is False


def test_every_panel_follows_one_pattern():
    panels = STATIC_DIR / "panels"
    for name in ("inspector.js", "setup.js", "search.js", "diff.js", "lines.js"):
        text = (panels / name).read_text()
        assert re.search(r"class \w+ extends Panel\b", text), f"{name} is not a Panel"
    for path in STATIC_DIR.rglob("*.js"):
        if "vendor" in path.parts:
            continue
        text = path.read_text()
        assert "panelsChanged" not in text, path.name
        # A panel is shown or hidden by the panel pattern only, never by another module.
        if path.name != "panel.js":
            assert not re.search(r"getElementById\(\"(inspector|setup|search-results)\"\)\.hidden\s*=", text), path.name
