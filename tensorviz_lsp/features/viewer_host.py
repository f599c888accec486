"""The loopback viewer servers this language server hosts (one per workspace folder),
opening their URLs, and the URL of each profile's newest graph.

Started on first use, stopped at ``shutdown``. Opening a URL uses
``window/showDocument`` with ``external: true`` when the client supports it;
otherwise (and always, in the log) the URL is shown as a message;
``tensorviz.showViewer`` opens a profile's newest graph again. What a viewer asks of the
editor (go to source, the setup form, saving a profile, starting a capture) is answered
by the feature that knows, which says so in its constructor (:class:`ViewerAnswers`:
:mod:`.reveal`, :mod:`.viewer_setup`, :mod:`.open_graph`).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable

from lsprotocol import types

from ..backends import Backends, Viewer, ViewerHooks
from ..feature import CommandHandler, Feature, hook
from ..host import Host
from ..registry import register
from .args import ShowViewerArgs
from .trust import Trust

log = logging.getLogger(__name__)


@dataclass
class ViewerAnswers:
    """What a folder's viewer asks of the editor, each answered by the one feature that
    knows (it sets its answer in its constructor). Called on the viewer's request
    threads, the folder first (None: no folder)."""

    #: Show ``frame`` (``file`` absolute) in the editor; True when it did.
    reveal: Callable[[Path | None, dict[str, Any]], bool] | None = None
    #: The setup form's content for ``profile`` (None: the folder's last form).
    setup: Callable[[Path | None, str | None], dict[str, Any] | None] | None = None
    #: Validate and save ``(name, recipe)``: ``[{path, message}]``, empty when saved.
    save_profile: Callable[[Path | None, str, dict[str, Any]], list[dict[str, Any]]] | None = None
    #: Start a capture of ``profile`` (``ValueError`` refuses).
    start_capture: Callable[[Path | None, str], None] | None = None

    def hooks_for(self, root: Path | None) -> ViewerHooks:
        """The folder's viewer hooks; a question no feature answers is refused here."""
        missing = [f.name for f in fields(self) if getattr(self, f.name) is None]
        if missing:
            raise RuntimeError(f"no feature answers the viewer's {', '.join(missing)}")
        reveal, setup, save, start = self.reveal, self.setup, self.save_profile, self.start_capture
        assert reveal is not None and setup is not None and save is not None and start is not None
        return ViewerHooks(
            reveal=lambda frame: reveal(root, frame),
            setup=lambda profile: setup(root, profile),
            save_profile=lambda name, recipe: save(root, name, recipe),
            start_capture=lambda profile: start(root, profile),
        )


@register
class ViewerHost(Feature):
    name = "viewer"

    def __init__(self, server: Host, backends: Backends, trust: Trust) -> None:
        super().__init__(server)
        self.backends = backends
        self.trust = trust
        # One viewer per workspace folder: each may read only its own folder's files.
        self._viewers: dict[str, Viewer] = {}
        self._lock = threading.Lock()
        #: What the viewers ask of the editor, answered by the features that know.
        self.answers = ViewerAnswers()
        #: The viewer URL of each profile's newest graph, by folder, newest last.
        self.urls: dict[str, dict[str, str]] = {}

    def commands(self) -> dict[str, CommandHandler]:
        return {"tensorviz.showViewer": self.show_viewer_command}

    def viewer(self, root: Path | None) -> Viewer:
        """The folder's running viewer server (started on first use; call off the loop)."""
        key = str(root) if root is not None else ""
        with self._lock:
            viewer = self._viewers.get(key)
            if viewer is None:
                viewer = self.backends.start_viewer(root, self.answers.hooks_for(root))
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

    async def show_viewer_command(self, args: list[Any]) -> dict[str, Any]:
        """Open (or show) the viewer URL of a profile's newest graph again, without
        capturing; no profile: the folder's newest graph."""
        a = ShowViewerArgs.parse(args)
        root = await self.trust.pick_folder(a.folder, "show the viewer of")
        urls = self.urls.get(str(root), {}) if root is not None else {}
        url: str | None
        profile: str | None
        if a.profile is None and urls:
            profile, url = list(urls.items())[-1]
        else:
            profile, url = a.profile, urls.get(a.profile or "")
        if url is None:
            shown = ", ".join(urls) or "none yet"
            what = f"profile {a.profile!r}" if a.profile else "this folder"
            self.server.show_message(
                f"TensorViz: no graph of {what} in this session (captured: {shown}); "
                "run tensorviz.captureProfile or Open as Graph first.",
                types.MessageType.Warning,
            )
            return {"ok": False, "reason": "no-graph"}
        opened = await self.show_url(url, f"Graph of profile {profile}")
        return {"ok": True, "url": url, "profile": profile, "opened": opened}

    @hook
    def shutdown(self) -> None:
        with self._lock:
            viewers, self._viewers = list(self._viewers.values()), {}
        for viewer in viewers:
            try:
                viewer.stop()
            except Exception:
                log.exception("stopping a viewer server failed")

    @hook
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
