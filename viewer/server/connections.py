"""The viewer's connections, bounded: a cap on how many are open and a deadline on
reading a request (its line, headers and body).

The server runs a thread per connection (``ThreadingHTTPServer``), and a client that
sends its headers a byte at a time (slowloris) would otherwise hold one forever: 385
such connections exhausted a 4 GiB server. So:

- a connection has :data:`READ_DEADLINE_S` seconds to deliver a whole request, and an
  idle keep-alive connection as long to start the next one; one watchdog thread shuts
  the socket of one that is late (its thread then ends on the closed socket). Answering
  takes no deadline: an event stream stays open as long as its page;
- at most :data:`MAX_CONNECTIONS` are open. A new one over the cap takes the place of
  the one that has been reading its request longest (a slow client, never one being
  answered), so a real request is still served while slow ones pile up; when every
  open connection is being answered, the new one gets ``503``.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

MAX_CONNECTIONS = 128
READ_DEADLINE_S = 10.0
_WATCH_INTERVAL_S = 0.25


class ConnectionGuard:
    def __init__(self, max_connections: int = MAX_CONNECTIONS, read_deadline_s: float = READ_DEADLINE_S) -> None:
        self.max_connections = max_connections
        self.read_deadline_s = read_deadline_s
        self._lock = threading.Lock()
        # socket -> monotonic time its current read began, or None while it is answered
        self._open: dict[Any, float | None] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.evicted = 0  # slow connections shut, for the benchmark

    def start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name="tensorviz-viewer-deadlines", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    @property
    def open_count(self) -> int:
        with self._lock:
            return len(self._open)

    def admit(self, sock: Any) -> bool:
        """A new connection: True when it may be served (an older slow one may be shut
        for it), False when every open one is being answered."""
        victim = None
        with self._lock:
            if len(self._open) >= self.max_connections:
                reading = [(since, s) for s, since in self._open.items() if since is not None]
                if not reading:
                    return False
                victim = min(reading, key=lambda pair: pair[0])[1]
                del self._open[victim]
            self._open[sock] = time.monotonic()
        if victim is not None:
            self.evicted += 1
            _shut(victim)
        return True

    def reading(self, sock: Any) -> None:
        """``sock`` waits for (or reads) a request: its deadline starts now."""
        with self._lock:
            if sock in self._open:
                self._open[sock] = time.monotonic()

    def answering(self, sock: Any) -> None:
        """``sock``'s request is read whole: no deadline while it is answered."""
        with self._lock:
            if sock in self._open:
                self._open[sock] = None

    def closed(self, sock: Any) -> None:
        with self._lock:
            self._open.pop(sock, None)

    def _watch(self) -> None:
        while not self._stop.wait(_WATCH_INTERVAL_S):
            cutoff = time.monotonic() - self.read_deadline_s
            with self._lock:
                late = [s for s, since in self._open.items() if since is not None and since < cutoff]
                for s in late:
                    self._open[s] = None  # shut once
            for s in late:
                self.evicted += 1
                _shut(s)


def _shut(sock: Any) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
