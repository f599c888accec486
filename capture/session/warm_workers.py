"""The warm workers a long-lived front end keeps between captures: the capture session's,
not the front end's.

The language server makes one :class:`WarmWorkers` and owns its lifetime through this
API alone: each capture request carries it (``CaptureRequest.warm``, with the folder's
``warm_idle_seconds``), and :func:`capture.session.run_session` runs the worker step on
the folder's warm worker; a settings change asks :meth:`WarmWorkers.retain`, a model
file opened asks :meth:`WarmWorkers.preload`, shutdown :meth:`WarmWorkers.close`. The
pool of resident processes (:class:`capture.session.warm.WarmPool`, one per folder)
starts with the first capture or preload that wants one. The CLI keeps none: every
command-line capture starts a new worker.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path

from .preload import start_preload
from .warm import WarmPool


class WarmWorkers:
    """The front end's warm workers (one per workspace folder, interpreter and capture
    environment), started on first use."""

    def __init__(self) -> None:
        self._pool: WarmPool | None = None
        self._lock = threading.Lock()

    def pool(self, idle_seconds: float) -> WarmPool | None:
        """The pool a capture runs on, its workers idling ``idle_seconds`` (the folder's
        setting) at most; None when that is 0 (the warm worker is off: one-shot)."""
        if idle_seconds <= 0:
            return None
        with self._lock:
            if self._pool is None:
                self._pool = WarmPool(idle_seconds)
            elif self._pool.idle_seconds != idle_seconds:
                self._pool.set_idle_seconds(idle_seconds)
            return self._pool

    def retain(self, root: Path, python: str | None, env: Mapping[str, str]) -> None:
        """The folder's settings changed: its warm worker goes unless it still runs
        ``python`` with the capture environment ``env`` (``python`` None: the warm
        worker is off for the folder now, or the folder was removed)."""
        with self._lock:
            pool = self._pool
        if pool is None:
            return
        if python is None:
            pool.discard(os.path.realpath(root), "the warm worker was turned off for the folder")
        else:
            pool.retain(root, python, env)

    def preload(self, root: Path, python: str, env: Mapping[str, str], names: list[str],
                idle_seconds: float) -> str:
        """Start the folder's warm worker before its first capture, importing ``names``
        (:mod:`capture.session.preload`); what happened, in a word or a line (``"off"``
        when ``idle_seconds`` is 0)."""
        pool = self.pool(idle_seconds)
        if pool is None:
            return "off"
        return start_preload(pool, root, python, env, names)

    def close(self) -> None:
        """Stop every warm worker (the front end is stopping)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
