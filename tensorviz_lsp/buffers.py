"""The editor's open documents as a capture session sees them: a snapshot taken on the
event loop, read on the worker thread (pygls changes documents on the loop only)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import safe_read


def differs_from_disk(path: Path, text: str) -> bool:
    """Whether a buffer holding ``text`` has unsaved changes to ``path`` (LSP has no
    dirty flag; line endings alone do not count)."""
    try:
        disk = safe_read.read_bytes(path).decode("utf-8")  # a FIFO swapped in must not block
    except (OSError, UnicodeDecodeError):
        return True
    return text != disk and text.replace("\r\n", "\n") != disk.replace("\r\n", "\n")


@dataclass(frozen=True)
class Buffers:
    """Each open document's text, by resolved path."""

    texts: Mapping[Path, str]

    def read_text(self, path: Path) -> str | None:
        """An open buffer's text, else None (the caller reads the disk)."""
        return self.texts.get(_key(path))

    def is_dirty(self, path: Path) -> bool:
        text = self.texts.get(_key(path))
        return text is not None and differs_from_disk(path, text)


def _key(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path
