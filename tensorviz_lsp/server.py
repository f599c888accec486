"""The TensorViz language server (pygls).

``create_server()`` builds a :class:`TensorVizServer` with every feature and
registers each LSP method exactly once; the registered handler fans the call out
to the features (see :mod:`tensorviz_lsp.feature`). Features find each other
through :meth:`TensorVizServer.get_feature`.

Threading: LSP messages are handled on the asyncio loop. Discovery, captures and
installs run on :attr:`TensorVizServer.executor`; anything they send to the
client goes back through :meth:`TensorVizServer.call_soon`, because pygls writes
to stdout from the loop thread only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import os
import threading
import typing
from pathlib import Path
from typing import Any, Callable, TypeVar

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from . import __version__
from .buffers import Buffers
from .diagnostics import DiagnosticsHub
from .features.args import ArgumentError
from .feature import Feature
from .settings import Settings
from .trust import TrustStore

if typing.TYPE_CHECKING:  # pragma: no cover
    from .backends import Backends

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Feature)


class TensorVizServer(LanguageServer):
    def __init__(self, backends: "Backends | None" = None, trust_store: TrustStore | None = None) -> None:
        from .framing import Protocol

        super().__init__("tensorviz", __version__, protocol_cls=Protocol)
        if backends is None:
            from .backends import RealBackends

            backends = RealBackends()
        self.backends = backends
        self.trust_store = trust_store or TrustStore()
        self.features: list[Feature] = []
        self.diagnostics = DiagnosticsHub(self)
        # Long work (discovery, captures, installs) runs here, never on the loop and
        # never on pygls' own pool (which reads stdin).
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=6, thread_name_prefix="tensorviz")
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self.init_options: Any = None
        self._folder_settings: dict[str, Settings] = {}
        self._global_settings = Settings()
        self.stopping = False

    # ------------------------------------------------------------------ features
    def add_feature(self, feature: Feature) -> Feature:
        self.features.append(feature)
        return feature

    def get_feature(self, cls: type[F]) -> F:
        for f in self.features:
            if isinstance(f, cls):
                return f
        raise LookupError(cls.__name__)

    async def fan_out(self, hook: str, *args: Any) -> list[Any]:
        """Call ``hook`` on every feature that overrides it; failures are logged."""
        results = []
        for feature in self.features:
            method = getattr(type(feature), hook, None)
            if method is None or method is getattr(Feature, hook, None):
                continue
            try:
                result = getattr(feature, hook)(*args)
                if inspect.isawaitable(result):
                    result = await result
            except Exception:
                log.exception("TensorViz: %s.%s failed; other features continue", feature.name, hook)
                continue
            results.append(result)
        return results

    # ------------------------------------------------------------------ threads
    def bind_loop(self) -> None:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()

    def on_loop(self) -> bool:
        return self.loop is not None and threading.get_ident() == self._loop_thread

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop thread (now, when already there)."""
        if self.loop is None or self.on_loop():
            fn(*args)
        elif not self.loop.is_closed():
            self.loop.call_soon_threadsafe(fn, *args)

    def run_coroutine(self, coro: typing.Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        """From a worker thread: run ``coro`` on the loop and wait for its result."""
        assert self.loop is not None and not self.on_loop()
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, fn, *args)

    # ------------------------------------------------------------------ client I/O
    def log_message(self, message: str, kind: types.MessageType = types.MessageType.Log) -> None:
        if self.stopping:
            return
        self.call_soon(self._safe_notify, self.window_log_message, types.LogMessageParams(type=kind, message=message))

    def show_message(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        log.log(_LOG_LEVEL[kind], "%s", message)
        self.call_soon(self._safe_notify, self.window_show_message, types.ShowMessageParams(type=kind, message=message))

    @staticmethod
    def _safe_notify(fn: Callable[[Any], None], params: Any) -> None:
        try:
            fn(params)
        except Exception:  # the client went away: nothing else to tell it
            pass

    async def ask(self, message: str, actions: list[str], kind: types.MessageType = types.MessageType.Info) -> str | None:
        """``window/showMessageRequest``: the chosen action's title, or None."""
        log.info("asking: %s [%s]", message, " / ".join(actions))
        try:
            choice = await self.window_show_message_request_async(
                types.ShowMessageRequestParams(
                    type=kind, message=message, actions=[types.MessageActionItem(title=a) for a in actions]
                )
            )
        except Exception as exc:
            log.warning("showMessageRequest failed: %s", exc)
            return None
        title = choice.title if choice is not None else None
        log.info("answer: %s", title if title is not None else "(dismissed)")
        return title

    # ------------------------------------------------------------------ capabilities
    @property
    def caps(self) -> types.ClientCapabilities:
        try:
            return self.client_capabilities or types.ClientCapabilities()
        except Exception:
            return types.ClientCapabilities()

    def supports_show_document(self) -> bool:
        sd = self.caps.window and self.caps.window.show_document
        return bool(sd and sd.support)

    def supports_progress(self) -> bool:
        return bool(self.caps.window and self.caps.window.work_done_progress)

    def supports_configuration(self) -> bool:
        return bool(self.caps.workspace and self.caps.workspace.configuration)

    def supports_lens_refresh(self) -> bool:
        ws = self.caps.workspace
        return bool(ws and ws.code_lens and ws.code_lens.refresh_support)

    def supports_inlay_hint_refresh(self) -> bool:
        ws = self.caps.workspace
        return bool(ws and ws.inlay_hint and ws.inlay_hint.refresh_support)

    def supports_watch_registration(self) -> bool:
        ws = self.caps.workspace
        return bool(ws and ws.did_change_watched_files and ws.did_change_watched_files.dynamic_registration)

    # ------------------------------------------------------------------ workspace
    def folders(self) -> list[Path]:
        """Workspace folder roots (paths), longest first."""
        roots: list[Path] = []
        try:
            ws = self.workspace
        except Exception:
            return roots
        for folder in ws.folders.values():
            p = to_fs_path(folder.uri)
            if p:
                roots.append(Path(p))
        if not roots and ws.root_path:
            roots.append(Path(ws.root_path))
        return sorted(set(roots), key=lambda p: len(str(p)), reverse=True)

    def folder_for(self, uri_or_path: str | Path) -> Path | None:
        """The workspace folder containing a document (multi-root aware)."""
        path = self.path_of(uri_or_path)
        if path is None:
            return None
        for root in self.folders():
            try:
                path.relative_to(root)
                return root
            except ValueError:
                continue
        return None

    def root_for(self, uri_or_path: str | Path) -> Path | None:
        """Like :meth:`folder_for`, falling back to the file's directory (single file)."""
        root = self.folder_for(uri_or_path)
        if root is None:
            path = self.path_of(uri_or_path)
            root = path.parent if path is not None else None
        return root

    @staticmethod
    def path_of(uri_or_path: str | Path) -> Path | None:
        if isinstance(uri_or_path, Path):
            return uri_or_path
        if "://" in uri_or_path or uri_or_path.startswith("file:"):
            p = to_fs_path(uri_or_path)
            return Path(p) if p else None
        return Path(uri_or_path)

    @staticmethod
    def uri_of(path: str | Path) -> str:
        return from_fs_path(str(path)) or f"file://{path}"

    def open_document(self, uri_or_path: str | Path):
        """The open text document for a URI or path, or None."""
        try:
            docs = self.workspace.text_documents
        except Exception:
            return None
        if isinstance(uri_or_path, str) and uri_or_path in docs:
            return docs[uri_or_path]
        path = self.path_of(uri_or_path)
        if path is None:
            return None
        doc = docs.get(self.uri_of(path))
        if doc is None:
            target = os.path.normcase(os.path.abspath(path))
            for d in docs.values():
                p = to_fs_path(d.uri)
                if p and os.path.normcase(os.path.abspath(p)) == target:
                    return d
        return doc

    def read_text(self, uri_or_path: str | Path) -> str | None:
        """An open buffer's text, else the file on disk, else None."""
        doc = self.open_document(uri_or_path)
        if doc is not None:
            return doc.source
        path = self.path_of(uri_or_path)
        try:
            return path.read_text(encoding="utf-8") if path else None
        except (OSError, UnicodeDecodeError):
            return None

    def buffers(self) -> Buffers:
        """The open documents' texts now, for a capture on a worker thread."""
        try:
            docs = list(self.workspace.text_documents.values())
        except Exception:
            return Buffers({})
        texts = {}
        for doc in docs:
            p = to_fs_path(doc.uri)
            if p:
                texts[Path(p).resolve()] = doc.source
        return Buffers(texts)

    # ------------------------------------------------------------------ settings
    def settings_for(self, root: Path | None) -> Settings:
        if root is not None:
            s = self._folder_settings.get(str(root))
            if s is not None:
                return s
        return self._global_settings

    async def reload_settings(self) -> None:
        """Merge initializationOptions with ``workspace/configuration`` per folder."""
        roots = self.folders()
        global_cfg: Any = None
        per_folder: list[Any] = [None] * len(roots)
        if self.supports_configuration():
            items = [types.ConfigurationItem(section="tensorviz")] + [
                types.ConfigurationItem(section="tensorviz", scope_uri=self.uri_of(r)) for r in roots
            ]
            try:
                result = await asyncio.wait_for(
                    self.workspace_configuration_async(types.ConfigurationParams(items=items)), 10
                )
                if result:
                    global_cfg, per_folder = result[0], list(result[1:]) + [None] * (len(roots) - len(result) + 1)
            except Exception as exc:
                log.warning("workspace/configuration failed (%s); using initializationOptions", exc)
        wrap = lambda v: {"tensorviz": v} if isinstance(v, dict) else None  # noqa: E731
        self._global_settings = Settings.from_config(self.init_options, wrap(global_cfg), where="settings")
        self._folder_settings = {
            str(root): Settings.from_config(
                self.init_options, wrap(global_cfg), wrap(cfg), where=f"settings for {root}"
            )
            for root, cfg in zip(roots, per_folder)
        }

    # ------------------------------------------------------------------ shutdown
    async def stop_features(self) -> None:
        if self.stopping:
            return
        await self.fan_out("shutdown")
        self.stopping = True
        self.executor.shutdown(wait=False, cancel_futures=True)


#: A client's own cursor notification (``tensorviz.followCursor``): ``{uri, line}``, line 0-based.
CURSOR_NOTIFICATION = "tensorviz/cursor"

_LOG_LEVEL = {
    types.MessageType.Error: logging.ERROR,
    types.MessageType.Warning: logging.WARNING,
    types.MessageType.Info: logging.INFO,
    types.MessageType.Log: logging.DEBUG,
}


def _default_features(server: TensorVizServer) -> list[Feature]:
    from .features.candidates import Candidates
    from .features.captured_lines import CapturedLines
    from .features.dependencies import Dependencies
    from .features.freshness import Freshness
    from .features.hover import CandidateInfo
    from .features.inlay_hints import ShapeHints
    from .features.interpreter import InterpreterSelection
    from .features.lenses import Lenses
    from .features.open_graph import OpenGraph
    from .features.recapture import RecaptureOnSave
    from .features.recipes import Recipes
    from .features.reveal import Reveal
    from .features.show_in_graph import ShowInGraph
    from .features.trust import Trust
    from .features.viewer_host import ViewerHost

    return [
        cls(server)
        for cls in (
            Trust,
            InterpreterSelection,
            Candidates,
            Recipes,
            Lenses,
            CandidateInfo,
            ViewerHost,
            Reveal,
            Freshness,
            CapturedLines,
            ShapeHints,
            Dependencies,
            OpenGraph,
            ShowInGraph,
            RecaptureOnSave,
        )
    ]


def create_server(
    backends: "Backends | None" = None,
    trust_store: TrustStore | None = None,
    features: Callable[[TensorVizServer], list[Feature]] | None = None,
) -> TensorVizServer:
    server = TensorVizServer(backends, trust_store)
    for feature in (features or _default_features)(server):
        server.add_feature(feature)
    register(server)
    return server


def register(server: TensorVizServer) -> None:
    """One registration per LSP method, each fanning out to the features."""

    @server.feature(types.INITIALIZE)
    def on_initialize(ls: TensorVizServer, params: types.InitializeParams) -> None:
        ls.bind_loop()
        ls.init_options = params.initialization_options

    @server.feature(types.INITIALIZED)
    async def on_initialized(ls: TensorVizServer, params: types.InitializedParams) -> None:
        ls.bind_loop()
        await ls.reload_settings()
        roots = ", ".join(str(r) for r in ls.folders()) or "(no folder)"
        log.info("TensorViz %s ready; workspace folders: %s", __version__, roots)
        await ls.fan_out("initialized")

    @server.feature(types.SHUTDOWN)
    async def on_shutdown(ls: TensorVizServer, params: None) -> None:
        await ls.stop_features()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_configuration(ls: TensorVizServer, params: types.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if isinstance(settings, dict) and not ls.supports_configuration():
            ls.init_options = settings
        await ls.reload_settings()
        await ls.fan_out("settings_changed")

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def on_folders(ls: TensorVizServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        await ls.reload_settings()
        added = [to_fs_path(f.uri) or f.uri for f in params.event.added]
        removed = [to_fs_path(f.uri) or f.uri for f in params.event.removed]
        await ls.fan_out("folders_changed", added, removed)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def on_open(ls: TensorVizServer, params: types.DidOpenTextDocumentParams) -> None:
        await ls.fan_out("document_opened", params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def on_change(ls: TensorVizServer, params: types.DidChangeTextDocumentParams) -> None:
        await ls.fan_out("document_changed", params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def on_save(ls: TensorVizServer, params: types.DidSaveTextDocumentParams) -> None:
        await ls.fan_out("document_saved", params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    async def on_close(ls: TensorVizServer, params: types.DidCloseTextDocumentParams) -> None:
        await ls.fan_out("document_closed", params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def on_watched(ls: TensorVizServer, params: types.DidChangeWatchedFilesParams) -> None:
        await ls.fan_out("files_changed", list(params.changes))

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))
    async def on_code_lens(ls: TensorVizServer, params: types.CodeLensParams) -> list[types.CodeLens]:
        return [lens for result in await ls.fan_out("code_lens", params) if result for lens in result]

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.Empty], resolve_provider=False),
    )
    async def on_code_action(ls: TensorVizServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return [a for result in await ls.fan_out("code_action", params) if result for a in result]

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def on_hover(ls: TensorVizServer, params: types.HoverParams) -> types.Hover | None:
        return next((r for r in await ls.fan_out("hover", params) if r is not None), None)

    # The editor's cursor (LSP has no cursor notification): tensorviz.followCursor.
    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_HIGHLIGHT)
    async def on_document_highlight(ls: TensorVizServer, params: types.DocumentHighlightParams) -> list[types.DocumentHighlight]:
        return [h for result in await ls.fan_out("document_highlight", params) if result for h in result]

    # The same from a client that reports the cursor itself (the VS Code extension sends it
    # on every selection change: VS Code asks for highlights only on a word): {uri, line}.
    @server.feature(CURSOR_NOTIFICATION)
    async def on_cursor(ls: TensorVizServer, params: Any) -> None:
        await ls.fan_out("cursor_notified", params)

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    async def on_document_symbol(ls: TensorVizServer, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
        return [s for result in await ls.fan_out("document_symbol", params) if result for s in result]

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=True))
    async def on_inlay_hint(ls: TensorVizServer, params: types.InlayHintParams) -> list[types.InlayHint]:
        return [h for result in await ls.fan_out("inlay_hint", params) if result for h in result]

    @server.feature(types.INLAY_HINT_RESOLVE)
    async def on_inlay_hint_resolve(ls: TensorVizServer, params: types.InlayHint) -> types.InlayHint:
        return next((r for r in await ls.fan_out("inlay_hint_resolve", params) if r is not None), params)

    for feature in server.features:
        for name, handler in feature.commands().items():
            _register_command(server, feature, name, handler)


def _register_command(server: TensorVizServer, feature: Feature, name: str, handler: Callable[[list[Any]], Any]) -> None:
    async def run_command(ls: TensorVizServer, *args: Any) -> Any:
        ls.bind_loop()
        try:
            result = handler(list(args))
            if inspect.isawaitable(result):
                result = await result
            return result
        except asyncio.CancelledError:
            raise
        except ValueError as exc:
            # A bad argument (ArgumentError) or a refusal ("not a file"): one clear line,
            # shown and logged once; the traceback only at debug level.
            log.debug("command %s refused", name, exc_info=True)
            ls.show_message(f"TensorViz: {name}: {exc}" if not isinstance(exc, ArgumentError) else f"TensorViz: {exc}",
                            types.MessageType.Error)
            return {"ok": False, "error": str(exc)}
        except Exception as exc:
            log.exception("TensorViz: command %s failed", name)
            ls.show_message(f"TensorViz: {name} failed: {exc}", types.MessageType.Error)
            return {"ok": False, "error": str(exc)}

    run_command.__name__ = f"command_{name.replace('.', '_')}"
    server.command(name)(run_command)
