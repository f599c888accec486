"""Errors a framework capture raises to end a capture with a clear failure.

Anything else a framework lets escape (an exception from user code, a MemoryError)
is reported too, as ``stage = "trace"`` with the exception's type, message and the
workspace frames of its traceback; raise these when you know better.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any


class CaptureError(Exception):
    """End the capture with ``Failure(stage=stage, message=message, details=details)``.

    ``stage`` is one of the failure stages of ``capture.graph.model.Failure`` (``device``,
    ``recipe``, ``import``, ``trace``, ``limit`` …). ``error_type`` overrides the
    reported type name; when omitted it is the type of ``__cause__`` (``raise
    CaptureError(...) from exc``) or ``"CaptureError"``. The failure's frames come from
    the cause's traceback when there is one, so chain user-code exceptions."""

    def __init__(
        self,
        stage: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        *,
        error_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.stage = stage
        self.message = message
        self.details = dict(details or {})
        self.error_type = error_type


class LimitExceeded(CaptureError):
    """A configurable capture limit was hit (``stage = "limit"``).

    ``limit`` is the :class:`capture.worker.limits.Limits` field name (``max_ops``,
    ``max_values``, ``max_groups``, ``max_result_bytes``, ``max_seconds``);
    the message and ``details`` give the limit and what was reached."""

    def __init__(self, limit: str, maximum: int | float, reached: int | float, what: str | None = None) -> None:
        what = what or limit.removeprefix("max_").replace("_", " ")
        super().__init__(
            "limit",
            f"the capture reached {reached:,} {what}, over the limit of {maximum:,} "
            f"(raise {limit} to capture more)",
            {"limit": limit, "maximum": maximum, "reached": reached},
            error_type="LimitExceeded",
        )
        self.limit = limit
        self.maximum = maximum
        self.reached = reached


class InternalError(CaptureError):
    """TensorViz's own code failed (``stage = "internal"``): a bug of TensorViz, never
    reported as the model's. ``step`` says what TensorViz was doing ("comparing the
    model's buffers after the forward"); the cause's type is kept and its frames are
    TensorViz's own."""

    def __init__(self, step: str, cause: BaseException) -> None:
        from ..graph.failure_text import readable_message

        try:
            text = str(cause)
        except Exception:
            text = ""
        first = readable_message(text).text
        super().__init__(
            "internal",
            f"TensorViz failed while {step}; this is a bug in TensorViz, not in the model"
            + (f" ({type(cause).__name__}: {first})" if first else f" ({type(cause).__name__})"),
            {"step": step, "cause": text[:20_000]},
        )
        self.step = step


@contextlib.contextmanager
def own_step(step: str) -> Iterator[None]:
    """Run TensorViz's own processing (no user code inside): any exception other than a
    :class:`CaptureError` becomes an :class:`InternalError` naming ``step``, so that a
    TensorViz bug is never reported as a failure of the model. A ``MemoryError`` stays
    itself (running out is the capture's size, not a bug)."""
    try:
        yield
    except (CaptureError, MemoryError, KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:
        raise InternalError(step, exc) from exc
