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
* **JSON nested deeper than the decoder's recursion allows** (``[`` a thousand times, or
  deep inside otherwise valid params): answered with ``-32700`` (Parse Error, id null, as
  JSON-RPC says when the id cannot be read) and the server reads on.

And the life cycle LSP prescribes, which pygls leaves to the server: a request before
``initialize`` gets ``-32002`` (Server Not Initialized) and a notification then is
dropped (``exit`` excepted); a second ``initialize`` gets ``-32600`` (Invalid Request);
after ``shutdown``, every request (a second ``shutdown`` too) gets ``-32600`` instead
of no answer at all.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Generator
from typing import Any

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
    JsonRpcServerNotInitialized,
)
from pygls.io_ import StdinAsyncReader, StdoutWriter
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

log = logging.getLogger(__name__)

#: The largest message read; larger ones end the session (the editor restarts the server).
MAX_MESSAGE_BYTES = 64 << 20
#: How long a message's body may take to arrive after its header (clients write whole
#: messages at once).
BODY_SECONDS = 10.0
#: How long a signalled server spends stopping its captures, viewers and installs.
STOP_SECONDS = 5.0
_HEADER = re.compile(rb"Content-Length: *(\d+)\r?\n$")


class FramingError(Exception):
    """The byte stream can no longer be split into messages."""


class _Answered:
    """What :meth:`Protocol.structure_message` returns for a request it already answered."""

    jsonrpc = None


ANSWERED = _Answered()


class Protocol(LanguageServerProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: "new" until ``initialize`` arrives, then "initialized"; "shut down" from the
        #: moment a ``shutdown`` request arrives (pygls marks it only once it is answered).
        self.lifecycle = "new"

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException:
            msg_id = data.get("id")
            method = data.get("method")
            if isinstance(method, str) and isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool):
                # The life cycle first: a request that may not run now says so, whatever its params.
                error = self._refusal(method) or JsonRpcInvalidParams(
                    f"invalid params for {method}: they do not match what the method takes")
                self._send_response(msg_id, None, error.to_response_error())
                log.warning("answered request %r (%s): %s", msg_id, method, error.message)
            else:
                log.warning("dropped a notification whose params do not match its method (%s)", method)
            return ANSWERED

    def handle_message(self, message: Any) -> None:
        if message is ANSWERED:
            return
        method = getattr(message, "method", None)
        if method is not None and method != types.EXIT:
            refusal = self._refusal(method)
            if refusal is not None:
                if hasattr(message, "id"):
                    self._send_response(message.id, None, refusal.to_response_error())
                    log.warning("answered request %r (%s): %s", message.id, method, refusal.message)
                else:
                    log.warning("dropped the notification %s: %s", method, refusal.message)
                return
            if method == types.INITIALIZE:
                self.lifecycle = "initialized"
            elif method == types.SHUTDOWN:
                self.lifecycle = "shut down"
        super().handle_message(message)

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        """pygls's own ``shutdown`` (the features' hook, then every other request still in
        flight cancelled), over a copy of the requests: cancelling one runs its callback
        at once, which removes it from pygls's table, and pygls's loop over that table
        failed ("dictionary changed size during iteration", the server then exiting 1)
        whenever a capture or an install was in flight (issue 52 item 5)."""
        if (user_handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current_id = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        self._shutdown = True
        return None

    def _refusal(self, method: str) -> JsonRpcException | None:
        """Why ``method`` may not run now, in the life cycle LSP prescribes; None: it may."""
        if self.lifecycle == "shut down":
            return JsonRpcInvalidRequest(f"{method} after shutdown: the server is shutting down")
        if self.lifecycle == "new" and method != types.INITIALIZE:
            return JsonRpcServerNotInitialized(f"{method} before initialize")
        if self.lifecycle == "initialized" and method == types.INITIALIZE:
            return JsonRpcInvalidRequest("initialize was already sent; the server is initialized once")
        return None

    def answer_parse_error(self, body: bytes, why: str) -> None:
        """``-32700`` for a message that cannot be decoded: to its request's id when the
        top level names one (so the client stops waiting), else to id null (JSON-RPC 2.0)."""
        msg_id = top_level_id(body)
        # A plain dict: pygls's converter leaves out a None id, and the client needs "id": null.
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": JsonRpcParseError.CODE, "message": why}})


_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"\s*(:?)|[\[\]{}]')


def top_level_id(body: bytes) -> int | str | None:
    """The ``id`` member of the outermost object of ``body``, found without decoding the
    nesting (a linear scan of strings and brackets), or None."""
    depth = 0
    for token in _TOKEN.finditer(body):
        first = body[token.start()]
        if first in b"[{":
            depth += 1
        elif first in b"]}":
            depth -= 1
        elif depth == 1 and token.group(1) and body[token.start():token.start() + 4] == b'"id"':
            try:
                value, _ = json.JSONDecoder().raw_decode(body[token.end():token.end() + 256].decode("utf-8", "replace").lstrip())
            except ValueError:
                return None
            return value if type(value) in (int, str) else None
    return None


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
        except RecursionError:
            log.warning("answered a %s-byte message nested too deeply to decode with a parse error", f"{len(body):,}")
            protocol.answer_parse_error(body, "the message is nested too deeply to decode")
            continue
        try:
            protocol.handle_message(message)
        except Exception:
            log.exception("could not handle a message")


class EditorWriter(StdoutWriter):
    """The server's stdout, the editor's end of the protocol. Once it is closed (the
    ``exit`` notification) or the editor has gone (a broken pipe), whatever is still sent
    (a cancelled capture's last log lines, its progress) is dropped, said once on stderr:
    pygls logged every failed message with its traceback and reported each failure as a
    new message, which failed in turn (10 MB of "Error sending data" on stderr when
    ``shutdown`` and ``exit`` came while viewer-started captures ran)."""

    def __init__(self, stdout: Any) -> None:
        super().__init__(stdout)
        self._out = stdout  # closed here: what pygls's (unannotated) close() does
        self.gone = False
        self.dropped = 0

    def close(self) -> None:
        self.gone = True
        try:
            self._out.close()
        except OSError:
            pass

    def write(self, data: bytes) -> None:
        if self.gone:
            self.dropped += 1
            return
        try:
            super().write(data)
        except (OSError, ValueError) as exc:  # a broken pipe, a closed file
            self.gone = True
            self.dropped += 1
            try:
                print(f"tensorviz: the editor's end of the connection is gone ({exc.__class__.__name__}); "
                      "messages to it are dropped from now on", file=sys.stderr, flush=True)
            except (OSError, ValueError):
                pass


def serve_stdio(server: Any) -> None:
    """``server.start_io()``, reading with :func:`read_messages`."""
    server._stop_event = stop = threading.Event()
    reader = StdinAsyncReader(sys.stdin.buffer, server.thread_pool)
    server.protocol.set_writer(EditorWriter(sys.stdout.buffer))

    async def main() -> bool:
        """True at the end of input (the editor closed the pipe without ``exit``)."""
        _exit_on_signals(server, asyncio.get_running_loop())
        try:
            await read_messages(stop, reader, server.protocol)
            if stop.is_set():
                return False
            # End of input: the editor is gone. Stop the features (captures, workers,
            # installs) and leave within STOP_SECONDS: pygls's shutdown then the
            # interpreter's exit waited on every thread still busy (a hover over a 15 MB
            # recipes file kept the process at 100 % CPU long after the pipe closed).
            if hasattr(server, "stop_features"):
                await server.stop_features()
            return True
        except FramingError as exc:
            why = f"the editor's messages can no longer be read ({exc}); exiting so that the editor restarts the server"
            log.error("TensorViz: %s", why)  # window/logMessage, if the editor still reads
            print(f"tensorviz: {why}", file=sys.stderr, flush=True)  # the editor's server log
            await server.stop_features()  # workers, viewers, installs: stopped, not orphaned
            raise

    try:
        ended = asyncio.run(main())
    except SystemExit as exc:
        # The editor's ``exit``. After ``shutdown`` stopped the features, threads still
        # finishing a capture get STOP_SECONDS, not a wait without end (the interpreter
        # would join every one of them, and the thread blocked on stdin). Without it,
        # nothing cancelled them: no wait (it was STOP_SECONDS of nothing). Either way the
        # workers die with this process, their keepers taking what the models started.
        shut_down = getattr(server.protocol, "lifecycle", None) == "shut down"
        leave(server, exc.code if isinstance(exc.code, int) else 1, STOP_SECONDS if shut_down else 0.0)
    except FramingError:
        logging.shutdown()
        # Not SystemExit or pygls's shutdown: a reader thread is still blocked on stdin,
        # and both would wait for it (the very hang this avoids).
        os._exit(1)
    except BrokenPipeError:
        log.error("the connection to the editor is lost; shutting down")
    except KeyboardInterrupt:
        pass
    else:
        if ended:
            shut_down = getattr(server.protocol, "lifecycle", None) == "shut down"
            print("tensorviz: the editor closed the connection; exiting", file=sys.stderr, flush=True)
            leave(server, 0 if shut_down else 1, STOP_SECONDS)
    server.shutdown()


def leave(server: Any, code: int, within: float = STOP_SECONDS) -> None:
    """End the process with ``code``: the server's capture threads get ``within``
    seconds to finish (they were cancelled), exit handlers run (the worker launcher's
    folder), then the process ends whatever is still running."""
    end = time.monotonic() + within
    for thread in list(getattr(getattr(server, "executor", None), "_threads", ())):
        thread.join(max(0.0, end - time.monotonic()))
    logging.shutdown()
    try:
        atexit._run_exitfuncs()
    finally:
        os._exit(code)


def _exit_on_signals(server: Any, loop: asyncio.AbstractEventLoop) -> None:
    """SIGINT, SIGTERM and SIGHUP: stop the features (a running capture's worker and
    what it started, the viewers, installs), then exit with 128 + the signal.

    Not KeyboardInterrupt: it reaches only the loop, and pygls's shutdown then waits for
    the capture threads and the thread blocked on stdin, so the server lived on."""

    def terminate(signum: int) -> None:
        name = signal.Signals(signum).name
        log.warning("TensorViz: %s received; stopping the captures and exiting", name)
        print(f"tensorviz: {name} received; stopping the captures and exiting", file=sys.stderr, flush=True)
        # Whatever stopping does, the process ends (a stuck feature must not keep it).
        fallback = threading.Timer(STOP_SECONDS + 1, os._exit, (128 + signum,))
        fallback.daemon = True
        fallback.start()

        async def stop_and_exit() -> None:
            try:
                await asyncio.wait_for(server.stop_features(), STOP_SECONDS)
            except Exception:
                log.exception("stopping the features after %s failed", name)
            logging.shutdown()
            os._exit(128 + signum)

        loop.create_task(stop_and_exit())

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(signum, terminate, signum)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
            pass
