"""The TensorViz language server (pygls): the client, the threads, the workspace and the
settings every feature shares (the :class:`~tensorviz_lsp.host.Host` protocol).

It knows no feature: ``tensorviz_lsp/wiring.py`` builds the features, each with what it
needs passed to its constructor, registers each LSP method once and fans the call out
to them (:meth:`TensorVizServer.call_hook`; the hooks are declared in
:mod:`tensorviz_lsp.feature`).

Threading: LSP messages are handled on the asyncio loop. Discovery, captures and
installs run on :attr:`TensorVizServer.executor`; anything they send to the client goes
back through :meth:`TensorVizServer.call_soon`, because pygls writes to stdout from the
loop thread only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import typing
from pathlib import Path
from typing import Any, Callable, Concatenate, ParamSpec, TypeVar, TypeVarTuple, Unpack

import safe_read

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path
from pygls.workspace import TextDocument

from . import __version__
from .buffers import Buffers
from .diagnostics import DiagnosticsHub
from .feature import Feature
from .framing import Protocol
from .hooks import HookTable
from .settings import Settings

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class TensorVizServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("tensorviz", __version__, protocol_cls=Protocol)
        #: Every feature, each after those it was given (set by ``wiring.create_server``).
        self.features: list[Feature] = []
        #: Who implements each declared hook, in order (set by ``wiring.create_server``).
        self.hooks = HookTable([])
        self.diagnostics = DiagnosticsHub(
            lambda params: self.call_soon(self.text_document_publish_diagnostics, params))
        # Long work (discovery, captures, installs) runs here, never on the loop and
        # never on pygls' own pool (which reads stdin).
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=6, thread_name_prefix="tensorviz")
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self.init_options: Any = None
        self._folder_settings: dict[str, Settings] = {}
        self._global_settings = Settings()
        self.stopping = False
        self._stopped: asyncio.Future[None] | None = None

    async def call_hook(self, hook: Callable[Concatenate[Any, P], object], *args: P.args, **kwargs: P.kwargs) -> Any:
        """Run a declared hook (``Feature.capture_landed``) on every feature that
        implements it, results combined by its rule; failures are logged."""
        return await self.hooks.call(hook, *args, **kwargs)

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

    async def run_blocking(self, fn: Callable[[Unpack[Ts]], T], *args: Unpack[Ts]) -> T:
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

    def open_document(self, uri_or_path: str | Path) -> TextDocument | None:
        """The open text document for a URI or path, or None."""
        try:
            docs: dict[str, TextDocument] = self.workspace.text_documents
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
            # Before trust: a FIFO, a device or a link out of the workspace is never read.
            return safe_read.read_text(path, workspace=self.root_for(path)) if path else None
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

        def wrap(v: Any) -> dict[str, Any] | None:
            return {"tensorviz": v} if isinstance(v, dict) else None

        self._global_settings = Settings.from_config(self.init_options, wrap(global_cfg), where="settings")
        self._folder_settings = {
            str(root): Settings.from_config(
                self.init_options, wrap(global_cfg), wrap(cfg), where=f"settings for {root}"
            )
            for root, cfg in zip(roots, per_folder)
        }

    # ------------------------------------------------------------------ shutdown
    async def stop_features(self) -> None:
        """The features' shutdown hooks, once: a second caller (``exit`` read while
        ``shutdown`` is still stopping them) waits for the first."""
        if self._stopped is None:
            self._stopped = asyncio.ensure_future(self._stop_features())
        await asyncio.shield(self._stopped)

    async def _stop_features(self) -> None:
        await self.call_hook(Feature.shutdown)
        self.stopping = True
        self.executor.shutdown(wait=False, cancel_futures=True)


_LOG_LEVEL = {
    types.MessageType.Error: logging.ERROR,
    types.MessageType.Warning: logging.WARNING,
    types.MessageType.Info: logging.INFO,
    types.MessageType.Log: logging.DEBUG,
}
