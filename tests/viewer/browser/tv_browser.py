"""Helpers for the browser tests (imported by name: the tests put this folder on
``sys.path``, like ``tests/viewer/viewer_fixtures.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VIEWPORT = {"width": 1400, "height": 900}


@dataclass
class App:
    """One page of the viewer app and what it logged."""

    page: Any
    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def js(self, fn: str, arg: Any = None) -> Any:
        return self.page.evaluate(fn, arg)

    def wait(self, fn: str, arg: Any = None, timeout: float = 30_000) -> Any:
        return self.page.wait_for_function(fn, arg=arg, timeout=timeout)

    def wait_ready(self, timeout: float = 30_000) -> None:
        self.wait("() => window.tensorviz && window.tensorviz.ready", timeout=timeout)

    @property
    def scene_version(self) -> int:
        return self.js("() => window.tensorviz.sceneVersion")

    def wait_scene_after(self, version: int, timeout: float = 30_000) -> None:
        self.wait("(v) => window.tensorviz.sceneVersion > v", version, timeout=timeout)

    def wait_subscribed(self, server, timeout_ms: int = 5000) -> None:
        """Wait until ``server`` holds an event stream (the page subscribes on load)."""
        for _ in range(timeout_ms // 50):
            if server.subscriber_count:
                return
            self.page.wait_for_timeout(50)
        raise AssertionError("the page never subscribed to api/events")

    def keys(self) -> list[str]:
        return self.js("() => window.tensorviz.keys()")

    def item_rect(self, key: str) -> dict | None:
        return self.js("(k) => window.tensorviz.itemRect(k)", key)

    def item_point(self, key: str, dy: float | None = None) -> tuple[float, float]:
        """Page coordinates of a point inside an item (its title row by default)."""
        r = self.item_rect(key)
        assert r is not None, f"{key} is not laid out"
        box = self.page.locator("#graph").bounding_box()
        if r["x"] < 0 or r["y"] < 0 or r["x"] + r["w"] > box["width"] - 400 or r["y"] + r["h"] > box["height"]:
            self.js("(k) => window.tensorviz.center(k)", key)
            self.page.wait_for_timeout(50)
            r = self.item_rect(key)
        return box["x"] + r["x"] + r["w"] / 2, box["y"] + r["y"] + (dy if dy is not None else min(12, r["h"] / 2))

    def painted_pixels(self) -> int:
        """Canvas pixels (sampled) that differ from the background: the graph was drawn."""
        return self.js(
            """async () => {
                await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
                const c = document.getElementById('graph');
                const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                const bg = [d[0], d[1], d[2]];
                let n = 0;
                for (let i = 0; i < d.length; i += 4 * 7) {
                  if (Math.abs(d[i] - bg[0]) + Math.abs(d[i + 1] - bg[1]) + Math.abs(d[i + 2] - bg[2]) > 30) n++;
                }
                return n;
            }"""
        )

    def save_setup(self, timeout: float = 30_000) -> str:
        """Click the setup form's Save and wait until the whole save is over: the profile
        written and the capture asked for ("Capture started." / "Could not start…"), or
        errors listed. The status is cleared and the listed errors marked stale first, so an
        earlier save's words never count (the form lists errors afresh on every save)."""
        self.page.evaluate(
            """() => {
                document.getElementById('setup-status').textContent = '';
                document.querySelectorAll('#setup-errors li').forEach((li) => { li.dataset.stale = '1'; });
            }"""
        )
        self.page.click("#setup-save")
        self.wait(
            """() => {
                const s = document.getElementById('setup-status').textContent;
                return s.startsWith('Capture started') || s.startsWith('Could not start')
                    || !!document.querySelector('#setup-errors li:not([data-stale])');
            }""",
            timeout=timeout,
        )
        return self.page.locator("#setup-status").inner_text()

    def unexpected_errors(self) -> list[str]:
        # api/setup answers 404 when the server has no setup provider: the browser logs
        # that resource failure itself; it is the documented "no setup form" answer.
        return [e for e in self.errors + self.console if "404" not in e]


def open_app(browser, url: str, *, ready: bool = True, viewport: dict | None = None, prepare=None) -> App:
    """``prepare(context)`` runs before the page loads (say, to route a request)."""
    context = browser.new_context(viewport=viewport or VIEWPORT, accept_downloads=True)
    if prepare is not None:
        prepare(context)
    page = context.new_page()
    app = App(page)
    page.on("console", lambda m: m.type == "error" and app.console.append(m.text))
    page.on("pageerror", lambda e: app.errors.append(str(e)))
    page.goto(url)
    if ready:
        app.wait_ready()
    return app


def make_workspace(root: Path) -> Path:
    """Source files for the synthetic captures' frames (``model/layer{0..6}.py``)."""
    (root / "model").mkdir(parents=True, exist_ok=True)
    for i in range(7):
        lines = [f"# layer {i}", "import jax.numpy as jnp", ""]
        lines += [f"def block_{i}_line_{n}(x):  # line {n}" if n % 5 == 0 else f"    x = jnp.tanh(x) + {n}  # line {n}" for n in range(4, 90)]
        (root / "model" / f"layer{i}.py").write_text("\n".join(lines) + "\n")
    return root
