"""The parent side of a capture, shared by the CLI and the language server.

One flow (:func:`run_session`): the checks in docs/architecture.md's order, each worded once
(:mod:`.checks`: trust, saved source, interpreter found; :mod:`.runner`: dependencies,
device, recipe, then import and trace in the worker, one-shot or warm, :mod:`.warm`),
the graph file in its one place (:mod:`.graph_files`), the capture history
(:mod:`.history`). Front ends pass what only they know as plain values and callables
(:class:`CaptureRequest`: trust, which buffers are dirty, the interpreter, the limits)
and show the result their own way (:class:`SessionResult`). A long-lived front end (the
language server) keeps warm workers through :class:`WarmWorkers`, which its requests
carry: the session, not the front end, runs a capture on them.
"""

from .graph_files import CAPTURES_DIR, graph_file
from .history import Baseline, CaptureHistory, HistoryError, HistoryLimits
from .job import CaptureJob, ResolvedRecipe
from .session import CaptureRequest, SessionResult, Worker, limits_for, run_session
from .warm_workers import WarmWorkers

__all__ = [
    "CAPTURES_DIR",
    "Baseline",
    "CaptureHistory",
    "CaptureJob",
    "CaptureRequest",
    "HistoryError",
    "HistoryLimits",
    "ResolvedRecipe",
    "SessionResult",
    "WarmWorkers",
    "Worker",
    "graph_file",
    "limits_for",
    "run_session",
]
