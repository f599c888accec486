"""What the language server needs from discovery, recipes, the worker and the viewer.

The features talk to these narrow interfaces only; :class:`RealBackends` adapts the
real packages (``discovery``, ``capture``, ``viewer``, ``recipes_store``), and the
unit tests pass fakes. Every call here may block and is made off the event loop,
except ``profiles_in`` (a pure TOML read) and viewer publishing.
"""

from __future__ import annotations

import logging
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

log = logging.getLogger(__name__)

RECIPES_PATH = Path(".tensorviz") / "recipes.toml"


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
    """One symbol that can be opened as a graph (from discovery)."""

    name: str
    qualname: str
    kind: str  # jax_function | linen_module | nnx_module | torch_module
    framework: str  # jax | torch
    name_range: Span
    range: Span
    inputs: list[dict[str, Any]] = field(default_factory=list)
    setup_fields: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""


@dataclass
class Discovered:
    candidates: list[Candidate]
    errors: list[str] = field(default_factory=list)
    # False when the text could not be parsed (a user mid-edit): keep the last good result.
    parsed: bool = True


@dataclass
class RecipeIssue:
    message: str
    line: int | None = None  # 1-based, as TOML reports it
    profile: str | None = None
    path: str | None = None  # key path such as profiles.x.inputs.args[0].dtype


@dataclass
class CaptureJob:
    root: Path
    profile: str
    python: str
    timeout: float
    # Path -> text of open buffers, so the worker's saved-source check agrees with ours.
    open_buffers: dict[str, str] = field(default_factory=dict)
    cancel: threading.Event = field(default_factory=threading.Event)
    on_progress: Callable[[str, float | None], None] = lambda message, fraction: None
    trusted: bool = True


@dataclass
class InstallPlan:
    """The reviewed command that would add missing capture dependencies."""

    python: str
    missing: list[str]
    command: list[str]


class Viewer(Protocol):
    url: str

    def add_capture(self, capture: Any, *, title: str | None = None, root: Path | None = None) -> str: ...

    def capture_url(self, capture_id: str | None) -> str: ...

    def setup_url(self) -> str: ...

    def publish(self, event: str, data: dict[str, Any]) -> None: ...

    def stop(self) -> None: ...


@dataclass
class ViewerHooks:
    reveal: Callable[[dict[str, Any], str | None], dict[str, Any] | bool]
    setup: Callable[[], dict[str, Any] | None]
    save_profile: Callable[[str, dict[str, Any]], dict[str, Any]]
    start_capture: Callable[[str], dict[str, Any]]


class Backends(Protocol):
    def discover(self, text: str, path: Path, root: Path | None) -> Discovered: ...

    def index_changed(self, root: Path, path: Path, text: str | None) -> None: ...

    def recipe_issues(self, root: Path, text: str) -> list[RecipeIssue]: ...

    def save_profile(self, root: Path, name: str, recipe: dict[str, Any]) -> list[dict[str, Any]]: ...

    def run_capture(self, job: CaptureJob) -> Any: ...

    def changed_sources(self, capture: Any, root: Path, read: Callable[[Path], bytes | None]) -> list[str]: ...

    def install_plan(self, failure: Any, python: str) -> InstallPlan | None: ...

    def start_viewer(self, hooks: ViewerHooks) -> Viewer: ...


# ---------------------------------------------------------------------------- helpers


def profiles_in(text: str | None) -> dict[str, dict[str, Any]]:
    """``[profiles.NAME]`` tables of a recipes file, leniently (invalid → none)."""
    if not text:
        return {}
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}
    profiles = data.get("profiles")
    if not isinstance(profiles, dict):
        return {}
    return {k: v for k, v in profiles.items() if isinstance(v, dict)}


def module_name(root: Path, path: Path) -> str | None:
    """``pkg/mod.py`` under ``root`` → ``pkg.mod`` (``__init__`` dropped)."""
    try:
        rel = path.resolve().relative_to(root.resolve())
    except ValueError:
        return None
    parts = list(rel.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


def factory_modules(recipe: dict[str, Any]) -> list[str]:
    """Modules named by ``init.factory`` / ``inputs.factory`` (``mod:fn`` → ``mod``)."""
    out = []
    for key in ("init", "inputs"):
        section = recipe.get(key)
        if isinstance(section, dict) and isinstance(section.get("factory"), str):
            out.append(section["factory"].split(":", 1)[0])
    return out


def module_file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None
