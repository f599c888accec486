"""Saved setups (``.tensorviz/recipes.toml``): which profile opens which symbol,
and diagnostics for invalid entries, with their line.

Every problem of a profile is reported, not only the first: after each one the
offending value is set aside and the profile checked again. A ``model`` whose
module is a workspace file is checked against discovery (source only, nothing is
imported): a name the module does not define is an error on the ``model`` line.

Reacts to ``textDocument/did*`` on the recipes file (an edit in the editor is
checked as typed) and to ``workspace/didChangeWatchedFiles`` (an edit elsewhere).
Registers a file watcher dynamically where the client allows it.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import os
from pathlib import Path
from typing import Any

from lsprotocol import types

from capture.recipe import is_path_ref, model_ref_for, module_file, path_ref_file, split_ref
from capture.recipe.toml_lines import locator_for

from ..backends import RECIPES_PATH, Backends, Candidate, RecipeIssue, every_problem, profiles_in, recipes_root
from ..diagnostics import SOURCE
from ..feature import Feature, hook
from ..host import Host
from ..registry import register
from .interpreter import InterpreterSelection

log = logging.getLogger(__name__)

KIND = "recipes"


def _saved_suffixes() -> tuple[str, ...]:
    """The file types a recipe's checkpoint or fixture can be (``.pt``, …)."""
    from capture.recipe import CHECKPOINT_SUFFIXES, FIXTURE_SUFFIXES

    return tuple(sorted(set(CHECKPOINT_SUFFIXES + FIXTURE_SUFFIXES)))


_SAVED_SUFFIXES = _saved_suffixes()
#: Canonical model references kept at most (a recipes file names one per profile).
_CANONICALS_KEPT = 20_000
# Watched: a replaced checkpoint makes its graph stale and its profile's diagnostic current.
SAVED_FILES_GLOB = "**/*.{" + ",".join(s.lstrip(".") for s in _SAVED_SUFFIXES) + "}"


@register
class Recipes(Feature):
    name = "recipes"

    def __init__(self, server: Host, backends: Backends, interpreters: InterpreterSelection) -> None:
        super().__init__(server)
        self.backends = backends
        self.interpreters = interpreters
        self._profiles: dict[str, dict[str, dict[str, Any]]] = {}
        self._by_model: dict[str, dict[str, str]] = {}
        #: Bumped whenever saved profiles may have changed (lens titles follow).
        self.generation = 0
        #: ``{(root, model reference): canonical form}`` (:meth:`_canonical`).
        self._canonicals: dict[tuple[str, str], str | None] = {}
        #: Roots whose check is running, and those asked for again meanwhile.
        self._checking: set[str] = set()
        self._again: set[str] = set()

    # -- queries -----------------------------------------------------------------
    def profile_of(self, uri: str, cand: Candidate) -> str | None:
        """The saved profile that opens ``cand`` (the first whose ``model`` names it), or None."""
        root = self.server.root_for(uri)
        path = self.server.path_of(uri)
        if root is None or path is None:
            return None
        # dotted where that import works, else the path form (scripts/06_scan.py:Net)
        model = model_ref_for(root, path, cand.qualname)
        return self.profile_for_model(root, model) if model else None

    def recipes_file(self, root: Path) -> Path:
        return root / RECIPES_PATH

    def profiles(self, root: Path) -> dict[str, dict[str, Any]]:
        key = str(root)
        if key not in self._profiles:
            self._profiles[key] = profiles_in(self.server.read_text(self.recipes_file(root)))
        return self._profiles[key]

    def profile_for(self, root: Path, path: Path, qualname: str) -> str | None:
        """The first saved profile whose ``model`` is this symbol."""
        model = model_ref_for(root, path, qualname)
        return self.profile_for_model(root, model) if model else None

    def profile_for_model(self, root: Path, model: str) -> str | None:
        """The first saved profile whose ``model`` names the same object as ``model``:
        the same text, or the same file and qualname in the other form (a profile
        saved as ``scripts.model:Net`` still opens ``scripts/model.py:Net``)."""
        index = self._model_index(root)
        found = index.get(model)
        if found is None:
            canonical = self._canonical(root, model)
            found = index.get(canonical) if canonical is not None else None
        return found

    def _canonical(self, root: Path, ref: str) -> str | None:
        """:func:`_canonical`, kept until a file other than the recipes file changes:
        an edit of a 2,217-profile recipes file resolves none of its paths again."""
        key = (str(root), ref)
        if key not in self._canonicals:
            if len(self._canonicals) >= _CANONICALS_KEPT:
                self._canonicals.clear()
            self._canonicals[key] = _canonical(root, ref)
        return self._canonicals[key]

    def _model_index(self, root: Path) -> dict[str, str]:
        """``{model reference (as saved, and canonical): first profile naming it}``:
        what lens titles show."""
        key = str(root)
        index = self._by_model.get(key)
        if index is None:
            index = {}
            for name, recipe in self.profiles(root).items():
                ref = recipe.get("model")
                if isinstance(ref, str):
                    index.setdefault(ref, name)
                    canonical = self._canonical(root, ref)
                    if canonical is not None:
                        index.setdefault(canonical, name)
            self._by_model[key] = index
        return index

    # -- diagnostics -------------------------------------------------------------
    async def check(self, root: Path) -> None:
        """Check the recipes file of ``root`` and publish its diagnostics.

        Checks of one root never pile up: while one runs, any number of further
        requests (an editor sending every keystroke and save of a 15 MB file) leave
        one more check to run after it, on the text of that moment."""
        self.invalidate(root)
        key = str(root)
        if key in self._checking:
            self._again.add(key)
            return
        self._checking.add(key)
        try:
            while True:
                self._again.discard(key)
                await self._check_once(root)
                if key not in self._again or self.server.stopping:
                    break
        finally:
            self._checking.discard(key)

    async def _check_once(self, root: Path) -> None:
        file = self.recipes_file(root)
        text = self.server.read_text(file)
        uri = self.server.uri_of(file)
        if text is None:
            self.server.diagnostics.set(uri, KIND, [])
            return
        try:
            issues: list[RecipeIssue] = await self.server.run_blocking(every_problem, text)
            issues = _merge(issues, await self._model_issues(root, text, issues))
            issues = _merge(issues, await self.server.run_blocking(saved_file_issues, root, text))
        except Exception as exc:
            log.exception("checking %s failed", file)
            issues = [RecipeIssue(f"could not check recipes: {exc}")]
        widths = await self.server.run_blocking(_line_widths, text, {max(0, (i.line or 1) - 1) for i in issues})
        diags = []
        for issue in issues:
            line = max(0, (issue.line or 1) - 1)
            width = widths.get(line, 0)
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

    async def _model_issues(self, root: Path, text: str, known: list[RecipeIssue]) -> list[RecipeIssue]:
        """``model`` names that their (workspace) module does not define.

        The file-system part runs off the event loop, each workspace file is read and
        discovered once however many profiles name it, and every line comes from the
        text's one locator: a 2,217-profile file no longer scans its 15 MB once a
        profile on the loop (issue 52 item 14)."""
        bad_model = {i.profile for i in known if i.path and i.path.endswith(".model")}
        out, wanted = await self.server.run_blocking(_model_files, root, text, bad_model)
        python = self.interpreters.discovery_python(root) if wanted else None
        for path, names in wanted.items():
            source = self.server.read_text(path)
            if source is None:
                continue  # not a workspace file (an installed package): nothing to read
            found = await self.server.run_blocking(self.backends.discover, source, path, root, python)
            if not found.parsed:
                continue  # the file's own diagnostic says why
            offered = {n for c in found.candidates for n in (c.qualname, c.name)}
            defines = ", ".join(c.qualname for c in found.candidates) or "no model discovery recognises"
            for name, module, qualname in names:
                if qualname in offered or _defines(source, qualname):
                    continue
                out.append(
                    RecipeIssue(
                        f"profiles.{name}.model: {module} has no {qualname!r} (it defines {defines})",
                        line=_model_line(text, name),
                        profile=name,
                        path=f"profiles.{name}.model",
                    )
                )
        out.sort(key=lambda i: i.line or 0)
        return out

    # -- hooks -------------------------------------------------------------------
    @hook
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
                                        # Torch checkpoints and fixtures are capture sources too.
                                        types.FileSystemWatcher(glob_pattern=SAVED_FILES_GLOB),
                                    ]
                                ),
                            )
                        ]
                    )
                )
            except Exception as exc:
                log.debug("file watcher registration failed: %s", exc)

    @hook
    async def folders_changed(self, added: list[str], removed: list[str]) -> None:
        self._canonicals.clear()
        for p in removed:
            self.invalidate(Path(p))
            uri = self.server.uri_of(Path(p) / RECIPES_PATH)
            self.server.diagnostics.set(uri, KIND, [])
        for p in added:
            await self.check(Path(p))

    async def _touched(self, uri: str) -> None:
        path = self.server.path_of(uri)
        root = recipes_root(path) if path is not None else None
        if root is None and path is not None and path.suffix.lower() in _SAVED_SUFFIXES:
            # A checkpoint or fixture appeared, went or changed: its profiles' diagnostics follow.
            root = self.server.folder_for(uri)
            if root is not None and self.server.read_text(self.recipes_file(root)) is None:
                root = None
        if root is not None:
            await self.check(root)

    @hook
    async def document_opened(self, uri: str) -> None:
        await self._touched(uri)

    @hook
    async def document_changed(self, uri: str) -> None:
        await self._touched(uri)

    @hook
    async def document_saved(self, uri: str) -> None:
        await self._touched(uri)

    @hook
    async def document_closed(self, uri: str) -> None:
        await self._touched(uri)

    @hook
    async def files_changed(self, changes: list[types.FileEvent]) -> None:
        if any(c.type != types.FileChangeType.Changed for c in changes):
            self._canonicals.clear()  # a module appeared or went: references resolve anew
        for change in changes:
            await self._touched(change.uri)

    def invalidate(self, root: Path) -> None:
        self._profiles.pop(str(root), None)
        before = self._by_model.pop(str(root), None)
        self.generation += 1
        # Lens titles name the saved profile: when the profiles a lens could show changed,
        # ask the client to fetch lenses again (workspace/codeLens/refresh). Neovim does not
        # advertise it by itself; docs/editors.md's setup does, and handles the request.
        if before is not None and self.server.supports_lens_refresh() and self.server.loop is not None \
                and not self.server.stopping:
            self.server.call_soon(lambda: asyncio.ensure_future(self._refresh_lenses(root, before)))

    async def _refresh_lenses(self, root: Path, before: dict[str, str]) -> None:
        try:
            if self._model_index(root) != before:
                await self.server.workspace_code_lens_refresh_async(None)
        except Exception as exc:
            log.debug("codeLens refresh after a profile change failed: %s", exc)


def _merge(first: list[RecipeIssue], more: list[RecipeIssue]) -> list[RecipeIssue]:
    """``first`` and what ``more`` adds: one problem per key (the first check's wording)."""
    seen = {i.path or i.message for i in first}
    return first + [i for i in more if (i.path or i.message) not in seen]


def saved_file_issues(root: Path, text: str) -> list[RecipeIssue]:
    """Checkpoints and fixtures (``init.checkpoint``, ``inputs.fixture``) of the valid
    profiles that the worker would refuse: absent, not a file, or (through a symlink)
    outside the workspace. Only the file system is asked; nothing is read or run."""
    from capture.recipe import RecipeError, key_path_line, profile_from_document

    from ..recipes_store import parsed_recipes

    try:
        doc = parsed_recipes(text)
    except RecipeError:
        return []
    real_root = os.path.realpath(root)
    out = []
    for name in list(doc.get("profiles") or {}):
        try:
            recipe = profile_from_document(doc, name, text=text)
        except RecipeError:
            continue  # its own diagnostic says why
        for key_path, rel in recipe.saved_files():
            what = key_path.rsplit(".", 1)[-1]
            real = os.path.realpath(os.path.join(real_root, *rel.split("/")))
            if real != real_root and not real.startswith(real_root + os.sep):
                problem = f"{rel} leads outside the workspace (to {real}); {what} files must live inside it"
            elif not os.path.exists(real):
                problem = f"no {what} file {rel} in the workspace (capture needs it)"
            elif not os.path.isfile(real):
                problem = f"{rel} is not a regular file"
            else:
                continue
            out.append(RecipeIssue(f"{key_path}: {problem}", line=key_path_line(text, key_path),
                                   profile=name, path=key_path))
    return out


def _canonical(root: Path, ref: str) -> str | None:
    """``FILE:qualname`` with the resolved file a ref's module names, None when the
    workspace has no such file."""
    module, qualname = split_ref(ref)
    if not module or not qualname:
        return None
    try:
        path = module_file(root, module)
        return f"{path.resolve()}:{qualname}" if path is not None else None
    except (OSError, ValueError):
        return None


def _defines(source: str, qualname: str) -> bool:
    """Whether ``source`` binds ``qualname`` (a class's nested names followed), from
    its text alone: a name discovery does not offer may still be a model (built by a
    factory, or with a base it cannot see)."""
    try:
        body = ast.parse(source).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True  # unreadable: do not claim it is missing
    *outer, last = qualname.split(".")
    for part in outer:
        cls = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if cls is None:
            return False
        body = cls.body
    return last in _bound_names(body)


def _bound_names(body: list[ast.stmt]) -> set[str]:
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(a.name == "*" for a in node.names):
                names.add("*")
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []) or []:
                    names |= _bound_names(child.body if isinstance(child, ast.ExceptHandler) else [child])
    return names


def _model_files(
    root: Path, text: str, skip: set[str | None]
) -> tuple[list[RecipeIssue], dict[Path, list[tuple[str, str, str]]]]:
    """For :meth:`Recipes._model_issues`, off the event loop: the issues of ``model``
    paths naming no workspace file, and ``{workspace file: [(profile, module,
    qualname)]}`` to check against discovery."""
    issues: list[RecipeIssue] = []
    wanted: dict[Path, list[tuple[str, str, str]]] = {}
    for name, recipe in profiles_in(text).items():
        ref = recipe.get("model")
        if name in skip or not isinstance(ref, str) or ref.count(":") != 1:
            continue
        module, qualname = split_ref(ref)
        path = module_file(root, module)
        if path is None and is_path_ref(ref):
            # A file named by path is always a workspace file: say why it cannot be used.
            problem = path_ref_file(root, module)[1] or f"no file {module!r} in the workspace"
            issues.append(RecipeIssue(f"profiles.{name}.model: {problem}", line=_model_line(text, name),
                                      profile=name, path=f"profiles.{name}.model"))
        elif path is not None:
            wanted.setdefault(path, []).append((name, module, qualname))
    return issues, wanted


def _line_widths(text: str, lines: set[int]) -> dict[int, int]:
    """``{0-based line: its length}`` for ``lines`` of ``text``, reading only as far as
    the last of them (off the event loop: a 15 MB text is not split for one line)."""
    out: dict[int, int] = {}
    start, number, last = 0, 0, max(lines, default=-1)
    while number <= last and start <= len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        if number in lines:
            out[number] = len(text[start:end].rstrip("\r"))
        start, number = end + 1, number + 1
    return out


def _model_line(text: str, profile: str) -> int | None:
    """1-based line of ``model`` in ``[profiles.PROFILE]`` (else the table's header),
    from the text's one locator."""
    return locator_for(text).line(["profiles", profile, "model"])
