"""One capture session, the parent side: the flow the CLI and the language server share.

:func:`run_session` takes a :class:`CaptureRequest` and

1. resolves the recipe (a bad one is reported at the ``recipe`` check, in order);
2. runs the checks that need no interpreter (:func:`capture.session.checks.preflight`:
   trust, saved source, interpreter found), each with its one wording;
3. hands the job to the worker step (:func:`capture.session.runner.run_worker`): a
   one-shot worker, or the folder's warm worker when the request carries the front
   end's :class:`~capture.session.warm_workers.WarmWorkers` (the language server's);
4. writes the graph file in its one place (:mod:`capture.session.graph_files`), or the
   request's ``output`` (a failure beside a good graph, never over it); a graph whose
   statistics (:mod:`capture.graph.later_stats`) or compiled program
   (:mod:`capture.graph.later_compiled`) follow it is written as soon as it arrives
   (``on_graph`` tells the front end), and again once they have;
5. keeps a successful capture in the history (:mod:`capture.session.history`) and
   returns the capture kept before it, for a diff.

It never raises for a capture problem: a failure is a failure capture in the result, and
a file that cannot be written is a line in :attr:`SessionResult.problems`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..graph import graphfile
from ..graph.model import Capture
from ..recipe import RECIPES_FILE
from ..recipe.lock import remove_abandoned_temporaries
from ..worker.limits import Limits
from .checks import files_to_save, preflight
from .graph_files import (
    NOT_WRITTEN_STAGES,
    GraphFileNameError,
    LinkedOutside,
    failure_file,
    graph_file,
    holds_good_capture,
    inside_workspace,
    write_encoded,
)
from .history import Baseline, CaptureHistory, HistoryError, HistoryLimits
from . import model_dependencies
from .job import CaptureJob, Log, Progress
from .runner import make_job, run_worker
from .warm_workers import WarmWorkers

#: The worker step: checks 4-7 and the capture of a job that passed the first checks
#: (:func:`run_session`'s own, or a test's stand-in).
Worker = Callable[[CaptureJob], Capture]


def limits_for(
    timeout_s: float | None = None, max_saved_file_mb: float | None = None, memory_mb: float | None = None,
    compile_s: float | None = None,
) -> Limits:
    """The worker's limits from what a person sets (``--timeout``/``captureTimeout`` in
    seconds, ``--max-saved-file-mb``/``maxSavedFileMB`` and ``--memory``/
    ``captureMemoryMB`` in MiB); None or 0 keeps the default (no memory limit)."""
    values: dict[str, float | int] = {}
    if timeout_s:
        values["max_seconds"] = float(timeout_s)
    if max_saved_file_mb:
        values["max_saved_file_bytes"] = max(1, int(max_saved_file_mb * (1 << 20)))
    if memory_mb:
        values["max_memory_bytes"] = max(1, int(memory_mb * (1 << 20)))
    if compile_s:
        values["compile_seconds"] = float(compile_s)
    return Limits(**values)  # type: ignore[arg-type]


def _clean(path: Path) -> bool:
    return False


@dataclass
class CaptureRequest:
    """What to capture and how; everything a front end knows that the session cannot.

    ``trusted``: the front end's decision (the language server asks the user first; a
    command typed in a terminal is trusted). ``is_dirty(path)``: whether an editor
    buffer of ``path`` has unsaved changes (the CLI has no buffers); ``read_text(path)``:
    the text an editor holds for ``path``, else None (the disk is read).
    ``known_sources``: workspace-relative files the profile's last capture read (they
    must be saved too). ``output``: the graph file to write instead of
    :func:`~capture.session.graph_files.graph_file`. ``history``: the history's bounds
    (None: not kept). ``warm``: the front end's warm workers (None: a one-shot worker);
    ``warm_idle_seconds``: how long the folder's warm worker may idle (0: off).
    ``progress``/``log``/``cancel``: see :class:`~capture.session.job.CaptureJob`.
    ``on_graph(capture, graph file)``: a graph whose statistics or compiled program follow
    it (:mod:`capture.graph.later_stats`, :mod:`capture.graph.later_compiled`), as soon as
    its file is written (None: not
    written), from the capturing thread; the session then waits for them, writes the
    file again, complete, and returns that capture."""

    workspace: Path
    profile: str
    python: str | None = None
    limits: Limits = field(default_factory=Limits)
    env: Mapping[str, str] = field(default_factory=dict)
    trusted: bool = True
    is_dirty: Callable[[Path], bool] = _clean
    read_text: Callable[[Path], str | None] | None = None
    known_sources: Collection[str] = ()
    output: Path | None = None
    history: HistoryLimits | None = field(default_factory=HistoryLimits)
    warm: WarmWorkers | None = None
    warm_idle_seconds: float = 0.0
    cancel: threading.Event = field(default_factory=threading.Event)
    progress: Progress | None = None
    log: Log | None = None
    on_graph: Callable[[Capture, Path | None], None] | None = None


@dataclass
class SessionResult:
    """What one session did. ``graph_file``: where the capture was written (None: not
    written, see ``problems``, or a refusal). ``baseline``: the history's newest capture
    before this one, to diff against. ``files``: the workspace files the capture depends
    on (what the saved-source check covered): a change to one makes a failure old news.
    ``problems``: one line each for what could not be kept (the graph file, the history);
    the capture stands."""

    capture: Capture
    job: CaptureJob
    graph_file: Path | None = None
    baseline: Baseline | None = None
    files: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.capture.failure is None


def run_session(request: CaptureRequest, worker: Worker | None = None) -> SessionResult:
    """Capture ``request.profile`` in ``request.workspace``: see the module docstring.
    ``worker``: a stand-in for the worker step (the language server's fast tests fake
    the worker with it); None runs the real one."""
    job = make_job(
        request.workspace, request.profile, python=request.python, limits=request.limits, env=request.env,
        cancel=request.cancel, progress=request.progress, log=request.log,
        warm_idle_seconds=request.warm_idle_seconds,
    )
    result = SessionResult(job.fail("crash", "SessionError", "the capture did not run"), job)
    job.graph_ready = lambda capture: _graph_first(request, result, capture)
    remove_abandoned_temporaries(Path(request.workspace) / RECIPES_FILE)  # a killed save's leftovers
    try:
        result.files = files_to_save(job, request.known_sources, request.read_text)
        refused = preflight(job, trusted=request.trusted,
                            unsaved=lambda: [p for p in result.files if request.is_dirty(p)])
    except Exception as exc:  # a bug here must still give the caller a failure capture
        result.capture = job.fail("crash", type(exc).__name__, f"TensorViz could not run the capture: {exc}")
        return result
    if refused is not None:
        result.capture = refused
    elif worker is not None:
        result.capture = worker(job)
    else:
        warm = request.warm.pool(request.warm_idle_seconds) if request.warm is not None else None
        result.capture = run_worker(job, warm)
    if refused is None and result.capture.failure is not None:
        try:
            model_dependencies.complete(job, result.capture, result.files)
        except Exception:  # a courtesy: the failure stands as the worker said it
            pass
    _keep(request, result)
    return result


def _keep(request: CaptureRequest, result: SessionResult) -> None:
    """The graph file, then (a success only) the history; each problem a line."""
    capture = result.capture
    data = _write_graph(request, result, capture)
    if data is None or capture.failure is not None or request.history is None:
        return
    history = CaptureHistory(request.workspace, request.history)
    try:
        result.baseline = history.baseline(request.profile)
        history.record(request.profile, capture, data)
    except HistoryError as exc:
        result.problems.append(f"not kept in the capture history: {exc}")


def _graph_first(request: CaptureRequest, result: SessionResult, capture: Capture) -> None:
    """A graph whose statistics follow it: its file is written now (again, complete, once
    they arrived), and the front end told (``request.on_graph``)."""
    _write_graph(request, result, capture)
    if request.on_graph is not None:
        try:
            request.on_graph(capture, result.graph_file)
        except Exception as exc:  # the front end's own problem: the capture goes on
            result.problems.append(f"showing the graph before its statistics failed: {exc}")


def _write_graph(request: CaptureRequest, result: SessionResult, capture: Capture) -> bytes | None:
    """Write ``capture``'s graph file (a failure beside a good graph, never over it); its
    encoded bytes, None when it was not written."""
    if capture.failure is not None and capture.failure.stage in NOT_WRITTEN_STAGES:
        return None
    try:
        # ``output`` is a path the person typed; the default one is the workspace's.
        target = request.output or inside_workspace(request.workspace, graph_file(request.workspace, request.profile))
        data = graphfile.encode(capture)
    except LinkedOutside as exc:
        result.problems.append(f"cannot write the graph file: {exc.strerror}")
        return None
    except (GraphFileNameError, ValueError) as exc:
        result.problems.append(f"cannot write the graph file: {exc}")
        return None
    if capture.failure is not None and holds_good_capture(target):
        target = failure_file(target)  # the last good graph stays where it is
    try:
        write_encoded(data, target)
        result.graph_file = target
    except OSError as exc:
        result.problems.append(f"cannot write {target}: {exc.strerror or exc}")
        return None
    if capture.failure is None:
        try:
            failure_file(target).unlink(missing_ok=True)  # older than the graph now in place
        except OSError as exc:
            result.problems.append(f"cannot remove the older failure {failure_file(target)}: {exc.strerror or exc}")
    return data
