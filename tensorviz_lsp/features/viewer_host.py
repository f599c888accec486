"""The loopback viewer servers this language server hosts (one per workspace folder),
opening their URLs, and the URL of each profile's newest graph.

Started on first use, stopped at ``shutdown``. Opening a URL uses
``window/showDocument`` with ``external: true`` when the client supports it;
otherwise (and always, in the log) the URL is shown as a message. What a viewer asks
of the editor (go to source, the setup form, saving a profile, starting a capture) is
answered by the hooks ``wiring.py`` connects (:meth:`ViewerHost.connect`).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable

from lsprotocol import types

from ..backends import Backends, Viewer, ViewerHooks
from ..feature import Feature
from ..host import Host

log = logging.getLogger(__name__)


class ViewerHost(Feature):
    name = "viewer"

    def __init__(self, server: Host, backends: Backends) -> None:
        super().__init__(server)
        self.backends = backends
        # One viewer per workspace folder: each may read only its own folder's files.
        self._viewers: dict[str, Viewer] = {}
        self._lock = threading.Lock()
        self._hooks: Callable[[Path | None], ViewerHooks] | None = None
        #: The viewer URL of each profile's newest graph, by folder, newest last.
        self.urls: dict[str, dict[str, str]] = {}

    def connect(self, hooks: Callable[[Path | None], ViewerHooks]) -> None:
        """What a folder's viewer asks of the editor (made by ``wiring.py`` once the
        features that answer exist)."""
        self._hooks = hooks

    def viewer(self, root: Path | None) -> Viewer:
        """The folder's running viewer server (started on first use; call off the loop)."""
        key = str(root) if root is not None else ""
        with self._lock:
            viewer = self._viewers.get(key)
            if viewer is None:
                if self._hooks is None:
                    raise RuntimeError("the viewer's hooks are not connected")
                viewer = self.backends.start_viewer(root, self._hooks(root))
                self._viewers[key] = viewer
                log.info("viewer server for %s listening at %s", root or "(no folder)", _redact(viewer.url))
            return viewer

    def running(self, root: Path | None) -> Viewer | None:
        return self._viewers.get(str(root) if root is not None else "")

    def remember_url(self, root: Path, profile: str, url: str) -> None:
        urls = self.urls.setdefault(str(root), {})
        urls.pop(profile, None)  # newest last
        urls[profile] = url

    def publish(self, root: Path | None, event: str, data: dict[str, Any]) -> None:
        viewer = self.running(root)
        if viewer is None:
            return
        try:
            viewer.publish(event, data)
        except Exception as exc:
            log.debug("viewer publish %s failed: %s", event, exc)

    async def show_url(self, url: str, what: str) -> bool:
        """Open ``url`` in the user's browser through the editor; True when it did.

        The URL is always logged too (esbonio's habit): a client that cannot open
        it, or a user who closed the tab, can still find it. ``tensorviz.showViewer``
        shows it again.

        Token policy: the token-bearing URL goes to the user only: this one
        ``window/logMessage`` per URL opened, of type Warning because that is the
        least Neovim keeps by default (it drops Info), the message of clients that
        cannot open it, and the command results. The token only works on loopback
        while this server runs; every other log line redacts it (:func:`_redact`)."""
        self.server.log_message(f"TensorViz: {what}: {url}", types.MessageType.Warning)
        if self.server.supports_show_document():
            try:
                result = await self.server.window_show_document_async(
                    types.ShowDocumentParams(uri=url, external=True)
                )
                if result is not None and result.success:
                    return True
                log.warning("the editor could not open the URL itself")
            except Exception as exc:
                log.warning("window/showDocument failed: %s", exc)
        self.server.show_message(f"TensorViz: {what}: open {url}")
        return False

    def shutdown(self) -> None:
        with self._lock:
            viewers, self._viewers = list(self._viewers.values()), {}
        for viewer in viewers:
            try:
                viewer.stop()
            except Exception:
                log.exception("stopping a viewer server failed")

    async def folders_changed(self, added: list[str], removed: list[str]) -> None:
        for folder in removed:
            with self._lock:
                viewer = self._viewers.pop(folder, None)
            if viewer is not None:
                await self.server.run_blocking(viewer.stop)


def _redact(url: str) -> str:
    # The token is a secret for the session; logs may be shared in bug reports.
    parts = url.split("/")
    if len(parts) > 3 and len(parts[3]) >= 16:
        parts[3] = parts[3][:4] + "…"
    return "/".join(parts)
