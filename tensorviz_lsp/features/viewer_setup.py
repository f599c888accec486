"""The viewer's setup form, per workspace folder: opening it for a symbol that has no
profile yet (or whose profile needs input dimensions), giving the viewer its content,
and saving what the user filled in. The form's content itself is built by the pure
functions of :mod:`.setup_form`."""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from pathlib import Path
from typing import Any

from lsprotocol import types

from capture.recipe import model_ref_for, module_file, profile_name, split_ref
from capture.worker.protocol import NeededDim

from ..backends import RECIPES_PATH, Backends, Candidate
from ..host import Host
from ..registry import register
from .candidates import Candidates
from .capturing import CaptureTarget
from .freshness import Freshness
from .recipes import Recipes
from .form_values import read_form_recipe
from .setup_form import SetupContext, draft_recipe, setup_form
from .viewer_host import ViewerHost

log = logging.getLogger(__name__)


@register
class ViewerSetup:
    def __init__(self, server: Host, backends: Backends, candidates: Candidates, recipes: Recipes,
                 freshness: Freshness, viewers: ViewerHost) -> None:
        self.server = server
        self.backends = backends
        self.candidates = candidates
        self.recipes = recipes
        self.freshness = freshness
        self.viewers = viewers
        #: The setup form each folder's viewer shows (the last symbol opened without a profile).
        self._last: dict[str, SetupContext] = {}
        viewers.answers.setup = self.form_for_viewer
        viewers.answers.save_profile = self.save_from_viewer

    def last(self, root: Path) -> SetupContext | None:
        return self._last.get(str(root))

    async def open(
        self, root: Path, uri: str, cand: Candidate, profile: str | None, *,
        recipe: dict[str, Any] | None = None, needs: list[NeededDim] | None = None,
    ) -> dict[str, Any]:
        """Show the form for ``cand`` in the folder's viewer (prefilled from discovery, or
        from ``recipe``; ``needs``: the dimensions a capture asked for)."""
        path = self.server.path_of(uri)
        model = model_ref_for(root, path, cand.qualname) if path else None
        if model is None:
            self.server.show_message(
                f"TensorViz: {path} cannot be named from the workspace root {root}: it is outside it, or its "
                "file name holds a '.' before .py (no module can have that name); open the folder that "
                "contains it, or rename the file.",
                types.MessageType.Error,
            )
            return {"ok": False, "reason": "not-importable"}
        name = profile or profile_name(cand.qualname, self.recipes.profiles(root))
        draft = dict(recipe) if recipe else draft_recipe(cand, model)
        self._last[str(root)] = SetupContext(root, uri, cand, name, draft, list(needs or []))
        viewer = await self.server.run_blocking(self.viewers.viewer, root)
        # The page of this form, even when the folder's viewer already holds another
        # model's graph (its plain URL would show that newest graph and its form).
        url = f"{viewer.url}?setup={urllib.parse.quote(name, safe='')}"
        log.info("setup form for %s (profile %s)", cand.qualname, name)
        await self.viewers.show_url(url, f"Set up {cand.qualname}")
        return {"ok": True, "setup": True, "url": url, "profile": name}

    async def ask_for_inputs(self, target: CaptureTarget, message: str, needs: list[NeededDim]) -> dict[str, Any] | None:
        """A capture stopped for unknown input dimensions (``needs``): open the form of
        its profile to ask for them; None when the symbol is not a Python file's
        candidate (nothing to prefill the form from)."""
        if not target.uri.endswith(".py"):
            return None
        cand = await self.candidates.find(target.uri, target.qualname)
        if cand is None:
            return None
        recipe = self.recipes.profiles(target.root).get(target.profile, {})
        self.server.show_message(f"TensorViz: {target.qualname} needs input dimensions before it can be traced: {message}")
        return await self.open(target.root, target.uri, cand, target.profile, recipe=recipe, needs=needs)

    def form_for_viewer(self, root: Path | None, profile: str | None = None) -> dict[str, Any] | None:
        """The viewer's setup provider (HTTP thread): the form's content.

        With ``profile`` (a graph page asks for the profile its capture came from) the
        form is that profile's, never the folder's last form: "Setup" and "Capture
        again" act on the graph on screen. Without one, the last form opened here
        (the page of a symbol that has no profile yet)."""
        if root is None:
            return None
        if profile is None:
            ctx = self._last.get(str(root))
            return setup_form(ctx) if ctx is not None else None
        if self.server.loop is None or self.server.stopping:
            return None
        ctx = self.server.run_coroutine(self.context_for_profile(root, profile), 60)
        return setup_form(ctx) if ctx is not None else None

    def _candidate_for(self, root: Path, recipe: dict[str, Any]) -> Candidate | None:
        """The candidate the form's recipe names (HTTP thread): the form's own, else
        discovered again; None when it cannot be found (the recipe is checked alone)."""
        last = self._last.get(str(root))
        if last is not None and last.recipe.get("model") == recipe.get("model"):
            return last.candidate
        model = recipe.get("model")
        module, qualname = split_ref(model) if isinstance(model, str) else ("", "")
        model_path = module_file(root, module) if module else None
        if model_path is None or not qualname or self.server.loop is None or self.server.stopping:
            return None
        try:
            return self.server.run_coroutine(self.candidates.find(self.server.uri_of(model_path), qualname), 60)
        except Exception:  # discovery's trouble must not block a save: the recipe is still checked
            log.warning("no candidate for %s:%s; its form is saved unchecked against its source", module, qualname)
            return None

    async def context_for_profile(self, root: Path, profile: str) -> SetupContext | None:
        """The setup form of a saved profile: its saved recipe, and the candidate its
        ``model`` names (discovered from source); None when there is no such profile."""
        last = self._last.get(str(root))
        self.recipes.invalidate(root)
        recipe = self.recipes.profiles(root).get(profile)
        if recipe is None:
            # Not saved yet: only the form being filled in may carry this name.
            return last if last is not None and last.profile == profile else None
        if last is not None and last.profile == profile:
            return SetupContext(root, last.uri, last.candidate, profile, dict(recipe), list(last.needs))
        model = recipe.get("model")
        module, qualname = split_ref(model) if isinstance(model, str) else ("", "")
        model_path = module_file(root, module) if module else None
        if model_path is None or not qualname:
            return None
        uri = self.server.uri_of(model_path)
        cand = await self.candidates.find(uri, qualname)
        if cand is None:
            return None
        return SetupContext(root, uri, cand, profile, dict(recipe))

    def save_from_viewer(self, root: Path | None, name: str, recipe: dict[str, Any]) -> list[dict[str, Any]]:
        """The viewer's save hook (HTTP thread): read the form's text as the shorthand
        reads it, check it as the command line checks a setup, validate and write; errors or []."""
        if root is None:
            return [{"path": "", "message": "no workspace folder to save the profile in"}]
        recipe, errors = read_form_recipe(root, name, recipe, self._candidate_for(root, recipe))
        if errors:
            return errors
        errors = self.backends.save_profile(root, name, recipe)
        if errors:
            return errors
        ctx = self._last.get(str(root))
        # Only the form of the same model: a graph page's form (another profile, another
        # model) must not turn the folder's last form into itself.
        if ctx is not None and (ctx.profile == name or ctx.recipe.get("model") == recipe.get("model")):
            ctx.profile, ctx.recipe, ctx.needs = name, dict(recipe), []
        self.server.call_soon(lambda: asyncio.ensure_future(self.recipes.check(root)))
        # A shown graph of this profile is stale now if the form changed it (editors
        # without file watchers would not say so).
        self.server.call_soon(lambda: asyncio.ensure_future(self.freshness.check(root / RECIPES_PATH)))
        log.info("saved profile %s in %s", name, root / RECIPES_PATH)
        return []
