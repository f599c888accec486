"""The checks before a capture that need no interpreter run, in docs/architecture.md's order, each
worded here once for the CLI and the language server alike:

1. ``trust``       - the caller says whether the workspace is trusted (the language
   server asks the user; a command typed in a terminal is trusted);
2. ``source``      - no unsaved editor buffer of a file the capture would import
   (:func:`files_to_save`) or of the recipes file;
3. ``interpreter`` - the selected Python exists and is an executable file (whether it
   runs, and is new enough, the worker step's probe finds out).

The rest (dependencies, device, recipe, import and trace) is the worker step,
:mod:`capture.session.runner`.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from urllib.parse import unquote, urlparse

import safe_read

from ..graph.model import Capture
from ..recipe import RECIPES_FILE
from ..worker.protocol import InterpreterDetails, SourceDetails
from ..worker.workspace_files import WorkspaceFiles
from .import_closure import import_closure
from .job import CaptureJob

#: Paths of unsaved editor buffers, or a callable that returns them when the check runs.
Unsaved = Iterable["str | os.PathLike[str]"] | Callable[[], Iterable["str | os.PathLike[str]"]]


#: The folders a workspace's own environment lives in, in the order they are looked for.
WORKSPACE_VENVS = (".venv", "venv")
_VENV_PYTHONS = (Path("bin") / "python", Path("bin") / "python3", Path("Scripts") / "python.exe")


def workspace_python(workspace: str | os.PathLike[str]) -> Path | None:
    """The interpreter of the workspace's own environment (``.venv``, else ``venv``), or
    None. The one lookup: CLI captures, the editor's interpreter choice and discovery's
    library bases (which read that interpreter's packages) all use it. Not resolved: a
    venv's python links to its base interpreter, and resolving it would lose the venv's
    site-packages."""
    root = Path(workspace)
    for name in WORKSPACE_VENVS:
        for python in _VENV_PYTHONS:
            candidate = root / name / python
            if candidate.exists():
                return candidate.absolute()
    return None


def default_interpreter(workspace: str | os.PathLike[str]) -> str:
    """The workspace's own interpreter (:func:`workspace_python`) when there is one, else this Python."""
    venv = workspace_python(workspace)
    return str(venv) if venv is not None else sys.executable


def preflight(job: CaptureJob, *, trusted: bool, unsaved: Unsaved = ()) -> Capture | None:
    """The failure capture of the first check that fails, else None."""
    if not trusted:
        return job.fail(
            "trust", "WorkspaceNotTrusted",
            f"the workspace {job.workspace} is not trusted, so nothing was run: a capture runs its code "
            "(model setup, input factories and tracing)",
        )
    dirty = unsaved_sources(job.workspace, unsaved)
    if dirty:
        return job.fail(
            "source", "UnsavedSource",
            f"save {', '.join(dirty)} first: the capture imports the saved file{'s' if len(dirty) > 1 else ''} "
            "from disk, and the editor has unsaved changes; nothing was run",
            SourceDetails(unsaved=dirty),
        )
    return interpreter_missing(job)


def interpreter_missing(job: CaptureJob) -> Capture | None:
    python = job.python
    if not os.path.exists(python):
        return job.fail(
            "interpreter", "InterpreterNotFound",
            f"the selected interpreter {python} does not exist; select another Python", InterpreterDetails(python=python),
        )
    if not os.access(python, os.X_OK) or os.path.isdir(python):
        return job.fail(
            "interpreter", "InterpreterNotExecutable",
            f"the selected interpreter {python} is not an executable file", InterpreterDetails(python=python),
        )
    return None


def unsaved_sources(workspace: Path, unsaved: Unsaved) -> list[str]:
    """The workspace Python files and recipes file among ``unsaved`` (paths relative to
    the workspace, absolute, or ``file://`` URIs), workspace-relative and sorted."""
    paths = unsaved() if callable(unsaved) else unsaved
    files = WorkspaceFiles(workspace)
    out = []
    for p in paths or ():
        text = os.fspath(p)
        if text.startswith("file://"):
            text = unquote(urlparse(text).path)
        full = text if os.path.isabs(text) else os.path.join(workspace, text)
        rel = files.relative(full)
        if rel is not None and (rel.endswith(".py") or rel == RECIPES_FILE):
            out.append(rel)
    return sorted(set(out))


def files_to_save(
    job: CaptureJob, known_sources: Iterable[str] = (), read_text: Callable[[Path], str | None] | None = None,
) -> list[Path]:
    """Every workspace file an editor must have saved before ``job`` runs: the static
    import closure of the model's and factories' modules (read through ``read_text``,
    an editor's open buffers, else the disk), ``known_sources`` (workspace-relative: the
    files the profile's last capture read) and the recipes file."""
    read = read_text or functools.partial(_read_disk, workspace=job.workspace)
    starts = [p for p in job.module_files() if p is not None]
    files = set(import_closure(job.workspace, starts, read))
    files |= {(job.workspace / rel).resolve() for rel in known_sources}
    files.add((job.workspace / RECIPES_FILE).resolve())
    return sorted(files)


def _read_disk(path: Path, *, workspace: Path) -> str | None:
    try:
        return safe_read.read_text(path, workspace=workspace)
    except (OSError, UnicodeDecodeError):
        return None
