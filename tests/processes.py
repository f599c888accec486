"""Waiting for a process that is not ours to exit, on the kernel's word, not by polling.

A pid file descriptor (Linux 5.3+) becomes readable when the process terminates, also
while it is a zombie that its parent has not reaped yet; ``os.kill(pid, 0)`` would
still succeed then."""

from __future__ import annotations

import asyncio
import os
import select


def exited(pid: int, timeout: float) -> bool:
    """True once ``pid`` has terminated (at once if it is gone); False after ``timeout``."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready)
    finally:
        os.close(fd)


async def exited_async(pid: int, timeout: float) -> bool:
    """:func:`exited` for a test running on an event loop."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    loop.add_reader(fd, lambda: done.done() or done.set_result(True))
    try:
        return await asyncio.wait_for(done, timeout)
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)
        os.close(fd)
