"""Typed settings: ``initializationOptions``, then per-folder ``workspace/configuration``.

Keys live under the ``tensorviz`` section (``{"tensorviz": {"python": ...}}``); a
client may also send the section's content directly as initializationOptions.
Each value is checked against its type: a bad value is logged and the default
used, so one typo never disables the server.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger(__name__)

SECTION = "tensorviz"


def _opt_str(v: Any) -> str | None:
    if v is None or v == "":
        return None
    if isinstance(v, str):
        return v
    raise TypeError("expected a string")


def _pos_float(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise TypeError("expected a positive number")
    return float(v)


def _nonneg_int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise TypeError("expected a non-negative integer")
    return v


def _pos_int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise TypeError("expected a positive integer")
    return v


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError("expected true or false")
    return v


def _nonneg_float(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        raise TypeError("expected a non-negative number")
    return float(v)


def _opt_argv(v: Any) -> list[str] | None:
    if v is None:
        return None
    if isinstance(v, list) and v and all(isinstance(x, str) and x for x in v):
        return list(v)
    raise TypeError("expected a non-empty list of strings")


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _env_map(v: Any) -> dict[str, str]:
    """``{"JAX_ENABLE_X64": "1"}``: variable names to string values (integers are
    written as text); anything else rejects the whole mapping."""
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise TypeError("expected a mapping of environment variable names to string values")
    out: dict[str, str] = {}
    for name, value in v.items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not an environment variable name")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise TypeError(f"{name}: expected a string value such as \"1\", not {value!r}")
        text = str(value)
        if "\x00" in text:
            raise ValueError(f"{name}: the value contains a NUL character")
        out[name] = text
    return out


@dataclass(frozen=True)
class Settings:
    """Settings for one workspace folder (camelCase keys in the client's config)."""

    # ``tensorviz.python``: the interpreter that runs captures (path, relative to the
    # folder, ``~`` or a name on PATH). Unset: the folder's ``.venv``, else the server's.
    python: str | None = field(default=None, metadata={"key": "python", "parse": _opt_str})
    # ``tensorviz.captureTimeout``: seconds before the worker's process group is killed.
    capture_timeout: float = field(default=120.0, metadata={"key": "captureTimeout", "parse": _pos_float})
    # ``tensorviz.maxSavedFileMB``: the largest checkpoint or fixture file (Torch
    # ``init.checkpoint`` / ``inputs.fixture``) a capture loads, in MiB.
    max_saved_file_mb: float = field(default=4096.0, metadata={"key": "maxSavedFileMB", "parse": _pos_float})
    # ``tensorviz.captureMemoryMB``: the capture worker's memory limit in MiB; 0 (the
    # default): none. Running out is reported as a MemoryError failure naming the limit.
    capture_memory_mb: float = field(default=0.0, metadata={"key": "captureMemoryMB", "parse": _nonneg_float})
    # ``tensorviz.lensDebounceMs``: quiet time after typing before lenses are recomputed.
    lens_debounce_ms: int = field(default=150, metadata={"key": "lensDebounceMs", "parse": _nonneg_int})
    # ``tensorviz.installCommand``: replaces the reviewed install command; ``{python}``
    # becomes the interpreter and an item ``{packages}`` the package list. The user
    # still sees and accepts the exact resulting command.
    install_command: list[str] | None = field(
        default=None, metadata={"key": "installCommand", "parse": _opt_argv}
    )
    # ``tensorviz.captureEnv``: extra environment variables for the capture worker (on
    # top of the server's own environment), e.g. ``{"JAX_ENABLE_X64": "1"}``, which
    # 64-bit JAX input descriptions require.
    capture_env: dict[str, str] = field(
        default_factory=dict, metadata={"key": "captureEnv", "parse": _env_map}
    )
    # ``tensorviz.historyCaptures`` / ``tensorviz.historyBytes``: how many captures of each
    # profile ``.tensorviz/captures/history/`` keeps, and how many bytes at most (the newest
    # two are always kept, so a diff against the previous capture has something to compare).
    history_captures: int = field(default=10, metadata={"key": "historyCaptures", "parse": _pos_int})
    history_bytes: int = field(default=256 << 20, metadata={"key": "historyBytes", "parse": _nonneg_int})
    # ``tensorviz.recaptureOnSave``: when a saved file is a source of a graph captured in
    # this session (or the recipes file changes its profile), capture it again in the
    # background; the viewer tab updates in place.
    recapture_on_save: bool = field(default=False, metadata={"key": "recaptureOnSave", "parse": _bool})
    # ``tensorviz.followCursor``: the open viewer page outlines the nodes of the line the
    # editor's cursor is on (read from ``textDocument/documentHighlight``; debounced, never
    # a capture, never a new tab).
    follow_cursor: bool = field(default=False, metadata={"key": "followCursor", "parse": _bool})
    # ``tensorviz.inlayHints``: shapes (dtype and dims) of what each captured line produced,
    # shown at the end of the line (``textDocument/inlayHint``), with measured statistics
    # (Torch) in their tooltip; the editor's own inlay-hint switch must be on too.
    inlay_hints: bool = field(default=True, metadata={"key": "inlayHints", "parse": _bool})
    # ``tensorviz.warmWorkerIdleSeconds``: how long the folder's warm capture worker
    # (frameworks already imported) waits for the next capture before it is stopped;
    # 0: no warm worker (every capture starts a new one).
    warm_worker_idle_seconds: float = field(
        default=600.0, metadata={"key": "warmWorkerIdleSeconds", "parse": _nonneg_float}
    )

    @classmethod
    def from_config(cls, *layers: Any, where: str = "settings", warn: Callable[[str], None] | None = None) -> "Settings":
        """Merge config dicts (later layers win); bad values → default + warning."""
        warn = warn or log.warning
        values: dict[str, Any] = {}
        for layer in layers:
            section = _section(layer)
            if section is None:
                continue
            for f in dataclasses.fields(cls):
                key = f.metadata["key"]
                if key not in section:
                    continue
                try:
                    values[f.name] = f.metadata["parse"](section[key])
                except (TypeError, ValueError) as exc:
                    warn(f"{where}: {SECTION}.{key} = {section[key]!r} ignored ({exc}); using the default {_default(f)!r}")
                    values.pop(f.name, None)
        return cls(**values)


def _default(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None if f.default is dataclasses.MISSING else f.default


def _section(layer: Any) -> dict[str, Any] | None:
    if not isinstance(layer, dict):
        return None
    inner = layer.get(SECTION)
    if isinstance(inner, dict):
        return inner
    # A client may send the section's content itself (``{"python": …}``).
    known = {f.metadata["key"] for f in dataclasses.fields(Settings)}
    if known & layer.keys():
        return layer
    return None


@dataclass(frozen=True)
class Interpreter:
    path: str
    # Where it came from: "selected" (the select-interpreter command), "setting",
    # ".venv", or "server" (the interpreter running this server).
    origin: str
    exists: bool = True

    def describe(self) -> str:
        suffix = "" if self.exists else ", not found"
        return f"{self.path} ({self.origin}{suffix})"


def venv_python(root: Path) -> Path | None:
    for rel in (".venv/bin/python", ".venv/Scripts/python.exe"):
        p = root / rel
        if p.exists():
            return p
    return None


def resolve_interpreter(
    root: Path | None, settings: Settings, selected: str | None = None
) -> Interpreter:
    """The selected capture interpreter for a folder (never imports or runs it)."""
    for origin, value in (("selected", selected), ("setting", settings.python)):
        if value:
            path = resolve_path(value, root)
            return Interpreter(str(path), origin, _is_executable(path))
    if root is not None:
        venv = venv_python(root)
        if venv is not None:
            # Not resolved: a venv's python is a symlink to the base interpreter,
            # and resolving it would lose the venv's site-packages.
            return Interpreter(str(venv.absolute()), ".venv", True)
    return Interpreter(sys.executable, "server", True)


def resolve_path(value: str, root: Path | None) -> Path:
    expanded = Path(os.path.expanduser(value))
    if expanded.is_absolute():
        return expanded
    if os.sep not in value and "/" not in value:
        found = shutil.which(value)
        if found:
            return Path(found)
    return (root or Path.cwd()) / expanded


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)
