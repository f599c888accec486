"""Work-done progress (``window/workDoneProgress/create`` + ``$/progress``).

An async context manager that creates a server-initiated token when the client
supports it (and is silent otherwise). ``cancelled`` is set when the user cancels
(``window/workDoneProgress/cancel``) or :meth:`Progress.cancel` is called, with the one
:attr:`Progress.reason` the log gives; reports may come from any thread.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import uuid

from lsprotocol import types

from ..host import Host

log = logging.getLogger(__name__)
_counter = itertools.count(1)


class Progress:
    def __init__(self, server: Host, title: str, *, cancellable: bool = False, message: str | None = None) -> None:
        self.server = server
        self.title = title
        self.cancellable = cancellable
        self.message = message
        self.token: str | None = None
        self.cancelled = asyncio.Event()
        #: The same, for worker threads.
        self.cancel_flag = threading.Event()
        #: Why it was cancelled (the first reason given), None while it was not.
        self.reason: str | None = None
        #: How it ended, as the end of the progress says it ("failed at trace: …");
        #: None: "done", or "cancelled" when it was.
        self.outcome: str | None = None

    async def __aenter__(self) -> "Progress":
        if not self.server.supports_progress():
            return self
        token = f"tensorviz-{next(_counter)}-{uuid.uuid4().hex[:8]}"
        try:
            await asyncio.wait_for(self.server.work_done_progress.create_async(token), 10)
        except Exception as exc:
            log.debug("progress create failed: %s", exc)
            return self
        self.token = token
        fut = self.server.work_done_progress.tokens.get(token)
        if fut is not None:
            loop = asyncio.get_running_loop()
            fut.add_done_callback(lambda f: loop.call_soon_threadsafe(self._on_cancel) if f.cancelled() else None)
        self.server.work_done_progress.begin(
            token,
            types.WorkDoneProgressBegin(title=self.title, cancellable=self.cancellable, message=self.message),
        )
        return self

    def _on_cancel(self) -> None:
        self.cancel("cancelled by the user (the editor's progress)")

    def cancel(self, reason: str) -> None:
        """Cancel, saying why (said once, by whoever reports the end: the first reason
        given is kept, a later one is the same cancel)."""
        if self.reason is None:
            self.reason = reason
        self.cancel_flag.set()
        if self.server.on_loop():
            self.cancelled.set()
        elif self.server.loop is not None:
            self.server.loop.call_soon_threadsafe(self.cancelled.set)

    def report(self, message: str, fraction: float | None = None) -> None:
        if self.token is None:
            return
        pct = None if fraction is None else max(0, min(100, int(fraction * 100)))
        token = self.token
        self.server.call_soon(
            self._notify_report, token, types.WorkDoneProgressReport(message=message, percentage=pct)
        )

    def _notify_report(self, token: str, value: types.WorkDoneProgressReport) -> None:
        try:
            self.server.work_done_progress.report(token, value)
        except Exception:
            pass

    def end_message(self, failed: bool = False) -> str:
        """What the end of the progress says: the outcome set, "cancelled" (and why),
        "failed" on an exception, else "done" (never "done" for what did not succeed)."""
        if self.outcome is not None:
            return self.outcome
        if self.reason is not None:
            return f"cancelled ({self.reason})"
        return "failed" if failed else "done"

    async def __aexit__(self, exc_type: object, *exc: object) -> None:
        if self.token is None:
            return
        try:
            message = self.end_message(failed=exc_type is not None)
            self.server.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))
        except Exception:
            pass
        self.server.work_done_progress.tokens.pop(self.token, None)
