"""Running captures from the editor: one capture session (:func:`capture.session.run_session`,
through ``Backends.run_session``)
per profile at a time, with cancellable work-done progress, and ``tensorviz.cancelCapture``
(cancel the folder's running captures: the worker is stopped).

Progress names the stage the capture is in and how long it has been in it
(``running the forward (12 s)``), said again every second while nothing else comes
(a forward reports nothing until it ends); the viewer is told each new stage.

What only the editor knows goes into the session as values: whether the workspace is
trusted (asked with a prompt first, unless the capture runs in the background), a
snapshot of the open buffers (which are dirty, what they hold), the previous capture's
sources, the folder's settings (interpreter, limits, environment, history), and the
server's warm workers (the session runs the capture on the folder's; :mod:`.warm_start`
configures them). The session does every check; this module only runs it off the event
loop and keeps track of what runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from capture.graph.model import Capture
from capture.session import CaptureRequest, HistoryLimits, SessionResult, limits_for

from ..backends import Backends, Span
from ..feature import Feature, hook
from ..host import Host
from ..records import CaptureRecords
from ..registry import register
from .args import ArgumentError, CancelArgs
from .interpreter import InterpreterSelection
from .progress import Progress
from .trust import Trust
from .viewer_host import ViewerHost

log = logging.getLogger(__name__)

CANCEL_COMMAND = "tensorviz.cancelCapture"


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


@register
class CaptureRunner(Feature):
    name = "capture-runner"

    def __init__(self, server: Host, backends: Backends, interpreters: InterpreterSelection, trust: Trust,
                 records: CaptureRecords, viewers: ViewerHost) -> None:
        super().__init__(server)
        self.backends = backends
        self.interpreters = interpreters
        self.trust = trust
        self.records = records
        self.viewers = viewers
        self._running: dict[tuple[str, str], Progress] = {}
        #: Why each profile's last capture was cancelled (read once, by whoever reports it).
        self._reasons: dict[tuple[str, str], str] = {}

    def commands(self):
        return {CANCEL_COMMAND: self.cancel_command}

    def is_running(self, key: tuple[str, str]) -> bool:
        return key in self._running

    def running(self) -> list[tuple[str, str]]:
        return list(self._running)

    def cancel(self, key: tuple[str, str], reason: str) -> bool:
        """Cancel the capture of ``key`` (its worker is killed), saying why; False when none runs."""
        progress = self._running.get(key)
        if progress is None:
            return False
        progress.cancel(reason)
        return True

    def cancel_reason(self, key: tuple[str, str]) -> str:
        """Why the last capture of ``key`` was cancelled (once: the reader reports it)."""
        return self._reasons.pop(key, None) or "cancelled"

    async def cancel_command(self, args: list[Any]) -> dict[str, Any]:
        """``tensorviz.cancelCapture {folder?, profile?}``: cancel the running captures of
        the folder (a folder, a file in it, as a path or URI; none: every folder's), or
        of one profile there."""
        a = CancelArgs.parse(args)
        root = self.server.folder_for(a.folder) if a.folder else None
        if a.folder and root is None:
            path = self.server.path_of(a.folder)
            root = path if path is not None and path.is_dir() else None
            if root is None:
                raise ArgumentError(f"tensorviz.cancelCapture: {a.folder} is not a workspace folder or a file in one")
        keys = [k for k in self._running if (root is None or k[0] == str(root)) and (a.profile in (None, k[1]))]
        for key in keys:
            self.cancel(key, "cancelled by the user (tensorviz.cancelCapture)")
        if not keys:
            where = f"profile {a.profile} in " if a.profile else ""
            self.server.show_message(f"TensorViz: no capture of {where}{root or 'any folder'} is running.")
            return {"ok": False, "reason": "none-running"}
        return {"ok": True, "cancelled": [k[1] for k in keys]}

    async def run(self, target: CaptureTarget, *, background: bool = False, purpose: str | None = None,
                  on_graph: Callable[[Capture], None] | None = None) -> SessionResult | None:
        """The session's result; None when a capture of the profile already runs (said
        to the user). ``purpose``: what the trust prompt says runs. ``background``: a
        recapture on save, which asks nothing (an untrusted workspace is refused).
        ``on_graph(capture)``: from the capturing thread, a graph whose statistics follow
        it, as soon as its file is written (the graph first)."""
        if target.key in self._running:
            self.server.show_message(f"TensorViz: profile {target.profile} is already being captured.")
            return None
        root, profile, qualname = target.root, target.profile, target.qualname
        interp = self.interpreters.for_root(root)
        if background:
            trusted = self.trust.is_trusted(root)
        else:
            if not self.trust.is_trusted(root):
                # The person may be in the browser (the setup form's Save and capture): say
                # there what the capture waits for, and where it is asked.
                self.viewers.publish(root, "progress", {
                    "message": f"Waiting for your answer in the editor: TensorViz asks there whether to trust {root} "
                               "before it runs the folder's code.", "fraction": None, "waiting": "trust"})
            trusted = await self.trust.ask(root, purpose or f"Capturing {qualname}", interp.path)
        settings = self.server.settings_for(root)
        previous = self.records.get(target.key)
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

            clock = StageClock(progress)

            def on_progress(message: str, fraction: float | None = None) -> None:
                clock.stage(message, fraction)
                self.viewers.publish(root, "progress", {"message": message, "fraction": fraction})

            request = CaptureRequest(
                root, profile, python=interp.path, trusted=trusted,
                limits=limits_for(settings.capture_timeout, settings.max_saved_file_mb, settings.capture_memory_mb),
                env=dict(settings.capture_env),
                is_dirty=buffers.is_dirty, read_text=buffers.read_text,
                known_sources=sorted(previous.sources) if previous is not None else (),
                history=HistoryLimits(settings.history_captures, settings.history_bytes),
                warm=self.backends.warm_workers(), warm_idle_seconds=settings.warm_worker_idle_seconds,
                cancel=progress.cancel_flag, progress=on_progress,
                log=lambda line: log.info("[worker] %s", line),
                on_graph=(lambda capture, path: on_graph(capture)) if on_graph is not None else None,
            )
            self._running[target.key] = progress
            self._reasons.pop(target.key, None)
            task = asyncio.ensure_future(self.server.run_blocking(self.backends.run_session, request))
            ticking = asyncio.ensure_future(clock.tick())
            try:
                result: SessionResult = await asyncio.shield(task)
            except asyncio.CancelledError:
                # The request itself was cancelled ($/cancelRequest): stop the worker too.
                progress.cancel("the editor cancelled the request ($/cancelRequest)")
                try:
                    await asyncio.wait_for(asyncio.shield(task), 30)
                except Exception:
                    pass
                raise
            finally:
                ticking.cancel()
                self._running.pop(target.key, None)
                if progress.reason is not None:
                    self._reasons[target.key] = progress.reason
            failure = result.capture.failure
            if failure is not None:
                # The progress ends saying how (never "done" for a failed or cancelled capture).
                progress.outcome = ("cancelled" if failure.stage == "cancelled"
                                    else f"failed at {failure.stage}: {failure.type}")
        for problem in result.problems:
            log.warning("capture of %s (profile %s): %s", qualname, profile, problem)
        return result

    @hook
    def shutdown(self) -> None:
        for progress in list(self._running.values()):
            progress.cancel("the language server is stopping")


class StageClock:
    """The capture's current stage and for how long it has run, reported as
    ``STAGE (N s)``: at each new stage, then every :attr:`EVERY` seconds."""

    EVERY = 1.0

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.message = ""
        self.fraction: float | None = None
        self.since = time.monotonic()

    def stage(self, message: str, fraction: float | None) -> None:
        """A new stage (any thread)."""
        if message != self.message:
            self.message, self.since = message, time.monotonic()
        self.fraction = fraction
        self.progress.report(self.text(), fraction)

    def text(self) -> str:
        seconds = time.monotonic() - self.since
        return f"{self.message} ({seconds:.0f} s)" if seconds >= 1 else self.message

    async def tick(self) -> None:
        while True:
            await asyncio.sleep(self.EVERY)
            if self.message:
                self.progress.report(self.text(), self.fraction)
