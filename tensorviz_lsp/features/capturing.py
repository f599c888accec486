"""Running captures from the editor: one capture session (:func:`capture.session.run_session`)
per profile at a time, with cancellable work-done progress.

What only the editor knows goes into the session as values: whether the workspace is
trusted (asked with a prompt first, unless the capture runs in the background), a
snapshot of the open buffers (which are dirty, what they hold), the previous capture's
sources, the folder's settings (interpreter, limits, environment, history, warm
worker). The session does every check; this module only runs it off the event loop and
keeps track of what runs.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

from capture.session import CaptureRequest, HistoryLimits, SessionResult, limits_for, run_session

from ..backends import Backends, Span
from ..feature import Feature
from ..host import Host
from .freshness import Freshness
from .interpreter import InterpreterSelection
from .progress import Progress
from .trust import Trust
from .viewer_host import ViewerHost

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CaptureTarget:
    """A capture in the editor: the profile in its folder, and the symbol that messages
    and diagnostics name (``name_range`` in ``uri``)."""

    root: Path
    profile: str
    uri: str
    qualname: str
    name_range: Span

    @property
    def key(self) -> tuple[str, str]:
        return (str(self.root), self.profile)


class CaptureRunner(Feature):
    name = "capture-runner"

    def __init__(self, server: Host, backends: Backends, interpreters: InterpreterSelection, trust: Trust,
                 freshness: Freshness, viewers: ViewerHost) -> None:
        super().__init__(server)
        self.backends = backends
        self.interpreters = interpreters
        self.trust = trust
        self.freshness = freshness
        self.viewers = viewers
        self._running: dict[tuple[str, str], Progress] = {}

    def is_running(self, key: tuple[str, str]) -> bool:
        return key in self._running

    def cancel(self, key: tuple[str, str]) -> bool:
        """Cancel the capture of ``key`` (its worker is killed); False when none runs."""
        progress = self._running.get(key)
        if progress is None:
            return False
        progress.cancel()
        return True

    async def run(self, target: CaptureTarget, *, background: bool = False, purpose: str | None = None) -> SessionResult | None:
        """The session's result; None when a capture of the profile already runs (said
        to the user). ``purpose``: what the trust prompt says runs. ``background``: a
        recapture on save, which asks nothing (an untrusted workspace is refused)."""
        if target.key in self._running:
            self.server.show_message(f"TensorViz: profile {target.profile} is already being captured.")
            return None
        root, profile, qualname = target.root, target.profile, target.qualname
        interp = self.interpreters.for_root(root)
        if background:
            trusted = self.trust.is_trusted(root)
        else:
            trusted = await self.trust.ask(root, purpose or f"Capturing {qualname}", interp.path)
        settings = self.server.settings_for(root)
        previous = self.freshness.records.get(target.key)
        buffers = self.server.buffers()
        log.info("capturing %s (profile %s) in %s with %s%s", qualname, profile, root, interp.describe(),
                 f", environment {' '.join(f'{k}={v}' for k, v in settings.capture_env.items())}"
                 if settings.capture_env else "")
        self.viewers.publish(root, "progress", {"message": f"Capturing {qualname}…", "fraction": 0.0})
        async with Progress(
            self.server,
            f"TensorViz: {'recapturing' if background else 'capturing'} {qualname}",
            cancellable=True,
            message=f"profile {profile}, {interp.describe()}",
        ) as progress:

            def on_progress(message: str, fraction: float | None = None) -> None:
                progress.report(message, fraction)
                self.viewers.publish(root, "progress", {"message": message, "fraction": fraction})

            request = CaptureRequest(
                root, profile, python=interp.path, trusted=trusted,
                limits=limits_for(settings.capture_timeout, settings.max_saved_file_mb, settings.capture_memory_mb),
                env=dict(settings.capture_env),
                is_dirty=buffers.is_dirty, read_text=buffers.read_text,
                known_sources=sorted(previous.sources) if previous is not None else (),
                history=HistoryLimits(settings.history_captures, settings.history_bytes),
                warm_idle_seconds=settings.warm_worker_idle_seconds,
                cancel=progress.cancel_flag, progress=on_progress,
                log=lambda line: log.info("[worker] %s", line),
            )
            self._running[target.key] = progress
            task = asyncio.ensure_future(self.server.run_blocking(run_session, request, self.backends.run_capture))
            try:
                result: SessionResult = await asyncio.shield(task)
            except asyncio.CancelledError:
                # The request itself was cancelled ($/cancelRequest): stop the worker too.
                progress.cancel()
                try:
                    await asyncio.wait_for(asyncio.shield(task), 30)
                except Exception:
                    pass
                raise
            finally:
                self._running.pop(target.key, None)
        for problem in result.problems:
            log.warning("capture of %s (profile %s): %s", qualname, profile, problem)
        return result

    def shutdown(self) -> None:
        for progress in list(self._running.values()):
            progress.cancel()
