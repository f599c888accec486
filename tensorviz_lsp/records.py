"""A graph captured in this session: what freshness, hints, hovers, Show in Graph and
recapture know about it (one per folder and profile, the newest)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from capture.graph.model import Capture

from .backends import Span


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
