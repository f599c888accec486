"""The worker step of a capture: everything after the checks of
:mod:`capture.session.checks`, in docs/architecture.md's order, each failing before any user code
is imported:

4. ``dependencies`` - the interpreter runs (3.11+) and has the worker's packages
   (probed without importing them), else the exact install command for it (pinning
   the installed Torch build: torch, ``nvidia-*``, ``triton``…, so that pip refuses
   rather than replaces it);
5. ``device``       - the recipe's device backend is available (checked in the worker,
   by the framework, before the model is imported; no CPU fallback);
6. ``recipe``       - the profile is valid, within the input limits, with every
   dimension known (else ``details["needs"]`` lists the dimensions to ask for);
7. ``import`` / ``trace`` - in the worker.

The worker runs in its own process group; the parent owns the deadline and kills the
whole group when it passes, on cancellation, and after the result (stray children).
A worker that crashes, exits early or sends garbage becomes a failure capture.

:func:`run_capture` is the checks and this step in one call, for callers that hold no
session (tests, benchmarks, scripts); the CLI and the language server go through
:func:`capture.session.run_session`, which also writes the graph file and the history.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Mapping
from typing import Any, Literal, cast

import safe_read

from ..frameworks import framework_info, framework_names
from ..graph.model import Capture
from ..recipe import DEFAULT_FRAMEWORK, Recipe, RecipeError
from ..worker.limits import Limits
from ..worker.procs import MARKER_ENV, register_child
from ..worker.protocol import PROTOCOL_VERSION, InputsNeededDetails, NeededDim, WorkerRequest
from .checks import Unsaved, default_interpreter, preflight
from .conversation import OneShotWorker, converse
from .job import CaptureJob, Log, Progress, resolve_recipe, workspace_path
from . import native_build
from .launcher import kept, launcher_script, worker_env
from .probe import MIN_PYTHON, install_command, missing_dependencies, path_stamp, probe_interpreter
from .warm import WarmPool, identity_for

__all__ = ["MIN_PYTHON", "default_interpreter", "install_command", "launcher_script", "run_capture", "run_worker"]


def run_capture(
    workspace: str | os.PathLike[str],
    recipe: Recipe | str | Mapping[str, Any],
    *,
    python: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    limits: Limits | None = None,
    unsaved: Unsaved = (),
    trusted: bool = True,
    progress: Progress | None = None,
    log: Log | None = None,
    cancel: threading.Event | None = None,
    env: Mapping[str, str] | None = None,
    warm: WarmPool | None = None,
) -> Capture:
    """Capture ``recipe`` (a :class:`Recipe`, a profile name saved in the workspace's
    ``.tensorviz/recipes.toml``, or ``Recipe.to_dict()`` data) in a worker running
    ``python`` (default :func:`default_interpreter`): the checks, then the worker step.

    ``timeout``: seconds for the worker (default ``limits.max_seconds``).
    ``unsaved``: paths (or a callable returning them) of editor buffers with unsaved
    changes. ``progress``, ``log`` and ``cancel``: see :class:`CaptureJob`.
    ``env``: extra environment variables for the worker (e.g. ``JAX_ENABLE_X64``).
    ``warm``: run on the folder's warm worker of this pool; None: a one-shot worker.
    Never raises for a capture problem; returns a failure capture instead."""
    job = make_job(workspace, recipe, python=python, limits=limits, timeout=timeout, env=env,
                   cancel=cancel, progress=progress, log=log)
    try:
        refused = preflight(job, trusted=trusted, unsaved=unsaved)
    except Exception as exc:  # a bug here must still give the caller a failure capture
        return job.fail("crash", type(exc).__name__, f"TensorViz could not run the capture: {exc}")
    return refused if refused is not None else run_worker(job, warm)


def make_job(
    workspace: str | os.PathLike[str],
    recipe: Recipe | str | Mapping[str, Any],
    *,
    python: str | os.PathLike[str] | None = None,
    limits: Limits | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
    log: Log | None = None,
    warm_idle_seconds: float = 0.0,
) -> CaptureJob:
    """The :class:`CaptureJob` of ``recipe`` in ``workspace``; its clock starts now."""
    root = workspace_path(workspace)
    limits = limits or Limits()
    if timeout is not None and timeout > 0:
        limits = Limits(**{**limits.to_dict(), "max_seconds": float(timeout)})
    job = CaptureJob(root, resolve_recipe(root, recipe), str(python) if python else default_interpreter(root),
                     limits, dict(env or {}), warm_idle_seconds=warm_idle_seconds)
    if cancel is not None:
        job.cancel = cancel
    if progress is not None:
        job.progress = progress
    if log is not None:
        job.log = log
    return job


def run_worker(job: CaptureJob, warm: WarmPool | None = None) -> Capture:
    """Checks 4-7 and the capture itself, for a job that passed :func:`preflight`.
    ``warm``: the pool whose folder worker runs it (None: a one-shot worker)."""
    try:
        return _WorkerStep(job, warm).run()
    except Exception as exc:  # a bug here must still give the caller a failure capture
        return job.fail("crash", type(exc).__name__, f"TensorViz could not run the capture: {exc}")


class _WorkerStep:
    def __init__(self, job: CaptureJob, warm: WarmPool | None) -> None:
        self.job = job
        self.warm = warm
        self.path_stamp: tuple[Any, ...] = ()

    def run(self) -> Capture:
        job = self.job
        info = framework_info(job.framework if job.framework in framework_names() else DEFAULT_FRAMEWORK)
        requires = info.requirements(self._model_source())
        probe = probe_interpreter(job, requires)
        if isinstance(probe, Capture):
            return probe
        self.path_stamp = path_stamp(probe.get("path"))
        missing = [m for m in requires if not probe["modules"].get(m, {}).get("found")]
        if missing:
            return missing_dependencies(job, missing, probe)

        resolved = job.recipe
        if resolved.error is not None:
            # docs/architecture.md: the device is checked before the recipe; a CUDA device still gets its
            # own check (in a worker) even when something else in the recipe is wrong.
            stand_in = self._device_stand_in()
            if stand_in is not None and stand_in.device != "cpu":
                device_failure = self._start(stand_in, action="probe_device")
                if device_failure is not None and device_failure.failure is not None and device_failure.failure.stage == "device":
                    return device_failure
            return job.fail("recipe", "RecipeError", str(resolved.error), resolved.error.to_dict())

        recipe = resolved.recipe
        assert recipe is not None
        needs = recipe.unknown_dims()
        if needs:
            listed = ", ".join(
                f"{n.section} {n.input} axis {n.axis}" + (f" ({n.name})" if n.name else "") for n in needs
            )
            return job.fail(
                "recipe", "InputsNeeded",
                f"profile {recipe.name!r} has unknown input dimensions: {listed}; give them a size to capture",
                InputsNeededDetails(needs=[cast(NeededDim, n.to_dict()) for n in needs]),
            )
        result = self._start(recipe, action="capture")
        assert result is not None
        if native_build.wanted(result.meta):
            native_build.start(job.python, job.env)
        return result

    def _model_source(self) -> str | None:
        """The text of the model's and factories' workspace modules (read, never
        imported), to tell which optional model packages the capture needs; ``None``
        when the recipe did not resolve or the model's module cannot be read from disk.
        A factory or call target that is no workspace file (``transformers:LlamaConfig``)
        adds nothing: an installed package brings its own imports."""
        if self.job.recipe.recipe is None:
            return None
        texts = []
        for i, path in enumerate(self.job.module_files()):
            if path is None:
                if i > 0:
                    continue
                return None
            try:
                texts.append(safe_read.read_text(path, workspace=self.job.workspace, errors="replace"))
            except OSError:
                return None
        return "\n".join(texts)

    def _device_stand_in(self) -> Recipe | None:
        """A minimal recipe carrying only the framework and device of an invalid one,
        so the worker can check the device (nothing is imported from the workspace)."""
        raw = self.job.recipe.raw
        if not isinstance(raw, Mapping):
            return None
        try:
            return Recipe.from_dict(
                {"name": "device_check", "model": "device_check:probe",
                 "framework": raw.get("framework", DEFAULT_FRAMEWORK), "device": raw.get("device", "cpu")}
            )
        except RecipeError:
            return None

    def _start(self, recipe: Recipe, *, action: Literal["capture", "probe_device"]) -> Capture | None:
        """Run the worker once. ``capture``: returns the capture (or a failure).
        ``probe_device``: returns a failure capture, or None when the device is fine."""
        job = self.job
        request = WorkerRequest(
            protocol=PROTOCOL_VERSION,
            action=action,
            workspace=str(job.workspace),
            recipe=recipe.to_dict(),
            limits=job.limits.to_dict(),
        )
        if self.warm is not None and action == "capture":
            if self.warm.preloading(job.workspace):
                job.progress("finishing the warm worker's imports (started when the model file was opened)", None)
            lease = self.warm.lease(job.workspace, os.path.abspath(job.python), worker_env(job.env),
                                    identity_for(job.python, job.env, self.path_stamp), log_line=job.log,
                                    wait_s=max(0.0, job.started + job.limits.max_seconds - time.monotonic()),
                                    cancel=job.cancel)
            if lease is not None:  # else the folder's warm worker is busy or cannot start: one-shot
                result: Capture | None = None
                try:
                    result = converse(job, lease, request)
                finally:
                    lease.release(result)
                return result
        read_fd, write_fd = os.pipe()
        log_r, log_w = os.pipe()
        env = worker_env(job.env)
        try:
            memory = ["--memory", str(job.limits.max_memory_bytes)] if job.limits.max_memory_bytes else []
            # Under a keeper of TensorViz's own (launcher.kept): what the interpreter starts
            # before the worker's own keeper exists (a wrapper script's orphan) is adopted
            # by it, and dies with this process however it ends.
            proc = subprocess.Popen(
                kept([job.python, launcher_script(), "--fd", str(write_fd), *memory]),
                stdin=subprocess.PIPE, stdout=log_w, stderr=subprocess.STDOUT,
                pass_fds=(write_fd,), cwd=str(job.workspace), env=env,
                start_new_session=True,
            )
        except OSError as exc:
            for fd in (read_fd, write_fd, log_r, log_w):
                os.close(fd)
            return job.fail("interpreter", "InterpreterNotRunnable", f"cannot start {job.python}: {exc.strerror or exc}")
        register_child(proc.pid)  # its orphans are adopted, and killed with it (procs.py)
        os.close(write_fd)
        os.close(log_w)
        worker = OneShotWorker(proc, read_fd, log_r, job.log, env[MARKER_ENV])
        try:
            return converse(job, worker, request)
        finally:
            worker.close()
