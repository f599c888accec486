"""Typed settings: ``initializationOptions``, then per-folder ``workspace/configuration``.

Keys live under the ``tensorviz`` section (``{"tensorviz": {"python": ...}}``); a
client may also send the section's content directly as initializationOptions.
Each value is checked against its type: a bad value is logged and the default
used, so one typo never disables the server.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from capture.session.checks import workspace_python

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


def setting(
    default: Any = None, *, key: str, parse: Callable[[Any], Any], schema: dict[str, Any], doc: str,
    shown_default: str | None = None, scope: str = "resource", factory: Callable[[], Any] | None = None,
) -> Any:
    """A :class:`Settings` field, described once: ``key`` under ``tensorviz``; ``parse``
    checks a client's value; ``schema`` is its JSON schema in the VS Code extension's
    configuration (``editors/vscode/package.json``); ``doc`` (Markdown) is what the
    settings table of ``docs/editors.md`` and the extension's description say;
    ``shown_default`` is the table's default when the value itself says too little.
    Both files are generated from these fields (``python -m tensorviz_lsp.settings``)."""
    metadata = {"key": key, "parse": parse, "schema": schema, "doc": doc, "shown_default": shown_default, "scope": scope}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Settings:
    """Settings for one workspace folder (camelCase keys in the client's config)."""

    python: str | None = setting(
        None, key="python", parse=_opt_str, schema={"type": ["string", "null"]},
        shown_default="the folder's own environment (`.venv`, else `venv`), else the server's Python",
        doc="interpreter that runs captures (path, relative to the folder, `~`, or a name on `PATH`)",
    )
    capture_timeout: float = setting(
        120.0, key="captureTimeout", parse=_pos_float, schema={"type": "number", "exclusiveMinimum": 0},
        doc="seconds before a capture's worker process group is killed",
    )
    capture_memory_mb: float = setting(
        0.0, key="captureMemoryMB", parse=_nonneg_float, schema={"type": "number", "minimum": 0},
        doc="memory limit for the capture in MiB: each of its processes' private memory (`RLIMIT_DATA`: heap "
            "and private mappings), and the shared memory they map together (`MAP_SHARED`, `/dev/shm`, memfd, "
            "checked every 50 ms); `0`: none; running out is a `MemoryError` failure naming the limit",
    )
    max_saved_file_mb: float = setting(
        4096.0, key="maxSavedFileMB", parse=_pos_float, schema={"type": "number", "exclusiveMinimum": 0},
        doc="the largest checkpoint or fixture file (Torch `init.checkpoint` / `inputs.fixture`) a capture loads, "
            "in MiB; larger ones fail with their size and this limit",
    )
    lens_debounce_ms: int = setting(
        150, key="lensDebounceMs", parse=_nonneg_int, schema={"type": "integer", "minimum": 0},
        doc="quiet time after typing before lenses are recomputed",
    )
    install_command: list[str] | None = setting(
        None, key="installCommand", parse=_opt_argv,
        schema={"type": ["array", "null"], "items": {"type": "string"}}, scope="machine-overridable",
        shown_default="pip in the selected Python",
        doc="replaces the reviewed install command; `{python}` and an item `{packages}` are substituted; you still "
            "see and accept the exact command",
    )
    history_captures: int = setting(
        10, key="historyCaptures", parse=_pos_int, schema={"type": "integer", "minimum": 1},
        doc="captures of each profile kept in `.tensorviz/captures/history/` (the viewer's diff against the "
            "previous capture reads them)",
    )
    history_bytes: int = setting(
        256 << 20, key="historyBytes", parse=_nonneg_int, schema={"type": "integer", "minimum": 0},
        doc="bytes of history kept per profile (256 MiB); the newest two captures are always kept",
    )
    capture_env: dict[str, str] = setting(
        key="captureEnv", parse=_env_map, factory=dict,
        schema={"type": "object", "additionalProperties": {"type": "string"}},
        doc="environment variables for the capture worker, a mapping of names to string values, e.g. "
            "`{ \"CUDA_VISIBLE_DEVICES\": \"\" }` (for 64-bit JAX inputs see docs/editors.md); added to the server's own environment; a mapping with a bad name "
            "or a non-string value is logged and ignored as a whole",
    )
    recapture_on_save: bool = setting(
        False, key="recaptureOnSave", parse=_bool, schema={"type": "boolean"},
        doc="when a saved file is a source of a graph captured in this session (or saving "
            "`.tensorviz/recipes.toml` changes that graph's profile), capture it again in the background, with "
            "progress in the editor; see below",
    )
    follow_cursor: bool = setting(
        False, key="followCursor", parse=_bool, schema={"type": "boolean"},
        doc="the open viewer page outlines the nodes of the cursor's line (read from "
            "`textDocument/documentHighlight`; see above)",
    )
    inlay_hints: bool = setting(
        True, key="inlayHints", parse=_bool, schema={"type": "boolean"},
        doc="inlay hints with the shapes each captured line produced (see above); the editor's own inlay-hint "
            "display must be on too",
    )
    warm_worker_idle_seconds: float = setting(
        600.0, key="warmWorkerIdleSeconds", parse=_nonneg_float, schema={"type": "number", "minimum": 0},
        doc="how long the folder's warm capture worker (frameworks and the last capture's libraries already "
            "imported) waits for the next capture before it is stopped; `0`: no warm worker, every capture "
            "starts a new process",
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


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
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
    # ".venv" or "venv" (the folder's own environment), or "server" (the interpreter
    # running this server).
    origin: str
    exists: bool = True

    def describe(self) -> str:
        suffix = "" if self.exists else ", not found"
        return f"{self.path} ({self.origin}{suffix})"


def resolve_interpreter(
    root: Path | None, settings: Settings, selected: str | None = None
) -> Interpreter:
    """The selected capture interpreter for a folder (never imports or runs it)."""
    for origin, value in (("selected", selected), ("setting", settings.python)):
        if value:
            path = resolve_path(value, root)
            return Interpreter(str(path), origin, _is_executable(path))
    venv = workspace_python(root) if root is not None else None
    if root is not None and venv is not None:
        return Interpreter(str(venv), venv.relative_to(root.absolute()).parts[0], True)
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


# -- the files generated from the fields above ------------------------------------------


@dataclass(frozen=True)
class ClientSetting:
    """A setting only the VS Code extension reads (the server never sees it)."""

    key: str
    default: Any
    schema: dict[str, Any]
    doc: str
    scope: str


#: The VS Code extension's own settings, listed in its configuration with the server's.
CLIENT_SETTINGS = (
    ClientSetting(
        "server.command", ["tensorviz", "lsp"], {"type": "array", "items": {"type": "string"}},
        "How to start the language server (the program and its arguments), e.g. "
        '`["/path/to/venv/bin/python", "-P", "-m", "tensorviz_lsp", "lsp"]` (`-P` keeps the workspace off '
        "the server's module path; the server refuses to start when a workspace file would shadow one of its "
        "modules).",
        "machine-overridable",
    ),
    ClientSetting(
        "viewer.openIn", "editor",
        {"type": "string", "enum": ["editor", "browser"], "enumDescriptions": [
            "In an editor tab beside the source (a webview framing the loopback viewer)",
            "In the default web browser",
        ]},
        "Where a graph opens. Either way go-to-source from the graph lands in this window; the command "
        '"TensorViz: Open Viewer in Browser" opens the last graph in the browser too.',
        "window",
    ),
)

PACKAGE_JSON = Path("editors") / "vscode" / "package.json"
EDITORS_MD = Path("docs") / "editors.md"
TABLE_START = "<!-- settings table: generated from tensorviz_lsp/settings.py (python -m tensorviz_lsp.settings) -->"
TABLE_END = "<!-- end of the generated settings table -->"


def _json_default(f: dataclasses.Field[Any]) -> Any:
    """The default as a person writes it (``120``, not ``120.0``)."""
    value = _default(f)
    return int(value) if isinstance(value, float) and value.is_integer() else value


def vscode_configuration() -> dict[str, Any]:
    """``contributes.configuration`` of the VS Code extension."""
    properties: dict[str, Any] = {}
    for c in CLIENT_SETTINGS:
        properties[f"{SECTION}.{c.key}"] = {**c.schema, "default": c.default, "markdownDescription": c.doc,
                                            "scope": c.scope}
    for f in dataclasses.fields(Settings):
        doc = f.metadata["doc"][0].upper() + f.metadata["doc"][1:] + "."
        if f.metadata["shown_default"]:
            doc += f" Default: {f.metadata['shown_default']}."
        properties[f"{SECTION}.{f.metadata['key']}"] = {
            **f.metadata["schema"], "default": _json_default(f), "markdownDescription": doc,
            "scope": f.metadata["scope"],
        }
    return {"title": "TensorViz", "properties": properties}


def settings_table() -> str:
    """The settings table of ``docs/editors.md``, between its markers."""
    rows = [TABLE_START, "| key | default | meaning |", "| --- | --- | --- |"]
    for f in dataclasses.fields(Settings):
        shown = f.metadata["shown_default"] or f"`{json.dumps(_json_default(f))}`"
        rows.append(f"| `{f.metadata['key']}` | {shown} | {f.metadata['doc']} |")
    rows.append(TABLE_END)
    return "\n".join(rows)


def generated(root: Path) -> dict[Path, str]:
    """Each generated file's text as it should be (the rest of each file kept)."""
    package = json.loads((root / PACKAGE_JSON).read_text(encoding="utf-8"))
    package["contributes"]["configuration"] = vscode_configuration()
    doc = (root / EDITORS_MD).read_text(encoding="utf-8")
    start, end = doc.index(TABLE_START), doc.index(TABLE_END) + len(TABLE_END)
    return {
        root / PACKAGE_JSON: json.dumps(package, indent=2, ensure_ascii=False) + "\n",
        root / EDITORS_MD: doc[:start] + settings_table() + doc[end:],
    }


def main() -> int:
    """Rewrite the generated files of the checkout this module belongs to."""
    root = Path(__file__).resolve().parents[1]
    for path, text in generated(root).items():
        if path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(root)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
