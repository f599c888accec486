"""What the latest captures know about a file's lines, for the editor.

Shared by the features that bring a capture back into the editor (inlay hints, hovers,
"Show in Graph", the cursor-following viewer). For a file it finds the latest capture of
every profile whose sources include the file (the registry of captures), takes that
capture's per-file slice of the line index (:mod:`capture.analysis.lines`, built once per capture
in the viewer, off the event loop), and maps its lines onto the text the editor has now.

Line mapping: the text a capture ran is the file whose bytes hash to the capture's
recorded ``sha256`` (snapshotted when the capture lands, or read later while the file on
disk still matches). The current text (the open buffer, else the disk) is compared with
it line by line: lines outside the changed regions keep their data (shifted by the
edits above them) and are marked stale when anything changed; changed lines lose it.
When the captured text is unknown (the file was edited on disk before a snapshot),
nothing can be placed: the file gets no line data rather than data on the wrong lines.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import safe_read

from ..feature import Feature
from ..host import Host
from ..records import CaptureRecords, Record, rel_path
from ..registry import register
from .viewer_host import ViewerHost

if TYPE_CHECKING:  # pragma: no cover
    from capture.analysis.lines import LineEntry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LineMap:
    """Captured line numbers (1-based) → current ones, for lines the edits left alone."""

    to_current: dict[int, int] | None  # None: the texts are equal (identity)
    changed: bool

    def current(self, captured_line: int) -> int | None:
        if self.to_current is None:
            return captured_line
        return self.to_current.get(captured_line)

    def captured(self, current_line: int) -> int | None:
        if self.to_current is None:
            return current_line
        inverse = self.__dict__.get("_inverse")
        if inverse is None:
            inverse = {c: k for k, c in self.to_current.items()}
            object.__setattr__(self, "_inverse", inverse)
        return inverse.get(current_line)


def line_map(captured: list[str], current: list[str]) -> LineMap:
    """How ``captured`` lines map onto ``current`` ones. Common head and tail are matched
    directly (an edit touches a small region), the middle by :mod:`difflib`."""
    if captured == current:
        return LineMap(None, False)
    n, m = len(captured), len(current)
    head = 0
    while head < n and head < m and captured[head] == current[head]:
        head += 1
    tail = 0
    while tail < n - head and tail < m - head and captured[n - 1 - tail] == current[m - 1 - tail]:
        tail += 1
    mapping = {k + 1: k + 1 for k in range(head)}
    for k in range(tail):
        mapping[n - k] = m - k
    a, b = captured[head:n - tail], current[head:m - tail]
    if a and b:
        matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
        for block in matcher.get_matching_blocks():
            for k in range(block.size):
                mapping[head + block.a + k + 1] = head + block.b + k + 1
    return LineMap(mapping, True)


@dataclass
class FileLines:
    """One capture's lines of one file, placed on the current text."""

    record: Record
    #: The capture's entries of this file, by captured line (1-based).
    entries: dict[int, "LineEntry"]
    map: LineMap

    @property
    def stale(self) -> bool:
        """The file changed since the capture: what is shown is "as of the last capture"."""
        return self.map.changed

    def placed(self) -> list[tuple[int, "LineEntry"]]:
        """``(current 0-based line, entry)`` for every entry whose line the edits left alone."""
        out = []
        for line, entry in self.entries.items():
            now = self.map.current(line)
            if now is not None:
                out.append((now - 1, entry))
        out.sort(key=lambda p: p[0])
        return out

    def at(self, line0: int) -> "LineEntry | None":
        """The entry shown on current 0-based line ``line0`` (None on a changed line)."""
        captured = self.map.captured(line0 + 1)
        return None if captured is None else self.entries.get(captured)


@register
class CapturedLines(Feature):
    name = "captured-lines"

    def __init__(self, server: Host, records: CaptureRecords, viewers: ViewerHost) -> None:
        super().__init__(server)
        self.records = records
        self.viewers = viewers
        self._lock = threading.Lock()
        # (capture id, root, rel) → the captured text's lines (None: unknown)
        self._texts: dict[tuple, list[str] | None] = {}
        # (capture id, root, rel, current text hash) → LineMap
        self._maps: dict[tuple, LineMap] = {}

    # -- what is known ------------------------------------------------------------
    def records_for(self, path: Path) -> list[tuple[Record, str]]:
        """``(record, workspace-relative path)`` of every latest capture whose sources
        include ``path``, newest first."""
        out = []
        for rec in self.records.all():
            if rec.capture_id is None or rec.capture.failure is not None:
                continue
            rel = rel_path(rec.root, path)
            if rel is not None and rel in rec.sources:
                out.append((rec, rel))
        out.sort(key=lambda p: p[0].captured_at, reverse=True)
        return out

    def index(self, rec: Record) -> Any:
        """The capture's line index (built on first use; call off the event loop)."""
        viewer = self.viewers.running(rec.root)
        if viewer is None or rec.capture_id is None:
            return None
        return viewer.lines(rec.capture_id)

    def file_lines(self, path: Path, text: str | None = None) -> list[FileLines]:
        """Every latest capture's lines of ``path`` placed on ``text`` (default: the open
        buffer, else the disk), newest capture first. Call off the event loop: the first
        call after a capture lands builds its line index."""
        if text is None:
            text = self.server.read_text(path)
        if text is None:
            return []
        current = text.splitlines()
        digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
        out = []
        for rec, rel in self.records_for(path):
            idx = self.index(rec)
            if idx is None:
                continue
            entries = idx.file(rel)
            if not entries:
                continue
            captured = self.captured_text(rec, rel)
            if captured is None:
                continue  # cannot place them: nothing rather than wrong lines
            key = (rec.capture_id, str(rec.root), rel, digest)
            with self._lock:
                lm = self._maps.get(key)
            if lm is None:
                lm = line_map(captured, current)
                with self._lock:
                    if len(self._maps) > 64:
                        self._maps.clear()
                    self._maps[key] = lm
            out.append(FileLines(rec, entries, lm))
        return out

    def captured_text(self, rec: Record, rel: str) -> list[str] | None:
        """The lines of ``rel`` as the capture ran it, when known."""
        key = (rec.capture_id, str(rec.root), rel)
        with self._lock:
            if key in self._texts:
                return self._texts[key]
        got = _read_if_same(rec, rel)
        with self._lock:
            # Only a known text is kept: an unknown one may become known (the file
            # reverted to what was captured).
            if got is not None:
                self._texts[key] = got
        return got

    def remember(self, rec: Record) -> None:
        """Snapshot the captured texts of a capture that just landed (off the loop)."""
        for rel in sorted(rec.sources):
            self.captured_text(rec, rel)
        with self._lock:
            live = {(r.capture_id, str(r.root)) for r in self.records.all()}
            for key in [k for k in self._texts if (k[0], k[1]) not in live]:
                del self._texts[key]


def _read_if_same(rec: Record, rel: str) -> list[str] | None:
    want = next((s.sha256 for s in rec.capture.sources if s.path == rel), None)
    if not want:
        return None
    try:
        data = safe_read.read_bytes(rec.root / rel, workspace=rec.root)  # rel comes from a graph file
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != want:
        return None
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None
