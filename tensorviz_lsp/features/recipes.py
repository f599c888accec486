"""Saved setups (``.tensorviz/recipes.toml``): which profile opens which symbol,
and diagnostics for invalid entries, with their line.

Reacts to ``textDocument/did*`` on the recipes file (an edit in the editor is
checked as typed) and to ``workspace/didChangeWatchedFiles`` (an edit elsewhere).
Registers a file watcher dynamically where the client allows it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lsprotocol import types

from ..backends import RECIPES_PATH, RecipeIssue, module_name, profiles_in, recipes_root
from ..diagnostics import SOURCE
from ..feature import Feature

log = logging.getLogger(__name__)

KIND = "recipes"


class Recipes(Feature):
    name = "recipes"

    def __init__(self, server) -> None:
        super().__init__(server)
        self._profiles: dict[str, dict[str, dict[str, Any]]] = {}
        self._by_model: dict[str, dict[str, str]] = {}
        #: Bumped whenever saved profiles may have changed (lens titles follow).
        self.generation = 0

    # -- queries -----------------------------------------------------------------
    def recipes_file(self, root: Path) -> Path:
        return root / RECIPES_PATH

    def profiles(self, root: Path) -> dict[str, dict[str, Any]]:
        key = str(root)
        if key not in self._profiles:
            self._profiles[key] = profiles_in(self.server.read_text(self.recipes_file(root)))
        return self._profiles[key]

    def model_ref(self, root: Path, path: Path, qualname: str) -> str | None:
        module = module_name(root, path)
        return f"{module}:{qualname}" if module else None

    def profile_for(self, root: Path, path: Path, qualname: str) -> str | None:
        """The first saved profile whose ``model`` is this symbol."""
        model = self.model_ref(root, path, qualname)
        return self.profile_for_model(root, model) if model else None

    def profile_for_model(self, root: Path, model: str) -> str | None:
        key = str(root)
        index = self._by_model.get(key)
        if index is None:
            index = {}
            for name, recipe in self.profiles(root).items():
                ref = recipe.get("model")
                if isinstance(ref, str):
                    index.setdefault(ref, name)
            self._by_model[key] = index
        return index.get(model)

    # -- diagnostics -------------------------------------------------------------
    async def check(self, root: Path) -> None:
        self.invalidate(root)
        file = self.recipes_file(root)
        text = self.server.read_text(file)
        uri = self.server.uri_of(file)
        if text is None:
            self.server.diagnostics.set(uri, KIND, [])
            return
        try:
            issues: list[RecipeIssue] = await self.server.run_blocking(self.server.backends.recipe_issues, root, text)
        except Exception as exc:
            log.exception("checking %s failed", file)
            issues = [RecipeIssue(f"could not check recipes: {exc}")]
        lines = text.splitlines()
        diags = []
        for issue in issues:
            line = max(0, (issue.line or 1) - 1)
            width = len(lines[line]) if line < len(lines) else 0
            where = f"{issue.path}: " if issue.path and issue.path not in issue.message else ""
            diags.append(
                types.Diagnostic(
                    range=types.Range(types.Position(line, 0), types.Position(line, width)),
                    message=f"{where}{issue.message}",
                    severity=types.DiagnosticSeverity.Error,
                    source=SOURCE,
                    code="invalid-recipe",
                )
            )
        self.server.diagnostics.set(uri, KIND, diags)
        if issues:
            log.info("%s: %d invalid recipe entr%s", file, len(issues), "y" if len(issues) == 1 else "ies")

    # -- hooks -------------------------------------------------------------------
    async def initialized(self) -> None:
        for root in self.server.folders():
            await self.check(root)
        if self.server.supports_watch_registration():
            try:
                await self.server.client_register_capability_async(
                    types.RegistrationParams(
                        registrations=[
                            types.Registration(
                                id="tensorviz-watch",
                                method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                                register_options=types.DidChangeWatchedFilesRegistrationOptions(
                                    watchers=[
                                        types.FileSystemWatcher(glob_pattern="**/*.py"),
                                        types.FileSystemWatcher(glob_pattern="**/.tensorviz/recipes.toml"),
                                    ]
                                ),
                            )
                        ]
                    )
                )
            except Exception as exc:
                log.debug("file watcher registration failed: %s", exc)

    async def folders_changed(self, added: list[str], removed: list[str]) -> None:
        for p in removed:
            self.invalidate(Path(p))
            uri = self.server.uri_of(Path(p) / RECIPES_PATH)
            self.server.diagnostics.set(uri, KIND, [])
        for p in added:
            await self.check(Path(p))

    async def _touched(self, uri: str) -> None:
        path = self.server.path_of(uri)
        root = recipes_root(path) if path is not None else None
        if root is not None:
            await self.check(root)

    async def document_opened(self, uri: str) -> None:
        await self._touched(uri)

    async def document_changed(self, uri: str) -> None:
        await self._touched(uri)

    async def document_saved(self, uri: str) -> None:
        await self._touched(uri)

    async def document_closed(self, uri: str) -> None:
        await self._touched(uri)

    async def files_changed(self, changes: list[types.FileEvent]) -> None:
        for change in changes:
            await self._touched(change.uri)

    def invalidate(self, root: Path) -> None:
        self._profiles.pop(str(root), None)
        self._by_model.pop(str(root), None)
        self.generation += 1
