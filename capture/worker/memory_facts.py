"""What this process and the machine have of memory, read from Linux's ``/proc`` (None
elsewhere), and sizes in words: shared by the worker's out-of-memory failure
(:mod:`capture.worker.request`) and Torch's estimate before a build
(:mod:`capture.torch.memory`). Standard library only."""

from __future__ import annotations

from ..units import bytes_text


def available_memory() -> int | None:
    """``MemAvailable`` in bytes (Linux), else None."""
    return _proc_field("/proc/meminfo", "MemAvailable:")


def data_in_use() -> int | None:
    """This process's ``VmData`` in bytes (what ``RLIMIT_DATA`` counts), else None."""
    return _proc_field("/proc/self/status", "VmData:")


def size_words(n: int | None) -> str:
    """``1.5 GiB``; ``an unknown amount`` for None."""
    return "an unknown amount" if n is None else bytes_text(n)


def _proc_field(path: str, name: str) -> int | None:
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(name):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
