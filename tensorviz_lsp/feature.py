"""The shape every language-server feature has (esbonio's pattern).

A feature is a class with lifecycle and document hooks. ``tensorviz_lsp/wiring.py``
makes each feature with what it needs (the :class:`~tensorviz_lsp.host.Host`, the
backends, the other features it calls) passed to its constructor, registers each LSP
method once and fans the call out to every feature that defines the hook; an exception
in one feature is logged and the others keep working. Hooks may be plain functions or
coroutines. A feature that tells the others something raises a hook through
``Host.fan_out`` (``capture_landed``, ``interpreter_changed``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Awaitable, Callable

from lsprotocol import types

from .records import Record
from .host import Host

CommandHandler = Callable[[list[Any]], Awaitable[Any] | Any]


class Feature:
    """Base class; override only the hooks a feature needs."""

    #: Shown in logs when a hook fails.
    name: str = "feature"

    def __init__(self, server: Host) -> None:
        self.server = server

    # -- lifecycle ------------------------------------------------------------
    def initialized(self) -> Awaitable[None] | None:
        """The client finished initialising; settings and folders are known."""

    def shutdown(self) -> Awaitable[None] | None:
        """Stop everything this feature started (workers, servers, timers)."""

    def settings_changed(self) -> Awaitable[None] | None:
        """Settings were (re)loaded for some folder."""

    def folders_changed(self, added: list[str], removed: list[str]) -> Awaitable[None] | None:
        """Workspace folders (paths) were added or removed."""

    # -- documents --------------------------------------------------------------
    def document_opened(self, uri: str) -> Awaitable[None] | None: ...

    def document_changed(self, uri: str) -> Awaitable[None] | None: ...

    def document_saved(self, uri: str) -> Awaitable[None] | None: ...

    def document_closed(self, uri: str) -> Awaitable[None] | None: ...

    def files_changed(self, changes: list[types.FileEvent]) -> Awaitable[None] | None:
        """``workspace/didChangeWatchedFiles`` (files changed on disk)."""

    # -- events features raise for each other (Host.fan_out) ----------------------
    def capture_landed(self, record: Record) -> Awaitable[None] | None:
        """A capture succeeded and its freshness record is in place, its captured texts
        snapshotted (called on the loop)."""

    def interpreter_changed(self) -> Awaitable[None] | None:
        """A folder's capture interpreter was chosen again (``tensorviz.selectInterpreter``)."""

    def workspace_trusted(self, root: Path) -> Awaitable[None] | None:
        """The user trusted the folder ``root`` (the command, or the prompt)."""

    def capture_failed(self, target: Any, files: set[Path]) -> Awaitable[None] | None:
        """A capture of ``target`` (a ``CaptureTarget``) failed after it ran (not a
        refusal, not a cancel); ``files``: what it depends on (a change may fix it)."""

    # -- requests (results of every feature are concatenated) -------------------
    def code_lens(self, params: types.CodeLensParams) -> Any:
        return None

    def code_action(self, params: types.CodeActionParams) -> Any:
        return None

    def hover(self, params: types.HoverParams) -> Any:
        """The first feature with an answer wins."""
        return None

    def document_symbol(self, params: types.DocumentSymbolParams) -> Any:
        return None

    def document_highlight(self, params: types.DocumentHighlightParams) -> Any:
        """Highlights of every feature are concatenated (also: where the cursor is)."""
        return None

    def inlay_hint(self, params: types.InlayHintParams) -> Any:
        return None

    def inlay_hint_resolve(self, hint: types.InlayHint) -> Any:
        """The first feature that returns the hint (completed) wins."""
        return None

    # -- commands -------------------------------------------------------------
    def commands(self) -> dict[str, CommandHandler]:
        """``workspace/executeCommand`` names this feature handles."""
        return {}
