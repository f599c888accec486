"""The viewer's HTTP API is written down once, in ``viewer/API.md``, and the two sides are
checked against it: the server's routes (``viewer/server/handlers.py``'s ``_GETS`` and
``_POSTS``) are exactly the documented ones, and every request the browser app makes
(``viewer/static/api.js``) is a documented route with documented query parameters."""

from __future__ import annotations

import re
from pathlib import Path

from viewer.server import handlers

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "viewer" / "API.md").read_text(encoding="utf-8")
CLIENT = (ROOT / "viewer" / "static" / "api.js").read_text(encoding="utf-8")


def _documented(method: str) -> set[str]:
    return set(re.findall(rf"`{method} api/([a-z_]+)", DOC))


def _client_calls(method: str) -> dict[str, set[str]]:
    """Each route the client calls with ``this.get``/``this.post``, and the keys of the
    parameter object it passes (``{ group, max_items: …, kernels: … }``)."""
    calls: dict[str, set[str]] = {}
    for name, params in re.findall(rf'this\.{method}\("([a-z_]+)"(?:,\s*\{{(.*?)\}})?\)', CLIENT, re.S):
        keys = {k for k in re.findall(r"(?:^|,)\s*(?:\.\.\.)?([a-z_]+)", params) if k != "f"}
        calls.setdefault(name, set()).update(keys)
    return calls


def test_the_server_serves_exactly_the_documented_routes():
    assert set(handlers._GETS) == _documented("GET"), "viewer/API.md and handlers._GETS disagree"
    assert set(handlers._POSTS) == _documented("POST"), "viewer/API.md and handlers._POSTS disagree"


def test_the_client_calls_documented_routes_only():
    gets, posts = _client_calls("get"), _client_calls("post")
    assert gets and posts, "the client's calls were not found: has api.js changed shape?"
    assert set(gets) <= _documented("GET"), set(gets) - _documented("GET")
    assert set(posts) <= _documented("POST"), set(posts) - _documented("POST")
    assert set(re.findall(r'this\.url\("([a-z_]+)"', CLIENT)) <= _documented("GET")


def test_the_client_sends_documented_query_parameters():
    undocumented = []
    for name, keys in _client_calls("get").items():
        for key in keys:
            # Documented as `KEY=` in a request (api/NAME?KEY=…, or `KEY=1` on api/NAME),
            # or as a `{KEY` field of a POST body.
            if not re.search(rf"[`?&]{key}=", DOC):
                undocumented.append(f"api/{name}?{key}")
    assert not undocumented, f"the client sends parameters viewer/API.md does not document: {undocumented}"


def test_a_route_missing_from_the_document_is_caught(monkeypatch):
    monkeypatch.setitem(handlers._GETS, "undocumented_route", lambda h, q: None)
    try:
        test_the_server_serves_exactly_the_documented_routes()
    except AssertionError:
        return
    raise AssertionError("an undocumented route passed the contract check")
