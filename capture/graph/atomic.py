"""TensorViz's one atomic write (graph files, recipes, JSON state, the history) and the
clean-up of the temporaries a killed write leaves."""

from __future__ import annotations

import os
import re
import secrets
import stat
import time
from pathlib import Path


def atomic_write(target: Path, data: bytes, *, new_mode: int = 0o644) -> None:
    """Replace ``target`` with ``data`` or leave it exactly as it was (a fresh file in the
    same folder, flushed to disk, then renamed over it). Raises ``OSError``.

    TensorViz's one atomic write (graph files, recipes, JSON state). An existing file keeps
    its permission bits; a new one gets ``new_mode`` less the umask, applied by the kernel
    at ``open`` (reading the umask would mean setting it, process-wide, under the
    language server's threads)."""
    fd, tmp = _create_temporary(target.parent if str(target.parent) else Path("."), target.name, new_mode)
    try:
        _hold(fd)  # until this write ends: a temporary nobody holds was left by a killed one
        with os.fdopen(fd, "wb") as fh:
            try:
                os.fchmod(fh.fileno(), stat.S_IMODE(target.stat().st_mode))
            except FileNotFoundError:
                pass  # a new file: the mode it was created with stands
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _remove_stale_temporaries(Path(tmp).parent, target.name)


#: A temporary that no writer holds (see :func:`_hold`) and that has not changed for this
#: long was left by a killed write. (The grace covers the moment between a writer's
#: creating its temporary and taking hold of it.)
ABANDONED_AFTER_SECONDS = 2.0


def _hold(fd: int) -> None:
    """Hold an exclusive ``flock`` on a temporary being written: the kernel lets it go
    when the writer ends, however it ends (SIGKILL included), so a temporary nobody holds
    is a killed write's. Where there is no ``flock``, temporaries are judged by age."""
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX)  # (a cleaner testing it holds it only for that moment)
    except (ImportError, OSError):
        pass


def open_regular_file(path: str | os.PathLike[str]) -> int | None:
    """A descriptor open for reading on ``path`` when it is a regular file; None when it
    cannot be opened or is anything else (a link is never followed, a FIFO never waited
    on). The caller closes it."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def abandoned_temporary(path: str | os.PathLike[str]) -> bool:
    """Whether ``path``, a temporary :func:`atomic_write` made, was left by a write that
    was killed: nobody holds it and it has not changed for :data:`ABANDONED_AFTER_SECONDS`
    (:data:`STALE_TEMPORARY_SECONDS` where locks cannot be taken, or for a temporary of an
    older TensorViz, which took none). Never follows a link."""
    fd = open_regular_file(path)
    if fd is None:
        return False
    try:
        age = time.time() - os.fstat(fd).st_mtime
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a write under way holds it
        except (ImportError, OSError):
            return age > STALE_TEMPORARY_SECONDS
        return age > ABANDONED_AFTER_SECONDS
    finally:
        os.close(fd)  # (and its lock with it)


#: Where locks cannot be taken: a temporary older than this was left by a killed write.
STALE_TEMPORARY_SECONDS = 600


def _remove_stale_temporaries(folder: Path, name: str) -> None:
    """Delete ``.NAME.<hex>.tmp`` files that killed writes left beside ``NAME``: at the
    next write of ``NAME``, whenever they were left (55 killed writes once left 130 MB for
    ten minutes)."""
    pattern = re.compile(rf"^\.{re.escape(name)}\.[0-9a-f]{{12}}\.tmp$")
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            if pattern.match(entry.name) and entry.is_file(follow_symlinks=False) and abandoned_temporary(entry.path):
                os.unlink(entry.path)
        except OSError:
            continue


def _create_temporary(folder: Path, name: str, mode: int) -> tuple[int, str]:
    """A fresh file next to the target, created with ``mode`` (``O_EXCL``: never an existing one)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")
