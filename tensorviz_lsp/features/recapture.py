"""Recapture on save (``tensorviz.recaptureOnSave``, default off).

When a saved file (``textDocument/didSave``, or a change on disk reported by
``workspace/didChangeWatchedFiles``) is a source of a graph captured in this session,
or the saved recipes file changes that graph's profile, the graph is captured again in
the background, with work-done progress in the editor, through the same flow and
checks as Open as Graph (trust, saved source, interpreter, dependencies…). On the
folder's warm worker when there is one (``tensorviz.warmWorkerIdleSeconds``).

- Success: the viewer tab showing the old graph updates in place (``capture-ready``
  with ``replaces``), keeping its camera and expansion; the stale diagnostic and
  banner clear (the new capture is fresh).
- Failure: the previous graph stays on screen under a failure banner, and the editor
  gets the failure diagnostic on the symbol (as for Open as Graph, without pop-ups).
- Saves while a capture of the same profile runs are coalesced: the newest wins; the
  running capture is cancelled (its worker killed) and only the newest one runs.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import safe_read

from lsprotocol import types

from ..backends import RECIPES_PATH, Backends, recipes_root
from ..feature import Feature
from ..host import Host
from .capturing import CaptureRunner, CaptureTarget
from .freshness import Freshness, profile_change
from .interpreter import InterpreterSelection
from .open_graph import OpenGraph
from .records import Record

log = logging.getLogger(__name__)


class RecaptureOnSave(Feature):
    name = "recapture-on-save"

    def __init__(self, server: Host, backends: Backends, interpreters: InterpreterSelection, freshness: Freshness,
                 runner: CaptureRunner, open_graph: OpenGraph) -> None:
        super().__init__(server)
        self.backends = backends
        self.interpreters = interpreters
        self.freshness = freshness
        self.runner = runner
        self.open_graph = open_graph
        #: The newest save's number per (folder, profile): an older run that sees a newer
        #: number gives way.
        self._generation: dict[tuple[str, str], int] = {}
        self._tasks: dict[tuple[str, str], asyncio.Future] = {}
        #: What triggered each profile's newest run (file and its bytes' hash): the same
        #: save reported twice (didSave, then the file watcher) starts nothing new.
        self._trigger: dict[tuple[str, str], tuple[str, str]] = {}

    # -- hooks -------------------------------------------------------------------
    async def document_saved(self, uri: str) -> None:
        await self._saved(self.server.path_of(uri))

    async def files_changed(self, changes: list[types.FileEvent]) -> None:
        for change in changes:
            if change.type != types.FileChangeType.Deleted:
                await self._saved(self.server.path_of(change.uri))

    def settings_changed(self) -> None:
        """A folder's interpreter or capture environment setting changed: its warm
        worker goes now rather than at the next capture."""
        for root in self.server.folders():
            settings = self.server.settings_for(root)
            interp = self.interpreters.for_root(root)
            python = interp.path if settings.warm_worker_idle_seconds > 0 else None
            try:
                self.backends.warm_retain(root, python, dict(settings.capture_env))
            except Exception:
                log.exception("checking the warm worker of %s failed", root)

    def folders_changed(self, added: list[str], removed: list[str]) -> None:
        for folder in removed:
            self.backends.warm_retain(Path(folder), None, {})

    def shutdown(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        try:
            self.backends.shutdown()  # the warm workers go with the server
        except Exception:
            log.exception("stopping the warm workers failed")

    # -- which graphs a save concerns ----------------------------------------------
    async def _saved(self, path: Path | None) -> None:
        if path is None or self.server.stopping:
            return
        freshness = self.freshness
        for rec in list(freshness.records.values()):
            if not self.server.settings_for(rec.root).recapture_on_save:
                continue
            if await self._concerns(rec, path):
                key = (str(rec.root), rec.profile)
                trigger = (str(path), await self.server.run_blocking(_digest, path))
                if key in self._tasks and self._trigger.get(key) == trigger:
                    continue
                self._trigger[key] = trigger
                self.schedule(rec)

    async def _concerns(self, rec: Record, path: Path) -> bool:
        root = recipes_root(path)
        if root is not None and _same(root, rec.root):
            text = self.server.read_text(rec.root / RECIPES_PATH)
            verdict = await self.server.run_blocking(
                profile_change, rec.capture.recipe, rec.profile, text
            )
            return isinstance(verdict, str) and not verdict.endswith("removed)")
        try:
            rel = path.resolve().relative_to(rec.root.resolve()).as_posix()
        except ValueError:
            return False
        if rel not in rec.sources:
            return False
        # Saved as captured (a save without edits, or an edit undone): nothing to do.
        changed = await self.server.run_blocking(self.backends.changed_sources, rec.capture, rec.root, {})
        return rel in changed

    # -- running ---------------------------------------------------------------------
    def schedule(self, rec: Record) -> asyncio.Future:
        """Recapture ``rec``'s profile; a run of it in progress is cancelled."""
        key = (str(rec.root), rec.profile)
        generation = self._generation.get(key, 0) + 1
        self._generation[key] = generation
        if self.runner.cancel(key):
            log.info("save while %s is being captured: cancelling that capture, the newest save wins", rec.profile)
        previous = self._tasks.get(key)
        task = asyncio.ensure_future(self._run(key, generation, previous))
        self._tasks[key] = task
        task.add_done_callback(lambda t: self._tasks.get(key) is t and self._tasks.pop(key, None))
        return task

    async def _run(self, key: tuple[str, str], generation: int, previous: asyncio.Future | None) -> dict[str, Any]:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        # A capture of the profile started another way (Open as Graph) ends first: it was
        # cancelled above.
        for _ in range(600):
            if not self.runner.is_running(key) or self._generation.get(key) != generation:
                break
            await asyncio.sleep(0.05)
        if self._generation.get(key) != generation or self.server.stopping:
            return {"ok": False, "reason": "superseded"}
        rec = self.freshness.records.get(key)
        if rec is None:
            return {"ok": False, "reason": "no-graph"}
        log.info("recapturing %s (profile %s) after a save", rec.qualname, rec.profile)
        try:
            return await self.open_graph.capture(
                CaptureTarget(rec.root, rec.profile, rec.uri, rec.qualname, rec.name_range),
                show=False, retry=False, background=True,
            )
        except Exception:
            log.exception("recapture of %s failed", rec.profile)
            return {"ok": False, "reason": "error"}


def _digest(path: Path) -> str:
    import hashlib

    try:
        return hashlib.sha256(safe_read.read_bytes(path, max_bytes=1 << 30)).hexdigest()
    except OSError:
        return ""


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b
