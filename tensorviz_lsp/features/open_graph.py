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
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import urllib.parse
from pathlib import Path
from typing import Any

from lsprotocol import types

from capture.graph import frame_repeats
from capture.graph.model import Failure
from capture.recipe import module_file, profile_name
from capture.session import CaptureRequest, HistoryLimits, SessionResult, limits_for, run_session
from capture.worker.protocol import NeededDim, environment_needed, inputs_needed

from ..backends import RECIPES_PATH, Candidate, Pos, Span, install_plan
from ..diagnostics import SOURCE
from ..feature import Feature
from .args import CaptureProfileArgs, OpenGraphArgs, ShowViewerArgs
from .candidates import Candidates
from .dependencies import Dependencies
from .captured_lines import CapturedLines
from .freshness import Freshness, Record, rel_path
from .interpreter import InterpreterSelection
from .lenses import lsp_range
from .progress import Progress
from .recipes import Recipes
from .setup_form import SetupContext, draft_recipe, setup_form
from .trust import Trust
from .viewer_host import ViewerHost

log = logging.getLogger(__name__)

FAILED_KIND = "capture"

#: Failure stages at which the session refused before anything ran: the command's result
#: reason, and how to go on from the editor (after the session's own words).
REFUSALS = {
    "trust": ("untrusted", " Run the command 'tensorviz.trustWorkspace' (or answer the prompt) to allow captures."),
    "source": ("unsaved", ""),
}
#: How to fix a failure of these stages from the editor.
REMEDIES = {
    "interpreter": " Set tensorviz.python or run the command 'tensorviz.selectInterpreter'.",
}


class OpenGraph(Feature):
    name = "open-graph"

    def __init__(self, server) -> None:
        super().__init__(server)
        self._running: dict[tuple[str, str], Progress] = {}
        self._failures: dict[tuple[str, str], tuple[str, types.Diagnostic]] = {}
        #: A failure's files (what the capture would import, and the recipes file) and
        #: when it failed: once one changes, its diagnostic says it is from then.
        self._failure_files: dict[tuple[str, str], tuple[set[Path], str]] = {}
        #: The setup form each folder's viewer shows (the last symbol opened without a profile).
        self.setups: dict[str, SetupContext] = {}
        #: The viewer URL of each profile's newest graph, by folder, newest last.
        self.urls: dict[str, dict[str, str]] = {}

    def commands(self):
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
        candidates = await self.server.get_feature(Candidates).get(uri)
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
        recipes = self.server.get_feature(Recipes)
        recipes.invalidate(root)
        profile = a.profile if a.profile and a.profile in recipes.profiles(root) else None
        profile = profile or recipes.profile_for(root, path, cand.qualname)
        if profile is None:  # the form runs nothing: trust is asked when it captures
            return await self.open_setup(root, uri, cand, a.profile)
        return await self.capture(root, profile, uri, cand.qualname, cand.name_range,
                                  purpose=f"Opening {cand.qualname} as a graph")

    async def capture_profile_command(self, args: list[Any], *, show: bool = True) -> dict[str, Any]:
        a = CaptureProfileArgs.parse(args)
        root = await self.server.get_feature(Trust).pick_folder(a.folder, "capture a profile in")
        if root is None:
            raise ValueError("no workspace folder")
        recipes = self.server.get_feature(Recipes)
        recipes.invalidate(root)
        recipe = recipes.profiles(root).get(a.profile)
        if recipe is None:
            known = ", ".join(recipes.profiles(root)) or "none saved"
            self.server.show_message(
                f"TensorViz: no profile {a.profile!r} in {root / '.tensorviz/recipes.toml'} (profiles: {known}).",
                types.MessageType.Error,
            )
            return {"ok": False, "reason": "no-profile"}
        model = recipe.get("model") if isinstance(recipe.get("model"), str) else ""
        module, _, qualname = model.partition(":")
        model_path = module_file(root, module) if module else None
        uri = self.server.uri_of(model_path) if model_path else self.server.uri_of(root / ".tensorviz" / "recipes.toml")
        name_range = Span(Pos(0, 0), Pos(0, 0))
        if model_path is not None:
            cand = await self.server.get_feature(Candidates).find(uri, qualname)
            if cand is not None:
                name_range = cand.name_range
        return await self.capture(root, a.profile, uri, qualname or a.profile, name_range, show=show,
                                  purpose=f"Capturing profile {a.profile}")

    async def show_viewer_command(self, args: list[Any]) -> dict[str, Any]:
        """Open (or show) the viewer URL of a profile's newest graph again, without
        capturing; no profile: the folder's newest graph."""
        a = ShowViewerArgs.parse(args)
        root = await self.server.get_feature(Trust).pick_folder(a.folder, "show the viewer of")
        urls = self.urls.get(str(root), {}) if root is not None else {}
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
        opened = await self.server.get_feature(ViewerHost).show_url(url, f"Graph of profile {profile}")
        return {"ok": True, "url": url, "profile": profile, "opened": opened}

    # ------------------------------------------------------------------ capture
    async def capture(
        self, root: Path, profile: str, uri: str, qualname: str, name_range: Span, *, show: bool = True, retry: bool = True,
        background: bool = False, purpose: str | None = None,
    ) -> dict[str, Any]:
        """Run the capture session (:func:`capture.session.run_session`) for ``profile``.

        ``purpose``: what the trust prompt says runs, when the workspace is not trusted
        yet (the answer is the session's ``trusted``). ``background``: a recapture on
        save (features/recapture.py): no prompts or pop-ups (a failure is the diagnostic
        and the viewer's banner), silent when cancelled by a newer save, and the viewer
        tab of the graph it replaces updates in place."""
        key = (str(root), profile)
        if key in self._running:
            self.server.show_message(f"TensorViz: profile {profile} is already being captured.")
            return {"ok": False, "reason": "busy"}
        interp = self.server.get_feature(InterpreterSelection).for_root(root)
        trust = self.server.get_feature(Trust)
        if background:
            trusted = trust.is_trusted(root)
        else:
            trusted = await trust.ask(root, purpose or f"Capturing {qualname}", interp.path)
        settings = self.server.settings_for(root)
        viewer_host = self.server.get_feature(ViewerHost)
        previous = self.server.get_feature(Freshness).records.get(key)
        buffers = self.server.buffers()
        log.info("capturing %s (profile %s) in %s with %s%s", qualname, profile, root, interp.describe(),
                 f", environment {' '.join(f'{k}={v}' for k, v in settings.capture_env.items())}"
                 if settings.capture_env else "")
        viewer_host.publish(root, "progress", {"message": f"Capturing {qualname}…", "fraction": 0.0})
        async with Progress(
            self.server,
            f"TensorViz: {'recapturing' if background else 'capturing'} {qualname}",
            cancellable=True,
            message=f"profile {profile}, {interp.describe()}",
        ) as progress:

            def on_progress(message: str, fraction: float | None = None) -> None:
                progress.report(message, fraction)
                viewer_host.publish(root, "progress", {"message": message, "fraction": fraction})

            request = CaptureRequest(
                root, profile, python=interp.path, trusted=trusted,
                limits=limits_for(settings.capture_timeout, settings.max_saved_file_mb, settings.capture_memory_mb),
                env=dict(settings.capture_env),
                is_dirty=buffers.is_dirty, read_text=buffers.read_text,
                known_sources=sorted(previous.sources) if previous is not None else (),
                history=HistoryLimits(settings.history_captures, settings.history_bytes),
                warm_idle_seconds=settings.warm_worker_idle_seconds,
                cancel=progress.cancel_flag, progress=on_progress,
                log=lambda line: log.info("[worker] %s", line),
            )
            self._running[key] = progress
            task = asyncio.ensure_future(self.server.run_blocking(run_session, request, self.server.backends.run_capture))
            try:
                result: SessionResult = await asyncio.shield(task)
            except asyncio.CancelledError:
                # The request itself was cancelled ($/cancelRequest): stop the worker too.
                progress.cancel()
                try:
                    await asyncio.wait_for(asyncio.shield(task), 30)
                except Exception:
                    pass
                raise
            finally:
                self._running.pop(key, None)
        for problem in result.problems:
            log.warning("capture of %s (profile %s): %s", qualname, profile, problem)
        if progress.cancel_flag.is_set() and background:
            log.info("recapture of %s (profile %s) cancelled: a newer save supersedes it", qualname, profile)
            return {"ok": False, "reason": "cancelled"}
        if progress.cancel_flag.is_set():
            msg = f"TensorViz: capture of {qualname} cancelled; the worker was stopped."
            self.server.show_message(msg)
            viewer_host.publish(root, "capture-failed", {"message": "cancelled"})
            return {"ok": False, "reason": "cancelled"}
        failure = result.capture.failure
        if failure is not None and failure.stage in REFUSALS:
            return self._refused(root, failure, background=background)
        if failure is not None:
            return await self._failed(
                root, profile, uri, qualname, name_range, result, interp, show=show, retry=retry, background=background
            )
        return await self._succeeded(root, profile, uri, qualname, name_range, result, show=show, background=background)

    def _refused(self, root: Path, failure: Failure, *, background: bool) -> dict[str, Any]:
        """The session refused before anything ran (trust, unsaved buffers): said once,
        in the session's words and how to go on from the editor; no diagnostic."""
        reason, remedy = REFUSALS[failure.stage]
        self.server.get_feature(ViewerHost).publish(root, "capture-failed", {"message": failure.message, "stage": failure.stage})
        if background:
            log.warning("recapture refused (%s): %s", failure.stage, failure.message)
        else:
            self.server.show_message(f"TensorViz: {failure.message}.{remedy}", types.MessageType.Warning)
        return {"ok": False, "reason": reason, "message": failure.message}

    async def _succeeded(
        self, root, profile, uri, qualname, name_range, result: SessionResult, *, show: bool, background: bool = False
    ) -> dict[str, Any]:
        capture = result.capture
        self._clear_failure(root, profile)
        viewer_host = self.server.get_feature(ViewerHost)
        title = f"{qualname} ({profile})"
        viewer = await self.server.run_blocking(viewer_host.viewer, root)
        # add_capture tells open pages ("capture-ready"), so a page showing the setup
        # form or an older graph offers the new one.
        # warm: the index builds while the browser starts, not on its first request;
        # trusted_sources: this process's own worker recorded them (not a foreign file).
        # The history's newest capture of this profile before this one: the page offers
        # the diff against it (read on the first diff, not now).
        extra: dict[str, Any] = {}
        if result.baseline is not None:
            extra["baseline"] = result.baseline
        old = self.server.get_feature(Freshness).records.get((str(root), profile))
        if background and old is not None and old.capture_id is not None:
            extra["replaces"] = old.capture_id  # its tab updates in place
        capture_id = await self.server.run_blocking(
            functools.partial(viewer.add_capture, capture, title, warm=True, trusted_sources=True, **extra)
        )
        saved = result.graph_file
        sources = {s.path for s in capture.sources}
        record = Record(root, profile, uri, qualname, capture, sources, name_range, capture_id=capture_id)
        self.server.get_feature(Freshness).record(record)
        # The text each source had when captured: where its lines' data goes after edits.
        await self.server.run_blocking(self.server.get_feature(CapturedLines).remember, record)
        await self.server.fan_out("capture_landed", record)  # inlay hints refresh
        url = viewer.url_for(capture_id)
        urls = self.urls.setdefault(str(root), {})
        urls.pop(profile, None)  # newest last
        urls[profile] = url
        n = len(capture.nodes)
        log.info("captured %s: %d nodes%s", qualname, n, f", saved to {saved}" if saved else "")
        if show:
            await viewer_host.show_url(url, f"Graph of {qualname}")
        return {"ok": True, "url": url, "capture": capture_id, "nodes": n, "file": str(saved) if saved else None}

    async def _failed(
        self, root, profile, uri, qualname, name_range, result: SessionResult, interp, *, show: bool, retry: bool,
        background: bool = False,
    ):
        capture = result.capture
        failure = capture.failure
        assert failure is not None
        stage = failure.stage
        viewer_host = self.server.get_feature(ViewerHost)
        viewer_host.publish(root, "capture-failed", {"message": failure.message, "stage": stage, "profile": profile})
        if stage == "dependencies" and not background:
            plan = install_plan(failure, interp.path)
            if plan is not None and not retry:
                # Just installed, and still missing: say so instead of asking again.
                self.server.get_feature(Dependencies).last_plan[str(root)] = plan
                self.server.show_message(
                    f"TensorViz: {', '.join(plan.missing)} still missing in {plan.python} after the install; "
                    f"see the log. {failure.message}",
                    types.MessageType.Error,
                )
                return {"ok": False, "reason": "dependencies", "installed": True, "missing": plan.missing}
            if plan is not None:
                deps = self.server.get_feature(Dependencies)
                installed = await deps.offer(root, plan, interp.origin)
                if installed and retry:
                    return await self.capture(root, profile, uri, qualname, name_range, show=show, retry=False)
                return {"ok": False, "reason": "dependencies", "installed": installed, "missing": plan.missing}
        needs = inputs_needed(failure)
        if needs and self.setup_possible(uri) and not background:
            cand = await self.server.get_feature(Candidates).find(uri, qualname)
            if cand is not None:
                recipe = self.server.get_feature(Recipes).profiles(root).get(profile, {})
                self.server.show_message(
                    f"TensorViz: {qualname} needs input dimensions before it can be traced: {failure.message}"
                )
                return await self.open_setup(root, uri, cand, profile, recipe=recipe, needs=list(needs))
        hint = REMEDIES.get(stage, "") + _environment_hint(failure, self.server.settings_for(root).capture_env)
        diag = types.Diagnostic(
            range=lsp_range(name_range),
            message=f"Capture of {qualname} (profile {profile}) failed at {stage}: {failure.type}: {failure.message}{hint}"
            + (f" ({recursion})" if (recursion := frame_repeats.summary(failure)) else ""),
            severity=types.DiagnosticSeverity.Error,
            source=SOURCE,
            code=f"capture-{stage}",
            related_information=self._frames(root, failure) or None,
        )
        self._failures[(str(root), profile)] = (uri, diag)
        files = {(root / RECIPES_PATH).resolve(), *result.files}
        files |= {(root / src.path).resolve() for src in capture.sources}
        self._failure_files[(str(root), profile)] = (files, time.strftime("%H:%M"))
        self._publish_failures(uri)
        if background:  # the diagnostic and the viewer's banner say it; no pop-up per save
            log.warning("recapture of %s failed (%s): %s", qualname, stage, failure.message)
        else:
            self.server.show_message(
                f"TensorViz: capture of {qualname} failed ({stage}): {failure.message}{hint}", types.MessageType.Error
            )
        return {"ok": False, "reason": stage, "message": failure.message, "details": failure.details}

    def setup_possible(self, uri: str) -> bool:
        return uri.endswith(".py")

    def _frames(self, root: Path, failure: Failure) -> list[types.DiagnosticRelatedInformation]:
        out = []
        frames = list(failure.frames)
        marks = frame_repeats.repeated(failure.details)
        for index, fr in list(enumerate(frames))[-5:]:
            p = Path(fr.file)
            p = p if p.is_absolute() else root / p
            line = max(0, int(fr.line or 1) - 1)
            out.append(
                types.DiagnosticRelatedInformation(
                    location=types.Location(
                        uri=self.server.uri_of(p),
                        range=types.Range(types.Position(line, 0), types.Position(line, 0)),
                    ),
                    message=f"in {fr.function}" + (f" {frame_repeats.marker(*marks[index])}" if index in marks else ""),
                )
            )
        return out

    def _mark_failures_changed(self, path: Path | None) -> None:
        """A file a failed capture read changed: its diagnostic may no longer hold, so
        it says which capture it is from (and is a warning now) until the next one."""
        if path is None:
            return
        path = path.resolve()
        touched: set[str] = set()
        for key, (files, when) in list(self._failure_files.items()):
            if path not in files or key not in self._failures:
                continue
            uri, diag = self._failures[key]
            root = Path(key[0])
            diag = types.Diagnostic(
                range=diag.range,
                message=f"From the last capture at {when}; {rel_path(root, path) or path} changed since: {diag.message}",
                severity=types.DiagnosticSeverity.Warning,
                source=diag.source,
                code=diag.code,
                related_information=diag.related_information,
            )
            self._failures[key] = (uri, diag)
            del self._failure_files[key]  # marked once
            touched.add(uri)
        for uri in touched:
            self._publish_failures(uri)

    def document_changed(self, uri: str) -> None:
        self._mark_failures_changed(self.server.path_of(uri))

    def document_saved(self, uri: str) -> None:
        self._mark_failures_changed(self.server.path_of(uri))

    def files_changed(self, changes: list[types.FileEvent]) -> None:
        for change in changes:
            self._mark_failures_changed(self.server.path_of(change.uri))

    def _clear_failure(self, root: Path, profile: str) -> None:
        self._failure_files.pop((str(root), profile), None)
        old = self._failures.pop((str(root), profile), None)
        if old is not None:
            self._publish_failures(old[0])

    def _publish_failures(self, uri: str) -> None:
        self.server.diagnostics.set(uri, FAILED_KIND, [d for u, d in self._failures.values() if u == uri])

    # ------------------------------------------------------------------ setup form
    async def open_setup(
        self,
        root: Path,
        uri: str,
        cand: Candidate,
        profile: str | None,
        *,
        recipe: dict[str, Any] | None = None,
        needs: list[NeededDim] | None = None,
    ) -> dict[str, Any]:
        recipes = self.server.get_feature(Recipes)
        path = self.server.path_of(uri)
        model = recipes.model_ref(root, path, cand.qualname) if path else None
        if model is None:
            self.server.show_message(
                f"TensorViz: {path} cannot be named from the workspace root {root}: it is outside it, or its "
                "file name holds a '.' before .py (no module can have that name); open the folder that "
                "contains it, or rename the file.",
                types.MessageType.Error,
            )
            return {"ok": False, "reason": "not-importable"}
        name = profile or profile_name(cand.qualname, recipes.profiles(root))
        draft = dict(recipe) if recipe else draft_recipe(cand, model)
        self.setups[str(root)] = SetupContext(root, uri, cand, name, draft, list(needs or []))
        viewer_host = self.server.get_feature(ViewerHost)
        viewer = await self.server.run_blocking(viewer_host.viewer, root)
        # The page of this form, even when the folder's viewer already holds another
        # model's graph (its plain URL would show that newest graph and its form).
        url = f"{viewer.url}?setup={urllib.parse.quote(name, safe='')}"
        log.info("setup form for %s (profile %s)", cand.qualname, name)
        await viewer_host.show_url(url, f"Set up {cand.qualname}")
        return {"ok": True, "setup": True, "url": url, "profile": name}

    def setup_for_viewer(self, root: Path | None, profile: str | None = None) -> dict[str, Any] | None:
        """The viewer's setup provider (HTTP thread): the form's content.

        With ``profile`` (a graph page asks for the profile its capture came from) the
        form is that profile's, never the folder's last form: "Setup" and "Capture
        again" act on the graph on screen. Without one, the last form opened here
        (the page of a symbol that has no profile yet)."""
        if root is None:
            return None
        if profile is None:
            ctx = self.setups.get(str(root))
            return setup_form(ctx) if ctx is not None else None
        if self.server.loop is None or self.server.stopping:
            return None
        ctx = self.server.run_coroutine(self.context_for_profile(root, profile), 60)
        return setup_form(ctx) if ctx is not None else None

    async def context_for_profile(self, root: Path, profile: str) -> SetupContext | None:
        """The setup form of a saved profile: its saved recipe, and the candidate its
        ``model`` names (discovered from source); None when there is no such profile."""
        last = self.setups.get(str(root))
        recipes = self.server.get_feature(Recipes)
        recipes.invalidate(root)
        recipe = recipes.profiles(root).get(profile)
        if recipe is None:
            # Not saved yet: only the form being filled in may carry this name.
            return last if last is not None and last.profile == profile else None
        if last is not None and last.profile == profile:
            return SetupContext(root, last.uri, last.candidate, profile, dict(recipe), list(last.needs))
        model = recipe.get("model") if isinstance(recipe.get("model"), str) else ""
        module, _, qualname = model.partition(":")
        model_path = module_file(root, module) if module else None
        if model_path is None or not qualname:
            return None
        uri = self.server.uri_of(model_path)
        cand = await self.server.get_feature(Candidates).find(uri, qualname)
        if cand is None:
            return None
        return SetupContext(root, uri, cand, profile, dict(recipe))

    def save_profile_from_viewer(self, root: Path | None, name: str, recipe: dict[str, Any]) -> list[dict[str, Any]]:
        """The viewer's save hook (HTTP thread): validate and write; errors or []."""
        if root is None:
            return [{"path": "", "message": "no workspace folder to save the profile in"}]
        errors = self.server.backends.save_profile(root, name, recipe)
        if errors:
            return errors
        ctx = self.setups.get(str(root))
        # Only the form of the same model: a graph page's form (another profile, another
        # model) must not turn the folder's last form into itself.
        if ctx is not None and (ctx.profile == name or ctx.recipe.get("model") == recipe.get("model")):
            ctx.profile, ctx.recipe, ctx.needs = name, dict(recipe), []
        recipes = self.server.get_feature(Recipes)
        freshness = self.server.get_feature(Freshness)
        self.server.call_soon(lambda: asyncio.ensure_future(recipes.check(root)))
        # A shown graph of this profile is stale now if the form changed it (editors
        # without file watchers would not say so).
        self.server.call_soon(lambda: asyncio.ensure_future(freshness.check(root / RECIPES_PATH)))
        log.info("saved profile %s in %s", name, root / ".tensorviz" / "recipes.toml")
        return []

    def start_capture_from_viewer(self, root: Path | None, profile: str) -> None:
        """The viewer's capture hook (HTTP thread): run the capture on the loop."""
        if self.server.loop is None or self.server.stopping or root is None:
            raise ValueError("the language server is not running")
        ctx = self.setups.get(str(root))
        if ctx is not None and ctx.profile == profile:
            coro = self._capture_from_setup(ctx, profile)
        else:  # another graph's profile: capture that one, by name
            # The page that asked follows the capture itself ("capture-ready"): no new tab.
            coro = self.capture_profile_command([{"profile": profile, "folder": str(root)}], show=False)
        self.server.loop.call_soon_threadsafe(lambda: asyncio.ensure_future(_logged(coro)))

    async def _capture_from_setup(self, ctx: SetupContext, profile: str) -> dict[str, Any]:
        self.server.get_feature(Recipes).invalidate(ctx.root)
        return await self.capture(ctx.root, profile, ctx.uri, ctx.candidate.qualname, ctx.candidate.name_range, show=False)

    # ------------------------------------------------------------------ lifecycle
    def shutdown(self) -> None:
        for progress in list(self._running.values()):
            progress.cancel()


async def _logged(coro) -> None:
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
    import json

    merged = {**current, **missing}
    return f" Set the tensorviz.captureEnv setting for this folder to {json.dumps(merged)} and capture again."
