"""Open as Graph: ``tensorviz.openGraph`` and ``tensorviz.captureProfile``, and the
viewer's "Capture" button.

Serves ``workspace/executeCommand``. Picks what to capture and hands it to
:meth:`CaptureFlow.capture <.capture_flow.CaptureFlow.capture>` (the capture session,
then the graph landing, or the refusal, the install flow, the input form or the failure
diagnostic):

1. the profile: the saved one for this symbol, else the viewer's setup form,
   prefilled from discovery (unknown dimensions are asked there; :mod:`.viewer_setup`);
2. a named profile of a folder (``tensorviz.captureProfile``), the symbol its ``model``
   names found by discovery;
3. from the viewer: the profile of the form or graph on screen.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Coroutine

from lsprotocol import types

from capture.recipe import module_file, split_ref

from ..backends import RECIPES_PATH, Pos, Span
from ..feature import CommandHandler, Feature
from ..host import Host
from ..registry import register
from .args import CaptureProfileArgs, OpenGraphArgs
from .candidates import Candidates
from .capture_flow import CaptureFlow
from .capturing import CaptureTarget
from .recipes import Recipes
from .trust import Trust
from .viewer_host import ViewerHost
from .viewer_setup import ViewerSetup

log = logging.getLogger(__name__)


@register
class OpenGraph(Feature):
    name = "open-graph"

    def __init__(self, server: Host, trust: Trust, candidates: Candidates, recipes: Recipes, setups: ViewerSetup,
                 flow: CaptureFlow, viewers: ViewerHost) -> None:
        super().__init__(server)
        self.trust = trust
        self.candidates = candidates
        self.recipes = recipes
        self.setups = setups
        self.flow = flow
        viewers.answers.start_capture = self.start_capture_from_viewer

    def commands(self) -> dict[str, CommandHandler]:
        return {
            "tensorviz.openGraph": self.open_graph_command,
            "tensorviz.captureProfile": self.capture_profile_command,
        }

    # ------------------------------------------------------------------ commands
    async def open_graph_command(self, args: list[Any]) -> dict[str, Any]:
        a = OpenGraphArgs.parse(args)
        uri = a.uri if "://" in a.uri or a.uri.startswith("file:") else self.server.uri_of(Path(a.uri).absolute())
        root = self.server.root_for(uri)
        path = self.server.path_of(uri)
        if root is None or path is None:
            raise ValueError(f"not a file: {a.uri}")
        candidates = await self.candidates.get(uri)
        cand = next((c for c in candidates if a.symbol in (c.qualname, c.name)), None) if a.symbol else (
            candidates[0] if len(candidates) == 1 else None
        )
        if cand is None:
            names = ", ".join(c.qualname for c in candidates) or "none"
            self.server.show_message(
                f"TensorViz: {path.name} has no graph candidate named {a.symbol!r} (candidates: {names}).",
                types.MessageType.Error,
            )
            return {"ok": False, "reason": "no-candidate"}
        recipes = self.recipes
        recipes.invalidate(root)
        profile = a.profile if a.profile and a.profile in recipes.profiles(root) else None
        profile = profile or recipes.profile_for(root, path, cand.qualname)
        if profile is None:  # the form runs nothing: trust is asked when it captures
            return await self.setups.open(root, uri, cand, a.profile)
        return await self.flow.capture(CaptureTarget(root, profile, uri, cand.qualname, cand.name_range),
                                       purpose=f"Opening {cand.qualname} as a graph")

    async def capture_profile_command(self, args: list[Any], *, show: bool = True) -> dict[str, Any]:
        a = CaptureProfileArgs.parse(args)
        root = await self.trust.pick_folder(a.folder, "capture a profile in")
        if root is None:
            raise ValueError("no workspace folder")
        recipes = self.recipes
        recipes.invalidate(root)
        recipe = recipes.profiles(root).get(a.profile)
        if recipe is None:
            known = ", ".join(recipes.profiles(root)) or "none saved"
            self.server.show_message(
                f"TensorViz: no profile {a.profile!r} in {root / RECIPES_PATH} (profiles: {known}).",
                types.MessageType.Error,
            )
            return {"ok": False, "reason": "no-profile"}
        model = recipe.get("model")
        module, qualname = split_ref(model) if isinstance(model, str) else ("", "")
        model_path = module_file(root, module) if module else None
        uri = self.server.uri_of(model_path) if model_path else self.server.uri_of(root / RECIPES_PATH)
        name_range = Span(Pos(0, 0), Pos(0, 0))
        if model_path is not None:
            cand = await self.candidates.find(uri, qualname)
            if cand is not None:
                name_range = cand.name_range
        return await self.flow.capture(CaptureTarget(root, a.profile, uri, qualname or a.profile, name_range),
                                       show=show, purpose=f"Capturing profile {a.profile}")

    # ------------------------------------------------------------------ from the viewer
    def start_capture_from_viewer(self, root: Path | None, profile: str) -> None:
        """The viewer's capture hook (HTTP thread): run the capture on the loop."""
        if self.server.loop is None or self.server.stopping or root is None:
            raise ValueError("the language server is not running")
        ctx = self.setups.last(root)
        coro: Coroutine[Any, Any, dict[str, Any]]
        if ctx is not None and ctx.profile == profile:
            self.recipes.invalidate(root)
            coro = self.flow.capture(
                CaptureTarget(root, profile, ctx.uri, ctx.candidate.qualname, ctx.candidate.name_range), show=False)
        else:  # another graph's profile: capture that one, by name
            # The page that asked follows the capture itself ("capture-ready"): no new tab.
            coro = self.capture_profile_command([{"profile": profile, "folder": str(root)}], show=False)
        self.server.loop.call_soon_threadsafe(lambda: asyncio.ensure_future(_logged(coro)))


async def _logged(coro: Coroutine[Any, Any, Any]) -> None:
    try:
        await coro
    except Exception:
        log.exception("capture from the viewer failed")
