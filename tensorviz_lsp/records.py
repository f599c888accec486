"""The graphs captured in this session: one :class:`Record` per folder and profile (the
newest), kept by :class:`CaptureRecords`, the one registry of captures.

Who does what with it: a capture that lands adds its record (``features/landing.py``,
through :meth:`Freshness.record <tensorviz_lsp.features.freshness.Freshness.record>`,
which also says it is fresh again); :mod:`~tensorviz_lsp.features.freshness` keeps each
record's stale state and forgets a removed folder's; the captured lines, inlay hints,
hovers, Show in Graph, recapture on save and the capture runner read it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from capture.graph.model import Capture

from .backends import Span
from .registry import register


@dataclass
class Record:
    root: Path
    profile: str
    uri: str
    qualname: str
    capture: Capture
    sources: set[str]
    name_range: Span
    capture_id: int | None = None
    #: When the capture landed (``time.time()``): what a hover says.
    captured_at: float = field(default_factory=time.time)
    #: Everything that changed: source files, then the recipe entry (what is shown).
    stale: list[str] = field(default_factory=list)
    #: Source files (workspace-relative) that changed since the capture.
    changed_sources: list[str] = field(default_factory=list)
    #: ``.tensorviz/recipes.toml (profile NAME changed)`` when the profile differs, else None.
    recipe_change: str | None = None
    #: Checks started, per aspect: a slower, older check never overwrites a newer one.
    checks: dict[str, int] = field(default_factory=lambda: {"sources": 0, "recipe": 0})

    @property
    def key(self) -> tuple[str, str]:
        """``(folder, profile)``: what the registry keeps one record per."""
        return (str(self.root), self.profile)


@register
class CaptureRecords:
    """The newest capture of each profile in each workspace folder, this session."""

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], Record] = {}

    def get(self, key: tuple[str, str]) -> Record | None:
        """The record of ``(folder, profile)``, or None."""
        return self._records.get(key)

    def all(self) -> list[Record]:
        """Every record, oldest capture first (a copy: safe to iterate while awaiting)."""
        return list(self._records.values())

    def __len__(self) -> int:
        return len(self._records)

    def put(self, record: Record) -> Record | None:
        """Keep ``record`` as its profile's newest; the one it replaces, or None."""
        old = self._records.get(record.key)
        self._records[record.key] = record
        return old

    def forget(self, key: tuple[str, str]) -> Record | None:
        """Drop the record of ``(folder, profile)``; the one dropped, or None."""
        return self._records.pop(key, None)

    def forget_folders(self, folders: Iterable[str]) -> list[Record]:
        """Drop every record of the folders (paths, as the client names them); those dropped."""
        gone = set(folders)
        return [self._records.pop(key) for key in [k for k in self._records if k[0] in gone]]


def same_folder(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


def rel_path(root: Path, path: Path) -> str | None:
    """``path`` relative to the workspace folder ``root`` (posix), as a capture's sources
    name it; None when it lies outside."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return None
