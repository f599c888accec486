"""One capture from the editor, from the session to its outcome.

Open as Graph and a profile's capture (:mod:`.open_graph`), the abstract recapture
(:mod:`.abstract_capture`) and recapture on save (:mod:`.recapture`) all go through
:meth:`CaptureFlow.capture`: the capture session runs (:class:`~.capturing.CaptureRunner`,
a thin adapter over :func:`capture.session.run_session`, which runs the checks in
the order of docs/architecture.md ("The checks before a capture") with their one wording), then one of

- the graph lands (:class:`~.landing.GraphLanding`);
- a refusal before anything ran (untrusted, unsaved) or a cancel is said once, in the
  session's words and how to go on from the editor;
- missing capture dependencies start the reviewed install flow
  (:class:`~.dependencies.Dependencies`), then one retry;
- missing input dimensions are asked in the setup form (:class:`~.viewer_setup.ViewerSetup`);
- any other failure becomes a diagnostic where it happened and the viewer's banner
  (:class:`~.capture_failures.FailureDiagnostics`), and the features hear of it
  (``capture_failed``).
"""

from __future__ import annotations

import functools

import json
import logging
from typing import Any

from lsprotocol import types

from capture.graph.failure_text import readable_message
from capture.graph.model import Failure
from capture.session import SessionResult
from capture.worker.protocol import environment_needed, inputs_needed, model_dependencies

from ..backends import RECIPES_PATH, InstallPlan, install_plan
from ..feature import Feature
from ..host import Host
from ..registry import register
from .capture_failures import ABSTRACT_ACTION, FailureDiagnostics, abstract_offered, frame_label, raising_frame
from .capturing import CaptureRunner, CaptureTarget
from .dependencies import Dependencies
from .landing import GraphLanding
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


@register
class CaptureFlow(Feature):
    name = "capture-flow"

    def __init__(self, server: Host, runner: CaptureRunner, landing: GraphLanding, failures: FailureDiagnostics,
                 dependencies: Dependencies, setups: ViewerSetup) -> None:
        super().__init__(server)
        self.runner = runner
        self.landing = landing
        self.failures = failures
        self.dependencies = dependencies
        self.setups = setups

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
        result = await self.runner.run(target, background=background, purpose=purpose,
                                       on_graph=functools.partial(self.landing.first_graph, target, show=show,
                                                                  background=background))
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
                self.failures.banner(target.root, {"message": f"cancelled ({why})", "stage": "cancelled",
                                                   "profile": target.profile})
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
        self.failures.banner(target.root, {"message": readable_message(failure.message).text, "stage": failure.stage})
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
        self.failures.banner(root, event)
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
        wanted = model_dependencies(failure, result.job.python)
        if wanted is not None and not background and retry:
            # The model's own libraries (Whisper's tiktoken): the same reviewed install,
            # into the capture interpreter, then the capture again (the parent's command
            # only: model_dependencies checks it, issue 52).
            plan = InstallPlan(result.job.python, wanted["missing"], wanted.get("install", []))
            if await self.dependencies.offer(target.root, plan):
                return await self.capture(target, show=show, retry=False)
        needs = inputs_needed(failure)
        if needs and not background:
            asked = await self.setups.ask_for_inputs(target, failure.message, needs)
            if asked is not None:
                return asked
        hint = REMEDIES.get(stage, "") + _environment_hint(failure, self.server.settings_for(root).capture_env)
        offer = abstract_offered(failure)
        if offer is not None:
            hint += f" Code action: {ABSTRACT_ACTION} (sets {offer} = \"abstract\" and captures again)."
        files = {(root / RECIPES_PATH).resolve(), *result.files}
        files |= {(root / src.path).resolve() for src in result.capture.sources}
        self.failures.show(target, failure, files, hint,
                           data={"abstract": offer} if offer is not None else None)
        await self.server.call_hook(Feature.capture_failed, target, files)
        if background:  # the diagnostic and the viewer's banner say it; no pop-up per save
            log.warning("recapture of %s failed (%s): %s", qualname, stage, failure.message)
        else:
            self.server.show_message(
                f"TensorViz: capture of {qualname} failed ({stage}): {readable_message(failure.message).text}{hint}",
                types.MessageType.Error,
            )
        return {"ok": False, "reason": stage, "message": failure.message, "details": failure.details}


def _environment_hint(failure: Failure, current: dict[str, str]) -> str:
    """A failure that names the environment it needs (``details.environment``, e.g.
    ``{"JAX_ENABLE_X64": "1"}`` for 64-bit JAX inputs): how to give it from the editor."""
    missing = {k: v for k, v in environment_needed(failure).items() if current.get(k) != v}
    if not missing:
        return ""
    merged = {**current, **missing}
    return f" Set the tensorviz.captureEnv setting for this folder to {json.dumps(merged)} and capture again."
