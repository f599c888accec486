"""Diagnostics of failed captures, where they happened: one on the line that raised (the
innermost workspace frame of the failure, naming the profile), a hint on the symbol's
name pointing there ("capture of PROFILE failed, see line N"), and the failure's frames
as related locations labelled ``model.py:179 in Block.forward``; until the next capture
of the profile. A failure without a workspace frame (a bad recipe, a missing package)
is one diagnostic on the symbol's name.

Once a file the failed capture read changes (an edit, a save, a change on disk), the
diagnostics may no longer hold: they say which capture they are from and the error
becomes a warning.

The viewer hears why a capture did not land too (:meth:`FailureDiagnostics.banner`: a
failure, a refusal, a cancel, a save that does not parse).
"""

from __future__ import annotations

import ast
import time
from pathlib import Path
from typing import Any

from lsprotocol import types

from capture.graph import frame_repeats
from capture.graph.failure_text import readable_message
from capture.graph.model import Failure, Frame

from ..diagnostics import SOURCE
from ..feature import Feature, hook
from ..host import Host
from .capturing import CaptureTarget
from ..records import rel_path
from ..registry import register
from .lenses import lsp_range
from .viewer_host import ViewerHost

KIND = "capture"
#: The code action a memory failure that offers abstract evidence gets (:mod:`.abstract_capture`).
ABSTRACT_ACTION = "Capture abstractly (shapes only)"
#: Related locations kept (the innermost ones: where it raised, and what called it).
MAX_FRAMES = 5


@register
class FailureDiagnostics(Feature):
    name = "capture-failures"

    def __init__(self, server: Host, viewers: ViewerHost) -> None:
        super().__init__(server)
        self.viewers = viewers
        #: Each failed profile's diagnostics, each with the document it is on.
        self._failures: dict[tuple[str, str], list[tuple[str, types.Diagnostic]]] = {}
        #: A failure's files (what the capture would import, and the recipes file) and
        #: when it failed: once one changes, its diagnostics say they are from then.
        self._files: dict[tuple[str, str], tuple[set[Path], str]] = {}

    def show(self, target: CaptureTarget, failure: Failure, files: set[Path], hint: str = "",
             data: dict[str, Any] | None = None) -> None:
        """Put the failure's diagnostics in place (replacing the profile's last).
        ``data``: what a code action on the error needs (the profile, its folder, an
        offered way out)."""
        stage = failure.stage
        recursion = frame_repeats.summary(failure)
        short = readable_message(failure.message)
        whose = " (TensorViz's own failure, not the model's: please report it)" if stage == "internal" else ""
        text = (f"Capture of {target.qualname} (profile {target.profile}) failed at {stage}{whose}: "
                f"{failure.type}: {short.text}{hint}" + (f" ({recursion})" if recursion else ""))
        payload = {"profile": target.profile, "folder": str(target.root), "stage": stage, **(data or {})}
        related = self._frames(target.root, failure) or None
        where = raising_frame(failure)
        diags: list[tuple[str, types.Diagnostic]] = []
        located = self._line_range(target.root, where) if where is not None else None
        if where is not None and located is not None:
            uri, rng = located
            diags.append((uri, types.Diagnostic(
                range=rng, message=text, severity=types.DiagnosticSeverity.Error, source=SOURCE,
                code=f"capture-{stage}", related_information=related, data=payload,
            )))
            same_file = self.server.path_of(uri) == self.server.path_of(target.uri)
            if not (same_file and rng.start.line == target.name_range.start.line):
                see = f"line {where.line}" if same_file else f"{where.file}:{where.line}"
                diags.append((target.uri, types.Diagnostic(
                    range=lsp_range(target.name_range),
                    message=f"capture of {target.profile} failed, see {see} ({failure.type})",
                    severity=types.DiagnosticSeverity.Hint, source=SOURCE, code=f"capture-{stage}",
                    related_information=[types.DiagnosticRelatedInformation(
                        location=types.Location(uri=uri, range=rng), message=frame_label(target.root, where))],
                    data=payload,
                )))
        else:
            diags.append((target.uri, types.Diagnostic(
                range=lsp_range(target.name_range), message=text, severity=types.DiagnosticSeverity.Error,
                source=SOURCE, code=f"capture-{stage}", related_information=related, data=payload,
            )))
        old = self._failures.get(target.key, [])
        self._failures[target.key] = diags
        self._files[target.key] = (files, time.strftime("%H:%M"))
        for uri in dict.fromkeys([u for u, _ in old] + [u for u, _ in diags]):
            self._publish(uri)

    def banner(self, root: Path | None, event: dict[str, Any]) -> None:
        """Tell the folder's viewer why a capture did not land (``capture-failed``:
        ``message``, ``stage``, ``profile``, the ``frame`` that raised): its banner."""
        self.viewers.publish(root, "capture-failed", event)

    def clear(self, root: Path, profile: str) -> None:
        self._files.pop((str(root), profile), None)
        old = self._failures.pop((str(root), profile), None)
        for uri in dict.fromkeys(u for u, _ in old or []):
            self._publish(uri)

    def failed(self, root: Path, profile: str) -> bool:
        return (str(root), profile) in self._failures

    def at(self, uri: str) -> list[types.Diagnostic]:
        """The failure diagnostics on ``uri`` now (for code actions on them)."""
        return [d for diags in self._failures.values() for u, d in diags if u == uri]

    def _line_range(self, root: Path, frame: Frame) -> tuple[str, types.Range] | None:
        """The document and range of ``frame``'s line (its code, without the indent)."""
        path = root / frame.file
        text = self.server.read_text(path)
        line0 = max(0, int(frame.line or 1) - 1)
        lines = text.splitlines() if text is not None else []
        if line0 >= len(lines):
            return None
        code = lines[line0]
        from .inlay_hints import units_of

        units = units_of(self.server)
        start = units(code[: len(code) - len(code.lstrip())])
        return self.server.uri_of(path), types.Range(types.Position(line0, start), types.Position(line0, units(code)))

    def _frames(self, root: Path, failure: Failure) -> list[types.DiagnosticRelatedInformation]:
        out = []
        marks = frame_repeats.repeated(failure.details)
        for index, fr in list(enumerate(failure.frames))[-MAX_FRAMES:]:
            p = Path(fr.file)
            p = p if p.is_absolute() else root / p
            line = max(0, int(fr.line or 1) - 1)
            out.append(
                types.DiagnosticRelatedInformation(
                    location=types.Location(
                        uri=self.server.uri_of(p),
                        range=types.Range(types.Position(line, 0), types.Position(line, 0)),
                    ),
                    message=frame_label(root, fr) + (f" {frame_repeats.marker(*marks[index])}" if index in marks else ""),
                )
            )
        return out

    def _changed(self, path: Path | None) -> None:
        """A file a failed capture read changed: its diagnostics may no longer hold, so
        they say which capture they are from (the error is a warning now) until the next one."""
        if path is None:
            return
        path = path.resolve()
        touched: set[str] = set()
        for key, (files, when) in list(self._files.items()):
            if path not in files or key not in self._failures:
                continue
            root = Path(key[0])
            prefix = f"From the last capture at {when}; {rel_path(root, path) or path} changed since: "
            marked = []
            for uri, diag in self._failures[key]:
                severity = diag.severity
                if severity == types.DiagnosticSeverity.Error:
                    severity = types.DiagnosticSeverity.Warning
                marked.append((uri, types.Diagnostic(
                    range=diag.range, message=prefix + diag.message, severity=severity, source=diag.source,
                    code=diag.code, related_information=diag.related_information, data=diag.data,
                )))
                touched.add(uri)
            self._failures[key] = marked
            del self._files[key]  # marked once
        for uri in touched:
            self._publish(uri)

    def _publish(self, uri: str) -> None:
        self.server.diagnostics.set(uri, KIND, self.at(uri))

    # -- hooks -------------------------------------------------------------------
    @hook
    def document_changed(self, uri: str) -> None:
        self._changed(self.server.path_of(uri))

    @hook
    def document_saved(self, uri: str) -> None:
        self._changed(self.server.path_of(uri))

    @hook
    def files_changed(self, changes: list[types.FileEvent]) -> None:
        for change in changes:
            self._changed(self.server.path_of(change.uri))


def raising_frame(failure: Failure) -> Frame | None:
    """The innermost workspace frame of a failure (the line that raised), else None."""
    return next((f for f in reversed(failure.frames) if not f.library and f.file and f.line), None)


def frame_label(root: Path, frame: Frame) -> str:
    """``model.py:179 in Block.forward``: the file as the capture names it, the line, and
    the function's qualified name read from the file's source (the worker records the
    bare name); the bare name when the source no longer has that function there."""
    return f"{Path(frame.file).name if frame.library else frame.file}:{frame.line} in " \
           f"{function_qualname(root / frame.file, frame.line, frame.function)}"


#: (file, mtime, size) -> its functions: (first line, last line, name, qualified name).
_QUALNAMES: dict[tuple[str, int, int], list[tuple[int, int, str, str]]] = {}


def function_qualname(path: Path, line: int, function: str) -> str:
    """The qualified name (as ``co_qualname`` spells it: ``Block.forward``,
    ``outer.<locals>.inner``) of the function named ``function`` around ``line`` of
    ``path``, read with ``ast``; ``function`` itself when none matches."""
    try:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
    except OSError:
        return function
    spans = _QUALNAMES.get(key)
    if spans is None:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError, OSError):
            return function
        found: list[tuple[int, int, str, str]] = []

        def walk(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    qual = prefix + child.name
                    if not isinstance(child, ast.ClassDef):
                        found.append((child.lineno, child.end_lineno or child.lineno, child.name, qual))
                    walk(child, qual + (".<locals>." if not isinstance(child, ast.ClassDef) else "."))
                else:
                    walk(child, prefix)

        walk(tree, "")
        if len(_QUALNAMES) > 256:
            _QUALNAMES.clear()
        spans = _QUALNAMES[key] = found
    # The innermost function of that name whose lines hold ``line``.
    hits = [(start, qual) for start, end, name, qual in spans if name == function and start <= line <= end]
    return max(hits)[1] if hits else function


def abstract_offered(failure: Failure) -> str | None:
    """The recipe key (``profiles.NAME.evidence``) a ``MemoryError`` failure of an eager
    Torch capture offers to set to ``"abstract"`` (its ``details["abstract"]``,
    ``{"evidence": "abstract", "key_path": ...}``, whatever the phase: the estimate
    before building or an allocation that failed); None for any other failure, or one
    that offers nothing (an abstract capture, another framework)."""
    if failure.type != "MemoryError" or not isinstance(failure.details, dict):
        return None
    offer = failure.details.get("abstract")
    if not isinstance(offer, dict) or offer.get("evidence") != "abstract" or not isinstance(offer.get("key_path"), str):
        return None
    return offer["key_path"]
