"""Builds the language server (esbonio's ``server/setup.py``): each feature is made once,
with what it needs passed to its constructor, and each LSP method is registered once and
fanned out to the features that define its hook (:mod:`tensorviz_lsp.feature`).

The order of :func:`default_features` is the fan-out order. A viewer's requests (go to
source, the setup form, saving a profile, starting a capture) are answered by features
made after the viewer host, so they are connected to it last.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from pathlib import Path
from typing import Any, Callable

from lsprotocol import types
from pygls.uris import to_fs_path

from . import __version__
from .backends import Backends, RealBackends, ViewerHooks
from .feature import Feature
from .features.abstract_capture import AbstractCapture
from .features.args import ArgumentError
from .features.candidates import Candidates
from .features.capture_failures import FailureDiagnostics
from .features.captured_lines import CapturedLines
from .features.capturing import CaptureRunner
from .features.dependencies import Dependencies
from .features.freshness import Freshness
from .features.hover import CandidateInfo
from .features.inlay_hints import ShapeHints
from .features.interpreter import InterpreterSelection
from .features.landing import GraphLanding
from .features.lenses import Lenses
from .features.open_graph import OpenGraph
from .features.recapture import RecaptureOnSave
from .features.recipes import Recipes
from .features.reveal import Reveal
from .features.show_in_graph import ShowInGraph
from .features.trust import Trust
from .features.viewer_host import ViewerHost
from .features.viewer_setup import ViewerSetup
from .features.warm_start import WarmStart
from .server import TensorVizServer
from .trust import TrustStore

log = logging.getLogger(__name__)

#: A client's own cursor notification (``tensorviz.followCursor``): ``{uri, line}``, line 0-based.
CURSOR_NOTIFICATION = "tensorviz/cursor"


def default_features(server: TensorVizServer, backends: Backends, trust_store: TrustStore) -> list[Feature]:
    """Every feature, each given the others it calls; in fan-out order."""
    trust = Trust(server, trust_store)
    interpreters = InterpreterSelection(server, trust)
    candidates = Candidates(server, backends, interpreters)
    recipes = Recipes(server, backends, interpreters)
    lenses = Lenses(server, candidates, recipes)
    viewers = ViewerHost(server, backends)
    reveal = Reveal(server)
    freshness = Freshness(server, backends, candidates, viewers)
    captured_lines = CapturedLines(server, freshness, viewers)
    info = CandidateInfo(server, candidates, recipes, freshness, captured_lines)
    hints = ShapeHints(server, captured_lines, freshness)
    dependencies = Dependencies(server, trust, interpreters)
    runner = CaptureRunner(server, backends, interpreters, trust, freshness, viewers)
    failures = FailureDiagnostics(server)
    setups = ViewerSetup(server, backends, candidates, recipes, freshness, viewers)
    open_graph = OpenGraph(
        server, trust=trust, candidates=candidates, recipes=recipes, runner=runner,
        landing=GraphLanding(server, viewers, freshness, captured_lines), failures=failures, setups=setups,
        dependencies=dependencies, viewers=viewers,
    )
    show_in_graph = ShowInGraph(server, captured_lines, viewers)
    recapture = RecaptureOnSave(server, backends, interpreters, freshness, runner, open_graph)
    warm_start = WarmStart(server, backends, trust, interpreters, candidates)
    abstract = AbstractCapture(server, backends, trust, recipes, failures, open_graph)

    def hooks(root: Path | None) -> ViewerHooks:
        return ViewerHooks(
            reveal=lambda frame: reveal.reveal_from_viewer(frame, root),
            setup=lambda profile: setups.form_for_viewer(root, profile),
            save_profile=lambda name, recipe: setups.save_from_viewer(root, name, recipe),
            start_capture=lambda profile: open_graph.start_capture_from_viewer(root, profile),
        )

    viewers.connect(hooks)
    return [
        trust, interpreters, candidates, recipes, lenses, info, viewers, reveal, freshness, captured_lines, hints,
        dependencies, runner, failures, open_graph, show_in_graph, recapture, warm_start, abstract,
    ]


def create_server(
    backends: Backends | None = None,
    trust_store: TrustStore | None = None,
    features: Callable[[TensorVizServer], list[Feature]] | None = None,
) -> TensorVizServer:
    """The server with its features (``features``: instead of the default ones, a test's)."""
    server = TensorVizServer()
    made = features(server) if features is not None else default_features(
        server, backends or RealBackends(), trust_store or TrustStore())
    server.features.extend(made)
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
        # Said once every feature has taken the change in (as "ready" is at the start):
        # what a client, or a test sharing one server between folders, can wait for.
        log.info("workspace folders changed: added %s; removed %s", ", ".join(added) or "none",
                 ", ".join(removed) or "none")

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
