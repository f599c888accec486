"""What the language server needs from discovery, recipes, the worker and the viewer.

The features talk to these narrow interfaces only; :class:`RealBackends` adapts the
real packages (``discovery``, ``capture``, ``viewer``, ``recipes_store``), and the
unit tests pass fakes. Every call here may block and is made off the event loop,
except ``profiles_in`` (a pure TOML read) and viewer publishing.
"""

from __future__ import annotations

import copy
import logging
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

# Where a recipe's dotted module lives: one definition, in capture (the worker's side
# needs it too). Re-exported for the features that look files up through this module.
from capture.recipe import RECIPES_FILE, module_file  # noqa: F401

from capture.graph.model import Capture, Failure
from capture.session import Baseline, CaptureRequest, SessionResult, WarmWorkers
from capture.worker.protocol import missing_dependencies

if TYPE_CHECKING:  # discovery imports libcst: loaded when the first file is discovered
    from discovery.positions import Range
    from discovery.results import CallInputJson, CandidateKind, FileResult, Framework, SetupFieldJson
    from capture.analysis.lines import LineIndex

log = logging.getLogger(__name__)

RECIPES_PATH = Path(RECIPES_FILE)


def recipes_root(path: Path) -> Path | None:
    """The workspace folder whose ``.tensorviz/recipes.toml`` ``path`` is, else None."""
    if path.name != RECIPES_PATH.name or path.parent.name != RECIPES_PATH.parent.name:
        return None
    return path.parent.parent


@dataclass(frozen=True)
class Pos:
    line: int  # 0-based
    character: int  # 0-based


@dataclass(frozen=True)
class Span:
    start: Pos
    end: Pos


@dataclass
class Candidate:
    """One symbol that can be opened as a graph: ``discovery.results.Candidate`` with
    positions the server can shift while a file does not parse, and its call inputs and
    setup fields in their JSON contract (what the setup form is built from)."""

    name: str
    qualname: str
    kind: CandidateKind
    framework: Framework
    name_range: Span
    range: Span
    inputs: list[CallInputJson] = field(default_factory=list)
    setup_fields: list[SetupFieldJson] = field(default_factory=list)
    reason: str = ""
    #: Methods to call on the built model before its call method runs (gpt-fast's
    #: ``setup_caches``): ``discovery.results.Preparation.to_json()`` each.
    preparations: list[dict[str, Any]] = field(default_factory=list)
    call_method: str | None = None
    call_defined_in: str | None = None
    setup_fields_complete: bool = True
    #: A function that builds the model (``discovery.factories``): its recipe saves
    #: ``model_factory = true``.
    model_factory: bool = False
    #: Libraries whose process state the model reads (``discovery.results.Candidate``).
    library_state: list[str] = field(default_factory=list)


@dataclass
class Discovered:
    candidates: list[Candidate]
    errors: list[str] = field(default_factory=list)
    # False when the text could not be parsed (a user mid-edit): keep the last good result.
    parsed: bool = True
    # False when discovery ran out of its budget for reading library bases: the next
    # request discovers again (and reads on) instead of answering from the cache.
    complete: bool = True


@dataclass
class RecipeIssue:
    message: str
    line: int | None = None  # 1-based, as TOML reports it
    profile: str | None = None
    path: str | None = None  # key path such as profiles.x.inputs.args[0].dtype


@dataclass
class InstallPlan:
    """The reviewed command that would add missing capture dependencies."""

    python: str
    missing: list[str]
    command: list[str]
    # ``name==version`` of the installed Torch build (torch, nvidia-*, triton…): kept in
    # every command, a user's own install template included, so pip refuses rather
    # than replaces the selected build.
    pinned: list[str] = field(default_factory=list)


@runtime_checkable
class Viewer(Protocol):
    """One loopback viewer server (per workspace folder): ``viewer.server.app.ViewerServer``."""

    @property
    def url(self) -> str:
        """The viewer's base URL (token included)."""
        ...

    def add_capture(
        self, capture: Capture, title: str | None = None, *, warm: bool = False, trusted_sources: bool = False,
        baseline: Baseline | None = None, replaces: int | None = None, in_place: bool = False,
    ) -> int:
        """Hold ``capture`` (the newest becomes the default) and tell open pages; its id.
        ``baseline``: what the page offers a diff against; ``replaces``: the id of the
        capture whose tab updates in place (a recapture); ``in_place``: the capture
        completes that one (its statistics arrived after it) and takes its id."""
        ...

    def url_for(self, capture_id: int) -> str: ...

    def publish(self, event: str, data: dict[str, Any] | None = None) -> None: ...

    def lines(self, capture_id: int) -> LineIndex | None:
        """The capture's line index (None when not held or failed)."""
        ...

    def pages(self, capture_id: int) -> int:
        """How many open viewer pages show the capture (Show in Graph focuses one)."""
        ...

    def stop(self) -> None: ...


@dataclass
class ViewerHooks:
    """What the viewer asks of the language server (called on its request threads).

    ``reveal(frame) -> bool``: show ``frame`` (``file`` absolute) in the editor;
    ``setup(profile) -> dict | None``: the setup form's content;
    ``save_profile(name, recipe) -> [{path, message}]``: errors, empty when saved;
    ``start_capture(profile)``: start a capture (``ValueError`` refuses)."""

    reveal: Callable[[dict[str, Any]], bool]
    setup: Callable[[str | None], dict[str, Any] | None]
    save_profile: Callable[[str, dict[str, Any]], list[dict[str, Any]]]
    start_capture: Callable[[str], None]


@runtime_checkable
class Backends(Protocol):
    """The language server's seam to what reads the disk, runs processes or serves:
    :class:`RealBackends`, and the tests' ``FakeBackends`` (``tests/lsp/fake_server.py``).
    Everything else the features need from ``capture``/``discovery`` is pure and
    called directly (recipe problems, failure details, install plans)."""

    def discover(self, text: str, path: Path, root: Path | None, python: str | None = None) -> Discovered:
        """``python``: the selected capture interpreter when one was chosen (a setting,
        the command, the folder's ``.venv``); discovery follows bases into its packages."""
        ...

    def index_changed(self, root: Path, path: Path, text: str | None) -> None:
        """``text``: an open buffer's content; None: the file on disk counts (again)."""
        ...

    def save_profile(self, root: Path, name: str, recipe: dict[str, Any]) -> list[dict[str, Any]]:
        """Validate and write a profile; its problems as ``[{path, message}]``, [] when saved."""
        ...

    def run_session(self, request: CaptureRequest) -> SessionResult:
        """One capture session (:func:`capture.session.run_session`: the checks, the
        worker, on ``request.warm``'s warm worker when it carries one, the graph file,
        the history); a failure is in the result, never a raise."""
        ...

    def warm_workers(self) -> WarmWorkers:
        """The server's warm workers (one :class:`capture.session.WarmWorkers`, the same
        on every call): its requests carry them, its features configure and close them."""
        ...

    def changed_sources(self, capture: Capture, root: Path, open_buffers: dict[str, str]) -> list[str]:
        """The capture's sources whose bytes now (an open buffer, else the disk) differ."""
        ...

    def start_viewer(self, root: Path | None, hooks: ViewerHooks) -> Viewer: ...


# ---------------------------------------------------------------------------- helpers


def profiles_in(text: str | None) -> dict[str, dict[str, Any]]:
    """``[profiles.NAME]`` tables of a recipes file, leniently (invalid → none)."""
    if not text:
        return {}
    from capture.recipe import RecipeError
    from capture.recipe.parse import recipes_size_problem

    from .recipes_store import parsed_recipes

    try:
        data = parsed_recipes(text)  # parsed once per change, shared with the diagnostics
    except RecipeError:
        if recipes_size_problem(text) is not None:
            return {}  # over the bound: its one diagnostic says so; nothing else reads it
        try:  # a wrong version or top-level key: the profiles are still offered
            data = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError):  # RecursionError: nested too deeply
            return {}
    profiles = data.get("profiles")
    if not isinstance(profiles, dict):
        return {}
    return {k: v for k, v in profiles.items() if isinstance(v, dict)}


# ---------------------------------------------------------------------------- the real pieces


class RealBackends:
    """``discovery``, ``capture`` (recipes, runner, freshness), ``recipes_store``, ``viewer``.

    Imports are lazy so that starting the server stays quick and the package
    boundaries hold (none of these import jax, flax or torch)."""

    # How long a found library environment is trusted before the disk is read again
    # (a ``.venv`` created, an interpreter upgraded).
    ENVIRONMENT_RECHECK_S = 10.0

    def __init__(self) -> None:
        self._indexes: dict[str, Any] = {}
        self._environments: dict[tuple[str, str | None], tuple[float, Any]] = {}
        self._lock = threading.Lock()
        self._warm = WarmWorkers()  # their pool starts with the first warm capture or preload

    # -- discovery -----------------------------------------------------------
    def _index(self, root: Path | None) -> Any:
        if root is None:
            return None
        with self._lock:
            key = str(root)
            if key not in self._indexes:
                try:
                    from discovery import WorkspaceIndex
                except ImportError:
                    self._indexes[key] = None
                else:
                    self._indexes[key] = WorkspaceIndex(root)
            return self._indexes[key]

    def _libraries(self, root: Path, python: str | None) -> Any:
        """The installed packages discovery reads (never imports or runs): those of the
        interpreter that captures (``python``: chosen, or the folder's own environment;
        None: this server's)."""
        import sys
        import time

        from discovery import find_environment

        key = (str(root), python)
        now = time.monotonic()
        with self._lock:
            known = self._environments.get(key)
        if known is not None and now - known[0] < self.ENVIRONMENT_RECHECK_S:
            return known[1]
        env = find_environment(python=python or sys.executable)
        with self._lock:
            self._environments[key] = (now, env)
        if known is None or known[1] is not env:
            where = ", ".join(env.paths) if env is not None else f"nowhere (no site-packages found for {python or sys.executable})"
            log.info("discovery reads library bases for %s from %s", root, where)
        return env

    def discover(self, text: str, path: Path, root: Path | None, python: str | None = None) -> Discovered:
        from discovery import discover_source

        index = self._index(root)
        if index is not None and root is not None:
            index.set_libraries(self._libraries(root, python))
        result = discover_source(text, str(path), index=index) if index is not None else discover_source(text, str(path))
        discovered = adapt_discovery(result)
        if index is not None and not index.is_complete(str(path)):
            discovered.complete = False
        return discovered

    def index_changed(self, root: Path, path: Path, text: str | None) -> None:
        """``text``: an open buffer's content; None: the file on disk counts (again)."""
        index = self._index(root)
        if index is None:
            return
        if text is None:
            index.remove(str(path))
        else:
            index.update(str(path), text)

    # -- recipes ---------------------------------------------------------------
    def save_profile(self, root: Path, name: str, recipe: dict[str, Any]) -> list[dict[str, Any]]:
        from capture.recipe import Recipe, RecipeError

        from .recipes_store import RecipeStoreError, save_profile

        # A form's text (VALUE and STEP lines) is read before this, with the checks against
        # the source (features.viewer_setup.save_from_viewer through features.form_values).
        data = {k: v for k, v in recipe.items() if k != "name"}
        try:
            r = Recipe.from_dict({"name": name, **data})
        except RecipeError as exc:
            path = exc.key_path.replace(f"profiles.{name}.", "", 1) if exc.key_path else ""
            return [{"path": path, "message": exc.problem}]
        try:
            save_profile(root, r)
        except (RecipeStoreError, RecipeError, OSError) as exc:
            return [{"path": "", "message": str(exc)}]
        return []

    # -- captures ----------------------------------------------------------------
    def run_session(self, request: CaptureRequest) -> SessionResult:
        from capture.session import run_session

        return run_session(request)

    def warm_workers(self) -> WarmWorkers:
        return self._warm

    def changed_sources(self, capture: Capture, root: Path, open_buffers: dict[str, str]) -> list[str]:
        from capture.graph.freshness import stale_sources

        return [c.path for c in stale_sources(capture.sources, root, open_buffers)]

    # -- viewer ------------------------------------------------------------------
    def start_viewer(self, root: Path | None, hooks: ViewerHooks) -> Viewer:
        from viewer.server.app import ViewerServer

        def reveal(frame: Any) -> bool:
            return hooks.reveal(
                {"file": frame.file, "line": frame.line, "column": frame.column, "function": frame.function}
            )

        server = ViewerServer(
            workspace=root,
            reveal_handler=reveal,
            setup_provider=hooks.setup,
            save_profile=hooks.save_profile,
            start_capture=hooks.start_capture,
        )
        server.start()
        return server


def install_plan(failure: Failure, python: str) -> InstallPlan | None:
    """The reviewed install of a ``dependencies`` failure's missing packages into
    ``python`` (the capture's interpreter: never one the failure names), with the
    parent's command when it made one (pinning the installed Torch build); None for any
    other failure, an unsupported version included (nothing to add: an upgrade is the
    user's call). Only checked distribution names come through
    (:func:`capture.worker.protocol.missing_dependencies`)."""
    details = missing_dependencies(failure, python)
    if details is None:
        return None
    missing = details["missing"]
    command = details.get("install") or [python, "-m", "pip", "install", *missing]
    return InstallPlan(python, missing, command, details.get("pinned", []))


def adapt_discovery(result: FileResult) -> Discovered:
    """Discovery's :class:`~discovery.results.FileResult` → :class:`Discovered`."""
    candidates = [
        Candidate(
            name=c.name,
            qualname=c.qualname,
            kind=c.kind,
            framework=c.framework,
            name_range=_span(c.name_range),
            range=_span(c.range),
            inputs=[i.to_json() for i in c.call_inputs],
            setup_fields=[f.to_json() for f in c.setup_fields],
            preparations=[p.to_json() for p in c.preparations],
            call_method=c.call_method,
            call_defined_in=c.call_defined_in,
            setup_fields_complete=c.setup_fields_complete,
            reason=c.reason,
            model_factory=c.model_factory,
            library_state=list(c.library_state),
        )
        for c in result.candidates
    ]
    return Discovered(candidates, [e.message for e in result.errors], parsed=result.ok)


def _span(r: Range) -> Span:
    return Span(Pos(r.start.line, r.start.character), Pos(r.end.line, r.end.character))


# -- every problem of a profile -------------------------------------------------

_MAX_PROBLEMS = 50
_UNSET_MODEL = "tensorviz_unset:Unset"


def every_problem(text: str) -> list[RecipeIssue]:
    """All the problems of every profile (the validator stops at the first: each one
    found is set aside, the profile checked again, with ``text`` still giving lines)."""
    from capture.recipe import RecipeError, parse_profile

    from capture.recipe.parse import recipes_size_problem

    from .recipes_store import parsed_recipes, text_key

    too_big = recipes_size_problem(text)
    if too_big is not None:
        return [RecipeIssue(too_big, line=1)]
    key = text_key(text)
    with _problems_lock:
        known = _problems.get(key)
    if known is not None:
        return list(known)
    issues = _every_problem(text, parsed_recipes, parse_profile, RecipeError)
    with _problems_lock:
        _problems[key] = issues
        while len(_problems) > 4:
            _problems.pop(next(iter(_problems)))
    return list(issues)


_problems: dict[tuple[int, bytes], list[RecipeIssue]] = {}  # every_problem's answers by text, newest last
_problems_lock = threading.Lock()


def _every_problem(text: str, parsed_recipes: Any, parse_profile: Any, RecipeError: Any) -> list[RecipeIssue]:
    try:
        doc = parsed_recipes(text)
    except RecipeError as exc:
        return [RecipeIssue(exc.problem, line=exc.line, profile=exc.profile, path=exc.key_path or None)]
    issues = []
    for name, table in (doc.get("profiles") or {}).items():
        if not isinstance(table, dict):
            try:
                parse_profile(name, table, text=text)
            except RecipeError as exc:
                issues.append(RecipeIssue(exc.problem, line=exc.line, profile=exc.profile or name, path=exc.key_path or None))
            continue
        table = copy.deepcopy(table)
        seen: set[str] = set()
        for _ in range(_MAX_PROBLEMS):
            try:
                parse_profile(name, table, text=text)
                break
            except RecipeError as exc:
                if exc.key_path in seen:
                    break
                seen.add(exc.key_path)
                issues.append(RecipeIssue(exc.problem, line=exc.line, profile=exc.profile or name, path=exc.key_path or None))
                if not _set_aside(table, _segments(exc.key_path, name)):
                    break
    return issues


def _segments(key_path: str, profile: str) -> list[str | int] | None:
    from capture.recipe import split_key_path

    try:
        segs = split_key_path(key_path)
    except Exception:
        return None
    if segs[:2] != ["profiles", profile]:
        return None
    return segs[2:]


def _set_aside(table: dict[str, Any], segs: list[str | int] | None) -> bool:
    """Take the problem at ``segs`` out of ``table``; False when that cannot be done."""
    if not segs:
        return False
    if segs == ["model"]:
        table["model"] = _UNSET_MODEL
        return True
    if len(segs) >= 3 and segs[0] in ("init", "inputs") and segs[1] in ("args", "kwargs"):
        container = table.get(segs[0], {}).get(segs[1])
        try:
            container[segs[2]] = 0  # a valid (static) description in place of the bad one
        except (TypeError, IndexError, KeyError):
            return False
        return True
    node: Any = table
    for seg in segs[:-1]:
        try:
            node = node[seg]
        except (TypeError, IndexError, KeyError):
            return False
    if isinstance(node, dict) and segs[-1] in node:
        del node[segs[-1]]
        return True
    return False
