"""Token and Host checks as a browser meets them: no token, a wrong token, another host
name resolving to loopback (DNS rebinding), and requests from another origin."""

from __future__ import annotations

import pytest

from synthetic import synthetic_capture
from viewer.server.app import ViewerServer

from tv_browser import open_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def server():
    s = ViewerServer([(synthetic_capture(50), "small")])
    s.start()
    try:
        yield s
    finally:
        s.stop()


def _goto(browser, url):
    """Navigate like a person would; the answer as the browser received it. (Chromium
    shows its own error page for an empty 403, so the navigation itself "fails".)"""
    context = browser.new_context()
    page = context.new_page()
    try:
        with page.expect_response(lambda r: r.url == url) as info:
            try:
                page.goto(url)
            except Exception:
                pass
        resp = info.value
        headers = dict(resp.headers)
        # What the server sent: Chromium substitutes its own error page for an empty 403.
        body = b"" if headers.get("content-length") == "0" else resp.body()
        return resp.status, body, headers
    finally:
        context.close()


def test_without_the_token_the_browser_gets_an_empty_403(browser, server):
    base = f"http://127.0.0.1:{server.port}"
    for path in ("/", "/index.html", "/static/app.js", "/api/capture", "/x" + server.token + "/"):
        status, body, headers = _goto(browser, base + path)
        assert (status, body) == (403, b""), path
        assert "access-control-allow-origin" not in headers


def test_a_wrong_token_is_403(browser, server):
    wrong = server.token[:-2] + ("AA" if not server.token.endswith("AA") else "BB")
    status, body, _ = _goto(browser, f"http://127.0.0.1:{server.port}/{wrong}/")
    assert (status, body) == (403, b"")


def test_another_host_name_on_loopback_is_403_even_with_the_token(browser, server):
    # rebind.test resolves to 127.0.0.1 (--host-resolver-rules): the browser sends
    # Host: rebind.test:PORT, as a DNS-rebinding page would.
    status, body, _ = _goto(browser, f"http://rebind.test:{server.port}/{server.token}/")
    assert (status, body) == (403, b"")
    status, _, _ = _goto(browser, f"http://rebind.test:{server.port}/{server.token}/api/capture")
    assert status == 403


def test_localhost_with_the_token_is_served(browser, server):
    status, body, headers = _goto(browser, f"http://localhost:{server.port}/{server.token}/")
    assert status == 200 and b"TensorViz" in body
    assert "script-src 'self'" in headers["content-security-policy"]


def test_the_app_itself_cannot_reach_tokenless_urls_and_sends_no_cors(browser, server, close_pages):
    app = open_app(browser, server.url)
    close_pages.append(app)
    got = app.js(
        """async () => {
            const bare = await fetch('/api/capture');
            const good = await fetch('api/capture');
            return [bare.status, (await bare.text()).length, good.status, good.headers.get('access-control-allow-origin')];
        }"""
    )
    assert got == [403, 0, 200, None]


def test_a_page_on_another_origin_cannot_read_the_api(browser, server, close_pages):
    # A page served from rebind.test (another origin) tries to fetch the viewer API with the
    # right token: no CORS header means the browser refuses to hand it the answer.
    app = open_app(browser, server.url)
    close_pages.append(app)
    other = browser.new_context()
    try:
        page = other.new_page()
        page.goto(f"http://localhost:{server.port}/{server.token}/")  # a different origin from 127.0.0.1
        result = page.evaluate(
            """async (url) => {
                try { const r = await fetch(url); return 'read:' + r.status; }
                catch (e) { return 'blocked'; }
            }""",
            server.url + "api/capture",
        )
        assert result == "blocked"
    finally:
        other.close()


def test_inline_script_and_inline_style_are_blocked_by_the_csp(browser, server, close_pages):
    app = open_app(browser, server.url)
    close_pages.append(app)
    blocked = app.js(
        """async () => {
            const violations = [];
            document.addEventListener('securitypolicyviolation', (e) => violations.push(e.effectiveDirective));
            const s = document.createElement('script');
            s.textContent = 'window.__inline = 1';
            document.body.append(s);
            const st = document.createElement('style');
            st.textContent = 'body { display: none !important; }';
            document.head.append(st);
            await new Promise((r) => setTimeout(r, 100));
            return [window.__inline === undefined, getComputedStyle(document.body).display !== 'none', violations.sort()];
        }"""
    )
    assert blocked[0] and blocked[1]
    assert "script-src-elem" in blocked[2] and "style-src-elem" in blocked[2]
