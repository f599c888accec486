"""Open as Graph: ``tensorviz.openGraph`` and ``tensorviz.captureProfile``.

Serves ``workspace/executeCommand``. A thin adapter over the capture session
(:func:`capture.session.run_session`), which runs the checks in DESIGN.md's order with
their one wording (trusted, source saved, interpreter found, dependencies, device,
recipe, import and trace), the worker (the folder's warm one when on), the graph file
and the history. What only the editor knows goes in as values: whether the workspace is
trusted (asked with a prompt first, once per workspace root), which buffers are dirty
and what they hold, the previous capture's sources. Around it, the editor's part:

1. the profile: the saved one for this symbol, else the viewer's setup form,
   prefilled from discovery (unknown dimensions are asked there);
2. cancellable work-done progress (cancelling kills the worker's process group);
3. ``window/showDocument`` (external) with the viewer URL.

A refusal (untrusted, unsaved) is a message; a failed capture becomes a diagnostic on
the symbol's name; missing capture dependencies start the reviewed install flow, then
one retry.

The parts, each owning one thing: :class:`~.capturing.CaptureRunner` runs the session,
:class:`~.landing.GraphLanding` puts a new graph in place,
:class:`~.capture_failures.FailureDiagnostics` says why one failed,
:class:`~.viewer_setup.ViewerSetup` asks for a setup; this module decides between them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any, Coroutine

from lsprotocol import types

from capture.graph.failure_text import readable_message
from capture.graph.model import Failure
from capture.recipe import module_file, split_ref
from capture.session import SessionResult
from capture.worker.protocol import environment_needed, inputs_needed, model_dependencies

from ..backends import RECIPES_PATH, InstallPlan, Pos, Span, install_plan
from ..feature import CommandHandler, Feature
from ..host import Host
from .args import CaptureProfileArgs, OpenGraphArgs, ShowViewerArgs
from .candidates import Candidates
from .capture_failures import ABSTRACT_ACTION, FailureDiagnostics, abstract_offered, frame_label, raising_frame
from .capturing import CaptureRunner, CaptureTarget
from .dependencies import Dependencies
from .landing import GraphLanding
from .recipes import Recipes
from .trust import Trust
from .viewer_host import ViewerHost
from .viewer_setup import ViewerSetup

log = logging.getLogger(__name__)

#: Failure stages at which the session refused before anything ran: the command's result
#: reason, and how to go on from the editor (after the session's own words).
REFUSALS = {
    "trust": ("untrusted", " Run the command 'tensorviz.trustWorkspace' (or answer the prompt) to allow captures."),
    "source": ("unsaved", ""),
}
#: The reason a recapture gives way to the next save's (features/recapture.py).
SUPERSEDED = "a newer save supersedes it"
#: How to fix a failure of these stages from the editor.
REMEDIES = {
    "interpreter": " Set tensorviz.python or run the command 'tensorviz.selectInterpreter'.",
}


class OpenGraph(Feature):
    name = "open-graph"

    def __init__(
        self, server: Host, *, trust: Trust, candidates: Candidates, recipes: Recipes, runner: CaptureRunner,
        landing: GraphLanding, failures: FailureDiagnostics, setups: ViewerSetup, dependencies: Dependencies,
        viewers: ViewerHost,
    ) -> None:
        super().__init__(server)
        self.trust = trust
        self.candidates = candidates
        self.recipes = recipes
        self.runner = runner
        self.landing = landing
        self.failures = failures
        self.setups = setups
        self.dependencies = dependencies
        self.viewers = viewers

    def commands(self) -> dict[str, CommandHandler]:
        return {
            "tensorviz.openGraph": self.open_graph_command,
            "tensorviz.captureProfile": self.capture_profile_command,
            "tensorviz.showViewer": self.show_viewer_command,
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
        return await self.capture(CaptureTarget(root, profile, uri, cand.qualname, cand.name_range),
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
        return await self.capture(CaptureTarget(root, a.profile, uri, qualname or a.profile, name_range), show=show,
                                  purpose=f"Capturing profile {a.profile}")

    async def show_viewer_command(self, args: list[Any]) -> dict[str, Any]:
        """Open (or show) the viewer URL of a profile's newest graph again, without
        capturing; no profile: the folder's newest graph."""
        a = ShowViewerArgs.parse(args)
        root = await self.trust.pick_folder(a.folder, "show the viewer of")
        urls = self.viewers.urls.get(str(root), {}) if root is not None else {}
        url: str | None
        profile: str | None
        if a.profile is None and urls:
            profile, url = list(urls.items())[-1]
        else:
            profile, url = a.profile, urls.get(a.profile or "")
        if url is None:
            shown = ", ".join(urls) or "none yet"
            what = f"profile {a.profile!r}" if a.profile else "this folder"
            self.server.show_message(
                f"TensorViz: no graph of {what} in this session (captured: {shown}); "
                "run tensorviz.captureProfile or Open as Graph first.",
                types.MessageType.Warning,
            )
            return {"ok": False, "reason": "no-graph"}
        opened = await self.viewers.show_url(url, f"Graph of profile {profile}")
        return {"ok": True, "url": url, "profile": profile, "opened": opened}

    # ------------------------------------------------------------------ capture
    async def capture(
        self, target: CaptureTarget, *, show: bool = True, retry: bool = True, background: bool = False,
        purpose: str | None = None,
    ) -> dict[str, Any]:
        """Capture ``target`` (:meth:`CaptureRunner.run`), then land the graph, refuse,
        offer the install of what is missing (one retry), ask for input dimensions, or
        put the failure on the symbol. ``background``: a recapture on save
        (features/recapture.py): no prompts or pop-ups (a failure is the diagnostic and
        the viewer's banner), silent when cancelled by a newer save, and the viewer tab
        of the graph it replaces updates in place."""
        result = await self.runner.run(target, background=background, purpose=purpose)
        if result is None:
            return {"ok": False, "reason": "busy"}
        qualname = target.qualname
        if result.job.cancel.is_set():
            # One line per cancel, with its one reason (a newer save, the user, shutdown).
            why = self.runner.cancel_reason(target.key)
            log.info("%s of %s (profile %s) cancelled after %s: %s", "recapture" if background else "capture",
                     qualname, target.profile, result.job.elapsed(), why)
            if why != SUPERSEDED:  # a newer save's capture follows: it reports itself
                if not background:
                    self.server.show_message(f"TensorViz: capture of {qualname} cancelled ({why}); the worker was stopped.")
                self.viewers.publish(target.root, "capture-failed",
                                     {"message": f"cancelled ({why})", "stage": "cancelled", "profile": target.profile})
            return {"ok": False, "reason": "cancelled", "why": why}
        failure = result.capture.failure
        if failure is None:
            self.failures.clear(target.root, target.profile)
            return await self.landing.land(target, result, show=show, background=background)
        if failure.stage in REFUSALS:
            return self._refused(target, failure, background=background)
        return await self._failed(target, result, failure, show=show, retry=retry, background=background)

    def _refused(self, target: CaptureTarget, failure: Failure, *, background: bool) -> dict[str, Any]:
        """The session refused before anything ran (trust, unsaved buffers): said once,
        in the session's words and how to go on from the editor; no diagnostic."""
        reason, remedy = REFUSALS[failure.stage]
        self.viewers.publish(target.root, "capture-failed", {"message": readable_message(failure.message).text, "stage": failure.stage})
        if background:
            log.warning("recapture refused (%s): %s", failure.stage, failure.message)
        else:
            self.server.show_message(f"TensorViz: {failure.message}.{remedy}", types.MessageType.Warning)
        return {"ok": False, "reason": reason, "message": failure.message}

    async def _failed(
        self, target: CaptureTarget, result: SessionResult, failure: Failure, *, show: bool, retry: bool,
        background: bool,
    ) -> dict[str, Any]:
        root, stage, qualname = target.root, failure.stage, target.qualname
        event: dict[str, Any] = {"message": readable_message(failure.message).text, "stage": stage,
                                 "profile": target.profile}
        where = raising_frame(failure)
        if where is not None:  # the viewer's banner links the line that raised
            event["frame"] = {"file": where.file, "line": where.line, "column": where.column,
                              "function": where.function, "label": frame_label(root, where)}
        self.viewers.publish(root, "capture-failed", event)
        if stage == "dependencies" and not background:
            python = result.job.python
            plan = install_plan(failure, python)
            if plan is not None and not retry:
                # Just installed, and still missing: say so instead of asking again.
                self.dependencies.last_plan[str(root)] = plan
                self.server.show_message(
                    f"TensorViz: {', '.join(plan.missing)} still missing in {plan.python} after the install; "
                    f"see the log. {failure.message}",
                    types.MessageType.Error,
                )
                return {"ok": False, "reason": "dependencies", "installed": True, "missing": plan.missing}
            if plan is not None:
                installed = await self.dependencies.offer(root, plan)
                if installed and retry:
                    return await self.capture(target, show=show, retry=False)
                return {"ok": False, "reason": "dependencies", "installed": installed, "missing": plan.missing}
        wanted = model_dependencies(failure)
        if wanted is not None and not background:
            # The model's own libraries (Whisper's tiktoken): the same reviewed install,
            # into the capture interpreter, then the capture again.
            plan = InstallPlan(wanted["python"] or result.job.python, wanted["missing"], wanted.get("install") or [])
            if retry:
                installed = await self.dependencies.offer(root, plan)
                if installed:
                    return await self.capture(target, show=show, retry=False)
        needs = inputs_needed(failure)
        if needs and target.uri.endswith(".py") and not background:
            cand = await self.candidates.find(target.uri, qualname)
            if cand is not None:
                recipe = self.recipes.profiles(root).get(target.profile, {})
                self.server.show_message(
                    f"TensorViz: {qualname} needs input dimensions before it can be traced: {failure.message}"
                )
                return await self.setups.open(root, target.uri, cand, target.profile, recipe=recipe, needs=needs)
        hint = REMEDIES.get(stage, "") + _environment_hint(failure, self.server.settings_for(root).capture_env)
        offer = abstract_offered(failure)
        if offer is not None:
            hint += f" Code action: {ABSTRACT_ACTION} (sets {offer} = \"abstract\" and captures again)."
        files = {(root / RECIPES_PATH).resolve(), *result.files}
        files |= {(root / src.path).resolve() for src in result.capture.sources}
        self.failures.show(target, failure, files, hint,
                           data={"abstract": offer} if offer is not None else None)
        await self.server.fan_out("capture_failed", target, files)
        if background:  # the diagnostic and the viewer's banner say it; no pop-up per save
            log.warning("recapture of %s failed (%s): %s", qualname, stage, failure.message)
        else:
            self.server.show_message(
                f"TensorViz: capture of {qualname} failed ({stage}): {readable_message(failure.message).text}{hint}",
                types.MessageType.Error
            )
        return {"ok": False, "reason": stage, "message": failure.message, "details": failure.details}

    # ------------------------------------------------------------------ from the viewer
    def start_capture_from_viewer(self, root: Path | None, profile: str) -> None:
        """The viewer's capture hook (HTTP thread): run the capture on the loop."""
        if self.server.loop is None or self.server.stopping or root is None:
            raise ValueError("the language server is not running")
        ctx = self.setups.last(root)
        coro: Coroutine[Any, Any, dict[str, Any]]
        if ctx is not None and ctx.profile == profile:
            self.recipes.invalidate(root)
            coro = self.capture(CaptureTarget(root, profile, ctx.uri, ctx.candidate.qualname, ctx.candidate.name_range),
                                show=False)
        else:  # another graph's profile: capture that one, by name
            # The page that asked follows the capture itself ("capture-ready"): no new tab.
            coro = self.capture_profile_command([{"profile": profile, "folder": str(root)}], show=False)
        self.server.loop.call_soon_threadsafe(lambda: asyncio.ensure_future(_logged(coro)))


async def _logged(coro: Coroutine[Any, Any, Any]) -> None:
    try:
        await coro
    except Exception:
        log.exception("capture from the viewer failed")


def _environment_hint(failure: Failure, current: dict[str, str]) -> str:
    """A failure that names the environment it needs (``details.environment``, e.g.
    ``{"JAX_ENABLE_X64": "1"}`` for 64-bit JAX inputs): how to give it from the editor."""
    missing = {k: v for k, v in environment_needed(failure).items() if current.get(k) != v}
    if not missing:
        return ""
    merged = {**current, **missing}
    return f" Set the tensorviz.captureEnv setting for this folder to {json.dumps(merged)} and capture again."
