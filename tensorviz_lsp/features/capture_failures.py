"""Diagnostics of failed captures: one on the symbol's name per folder and profile, with
the failure's frames as related locations, until the next capture of the profile.

Once a file the failed capture read changes (an edit, a save, a change on disk), the
diagnostic may no longer hold: it says which capture it is from and becomes a warning.
"""

from __future__ import annotations

import time
from pathlib import Path

from lsprotocol import types

from capture.graph import frame_repeats
from capture.graph.model import Failure

from ..diagnostics import SOURCE
from ..feature import Feature
from ..host import Host
from .capturing import CaptureTarget
from .freshness import rel_path
from .lenses import lsp_range

KIND = "capture"


class FailureDiagnostics(Feature):
    name = "capture-failures"

    def __init__(self, server: Host) -> None:
        super().__init__(server)
        self._failures: dict[tuple[str, str], tuple[str, types.Diagnostic]] = {}
        #: A failure's files (what the capture would import, and the recipes file) and
        #: when it failed: once one changes, its diagnostic says it is from then.
        self._files: dict[tuple[str, str], tuple[set[Path], str]] = {}

    def show(self, target: CaptureTarget, failure: Failure, files: set[Path], hint: str = "") -> None:
        """Put the failure's diagnostic on the target's symbol (replacing the profile's last)."""
        stage = failure.stage
        recursion = frame_repeats.summary(failure)
        diag = types.Diagnostic(
            range=lsp_range(target.name_range),
            message=f"Capture of {target.qualname} (profile {target.profile}) failed at {stage}: "
                    f"{failure.type}: {failure.message}{hint}" + (f" ({recursion})" if recursion else ""),
            severity=types.DiagnosticSeverity.Error,
            source=SOURCE,
            code=f"capture-{stage}",
            related_information=self._frames(target.root, failure) or None,
        )
        self._failures[target.key] = (target.uri, diag)
        self._files[target.key] = (files, time.strftime("%H:%M"))
        self._publish(target.uri)

    def clear(self, root: Path, profile: str) -> None:
        self._files.pop((str(root), profile), None)
        old = self._failures.pop((str(root), profile), None)
        if old is not None:
            self._publish(old[0])

    def _frames(self, root: Path, failure: Failure) -> list[types.DiagnosticRelatedInformation]:
        out = []
        marks = frame_repeats.repeated(failure.details)
        for index, fr in list(enumerate(failure.frames))[-5:]:
            p = Path(fr.file)
            p = p if p.is_absolute() else root / p
            line = max(0, int(fr.line or 1) - 1)
            out.append(
                types.DiagnosticRelatedInformation(
                    location=types.Location(
                        uri=self.server.uri_of(p),
                        range=types.Range(types.Position(line, 0), types.Position(line, 0)),
                    ),
                    message=f"in {fr.function}" + (f" {frame_repeats.marker(*marks[index])}" if index in marks else ""),
                )
            )
        return out

    def _changed(self, path: Path | None) -> None:
        """A file a failed capture read changed: its diagnostic may no longer hold, so
        it says which capture it is from (and is a warning now) until the next one."""
        if path is None:
            return
        path = path.resolve()
        touched: set[str] = set()
        for key, (files, when) in list(self._files.items()):
            if path not in files or key not in self._failures:
                continue
            uri, diag = self._failures[key]
            root = Path(key[0])
            diag = types.Diagnostic(
                range=diag.range,
                message=f"From the last capture at {when}; {rel_path(root, path) or path} changed since: {diag.message}",
                severity=types.DiagnosticSeverity.Warning,
                source=diag.source,
                code=diag.code,
                related_information=diag.related_information,
            )
            self._failures[key] = (uri, diag)
            del self._files[key]  # marked once
            touched.add(uri)
        for uri in touched:
            self._publish(uri)

    def _publish(self, uri: str) -> None:
        self.server.diagnostics.set(uri, KIND, [d for u, d in self._failures.values() if u == uri])

    # -- hooks -------------------------------------------------------------------
    def document_changed(self, uri: str) -> None:
        self._changed(self.server.path_of(uri))

    def document_saved(self, uri: str) -> None:
        self._changed(self.server.path_of(uri))

    def files_changed(self, changes: list[types.FileEvent]) -> None:
        for change in changes:
            self._changed(self.server.path_of(change.uri))
