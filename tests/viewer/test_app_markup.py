"""The browser app's page modules (viewer/static/app.js and what it moved out:
capture-screens.js, canvas-input.js) read the page's markup by id (``$("graph")``, dom.js) and types each one as present (strict ``tsc``): this holds only while
viewer/static/index.html has every id it asks for, and the workspace it toggles."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

STATIC = Path(__file__).resolve().parents[2] / "viewer" / "static"


class _Markup(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.classes: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.append(value)
            elif name == "class" and value:
                self.classes.update(value.split())


def _markup() -> _Markup:
    page = _Markup()
    page.feed((STATIC / "index.html").read_text(encoding="utf-8"))
    return page


PAGE_MODULES = ("app.js", "capture-screens.js", "canvas-input.js")


def test_every_id_app_js_asks_for_is_in_the_page():
    asked: set[str] = set()
    for name in PAGE_MODULES:
        found = set(re.findall(r'\$\("([^"]+)"\)', (STATIC / name).read_text(encoding="utf-8")))
        assert found, f"{name} reads the page through $(id): the pattern no longer matches"
        asked |= found
    # Every module that reads the page by id is one of them.
    for path in STATIC.rglob("*.js"):
        if "vendor" not in path.parts and path.name not in PAGE_MODULES:
            assert not re.search(r'\$\("', path.read_text(encoding="utf-8")), path.name
    assert len(asked) > 40
    page = _markup()
    assert sorted(asked - set(page.ids)) == []
    assert len(page.ids) == len(set(page.ids)), "an id used twice in index.html"


def test_the_workspace_app_js_toggles_is_in_the_page():
    source = (STATIC / "app.js").read_text(encoding="utf-8")
    assert 'document.querySelector(".workspace")' in source
    assert "workspace" in _markup().classes
