"""The first layout worker starts while the page's HTML is read (index.html loads
layout/early-worker.js before the app's modules), and the app's layout client adopts it
rather than starting a second one: ELK (1.6 MB) parses while the app's 40 modules load,
not after them. Without the early start the first worker is made only once app.js runs;
without the adoption the page would start two."""

from __future__ import annotations

import pytest

from synthetic import synthetic_capture
from viewer.server.app import STATIC_DIR, ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Every Worker the page makes, with when it was made (before any of the page's scripts run).
RECORD_WORKERS = """
(() => {
  const Real = window.Worker;
  window.__workersMade = [];
  window.Worker = class extends Real {
    constructor(url, options) {
      super(url, options);
      window.__workersMade.push({url: String(url), at: performance.now(), module: !!(options && options.type === "module")});
    }
  };
})();
"""


@pytest.fixture
def server():
    """A viewer server holding a small synthetic capture."""
    served = ViewerServer([synthetic_capture(200)])
    served.start()
    try:
        yield served
    finally:
        served.stop()


def test_the_page_starts_its_layout_worker_before_the_app_and_adopts_it(browser, close_pages, server):
    html = (STATIC_DIR / "index.html").read_text()
    assert html.index("static/layout/early-worker.js") < html.index("static/app.js")
    app = open_app(browser, server.url, prepare=lambda context: context.add_init_script(RECORD_WORKERS))
    close_pages.append(app)
    app.wait("() => window.tensorviz.firstPaintMs !== null")
    made = app.js("() => window.__workersMade")
    script_ran = app.js("() => window.tensorviz.marks.script")
    assert made, "no layout worker was started"
    first = made[0]
    assert first["url"] == "static/layout/layout.worker.js" and first["module"]
    assert first["at"] < script_ran, (first, script_ran)  # started before the app's modules ran
    # adopted: the first view was laid out, by a pool that did not start a second worker for it
    assert app.js("() => window.tensorviz.layoutJobs") > 0
    assert app.js("() => globalThis.tensorvizEarlyWorker") is None
    assert len([m for m in made if m["at"] < script_ran]) == 1
    assert app.keys() and not app.errors and not app.console


# The early worker's script fails to load (it names no file) and says so before app.js runs
# (the error is dispatched as a microtask after early-worker.js has listened, as a fast
# failure would arrive; a real one may come later, when the client's own handler hears it).
FAIL_FIRST_WORKER = """
(() => {
  const Real = window.Worker;
  let first = true;
  window.Worker = class extends Real {
    constructor(url, options) {
      const fail = first && String(url).endsWith("layout.worker.js");
      super(fail ? "static/no-such-worker.js" : url, options);
      first = false;
      if (fail) queueMicrotask(() => this.dispatchEvent(new Event("error")));
    }
  };
})();
"""


def test_an_early_worker_that_failed_before_it_was_adopted_is_replaced(browser, close_pages, server):
    app = open_app(browser, server.url, prepare=lambda context: context.add_init_script(FAIL_FIRST_WORKER))
    close_pages.append(app)
    # not adopted: the client's own worker lays the first view out (adopted, the page
    # waited for ever on a worker that never loaded)
    app.wait("() => window.tensorviz.firstPaintMs !== null")
    assert app.js("() => window.tensorviz.layoutJobs") > 0
