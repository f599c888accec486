"""The lock beside a workspace's recipes file: one writer at a time.

    WORKSPACE/.tensorviz/recipes.toml.lock

Every writer of ``recipes.toml`` (``tensorviz capture``/``open`` saving a setup, the
editor's setup form, the viewer's form, all through ``tensorviz_lsp.recipes_store``)
reads, changes and replaces the file while it holds an exclusive ``flock`` on this file,
so two writers at once (two captures started together, the editor and the CLI) cannot
lose each other's profile: the second reads what the first wrote. Readers take no lock:
a write is a rename, so they see the old file or the new one.

The lock file is left in place (removing it would let a third writer lock a new file
while the second still holds the old one). While a writer holds the lock, no other write
is under way, so the temporary files a killed writer left beside ``recipes.toml``
(``.recipes.toml.<hex>.tmp``) are removed then, and at the start of each capture when
nobody holds it.

Standard library only (``fcntl``; ``msvcrt`` on Windows).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path
from typing import Iterator

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]
    import msvcrt

#: How long a writer waits for another one (a save takes milliseconds).
LOCK_WAIT_SECONDS = 30.0
_POLL_SECONDS = 0.02


class RecipesLocked(OSError):
    """Another writer held the lock for longer than the wait."""


def lock_path(recipes: Path) -> Path:
    return recipes.with_name(recipes.name + ".lock")


@contextlib.contextmanager
def recipes_lock(recipes: Path, *, wait: float | None = None) -> Iterator[None]:
    """Hold the lock beside ``recipes`` (its folder is created) and, inside it, remove
    the temporaries killed writes left. Raises :class:`RecipesLocked` after ``wait``
    seconds (default :data:`LOCK_WAIT_SECONDS`), ``OSError`` when the lock file cannot
    be made."""
    wait = LOCK_WAIT_SECONDS if wait is None else wait
    recipes.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path(recipes), os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
                 | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        deadline = time.monotonic() + wait
        while not _try_lock(fd):
            if time.monotonic() >= deadline:
                raise RecipesLocked(f"another TensorViz has been saving {recipes} for over {wait:g} s "
                                    f"(it holds {lock_path(recipes)})")
            time.sleep(_POLL_SECONDS)
        try:
            remove_write_temporaries(recipes)
            yield
        finally:
            _unlock(fd)
    finally:
        os.close(fd)


def remove_abandoned_temporaries(recipes: Path) -> None:
    """When no writer holds the lock: remove what killed writes left beside ``recipes``
    (a capture's start; nothing when there is no ``.tensorviz`` folder or lock file)."""
    try:
        fd = os.open(lock_path(recipes), os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return
    try:
        if _try_lock(fd):
            try:
                remove_write_temporaries(recipes)
            finally:
                _unlock(fd)
    finally:
        os.close(fd)


def remove_write_temporaries(recipes: Path) -> list[str]:
    """Delete every ``.recipes.toml.<hex>.tmp`` beside ``recipes`` (call with the lock
    held: no write is then under way). Returns the names removed."""
    pattern = re.compile(rf"^\.{re.escape(recipes.name)}\.[0-9a-f]{{12}}\.tmp$")
    removed: list[str] = []
    try:
        entries = list(os.scandir(recipes.parent))
    except OSError:
        return removed
    for entry in entries:
        try:
            if pattern.match(entry.name) and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                removed.append(entry.name)
        except OSError:
            continue
    return removed


def _try_lock(fd: int) -> bool:
    """True: locked now; False: another writer holds it. Other failures raise."""
    if fcntl is None:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _unlock(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
    else:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
