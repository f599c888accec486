"""Workspace Trust: ``tensorviz.trustWorkspace`` and the prompt before code runs.

Serves ``workspace/executeCommand`` (``tensorviz.trustWorkspace``) and asks with
``window/showMessageRequest``. Discovery and code lenses never need trust: they
import nothing. Everything that runs user code asks first: a capture with :meth:`Trust.ask`
(the answer is the capture session's ``trusted``), an install with :meth:`Trust.ensure`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lsprotocol import types

from ..feature import Feature
from ..host import Host
from ..registry import register
from ..trust import TrustStore
from .args import FolderArgs

log = logging.getLogger(__name__)

TRUST = "Trust Workspace"
CANCEL = "Cancel"


@register
class Trust(Feature):
    name = "trust"

    def __init__(self, server: Host, store: TrustStore) -> None:
        super().__init__(server)
        self.store = store

    def commands(self):
        return {"tensorviz.trustWorkspace": self.trust_command}

    def is_trusted(self, root: Path) -> bool:
        return self.store.is_trusted(root)

    async def ask(
        self, root: Path, purpose: str, python: str | None = None,
        runs: str = "(model setup, input factories and tracing)",
    ) -> bool:
        """Whether ``root`` is trusted, asking the user when it is not yet (the answer
        is stored). Says nothing on a refusal: a capture's refusal is the session's."""
        if self.is_trusted(root):
            return True
        where = f" with {python}" if python else ""
        answer = await self.server.ask(
            f"TensorViz: {purpose} runs code from the workspace {root}{where} "
            f"{runs}. Do you trust this workspace? "
            f"The decision is stored outside it, in {self.store.path}.",
            [TRUST, CANCEL],
            types.MessageType.Warning,
        )
        if answer == TRUST:
            self.store.set_trusted(root, True)
            log.info("workspace trusted: %s", root)
            await self.server.call_hook(Feature.workspace_trusted, root)
            return True
        return False

    async def ensure(
        self, root: Path, purpose: str, python: str | None = None,
        runs: str = "(model setup, input factories and tracing)",
    ) -> bool:
        """:meth:`ask`, saying on a refusal that nothing was run (for what is not a capture)."""
        if await self.ask(root, purpose, python, runs):
            return True
        self.server.show_message(
            f"TensorViz: {root} is not trusted, so nothing was run. "
            "Run the command 'tensorviz.trustWorkspace' (or answer the prompt) to allow captures.",
            types.MessageType.Warning,
        )
        return False

    async def pick_folder(self, folder: str | None, purpose: str) -> Path | None:
        """The workspace folder an argument names (URI, path, or a file inside it), or ask.
        A folder outside the workspace's folders counts only as a single file's folder:
        one holding a document open in the editor (a server started without workspace
        folders captures there); any other (``/etc``) is None."""
        if folder:
            root = self.server.folder_for(folder)
            if root is None:
                path = self.server.path_of(folder)
                root = path if path is not None and path.is_dir() and self._holds_open_document(path) else None
            return root
        roots = self.server.folders()
        if len(roots) == 1:
            return roots[0]
        if not roots:
            return None
        names = [str(r) for r in sorted(roots)]
        answer = await self.server.ask(f"TensorViz: which workspace folder to {purpose}?", names)
        return Path(answer) if answer else None

    def _holds_open_document(self, folder: Path) -> bool:
        """Whether a document open in the editor has ``folder`` as its own folder."""
        try:
            uris = list(self.server.workspace.text_documents)
        except Exception:  # a host without a workspace yet
            return False
        return any(self.server.root_for(uri) == folder for uri in uris)

    async def trust_command(self, args: list[Any]) -> dict[str, Any]:
        parsed = FolderArgs.parse(args)
        root = await self.pick_folder(parsed.folder, "trust")
        if root is None and parsed.folder:
            # Only a folder of this workspace may be trusted: a client that names another
            # (/etc) stores nothing.
            self.server.show_message(
                f"TensorViz: {parsed.folder} is not a folder of this workspace, so it was not trusted "
                "(only the workspace's folders, or the folder of a file open in the editor, can be).",
                types.MessageType.Warning)
            return {"ok": False, "reason": "not-a-workspace-folder"}
        if root is None:
            self.server.show_message("TensorViz: no workspace folder to trust.", types.MessageType.Warning)
            return {"ok": False}
        self.store.set_trusted(root, parsed.trusted)
        state = "trusted" if parsed.trusted else "no longer trusted"
        self.server.show_message(f"TensorViz: workspace {root} is {state}.")
        if parsed.trusted:
            await self.server.call_hook(Feature.workspace_trusted, root)
        return {"ok": True, "folder": str(root), "trusted": parsed.trusted}
