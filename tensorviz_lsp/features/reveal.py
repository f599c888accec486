"""Go-to-source: a reveal request from the viewer → ``window/showDocument``.

A frame's ``file`` is workspace-relative where possible; it is resolved against
the workspace folder of the capture (then every folder). ``line`` is 1-based and
``column`` 0-based, as Python reports them; the editor gets the 0-based range
from the column to the end of that line, with ``takeFocus``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lsprotocol import types

from ..feature import Feature

log = logging.getLogger(__name__)


class Reveal(Feature):
    name = "reveal"

    def __init__(self, server) -> None:
        super().__init__(server)
        #: capture id (viewer) → workspace folder it came from
        self.capture_roots: dict[str, Path] = {}

    def resolve(self, file: str, capture_id: str | None) -> Path | None:
        p = Path(file)
        if p.is_absolute():
            return p if p.exists() else None
        roots = []
        if capture_id is not None and capture_id in self.capture_roots:
            roots.append(self.capture_roots[capture_id])
        roots += [r for r in self.server.folders() if r not in roots]
        roots += [r for r in self.capture_roots.values() if r not in roots]
        for root in roots:
            candidate = (root / p).resolve()
            try:
                candidate.relative_to(root.resolve())
            except ValueError:
                continue  # "../../etc/passwd" is not a workspace file
            if candidate.exists():
                return candidate
        return None

    def range_for(self, path: Path, line: int, column: int) -> types.Range:
        line0 = max(0, int(line) - 1)
        col = max(0, int(column or 0))
        text = self.server.read_text(path)
        end = col
        if text is not None:
            lines = text.splitlines()
            if line0 < len(lines):
                end = max(col, len(lines[line0]))
                col = min(col, len(lines[line0]))
        return types.Range(types.Position(line0, col), types.Position(line0, end))

    async def reveal(self, frame: dict[str, Any], capture_id: str | None = None) -> bool:
        file = frame.get("file")
        if not isinstance(file, str) or not file:
            return False
        path = self.resolve(file, capture_id)
        if path is None:
            log.warning("reveal: %s is not a file in the workspace", file)
            return False
        rng = self.range_for(path, frame.get("line") or 1, frame.get("column") or 0)
        params = types.ShowDocumentParams(uri=self.server.uri_of(path), take_focus=True, selection=rng, external=False)
        if not self.server.supports_show_document():
            self.server.show_message(f"TensorViz: source at {path}:{rng.start.line + 1}:{rng.start.character + 1}")
            return False
        try:
            result = await self.server.window_show_document_async(params)
        except Exception as exc:
            log.warning("reveal: window/showDocument failed: %s", exc)
            return False
        return bool(result is not None and getattr(result, "success", False))

    def reveal_from_viewer(self, frame: dict[str, Any], capture_id: str | None = None) -> dict[str, Any]:
        """The viewer's reveal hook (called on its HTTP thread)."""
        if self.server.loop is None or self.server.stopping:
            return {"handled": "viewer"}
        try:
            ok = self.server.run_coroutine(self.reveal(frame, capture_id), timeout=15)
        except Exception as exc:
            log.warning("reveal failed: %s", exc)
            ok = False
        return {"handled": "editor" if ok else "viewer"}
