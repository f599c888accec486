"""The one way TensorViz reads a file it did not write: a workspace's sources, recipes,
factories and saved files, whoever reads them (discovery, the capture session and its
worker, the language server, the viewer).

A workspace is untrusted until its owner says otherwise, and some of its files are read
before that (code lenses, hover, diagnostics). A committed ``recipes.toml → /dev/zero``
would be read until memory runs out, a FIFO would block the reader (and with it the
whole language server) forever, and a link to ``/etc/shadow`` would be read and its
contents leaked through diagnostics. So every read here:

- opens non-blocking and checks the *open* file's type with ``fstat``: only a regular
  file is read (a FIFO, socket or device named, linked or swapped in is refused without
  waiting on it);
- refuses a file over ``max_bytes`` before reading it, and never reads more than that;
- given ``workspace``, resolves links first and refuses a file whose real path is not
  inside the workspace's real path (opening that real path with ``O_NOFOLLOW``, so a
  link swapped in after the check is refused too).

Standard library only, and a top-level package of its own: ``discovery`` (stdlib and
libcst) and ``capture`` (stdlib and msgpack, run inside the user's interpreter, which
gets this package beside ``capture`` on its path) may not import each other, and both
need this; so do ``viewer`` and ``tensorviz_lsp``.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["UnsafeFile", "NotRegularFile", "TooLarge", "OutsideWorkspace", "read_bytes", "read_text", "is_inside"]

#: The default bound: larger than any source or recipes file a person writes.
DEFAULT_MAX_BYTES = 16 * 1024 * 1024


class UnsafeFile(OSError):
    """A file refused before (or instead of) reading it. An ``OSError``, so that a
    caller's existing "cannot read" handling covers it; ``strerror`` says why."""

    def __init__(self, code: int, reason: str, path: str | os.PathLike[str]) -> None:
        super().__init__(code, reason, os.fspath(path))


class NotRegularFile(UnsafeFile):
    def __init__(self, path: str | os.PathLike[str], kind: str) -> None:
        super().__init__(errno.EINVAL, f"is {kind}, not a regular file", path)


class TooLarge(UnsafeFile):
    def __init__(self, path: str | os.PathLike[str], size: int, max_bytes: int) -> None:
        super().__init__(errno.EFBIG, f"file is {size:,} bytes, over the {max_bytes:,}-byte limit", path)


class OutsideWorkspace(UnsafeFile):
    def __init__(self, path: str | os.PathLike[str], real: str) -> None:
        super().__init__(errno.EACCES, f"resolves to {real}, outside the workspace", path)


def is_inside(path: str | os.PathLike[str], workspace: str | os.PathLike[str]) -> bool:
    """Whether ``path``'s real path (links resolved) is ``workspace``'s real path or below it."""
    real = os.path.realpath(path)
    root = os.path.realpath(workspace)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def read_bytes(path: str | os.PathLike[str], *, workspace: str | os.PathLike[str] | None = None,
               max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (see the module's docstring). Raises
    ``FileNotFoundError`` and the other ``OSError`` of ``open``, or :class:`UnsafeFile`."""
    target = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    if workspace is not None:
        real = os.path.realpath(target)
        if not is_inside(real, workspace):
            raise OutsideWorkspace(path, real)
        target = real
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket (or a FIFO with no writer, on some systems)
            raise NotRegularFile(path, _kind(os.stat(target).st_mode)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(path, _kind(st.st_mode))
        if st.st_size > max_bytes:
            raise TooLarge(path, st.st_size, max_bytes)
        chunks = []
        left = max_bytes + 1  # one past the bound: a file that grew after fstat is caught
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise TooLarge(path, len(data), max_bytes)
    return data


def read_text(path: str | os.PathLike[str], *, workspace: str | os.PathLike[str] | None = None,
              max_bytes: int = DEFAULT_MAX_BYTES, errors: str = "strict") -> str:
    """:func:`read_bytes` decoded as UTF-8 (``UnicodeDecodeError`` unless ``errors``)."""
    return read_bytes(path, workspace=workspace, max_bytes=max_bytes).decode("utf-8", errors)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"
