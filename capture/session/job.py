"""One capture as the parent sees it: the resolved recipe, the interpreter, the limits and
the callbacks, and how a failure of it is recorded.

A :class:`CaptureJob` is built before the first check (:mod:`capture.session.checks`) and
handed, once those pass, to the worker step (:func:`capture.session.runner.run_worker`, or
a test's fake through the language server's ``Backends`` seam). Every failure capture of
the job, whichever check or phase failed, is made by :meth:`CaptureJob.fail`, so each
carries the recipe as resolved, the framework and the files the recipe names.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..frameworks import framework_names
from ..graph.frame_repeats import collapse_failure
from ..graph.freshness import file_sha256
from ..graph.model import Capture, Failure, Frame, Source
from ..recipe import DEFAULT_FRAMEWORK, RECIPES_FILE, Recipe, RecipeError, load_recipes_table, module_file, profile_from_document, split_ref
from ..worker.limits import Limits

Progress = Callable[[str, "float | None"], None]
Log = Callable[[str], None]


def _no_progress(message: str, fraction: float | None) -> None:
    pass


def _no_log(line: str) -> None:
    pass


def _no_graph(capture: Capture) -> None:
    pass


@dataclass(frozen=True)
class ResolvedRecipe:
    """A recipe as the parent resolved it: the valid :class:`Recipe`, or the
    :class:`RecipeError` it raised (reported only at the ``recipe`` check, after the
    interpreter and dependency checks, as docs/architecture.md orders them)."""

    recipe: Recipe | None
    error: RecipeError | None
    #: What failure captures record as their recipe (``Recipe.to_dict()``, or ``{"name"}``).
    as_dict: dict[str, Any] | None
    framework: str
    #: The profile's table as written (an invalid recipe still names its device).
    raw: Any = None

    @property
    def name(self) -> str:
        if self.recipe is not None:
            return self.recipe.name
        return str((self.as_dict or {}).get("name") or "?")

    def refs(self) -> list[str]:
        """The model ref, then every factory ref (empty before the recipe is valid,
        except what an invalid table still names as strings)."""
        if self.recipe is not None:
            return [self.recipe.model, *self.recipe.factory_refs()]
        raw = self.raw if isinstance(self.raw, Mapping) else {}
        refs = [raw["model"]] if isinstance(raw.get("model"), str) else []
        for section in ("init", "inputs"):
            table = raw.get(section)
            if isinstance(table, Mapping) and isinstance(table.get("factory"), str):
                refs.append(table["factory"])
        return refs


def resolve_recipe(workspace: Path, recipe: Recipe | str | Mapping[str, Any]) -> ResolvedRecipe:
    """``recipe``: a :class:`Recipe`, a profile name saved in the workspace's
    ``.tensorviz/recipes.toml``, or ``Recipe.to_dict()`` data. Never raises for a bad
    recipe: the error is kept for the ``recipe`` check."""
    if isinstance(recipe, Recipe):
        return ResolvedRecipe(recipe, None, recipe.to_dict(), recipe.framework, None)
    raw: Any = None
    if isinstance(recipe, str):
        as_dict: dict[str, Any] = {"name": recipe}
        path = workspace / RECIPES_FILE
        try:
            doc, text = load_recipes_table(path)
            raw = (doc.get("profiles") or {}).get(recipe)
            resolved = profile_from_document(doc, recipe, text=text, file=str(path))
        except RecipeError as exc:
            return ResolvedRecipe(None, exc, as_dict, _framework_of(raw), raw)
    else:
        raw = recipe
        as_dict = {"name": str(recipe.get("name")) if isinstance(recipe, Mapping) else "?"}
        try:
            resolved = Recipe.from_dict(recipe)
        except RecipeError as exc:
            return ResolvedRecipe(None, exc, as_dict, _framework_of(raw), raw)
    return ResolvedRecipe(resolved, None, resolved.to_dict(), resolved.framework, raw)


def _framework_of(raw: Any) -> str:
    """The framework an invalid table names, when it is one TensorViz knows."""
    if isinstance(raw, Mapping) and raw.get("framework", DEFAULT_FRAMEWORK) in framework_names():
        return str(raw.get("framework", DEFAULT_FRAMEWORK))
    return "unknown"


@dataclass
class CaptureJob:
    """One capture: what to run, where, and whom to tell. ``workspace`` is absolute with
    links resolved. ``progress(message, fraction)`` is called from the capturing thread,
    ``log(line)`` (the worker's stdout and stderr) from a reader thread. ``cancel``: set
    it to stop the capture (the worker's process group is killed). ``warm_idle_seconds``:
    the language server's ``tensorviz.warmWorkerIdleSeconds`` (0: a one-shot worker).
    ``graph_ready(capture)``: called from the capturing thread with a graph whose
    statistics follow it (``meta["stats_pending"]``, :mod:`capture.graph.later_stats`)
    as soon as it arrives, before they are waited for: the graph first (the session writes
    its file there)."""

    workspace: Path
    recipe: ResolvedRecipe
    python: str
    limits: Limits = field(default_factory=Limits)
    env: dict[str, str] = field(default_factory=dict)
    cancel: threading.Event = field(default_factory=threading.Event)
    progress: Progress = _no_progress
    log: Log = _no_log
    graph_ready: Callable[[Capture], None] = _no_graph
    warm_idle_seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @property
    def profile(self) -> str:
        return self.recipe.name

    @property
    def framework(self) -> str:
        return self.recipe.framework

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.started:.1f} s"

    def elapsed_s(self) -> float:
        return round(time.monotonic() - self.started, 3)

    def fail(
        self, stage: str, type_name: str, message: str, details: Mapping[str, Any] | None = None,
        frames: list[Frame] | None = None, sources: list[Source] | None = None,
    ) -> Capture:
        """The failure capture of this job: no nodes, the failure, the recipe as resolved."""
        return Capture.failed_capture(
            # A crash dump's frames (faulthandler) repeat as a traceback's do: collapsed alike.
            collapse_failure(Failure(type=type_name, message=message, stage=stage, frames=list(frames or []),
                                     details=dict(details or {}))),
            framework=self.framework,
            recipe=self.recipe.as_dict,
            sources=sources if sources is not None else self.named_sources(),
            meta={"elapsed_s": self.elapsed_s()},
        )

    def module_files(self) -> list[Path | None]:
        """The workspace file of each module the recipe names (model, then factories),
        None where there is none."""
        return [module_file(self.workspace, split_ref(ref)[0]) for ref in self.recipe.refs()]

    def named_sources(self) -> list[Source]:
        """The files the recipe names, hashed: the sources of a failure that came before
        the worker reported any."""
        if self.recipe.recipe is None:
            return []
        out = {}
        for path in self.module_files():
            digest = file_sha256(path) if path is not None else None
            if path is not None and digest is not None:
                out[path.relative_to(self.workspace).as_posix()] = digest
        return [Source(p, h) for p, h in sorted(out.items())]


def workspace_path(workspace: str | os.PathLike[str]) -> Path:
    """A workspace as jobs hold it: absolute, links resolved."""
    return Path(os.path.realpath(os.path.abspath(workspace)))
