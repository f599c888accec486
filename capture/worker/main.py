"""The worker process: read one request, run one framework capture, send the result.

Runs in the user's selected interpreter as ``launcher.py --fd N`` (see
:mod:`capture.session.launcher`) or ``python -m capture.worker --fd N``; with
``--zygote`` it is the warm worker's resident process instead (:mod:`.zygote`).
Messages go to the inherited pipe ``N``, never to stdout, so user code that prints
cannot corrupt them; stdout and stderr both reach the parent's log. ``faulthandler``
writes the Python stack of a hard crash (segfault, abort) to stderr, where the parent
finds the user frames.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import time
from typing import cast

from .protocol import WorkerMessage, WorkerRequest, encode_frame, read_frame
from .request import flush_and_exit, run_request


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    started = time.monotonic()
    if len(argv) == 3 and argv[0] == "--zygote" and argv[1] == "--fd" and argv[2].isdigit():
        from .zygote import serve  # the warm worker (capture.session.warm): one forked child per capture

        return serve(int(argv[2]))
    memory = 0
    if len(argv) == 4 and argv[2] == "--memory" and argv[3].isdigit():
        memory = int(argv[3])  # the capture's memory limit: the keeper counts shared memory against it
        argv = argv[:2]
    if len(argv) != 2 or argv[0] != "--fd" or not argv[1].isdigit():
        print("usage: capture.worker --fd N [--memory BYTES] (started by TensorViz, not by hand)", file=sys.stderr)
        return 2
    from .procs import keep_worker

    # The process the CLI or server started stays behind as the worker's keeper (trusted
    # code only): it dies with that parent, even by SIGKILL, and then kills the worker and
    # every process below it, whatever session or environment they chose; this process
    # goes on as the worker (and dies with its keeper).
    keep_worker(memory)
    out = os.fdopen(int(argv[1]), "wb", buffering=0)
    faulthandler.enable(file=sys.stderr, all_threads=True)
    # Kept so that a MemoryError can still be reported: freed before building the failure.
    reserve = bytearray(1 << 20)

    def send(message: WorkerMessage) -> None:
        out.write(encode_frame(message))

    try:
        request = read_frame(sys.stdin.buffer)
    except Exception as exc:
        print(f"tensorviz worker: bad request: {exc}", file=sys.stderr)
        return flush_and_exit(3)
    try:
        sys.stdin.close()
    except OSError:
        pass
    run_request(cast(WorkerRequest, request), started, send, reserve)
    return flush_and_exit(0)
