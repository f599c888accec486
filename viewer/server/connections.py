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
  open connection is being answered, the new one gets ``503``;
- event streams (``api/events``, answered as long as their page stays open) are
  counted apart, at most :data:`MAX_EVENT_STREAMS`: a new one over that cap ends the
  oldest. They never take the places of the connections that serve pages and API
  calls (128 open streams once answered every other request 503, until about 13 s
  after they closed).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

MAX_CONNECTIONS = 128
#: Event streams open at once (one per open page); the oldest gives way to a new one.
MAX_EVENT_STREAMS = 64
READ_DEADLINE_S = 10.0
_WATCH_INTERVAL_S = 0.25


class ConnectionGuard:
    def __init__(self, max_connections: int = MAX_CONNECTIONS, read_deadline_s: float = READ_DEADLINE_S,
                 max_streams: int = MAX_EVENT_STREAMS) -> None:
        self.max_connections = max_connections
        self.max_streams = max_streams
        self.read_deadline_s = read_deadline_s
        self._lock = threading.Lock()
        # socket -> monotonic time its current read began, or None while it is answered
        self._open: dict[Any, float | None] = {}
        # event-stream socket -> how to end its stream, oldest first
        self._streams: dict[Any, Callable[[], None]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.evicted = 0  # slow connections shut, for the benchmark
        self.evicted_streams = 0  # event streams ended for newer ones

    def start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name="tensorviz-viewer-deadlines", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    @property
    def open_count(self) -> int:
        """Open connections other than event streams."""
        with self._lock:
            return len(self._open)

    @property
    def stream_count(self) -> int:
        with self._lock:
            return len(self._streams)

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

    def streaming(self, sock: Any, end: Callable[[], None]) -> None:
        """``sock`` now carries an event stream (``end()`` ends it): it leaves the
        connections' count for the streams', and the oldest stream over
        :attr:`max_streams` is ended and its socket shut."""
        with self._lock:
            self._open.pop(sock, None)
            self._streams[sock] = end
            oldest = []
            while len(self._streams) > self.max_streams:
                victim = next(iter(self._streams))
                oldest.append((victim, self._streams.pop(victim)))
        for victim, end_victim in oldest:
            self.evicted_streams += 1
            try:
                end_victim()
            finally:
                _shut(victim)

    def closed(self, sock: Any) -> None:
        with self._lock:
            self._open.pop(sock, None)
            self._streams.pop(sock, None)

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
