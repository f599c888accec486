"""The viewer's event hub: the open pages' server-sent-event queues, and which capture
each page shows.

Every page holds one ``api/events`` stream; :class:`EventHub` keeps a bounded queue per
stream (a page that stopped reading loses events, not memory) and the capture that page
named (``api/events?capture=ID``; a page without one shows the capture that was the
newest when it subscribed), so the editor can tell whether a capture has a page to focus
("Show in Graph") and a recapture can move its pages along with it.
"""

from __future__ import annotations

import queue
import threading

#: Events queued for one page before it loses the newest ones.
MAX_QUEUED_EVENTS = 1000


class EventHub:
    """Thread-safe: publishers and the streams' request threads share it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[queue.Queue, int | None] = {}  # queue → the capture its page shows

    def subscribe(self, capture_id: int | None) -> queue.Queue:
        q: queue.Queue = queue.Queue()
        with self._lock:
            self._queues[q] = capture_id
        return q

    def unsubscribe(self, q: queue.Queue) -> None:
        with self._lock:
            self._queues.pop(q, None)

    def send(self, message: bytes | None) -> None:
        """Queue ``message`` for every page (``None`` ends every stream)."""
        with self._lock:
            queues = list(self._queues)
        for q in queues:
            if message is None or q.qsize() < MAX_QUEUED_EVENTS:
                q.put(message)

    def moved(self, old: int, new: int) -> None:
        """Pages showing capture ``old`` now show ``new`` (updated in place)."""
        with self._lock:
            for q, shown in self._queues.items():
                if shown == old:
                    self._queues[q] = new

    def pages(self, capture_id: int) -> int:
        with self._lock:
            return sum(1 for shown in self._queues.values() if shown == capture_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._queues)
