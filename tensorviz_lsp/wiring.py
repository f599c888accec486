"""Builds the language server (esbonio's ``server/setup.py``): every module of
``tensorviz_lsp/features/`` is imported, and each declares its own feature
(``@register``, :mod:`tensorviz_lsp.feature`); each registered class is made once, given
what its constructor's annotations name (:func:`build_parts`); each LSP method is
registered once and fans out to the features that implement its hook
(:class:`~tensorviz_lsp.hooks.HookTable`, which also orders them).

Nothing here names a feature: a new one is a module in ``tensorviz_lsp/features/`` with
a registered class.
"""

from __future__ import annotations

import asyncio
import heapq
import importlib
import inspect
import logging
import pkgutil
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Callable

from lsprotocol import types
from pygls.uris import to_fs_path

from . import __version__
from .backends import Backends, RealBackends
from .feature import ArgumentError, CommandHandler, Feature
from .hooks import HookTable
from .host import Host
from .registry import part_name, registered
from .server import TensorVizServer
from .trust import TrustStore

log = logging.getLogger(__name__)

#: A client's own cursor notification (``tensorviz.followCursor``): ``{uri, line}``, line 0-based.
CURSOR_NOTIFICATION = "tensorviz/cursor"
#: The folder whose every module may declare features (imported by name, at startup).
FEATURES_PACKAGE = "tensorviz_lsp.features"


class WiringError(RuntimeError):
    """A registered class cannot be made: what it asks for is not there, or two ask
    for each other."""


def load_feature_modules(package: str = FEATURES_PACKAGE) -> list[str]:
    """Import every module of ``package`` (each registers what it declares); their names."""
    pkg = importlib.import_module(package)
    names = sorted(f"{package}.{m.name}" for m in pkgutil.iter_modules(pkg.__path__))
    for name in names:
        importlib.import_module(name)
    return names


def _constructor(cls: type) -> Callable[..., None]:
    init: Callable[..., None] = getattr(cls, "__init__")  # noqa: B009 - the class's (mypy refuses cls.__init__)
    return init


def constructor_needs(cls: type) -> dict[str, type]:
    """What ``cls``'s constructor asks for: parameter name -> annotated class."""
    try:
        hints = typing.get_type_hints(_constructor(cls))
    except Exception as exc:
        raise WiringError(f"{cls.__qualname__}: its constructor's annotations cannot be resolved ({exc})") from exc
    needs: dict[str, type] = {}
    for name, param in list(inspect.signature(_constructor(cls)).parameters.items())[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise WiringError(f"{cls.__qualname__}: *{name} cannot be given by type")
        want = hints.get(name)
        if not isinstance(want, type):
            raise WiringError(f"{cls.__qualname__}: parameter {name!r} needs a class as its annotation, "
                              f"found {want!r}")
        needs[name] = want
    return needs


def build_parts(classes: Iterable[type], provided: Mapping[type, object]) -> list[object]:
    """Make each class once, after what it needs (``provided``, or another of
    ``classes``), passing it by parameter name; in that order, ties by name."""
    classes = list(dict.fromkeys(classes))
    by_type = set(classes)
    needs = {cls: constructor_needs(cls) for cls in classes}
    deps: dict[type, set[type]] = {}
    for cls, wanted in needs.items():
        deps[cls] = set()
        for name, want in wanted.items():
            if want in provided:
                continue
            if want not in by_type:
                raise WiringError(f"{cls.__qualname__} needs {name}: {want.__qualname__}, which no registered part "
                                  f"is ({', '.join(sorted(part_name(c) for c in classes))}) and nothing provides")
            deps[cls].add(want)
    order: list[type] = []
    waiting = {cls: set(d) for cls, d in deps.items()}
    ready = [(part_name(cls), cls.__qualname__, cls) for cls, d in waiting.items() if not d]
    heapq.heapify(ready)
    while ready:
        cls = heapq.heappop(ready)[2]
        order.append(cls)
        for other, d in waiting.items():
            if cls in d:
                d.discard(cls)
                if not d:
                    heapq.heappush(ready, (part_name(other), other.__qualname__, other))
    if len(order) != len(classes):
        stuck = sorted(c.__qualname__ for c in classes if c not in order)
        raise WiringError(f"these parts need each other, directly or through others: {', '.join(stuck)}")
    made: dict[type, object] = dict(provided)
    for cls in order:
        made[cls] = cls(**{name: made[want] for name, want in needs[cls].items()})
    return [made[cls] for cls in order]


def create_server(
    backends: Backends | None = None,
    trust_store: TrustStore | None = None,
    features: Iterable[type] | None = None,
) -> TensorVizServer:
    """The server with its features: every registered one (the modules of
    ``tensorviz_lsp/features/``), or ``features`` (a test's classes) instead."""
    server = TensorVizServer()
    if features is None:
        load_feature_modules()
        features = registered()
    provided: dict[type, object] = {
        Host: server, Backends: backends or RealBackends(), TrustStore: trust_store or TrustStore(),
    }
    parts = build_parts(features, provided)
    made = [p for p in parts if isinstance(p, Feature)]
    server.features.extend(made)
    server.hooks = HookTable(made)
    register(server)
    return server


def register(server: TensorVizServer) -> None:
    """One registration per LSP method, each fanning out to the features."""
    _register_lifecycle(server)
    _register_documents(server)
    _register_requests(server)
    _register_commands(server)


def _register_lifecycle(server: TensorVizServer) -> None:
    """The server's life and its workspace: initialize, shutdown, settings, folders."""

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
        await ls.call_hook(Feature.initialized)

    @server.feature(types.SHUTDOWN)
    async def on_shutdown(ls: TensorVizServer, params: None) -> None:
        await ls.stop_features()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_configuration(ls: TensorVizServer, params: types.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if isinstance(settings, dict) and not ls.supports_configuration():
            ls.init_options = settings
        await ls.reload_settings()
        await ls.call_hook(Feature.settings_changed)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def on_folders(ls: TensorVizServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        await ls.reload_settings()
        added = [to_fs_path(f.uri) or f.uri for f in params.event.added]
        removed = [to_fs_path(f.uri) or f.uri for f in params.event.removed]
        await ls.call_hook(Feature.folders_changed, added, removed)
        # Said once every feature has taken the change in (as "ready" is at the start):
        # what a client, or a test sharing one server between folders, can wait for.
        log.info("workspace folders changed: added %s; removed %s", ", ".join(added) or "none",
                 ", ".join(removed) or "none")


def _register_documents(server: TensorVizServer) -> None:
    """What happens to documents and files: events fanned out to the features."""

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def on_open(ls: TensorVizServer, params: types.DidOpenTextDocumentParams) -> None:
        await ls.call_hook(Feature.document_opened, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def on_change(ls: TensorVizServer, params: types.DidChangeTextDocumentParams) -> None:
        await ls.call_hook(Feature.document_changed, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def on_save(ls: TensorVizServer, params: types.DidSaveTextDocumentParams) -> None:
        await ls.call_hook(Feature.document_saved, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    async def on_close(ls: TensorVizServer, params: types.DidCloseTextDocumentParams) -> None:
        await ls.call_hook(Feature.document_closed, params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def on_watched(ls: TensorVizServer, params: types.DidChangeWatchedFilesParams) -> None:
        await ls.call_hook(Feature.files_changed, list(params.changes))


def _register_requests(server: TensorVizServer) -> None:
    """The requests an editor makes of a document, each answered by the features' hooks."""

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))
    async def on_code_lens(ls: TensorVizServer, params: types.CodeLensParams) -> list[types.CodeLens]:
        return list(await ls.call_hook(Feature.code_lens, params))

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.Empty], resolve_provider=False),
    )
    async def on_code_action(ls: TensorVizServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return list(await ls.call_hook(Feature.code_action, params))

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def on_hover(ls: TensorVizServer, params: types.HoverParams) -> types.Hover | None:
        hover: types.Hover | None = await ls.call_hook(Feature.hover, params)
        return hover

    # The editor's cursor (LSP has no cursor notification): tensorviz.followCursor.
    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_HIGHLIGHT)
    async def on_document_highlight(ls: TensorVizServer, params: types.DocumentHighlightParams) -> list[types.DocumentHighlight]:
        return list(await ls.call_hook(Feature.document_highlight, params))

    # The same from a client that reports the cursor itself (the VS Code extension sends it
    # on every selection change: VS Code asks for highlights only on a word): {uri, line}.
    @server.feature(CURSOR_NOTIFICATION)
    async def on_cursor(ls: TensorVizServer, params: Any) -> None:
        await ls.call_hook(Feature.cursor_notified, params)

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    async def on_document_symbol(ls: TensorVizServer, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
        return list(await ls.call_hook(Feature.document_symbol, params))

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=True))
    async def on_inlay_hint(ls: TensorVizServer, params: types.InlayHintParams) -> list[types.InlayHint]:
        return list(await ls.call_hook(Feature.inlay_hint, params))

    @server.feature(types.INLAY_HINT_RESOLVE)
    async def on_inlay_hint_resolve(ls: TensorVizServer, params: types.InlayHint) -> types.InlayHint:
        resolved = await ls.call_hook(Feature.inlay_hint_resolve, params)
        return resolved if resolved is not None else params


def _register_commands(server: TensorVizServer) -> None:
    """Each feature's commands, each name handled by one feature."""
    handled_by: dict[str, str] = {}
    for feature in server.features:
        for name, handler in feature.commands().items():
            if name in handled_by:
                raise WiringError(f"the command {name} is handled by two features: {handled_by[name]} and {feature.name}")
            handled_by[name] = feature.name
            _register_command(server, feature, name, handler)


def _register_command(server: TensorVizServer, feature: Feature, name: str, handler: CommandHandler) -> None:
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
