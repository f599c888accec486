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
from ..host import Host
from ..registry import register
from .viewer_host import ViewerHost

log = logging.getLogger(__name__)


@register
class Reveal(Feature):
    name = "reveal"

    def __init__(self, server: Host, viewers: ViewerHost) -> None:
        super().__init__(server)
        viewers.answers.reveal = lambda root, frame: self.reveal_from_viewer(frame, root)

    def resolve(self, file: str, root: Path | None) -> Path | None:
        p = Path(file)
        if p.is_absolute():
            return p if p.exists() else None
        roots = ([root] if root is not None else []) + [r for r in self.server.folders() if r != root]
        for base in roots:
            candidate = (base / p).resolve()
            try:
                candidate.relative_to(base.resolve())
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
                col = min(col, len(lines[line0]))
                end = max(col, len(lines[line0]))
        return types.Range(types.Position(line0, col), types.Position(line0, end))

    async def reveal(self, frame: dict[str, Any], root: Path | None = None) -> bool:
        file = frame.get("file")
        if not isinstance(file, str) or not file:
            return False
        path = self.resolve(file, root)
        if path is None:
            log.warning("reveal: %s is not a file in the workspace", file)
            return False
        rng = self.range_for(path, frame.get("line") or 1, frame.get("column") or 0)
        if not self.server.supports_show_document():
            self.server.show_message(f"TensorViz: source at {path}:{rng.start.line + 1}:{rng.start.character + 1}")
            return False
        params = types.ShowDocumentParams(uri=self.server.uri_of(path), take_focus=True, selection=rng, external=False)
        try:
            result = await self.server.window_show_document_async(params)
        except Exception as exc:
            log.warning("reveal: window/showDocument failed: %s", exc)
            return False
        return result is not None and result.success

    def reveal_from_viewer(self, frame: dict[str, Any], root: Path | None = None) -> bool:
        """The viewer's reveal hook (called on its HTTP thread): True when the editor showed it."""
        if self.server.loop is None or self.server.stopping:
            return False
        try:
            return bool(self.server.run_coroutine(self.reveal(frame, root), timeout=15))
        except Exception as exc:
            log.warning("reveal failed: %s", exc)
            return False
