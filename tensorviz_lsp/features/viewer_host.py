"""The loopback viewer server this language server hosts, and opening its URLs.

Started on first use, stopped at ``shutdown``. Opening a URL uses
``window/showDocument`` with ``external: true`` when the client supports it;
otherwise (and always, in the log) the URL is shown as a message.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from lsprotocol import types

from ..backends import Viewer, ViewerHooks
from ..feature import Feature

log = logging.getLogger(__name__)


class ViewerHost(Feature):
    name = "viewer"

    def __init__(self, server) -> None:
        super().__init__(server)
        self._viewer: Viewer | None = None
        self._lock = threading.Lock()

    def viewer(self) -> Viewer:
        """The running viewer server (started here on first use; call off the loop)."""
        with self._lock:
            if self._viewer is None:
                from .open_graph import OpenGraph
                from .reveal import Reveal

                reveal = self.server.get_feature(Reveal)
                opener = self.server.get_feature(OpenGraph)
                self._viewer = self.server.backends.start_viewer(
                    ViewerHooks(
                        reveal=reveal.reveal_from_viewer,
                        setup=opener.setup_for_viewer,
                        save_profile=opener.save_profile_from_viewer,
                        start_capture=opener.start_capture_from_viewer,
                    )
                )
                log.info("viewer server listening at %s", _redact(self._viewer.url))
            return self._viewer

    @property
    def running(self) -> Viewer | None:
        return self._viewer

    def publish(self, event: str, data: dict[str, Any]) -> None:
        viewer = self._viewer
        if viewer is None:
            return
        try:
            viewer.publish(event, data)
        except Exception as exc:
            log.debug("viewer publish %s failed: %s", event, exc)

    async def show_url(self, url: str, what: str) -> bool:
        """Open ``url`` in the user's browser through the editor; True when it did."""
        log.info("%s: %s", what, url)
        if self.server.supports_show_document():
            try:
                result = await self.server.window_show_document_async(
                    types.ShowDocumentParams(uri=url, external=True)
                )
                if result is not None and getattr(result, "success", False):
                    return True
                log.warning("the editor could not open the URL itself")
            except Exception as exc:
                log.warning("window/showDocument failed: %s", exc)
        self.server.show_message(f"TensorViz: {what}: open {url}")
        return False

    def shutdown(self) -> None:
        with self._lock:
            viewer, self._viewer = self._viewer, None
        if viewer is not None:
            try:
                viewer.stop()
            except Exception:
                log.exception("stopping the viewer server failed")


def _redact(url: str) -> str:
    # The token is a secret for the session; logs may be shared in bug reports.
    parts = url.split("/")
    if len(parts) > 3 and len(parts[3]) >= 16:
        parts[3] = parts[3][:4] + "…"
    return "/".join(parts)
