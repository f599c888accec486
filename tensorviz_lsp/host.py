"""What a feature may use of the language server: the client, the threads, the workspace
and the settings. :class:`~tensorviz_lsp.server.TensorVizServer` is the one
implementation; features are typed against this protocol so that no feature module
imports the server (``tensorviz_lsp/wiring.py`` builds both, and hands each feature the
other features it needs in its constructor)."""

from __future__ import annotations

import asyncio
import typing
from pathlib import Path
from typing import Any, Callable, Concatenate, Coroutine, ParamSpec, Protocol, TypeVar, TypeVarTuple, Unpack

from lsprotocol import types
from pygls.progress import Progress as WorkDoneProgress
from pygls.protocol import LanguageServerProtocol
from pygls.workspace import TextDocument, Workspace

from .buffers import Buffers
from .diagnostics import DiagnosticsHub
from .settings import Settings

P = ParamSpec("P")
T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class Host(Protocol):
    #: The asyncio loop LSP messages are handled on (None before the first message).
    loop: asyncio.AbstractEventLoop | None
    #: True once shutdown began: nothing new starts.
    stopping: bool
    diagnostics: DiagnosticsHub

    # -- threads ---------------------------------------------------------------
    def on_loop(self) -> bool: ...

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop thread (now, when already there)."""

    def run_coroutine(self, coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        """From a worker thread: run ``coro`` on the loop and wait for its result."""

    async def run_blocking(self, fn: Callable[[Unpack[Ts]], T], *args: Unpack[Ts]) -> T:
        """``fn(*args)`` on the server's executor (never on the loop)."""

    async def call_hook(self, hook: Callable[Concatenate[Any, P], object], *args: P.args, **kwargs: P.kwargs) -> Any:
        """Run a hook declared by :class:`~tensorviz_lsp.feature.Feature`, named by its
        declaration (``Feature.capture_landed``), on every feature that implements it:
        an event one feature raises for the others; results combined by its rule."""

    # -- the client --------------------------------------------------------------
    def log_message(self, message: str, kind: types.MessageType = types.MessageType.Log) -> None: ...

    def show_message(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None: ...

    async def ask(self, message: str, actions: list[str], kind: types.MessageType = types.MessageType.Info) -> str | None:
        """``window/showMessageRequest``: the chosen action's title, or None."""

    @property
    def caps(self) -> types.ClientCapabilities: ...

    def supports_show_document(self) -> bool: ...

    def supports_progress(self) -> bool: ...

    def supports_lens_refresh(self) -> bool: ...

    def supports_inlay_hint_refresh(self) -> bool: ...

    def supports_watch_registration(self) -> bool: ...

    # pygls' own: requests to the client, progress, the negotiated protocol.
    @property
    def work_done_progress(self) -> WorkDoneProgress: ...

    @property
    def protocol(self) -> LanguageServerProtocol: ...

    def window_show_document_async(self, params: types.ShowDocumentParams) -> typing.Awaitable[types.ShowDocumentResult]: ...

    def workspace_code_lens_refresh_async(self, params: None) -> typing.Awaitable[None]: ...

    def workspace_inlay_hint_refresh_async(self, params: None) -> typing.Awaitable[None]: ...

    def client_register_capability_async(self, params: types.RegistrationParams) -> typing.Awaitable[None]: ...

    # -- the workspace -------------------------------------------------------------
    @property
    def workspace(self) -> Workspace: ...

    def folders(self) -> list[Path]:
        """Workspace folder roots, longest first."""

    def folder_for(self, uri_or_path: str | Path) -> Path | None: ...

    def root_for(self, uri_or_path: str | Path) -> Path | None:
        """The folder of a document, else the file's own directory."""

    def path_of(self, uri_or_path: str | Path) -> Path | None: ...

    def uri_of(self, path: str | Path) -> str: ...

    def open_document(self, uri_or_path: str | Path) -> TextDocument | None: ...

    def read_text(self, uri_or_path: str | Path) -> str | None:
        """An open buffer's text, else the file on disk, else None."""

    def buffers(self) -> Buffers:
        """The open documents' texts now (for a capture on a worker thread)."""

    def settings_for(self, root: Path | None) -> Settings: ...
