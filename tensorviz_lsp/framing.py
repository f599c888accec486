"""The language server's side of the wire: reading framed messages robustly.

pygls reads ``Content-Length`` framed JSON-RPC from stdin. Three ways a client (or a
broken pipe) can make that go wrong, and what this module does instead:

* **A request whose params do not fit its method** (``5``, ``"x"``, ``[1, 2]``,
  ``{"textDocument": {}}``): pygls cannot build the message and answers nothing, so the
  client waits forever. :class:`Protocol` answers such a request with ``-32602`` (Invalid
  Params) naming the method; a bad notification has nobody to answer and is dropped.
* **A ``Content-Length`` no reader can honour** (``2**40``): reading it allocates the
  whole length. Over :data:`MAX_MESSAGE_BYTES` the framing is broken beyond repair: the
  server says so in the log and exits, so the editor restarts it.
* **A wrong or missing ``Content-Length``**: a message without the header leaves its body
  glued to the next message's header line, and pygls only recognises a header at the
  start of a line, so every later message was lost. :func:`read_messages` finds the header
  at the end of any line, so the stream resynchronises on the next message. A length
  longer than the body would wait for bytes that never come while swallowing later
  messages: a body that does not complete within :data:`BODY_SECONDS` of its header means
  broken framing, and the server exits.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
import threading
from typing import Any

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.io_ import StdinAsyncReader, StdoutWriter
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger(__name__)

#: The largest message read; larger ones end the session (the editor restarts the server).
MAX_MESSAGE_BYTES = 64 << 20
#: How long a message's body may take to arrive after its header (clients write whole
#: messages at once).
BODY_SECONDS = 10.0
_HEADER = re.compile(rb"Content-Length: *(\d+)\r?\n$")


class FramingError(Exception):
    """The byte stream can no longer be split into messages."""


class _Answered:
    """What :meth:`Protocol.structure_message` returns for a request it already answered."""

    jsonrpc = None


ANSWERED = _Answered()


class Protocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException:
            msg_id = data.get("id")
            method = data.get("method")
            if isinstance(method, str) and type(msg_id) in (int, str):
                error = JsonRpcInvalidParams(f"invalid params for {method}: they do not match what the method takes")
                self._send_response(msg_id, None, error.to_response_error())
                log.warning("answered request %r (%s) with Invalid Params", msg_id, method)
            else:
                log.warning("dropped a notification whose params do not match its method (%s)", method)
            return ANSWERED

    def handle_message(self, message: Any) -> None:
        if message is ANSWERED:
            return
        super().handle_message(message)


async def read_messages(stop: threading.Event, reader: Any, protocol: Protocol) -> None:
    """pygls's ``run_async`` loop, with the guards this module's docstring lists. Returns
    at end of input; raises :class:`FramingError` when the stream cannot be read on."""
    length: int | None = None
    while not stop.is_set():
        line = await reader.readline()
        if not line:
            return
        if length is None:
            match = _HEADER.search(line)
            if match:
                length = int(match.group(1))
                if length > MAX_MESSAGE_BYTES:
                    raise FramingError(
                        f"a message claims {length:,} bytes, over the {MAX_MESSAGE_BYTES:,}-byte limit"
                    )
            continue
        if line.strip():
            continue  # another header (Content-Type)
        try:
            body = await asyncio.wait_for(reader.readexactly(length), BODY_SECONDS) if length else b""
        except asyncio.TimeoutError:
            raise FramingError(
                f"a message's {length:,}-byte body did not arrive within {BODY_SECONDS:g} s of its header "
                "(a wrong Content-Length)"
            ) from None
        if length and len(body) < length:
            return  # end of input inside a body
        length = None
        if not body:
            continue
        try:
            message = json.loads(body, object_hook=protocol.structure_message)
        except ValueError as exc:  # not JSON: a wrong length cut it; the next header resynchronises
            log.warning("skipped a message that is not JSON (%s); reading on from the next header", exc)
            continue
        try:
            protocol.handle_message(message)
        except Exception:
            log.exception("could not handle a message")


def serve_stdio(server: Any) -> None:
    """``server.start_io()``, reading with :func:`read_messages`."""
    server._stop_event = stop = threading.Event()
    reader = StdinAsyncReader(sys.stdin.buffer, server.thread_pool)
    server.protocol.set_writer(StdoutWriter(sys.stdout.buffer))

    async def main() -> None:
        try:
            await read_messages(stop, reader, server.protocol)
        except FramingError as exc:
            why = f"the editor's messages can no longer be read ({exc}); exiting so that the editor restarts the server"
            log.error("TensorViz: %s", why)  # window/logMessage, if the editor still reads
            print(f"tensorviz: {why}", file=sys.stderr, flush=True)  # the editor's server log
            await server.stop_features()  # workers, viewers, installs: stopped, not orphaned
            raise

    try:
        asyncio.run(main())
    except FramingError:
        logging.shutdown()
        # Not SystemExit or pygls's shutdown: a reader thread is still blocked on stdin,
        # and both would wait for it (the very hang this avoids).
        os._exit(1)
    except BrokenPipeError:
        log.error("the connection to the editor is lost; shutting down")
    except KeyboardInterrupt:
        pass
    server.shutdown()
