"""Warm from the first capture: the folder's resident capture worker starts in the
background once the folder is trusted and a model file is open, so that the first Open
as Graph pays no import of Torch, JAX or ``transformers``.

What it imports (:func:`capture.session.preload.preload_names`): the frameworks
discovery found in the open model files (a Flax module: JAX and Flax), TensorViz's
capture modules for them, and the libraries those files and the workspace modules they
import name at their top (``transformers``, ``from transformers import GPT2LMHeadModel``
as that class's module), bounded; never workspace code, which every capture imports
fresh in its own child. A capture that arrives while this runs waits for the rest of it
(``capture.session.warm``). Every guarantee of the warm worker holds: the resident
process only imports, is bound to the interpreter, its files and the capture
environment, and is discarded when in doubt.

When: a Python file with a model opens in a trusted folder (once the client's settings
are read: a file opened before waits for them); the folder becomes trusted
(``workspace_trusted``); the settings, the interpreter or a capture's outcome change
(``capture_failed``: a discarded worker warms again for the next capture). Off with
``tensorviz.warmWorkerIdleSeconds = 0``. Nothing runs for an untrusted folder.

The warm workers are the capture session's (:class:`capture.session.WarmWorkers`, from
``Backends.warm_workers``): this feature configures them (a folder whose interpreter or
capture environment changed loses its worker, a removed folder too) and closes them when
the server stops; each capture request carries them (:mod:`.capturing`).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from capture.frameworks import kind_declaration
from capture.session.import_closure import import_closure

from ..backends import Backends
from ..feature import Feature, hook
from ..host import Host
from ..registry import register
from .candidates import Candidates
from .capturing import CaptureRunner
from .interpreter import InterpreterSelection
from .trust import Trust

log = logging.getLogger(__name__)

#: Workspace files read for their imports (the open model files and what they import).
MAX_FILES = 64


@register
class WarmStart(Feature):
    name = "warm-start"

    def __init__(self, server: Host, backends: Backends, trust: Trust, interpreters: InterpreterSelection,
                 candidates: Candidates) -> None:
        super().__init__(server)
        self.backends = backends
        self.trust = trust
        self.interpreters = interpreters
        self.candidates = candidates
        #: The server's warm workers (the capture session's): configured and closed here,
        #: carried by every capture request (:mod:`.capturing`).
        self.workers = backends.warm_workers()
        #: The folder's newest preload (a later one waits for it: one at a time per folder).
        self._tasks: dict[str, asyncio.Future] = {}
        #: What each folder was last asked to preload, and the answer (for logs and tests).
        self.last: dict[str, tuple[list[str], str]] = {}
        #: The client's settings are read (``initialized`` comes after them). An editor
        #: opens its buffer right after sending ``initialized`` (Neovim does), while the
        #: server still asks for them: a preload then would read the defaults (and start
        #: a worker that ``warmWorkerIdleSeconds = 0`` turns off), so it waits for them.
        self._settings_read = False

    # -- hooks --------------------------------------------------------------------
    @hook
    def initialized(self) -> None:
        self._settings_read = True
        for root in self.server.folders():
            self.consider(root)

    @hook
    async def document_opened(self, uri: str) -> None:
        if uri.endswith((".py", ".pyi")):
            root = self.server.folder_for(uri)
            if root is not None:
                self.consider(root)

    @hook
    def workspace_trusted(self, root: Path) -> None:
        self.consider(root)

    @hook
    def capture_failed(self, target: Any, files: Any) -> None:
        self.consider(target.root)

    @hook
    def settings_changed(self) -> None:
        """A folder's interpreter or capture environment setting changed: its warm
        worker goes now rather than at the next capture, and a new one warms."""
        for root in self.server.folders():
            settings = self.server.settings_for(root)
            interp = self.interpreters.for_root(root)
            python = interp.path if settings.warm_worker_idle_seconds > 0 else None
            try:
                self.workers.retain(root, python, dict(settings.capture_env))
            except Exception:
                log.exception("checking the warm worker of %s failed", root)
        for root in self.server.folders():
            self.consider(root)

    @hook
    def interpreter_changed(self) -> None:
        for root in self.server.folders():
            self.consider(root)

    @hook
    def folders_changed(self, added: list[str], removed: list[str]) -> None:
        for folder in removed:
            self.workers.retain(Path(folder), None, {})

    # The running captures are cancelled (CaptureRunner) before their warm workers close.
    @hook(after=(CaptureRunner,))
    def shutdown(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        try:
            self.workers.close()  # the warm workers go with the server
        except Exception:
            log.exception("stopping the warm workers failed")

    # -- the preload ----------------------------------------------------------------
    def consider(self, root: Path) -> asyncio.Future | None:
        """Preload ``root``'s warm worker now, in the background, if it should be."""
        if self.server.stopping or self.server.loop is None or not self._settings_read:
            return None  # before the settings: ``initialized`` considers every folder
        previous = self._tasks.get(str(root))
        task = asyncio.ensure_future(self._preload(root, previous))
        self._tasks[str(root)] = task
        task.add_done_callback(lambda t: self._tasks.get(str(root)) is t and self._tasks.pop(str(root), None))
        return task

    async def _preload(self, root: Path, previous: asyncio.Future | None) -> str | None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        settings = self.server.settings_for(root)
        if settings.warm_worker_idle_seconds <= 0 or not self.trust.is_trusted(root) or self.server.stopping:
            return None
        frameworks, files = await self._models(root)
        if not frameworks:
            return None  # no model file open: nothing says what to import
        interp = self.interpreters.for_root(root)
        if not interp.exists:
            return None
        texts = await self.server.run_blocking(_texts, root, files, self.server.buffers().read_text)
        from capture.session.preload import preload_names

        names = preload_names(root, frameworks, texts)
        try:
            state = await self.server.run_blocking(
                self.workers.preload, root, interp.path, dict(settings.capture_env), names,
                settings.warm_worker_idle_seconds,
            )
        except Exception:
            log.exception("starting the warm worker of %s failed", root)
            return None
        self.last[str(root)] = (names, state)
        if state in ("started", "preloading"):
            log.info("warm worker for %s %s: importing %s", root, "started" if state == "started" else "preloading",
                     ", ".join(n for n in names if not n.startswith("capture.")))
        elif state not in ("warm", "busy"):
            log.info("warm worker for %s not preloaded: %s", root, state)
        return state

    async def _models(self, root: Path) -> tuple[list[str], list[Path]]:
        """The frameworks of the folder's open model files, and those files."""
        frameworks: dict[str, None] = {}
        files: list[Path] = []
        try:
            uris = list(self.server.workspace.text_documents)
        except Exception:
            return [], []
        for uri in uris:
            if not uri.endswith((".py", ".pyi")) or self.server.folder_for(uri) != root:
                continue
            candidates = await self.candidates.get(uri)
            if not candidates:
                continue
            path = self.server.path_of(uri)
            if path is not None:
                files.append(path)
            for cand in candidates:
                # A kind may need a package on top of its framework (Flax for a Flax module).
                declared = kind_declaration(cand.kind)
                for fw in (cand.framework, *(declared.requires if declared else ())):
                    frameworks[fw] = None
        return list(frameworks), files


def _texts(root: Path, files: list[Path], read_buffer: Any) -> list[str]:
    """The texts of ``files`` and of the workspace modules they import (editor buffers
    first, else the disk), at most :data:`MAX_FILES` of them."""

    def read(path: Path) -> str | None:
        text = read_buffer(path)
        if text is not None:
            return text
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    ordered = list(dict.fromkeys(p.resolve() for p in files))
    ordered += [p for p in import_closure(root, ordered, read, limit=MAX_FILES) if p not in ordered]
    return [t for t in (read(p) for p in ordered[:MAX_FILES]) if t is not None]
