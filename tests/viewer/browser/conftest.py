"""Browser tests: the real viewer server (in-process) and the real app in Debian's Chromium.

One Chromium per test module (``browser`` fixture), one fresh context per test. The app
runs under the server's real Content-Security-Policy, so page scripts are only ever
evaluated as functions (Playwright's string expressions would need ``unsafe-eval``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # Lets a test send the browser to another host name that resolves to loopback:
    # the DNS-rebinding case the server's Host check must refuse.
    "--host-resolver-rules=MAP rebind.test 127.0.0.1",
]


def _chromium_path() -> str | None:
    if Path(CHROMIUM).exists():
        return CHROMIUM
    return shutil.which("chromium")


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    path = _chromium_path()
    if path is None:
        pytest.skip("Debian's Chromium is not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def close_pages():
    """Collects apps opened by a test and closes their contexts afterwards."""
    opened: list = []
    yield opened
    for app in opened:
        try:
            app.page.context.close()
        except Exception:
            pass
