"""pytest-lsp helpers: a client with a given editor's recorded capabilities, its own
trust store (``TENSORVIZ_CONFIG_DIR``) and answers to ``showMessageRequest``.

Starting a server costs seconds (an interpreter, pygls, the features), so a test module
whose tests need no server of their own shares one (:class:`SharedServer`, as esbonio's
end-to-end tests share theirs): each test gets a workspace folder of its own, added for
the test and removed after it, and a client whose records start empty. A test that needs
other initialization options, capabilities or folders starts its own
(:func:`start_session`)."""

from __future__ import annotations

import asyncio
import os
import time
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

# The spec's examples, verbatim (checked against the spec in tests/foundation).
from spec_examples import SPEC_MLP, SPEC_NET, SPEC_RECIPE

ROOT = Path(__file__).resolve().parents[2]
# The server's notifications a test waits on (Session.wait_for's ``on``).
DIAGNOSTICS = types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS
LOG = types.WINDOW_LOG_MESSAGE
PROGRESS = types.PROGRESS
FAKE_SERVER = [sys.executable, str(Path(__file__).with_name("fake_server.py"))]
REAL_SERVER = [sys.executable, "-m", "tensorviz_lsp", "lsp"]

EDITORS = {
    "neovim": "neovim@v0.11.0",
    "vscode": "visual-studio-code",
}


class Session:
    """A started server plus the handful of moves a test makes."""

    def __init__(self, client: LanguageClient, workspace: Path, config_dir: Path) -> None:
        self.client = client
        self.workspace = workspace
        self.config_dir = config_dir
        self.versions: dict[str, int] = {}

    def uri(self, rel: str | Path) -> str:
        return (self.workspace / rel).as_uri()

    def open(self, rel: str, text: str | None = None) -> str:
        uri = self.uri(rel)
        text = text if text is not None else (self.workspace / rel).read_text()
        self.versions[uri] = 1
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
            )
        )
        return uri

    def replace(self, rel: str, text: str) -> None:
        uri = self.uri(rel)
        self.versions[uri] = self.versions.get(uri, 1) + 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    def save(self, rel: str, text: str) -> None:
        """Save ``text`` as an editor does: an open buffer gets the text first (didChange
        comes before didSave), so buffer and disk agree after the save."""
        if self.uri(rel) in self.versions:
            self.replace(rel, text)
        (self.workspace / rel).write_text(text)
        self.client.text_document_did_save(
            types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=self.uri(rel)))
        )

    def disk_changed(self, rel: str) -> None:
        self.client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                changes=[types.FileEvent(uri=self.uri(rel), type=types.FileChangeType.Changed)]
            )
        )

    async def lenses(self, rel: str) -> list[types.CodeLens]:
        return await self.client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=self.uri(rel)))
        )

    async def execute(self, command: str, *arguments: Any, timeout: float = 120) -> Any:
        return await asyncio.wait_for(
            self.client.workspace_execute_command_async(
                types.ExecuteCommandParams(command=command, arguments=list(arguments))
            ),
            timeout,
        )

    def answer(self, *titles: str | None) -> None:
        """Queue the user's answers to the next showMessageRequest prompts."""
        self.client.answers.extend(titles)

    async def wait_for(self, predicate, *, on: str, timeout: float = 30, what: str = "condition") -> Any:
        """``predicate()``'s first true value, checked now and again after each ``on``
        notification from the server (``DIAGNOSTICS``, ``LOG``, ``PROGRESS``): the
        event that can change its answer, never a poll. ``timeout`` only ends a hang."""

        async def until() -> Any:
            while not (value := predicate()):
                # Registered in the same step as the check (no notification can slip in
                # between); shielded, since a timeout must not cancel pytest-lsp's
                # future, which its client resolves when the notification comes anyway.
                await asyncio.shield(self.client.protocol.wait_for_notification_async(on))
            return value

        try:
            return await asyncio.wait_for(until(), timeout)
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what} (on {on}); log:\n{self.logs()}") from None

    def log_count(self, text: str) -> int:
        return sum(text in m.message for m in self.client.log_messages)

    async def logged(self, text: str, *, after: int = 0, timeout: float = 30) -> str:
        """The first ``window/logMessage`` containing ``text`` past ``after`` earlier ones."""

        def found() -> str | None:
            hits = [m.message for m in self.client.log_messages if text in m.message]
            return hits[after] if len(hits) > after else None

        return await self.wait_for(found, on=LOG, timeout=timeout, what=repr(text))

    def diagnostics(self, rel: str) -> list[types.Diagnostic]:
        return list(self.client.diagnostics.get(self.uri(rel), []))

    def messages(self) -> list[str]:
        return [m.message for m in self.client.messages]

    def logs(self) -> str:
        return "\n".join(m.message for m in self.client.log_messages)


def make_client_factory():
    from pytest_lsp.client import make_test_lsp_client

    def factory() -> LanguageClient:
        client = make_test_lsp_client()
        client.answers = []  # type: ignore[attr-defined]
        client.prompts = []  # type: ignore[attr-defined]

        @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
        def show_message_request(params: types.ShowMessageRequestParams):
            client.prompts.append(params)  # type: ignore[attr-defined]
            answer = client.answers.pop(0) if client.answers else None  # type: ignore[attr-defined]
            if answer is None:
                return None
            return types.MessageActionItem(title=answer)

        client.lens_refreshes = []  # type: ignore[attr-defined]
        client.lens_refreshed = asyncio.Event()  # type: ignore[attr-defined]

        @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
        def code_lens_refresh(params: None):
            client.lens_refreshes.append(time.monotonic())  # type: ignore[attr-defined]
            client.lens_refreshed.set()  # type: ignore[attr-defined]
            return None

        client.inlay_hint_refreshes = []  # type: ignore[attr-defined]
        client.inlay_hints_refreshed = asyncio.Event()  # type: ignore[attr-defined]

        @client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
        def inlay_hint_refresh(params: None):
            client.inlay_hint_refreshes.append(time.monotonic())  # type: ignore[attr-defined]
            client.inlay_hints_refreshed.set()  # type: ignore[attr-defined]
            return None

        @client.feature(types.CLIENT_REGISTER_CAPABILITY)
        def register_capability(params: types.RegistrationParams):
            return None

        return client

    return factory


async def start_session(
    workspace: Path | None,
    config_dir: Path,
    *,
    editor: str = "neovim",
    server: list[str] | None = None,
    init_options: Any = None,
    configuration: dict | None = None,
    env: dict[str, str] | None = None,
    folders: list[Path] | None = None,
    capabilities: types.ClientCapabilities | None = None,
) -> Session:
    server_env = {
        **os.environ,
        "TENSORVIZ_CONFIG_DIR": str(config_dir),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        **(env or {}),
    }
    config = ClientServerConfig(server_command=server or FAKE_SERVER, client_factory=make_client_factory(), server_env=server_env)
    client = await config.start()
    if configuration:
        for scope, value in configuration.items():
            client.set_configuration(value, scope_uri=scope)
    folders = folders or ([workspace] if workspace is not None else [])
    caps = capabilities or client_capabilities(EDITORS.get(editor, editor))
    await client.initialize_session(
        types.InitializeParams(
            capabilities=caps,
            root_uri=workspace.as_uri() if workspace is not None else None,
            workspace_folders=[types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders],
            initialization_options=init_options,
        )
    )
    return Session(client, workspace, config_dir)  # type: ignore[arg-type]


# What the server logs once every feature has taken a folder change in (wiring.py).
FOLDERS_CHANGED = "workspace folders changed: "


class SharedServer:
    """One server for many tests, started without a folder: :meth:`enter` gives a test a
    session on a folder of its own and :meth:`leave` takes the folder away again. The
    trust store is the server's (``config_dir``), shared by its tests; each folder is a new
    path, so each starts untrusted."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.client = session.client
        self.config_dir = session.config_dir

    @classmethod
    async def start(cls, config_dir: Path, **kwargs: Any) -> SharedServer:
        return cls(await start_session(None, config_dir, **kwargs))

    def _forget(self) -> None:
        """The client's records start empty for each test (a late answer queued by one
        test must not answer the next one's prompt)."""
        c = self.client
        for records in (c.messages, c.log_messages, c.shown_documents, c.prompts, c.answers,
                        c.lens_refreshes, c.inlay_hint_refreshes):
            records.clear()
        c.diagnostics.clear()
        c.progress_reports.clear()
        c.lens_refreshed.clear()
        c.inlay_hints_refreshed.clear()

    async def _change_folders(self, s: Session, *, added: list[Path], removed: list[Path]) -> None:
        folders = [types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in (*added, *removed)]
        said = f"added {added[0]}" if added else f"removed {removed[0]}"
        before = sum(FOLDERS_CHANGED in m and said in m for m in (m.message for m in self.client.log_messages))
        self.client.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(added=folders[:len(added)], removed=folders[len(added):])))
        await s.wait_for(
            lambda: sum(FOLDERS_CHANGED in m and said in m for m in (m.message for m in self.client.log_messages)) > before,
            on=LOG, what=f"the server's word that it {said}")

    async def enter(self, workspace: Path, configuration: dict | None = None) -> Session:
        """A session on ``workspace``, added as a folder; ``configuration``: its settings
        (``workspace/configuration`` for the folder), as a per-folder setting."""
        self._forget()
        if configuration is not None:
            self.client.set_configuration(configuration, scope_uri=workspace.as_uri())
        s = Session(self.client, workspace, self.config_dir)
        await self._change_folders(s, added=[workspace], removed=[])
        return s

    async def leave(self, s: Session) -> None:
        for uri in s.versions:
            self.client.text_document_did_close(
                types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
        await self._change_folders(s, added=[], removed=[s.workspace])

    async def stop(self) -> None:
        await stop_session(self.session)


class SharedServers:
    """A module's shared servers, one per editor, each started when a test first asks for
    it: ``s = await servers.enter(workspace, editor=...)`` ... ``await servers.leave(s)``."""

    def __init__(self, config_dir: Path) -> None:
        self.config_dir = config_dir
        self.servers: dict[str, SharedServer] = {}
        self._of: dict[int, SharedServer] = {}

    async def enter(self, workspace: Path, *, editor: str = "neovim", configuration: dict | None = None) -> Session:
        if editor not in self.servers:
            self.servers[editor] = await SharedServer.start(self.config_dir, editor=editor)
        s = await self.servers[editor].enter(workspace, configuration)
        self._of[id(s)] = self.servers[editor]
        return s

    async def leave(self, s: Session) -> None:
        await self._of.pop(id(s)).leave(s)

    async def stop(self) -> None:
        for server in self.servers.values():
            await server.stop()


def trusted_in_store(config_dir: Path, workspace: Path) -> bool | None:
    """What the trust store under ``config_dir`` says of ``workspace`` (None: nothing)."""
    import json

    path = config_dir / "trust.json"
    if not path.exists():
        return None
    entry = json.loads(path.read_text()).get("workspaces", {}).get(str(workspace.resolve()))
    return None if entry is None else bool(entry.get("trusted"))


async def stop_session(session: Session) -> None:
    try:
        await asyncio.wait_for(session.client.shutdown_session(), 30)
    finally:
        await session.client.stop()


@pytest.fixture
def config_dir(tmp_path) -> Path:
    d = tmp_path / "user-config"
    d.mkdir()
    return d



def make_workspace(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


@pytest.fixture
def spec_workspace(tmp_path) -> Path:
    return make_workspace(
        tmp_path / "ws",
        {"model.py": SPEC_NET, "mlp.py": SPEC_MLP, ".tensorviz/recipes.toml": SPEC_RECIPE},
    )
