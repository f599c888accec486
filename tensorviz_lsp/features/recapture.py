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
- A capture that failed (a recapture, or Open as Graph) is tried again by the next save
  of any file it depends on (what it imports, the recipes file), even one that brings
  the file back to what the last good graph was captured from.
- A save of a source that does not parse starts nothing: a capture would fail at its
  import (and cost the warm worker nothing, but a failure). The log and the viewer say
  which file and line, the lens too (:mod:`.lenses`); the next save that parses captures.
"""

from __future__ import annotations

import ast
import asyncio
import logging
from pathlib import Path
from typing import Any, Callable

import safe_read

from lsprotocol import types

from capture.graph.freshness import source_sha256

from ..backends import RECIPES_PATH, Backends, recipes_root
from ..feature import Feature, hook
from ..host import Host
from .capturing import CaptureRunner, CaptureTarget
from .freshness import profile_change
from .capture_failures import FailureDiagnostics
from .capture_flow import SUPERSEDED, CaptureFlow
from ..records import CaptureRecords, Record, rel_path, same_folder
from ..registry import register

log = logging.getLogger(__name__)


@register
class RecaptureOnSave(Feature):
    name = "recapture-on-save"

    def __init__(self, server: Host, backends: Backends, records: CaptureRecords, runner: CaptureRunner,
                 flow: CaptureFlow, failures: FailureDiagnostics) -> None:
        super().__init__(server)
        self.backends = backends
        self.records = records
        self.runner = runner
        self.flow = flow
        self.failures = failures
        #: The newest save's number per (folder, profile): an older run that sees a newer
        #: number gives way.
        self._generation: dict[tuple[str, str], int] = {}
        self._tasks: dict[tuple[str, str], asyncio.Future] = {}
        #: What triggered each profile's newest run (file and its bytes' hash): the same
        #: save reported twice (didSave, then the file watcher) starts nothing new.
        self._trigger: dict[tuple[str, str], tuple[str, str | None]] = {}
        #: Profiles whose last capture failed (or was not started: a source did not
        #: parse), with what to capture and the files a save of which tries again.
        self._failed: dict[tuple[str, str], tuple[CaptureTarget, set[Path]]] = {}

    # -- hooks -------------------------------------------------------------------
    @hook
    async def document_saved(self, uri: str) -> None:
        await self._saved(self.server.path_of(uri))

    @hook
    async def files_changed(self, changes: list[types.FileEvent]) -> None:
        for change in changes:
            if change.type != types.FileChangeType.Deleted:
                await self._saved(self.server.path_of(change.uri))

    @hook
    def capture_failed(self, target: CaptureTarget, files: set[Path]) -> None:
        self._failed[target.key] = (target, set(files))

    @hook
    def capture_landed(self, record: Record) -> None:
        self._failed.pop((str(record.root), record.profile), None)

    @hook
    def shutdown(self) -> None:
        for task in self._tasks.values():
            task.cancel()

    # -- which graphs a save concerns ----------------------------------------------
    async def _saved(self, path: Path | None) -> None:
        if path is None or self.server.stopping:
            return
        wanted: dict[tuple[str, str], tuple[CaptureTarget, list[str]]] = {}
        for rec in self.records.all():
            if self.server.settings_for(rec.root).recapture_on_save and await self._concerns(rec, path):
                target = CaptureTarget(rec.root, rec.profile, rec.uri, rec.qualname, rec.name_range)
                wanted[target.key] = (target, sorted(rec.sources))
        resolved = _resolved(path)
        for key, (target, files) in list(self._failed.items()):
            # Tried again whatever the bytes: the save that fixes it may restore the text
            # the last good graph was captured from.
            if key not in wanted and resolved in files and self.server.settings_for(target.root).recapture_on_save:
                wanted[key] = (target, sorted(rel for f in files if (rel := rel_path(target.root, f))))
        for key, (target, sources) in wanted.items():
            trigger = (str(path), await self.server.run_blocking(source_sha256, str(path)))
            if key in self._tasks and self._trigger.get(key) == trigger:
                continue
            self._trigger[key] = trigger
            problem = await self.server.run_blocking(_unparsable, target.root, [path, *(target.root / s for s in sources)],
                                                     self.server.buffers().read_text)
            if problem is not None:
                self._not_parsed(target, problem, path)
                continue
            self.schedule(target)

    def _not_parsed(self, target: CaptureTarget, problem: str, saved: Path) -> None:
        """A source does not parse: nothing runs; said in the log and on the viewer's
        banner, and tried again by the next save (the lens says it too)."""
        root = target.root
        files = self._failed.get(target.key, (target, set()))[1] | {_resolved(saved)}
        self._failed[target.key] = (target, files)
        if self.runner.cancel(target.key, SUPERSEDED):
            pass  # a recapture of the text before this save is no use either
        log.warning("not recapturing %s (profile %s): %s; the next save that parses captures it",
                    target.qualname, target.profile, problem)
        self.failures.banner(root, {
            "message": f"not recaptured: {problem}; the graph shown is the last good one", "stage": "source",
            "profile": target.profile})
        if self.server.supports_lens_refresh():
            asyncio.ensure_future(_refresh_lenses(self.server))

    async def _concerns(self, rec: Record, path: Path) -> bool:
        root = recipes_root(path)
        if root is not None and same_folder(root, rec.root):
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
        if not await self.server.run_blocking(uses_source, rec.root, rec.capture, rel, self.server.buffers().read_text):
            return False  # imported with the model's package, but nothing of it is used
        # Saved as captured (a save without edits, or an edit undone): nothing to do.
        changed = await self.server.run_blocking(self.backends.changed_sources, rec.capture, rec.root, {})
        return rel in changed

    # -- running ---------------------------------------------------------------------
    def schedule(self, target: CaptureTarget) -> asyncio.Future:
        """Recapture ``target``'s profile; a run of it in progress is cancelled (the
        newest save wins: its reason is logged once, when that run ends)."""
        key = target.key
        generation = self._generation.get(key, 0) + 1
        self._generation[key] = generation
        self.runner.cancel(key, SUPERSEDED)
        previous = self._tasks.get(key)
        task = asyncio.ensure_future(self._run(target, generation, previous))
        self._tasks[key] = task
        task.add_done_callback(lambda t: self._tasks.get(key) is t and self._tasks.pop(key, None))
        return task

    async def _run(self, target: CaptureTarget, generation: int, previous: asyncio.Future | None) -> dict[str, Any]:
        key = target.key
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
        rec = self.records.get(key)
        if rec is not None:  # the newest graph names the symbol where it is now
            target = CaptureTarget(rec.root, rec.profile, rec.uri, rec.qualname, rec.name_range)
        log.info("recapturing %s (profile %s) after a save%s", target.qualname, target.profile,
                 " (its last capture failed)" if key in self._failed else "")
        try:
            return await self.flow.capture(target, show=False, retry=False, background=True)
        except Exception:
            log.exception("recapture of %s failed", target.profile)
            return {"ok": False, "reason": "error"}


def uses_source(root: Path, capture: Any, rel: str, read_text: Callable[[Path], str | None]) -> bool:
    """Whether the capture uses workspace file ``rel`` (one of its sources): its code ran
    in the capture (a frame is there), or the model's file or a file the recipe names (a
    factory, a call's target) imports from it, directly or through files it imports from.
    A file only imported because the model's package imports it (a sibling model in the
    package's ``__init__``) is not used; saving it recaptures nothing. Unknown: used."""
    from capture.recipe import module_file
    from capture.session.import_time import used_files

    if any(not f.library and f.file == rel for f in getattr(capture, "frames", None) or []):
        return True
    recipe = getattr(capture, "recipe", None) or {}
    refs = [recipe.get("model")] + _recipe_targets(recipe)
    starts = []
    for ref in refs:
        if isinstance(ref, str) and ":" in ref:
            try:
                found = module_file(root, ref.partition(":")[0])
            except (OSError, ValueError):
                found = None
            if found is not None:
                starts.append(found)
    if not starts:
        return True
    used = used_files(root, starts, lambda p: read_text(p))
    return any(p.resolve() == (root / rel).resolve() for p in used)


def _recipe_targets(node: Any) -> list[str]:
    """Every ``factory`` and call/ref ``target`` a recipe table names."""
    out: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("factory", "target") and isinstance(value, str):
                out.append(value)
            else:
                out += _recipe_targets(value)
    elif isinstance(node, list):
        for value in node:
            out += _recipe_targets(value)
    return out


def _unparsable(root: Path, paths: list[Path], read_buffer: Any) -> str | None:
    """``model.py does not parse (line 12: invalid syntax)`` for the first Python file
    of ``paths`` whose text (an editor buffer, else the disk) is not valid Python; None
    when they all parse."""
    seen: set[Path] = set()
    for path in paths:
        if path.suffix != ".py" or (r := _resolved(path)) in seen:
            continue
        seen.add(r)
        text = read_buffer(path)
        if text is None:
            try:
                text = safe_read.read_text(path, workspace=root)
            except (OSError, UnicodeDecodeError):
                continue
        try:
            ast.parse(text, filename=str(path))
        except SyntaxError as exc:
            return f"{rel_path(root, path) or path.name} does not parse (line {exc.lineno}: {exc.msg})"
        except ValueError as exc:  # a NUL byte
            return f"{rel_path(root, path) or path.name} does not parse ({exc})"
    return None


async def _refresh_lenses(server: Host) -> None:
    try:
        await server.workspace_code_lens_refresh_async(None)
    except Exception as exc:
        log.debug("codeLens refresh failed: %s", exc)


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path
