"""Command arguments: small typed classes read leniently from JSON.

Editors pass ``workspace/executeCommand`` arguments as a list; TensorViz commands
take one object (``[{"uri": …, "symbol": …}]``) and also accept positional strings
where that is what a person would type (``:lsp-workspace-command`` in Helix).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any


class ArgumentError(ValueError):
    pass


def _obj(args: list[Any], positional: tuple[str, ...], command: str) -> dict[str, Any]:
    # Helix's ``:lsp-workspace-command NAME REST`` sends REST parsed as JSON values:
    # ``"jax_example"`` → ["jax_example"], ``{"profile": "x"}`` → [{"profile": "x"}],
    # ``["jax_example"]`` → [["jax_example"]] (one list: its items are the arguments).
    if len(args) == 1 and isinstance(args[0], list):
        args = list(args[0])
    if not args:
        return {}
    if len(args) == 1 and isinstance(args[0], dict):
        return dict(args[0])
    if all(isinstance(a, (str, bool, int, float)) or a is None for a in args) and len(args) <= len(positional):
        return {k: v for k, v in zip(positional, args) if v is not None}
    forms = " or ".join(
        [f"one object {{{', '.join(positional)}}}"] + ([f"up to {len(positional)} strings"] if positional else [])
    )
    raise ArgumentError(f"{command} takes {forms}; got {json.dumps(args, default=str)[:200]}")


#: Other names a person may use for an argument: ``{"path": …}`` for selectInterpreter.
ALIASES = {"qualname": "symbol", "profile_name": "profile", "path": "python", "interpreter": "python"}


def _parse(cls, args: list[Any], positional: tuple[str, ...]):
    obj = _obj(args, positional, cls.COMMAND)
    names = {f.name: f for f in fields(cls)}
    aliases = ALIASES
    values = {}
    for key, value in obj.items():
        name = aliases.get(key, key)
        if name not in names:
            continue
        values[name] = value
    try:
        inst = cls(**values)
    except TypeError as exc:
        raise ArgumentError(f"{cls.COMMAND}: {exc}") from None
    inst.check()
    return inst


@dataclass
class OpenGraphArgs:
    """``tensorviz.openGraph``: ``{uri, symbol, profile?}``."""

    uri: str | None = None
    symbol: str | None = None
    profile: str | None = None

    COMMAND = "tensorviz.openGraph"
    POSITIONAL = ("uri", "symbol", "profile")

    def check(self) -> None:
        if not self.uri or not isinstance(self.uri, str):
            raise ArgumentError("tensorviz.openGraph needs {uri, symbol}")
        if self.symbol is not None and not isinstance(self.symbol, str):
            raise ArgumentError("symbol must be a string")

    @classmethod
    def parse(cls, args: list[Any]) -> "OpenGraphArgs":
        return _parse(cls, args, cls.POSITIONAL)


@dataclass
class CaptureProfileArgs:
    """``tensorviz.captureProfile``: ``{profile, folder?}``."""

    profile: str | None = None
    folder: str | None = None

    COMMAND = "tensorviz.captureProfile"
    POSITIONAL = ("profile", "folder")

    def check(self) -> None:
        if not self.profile or not isinstance(self.profile, str):
            raise ArgumentError("tensorviz.captureProfile needs a profile name")

    @classmethod
    def parse(cls, args: list[Any]) -> "CaptureProfileArgs":
        return _parse(cls, args, cls.POSITIONAL)


@dataclass
class FolderArgs:
    """Commands about one workspace folder: ``{folder?}`` (URI or path)."""

    folder: str | None = None
    trusted: bool = True

    COMMAND = "tensorviz.trustWorkspace"
    POSITIONAL = ("folder",)

    def check(self) -> None:
        if self.folder is not None and not isinstance(self.folder, str):
            raise ArgumentError("folder must be a URI or a path")
        if not isinstance(self.trusted, bool):
            raise ArgumentError("trusted must be true or false")

    @classmethod
    def parse(cls, args: list[Any]) -> "FolderArgs":
        return _parse(cls, args, cls.POSITIONAL)


@dataclass
class SelectInterpreterArgs:
    """``tensorviz.selectInterpreter``: ``{python?, folder?}`` (no python: choose)."""

    python: str | None = None
    folder: str | None = None

    COMMAND = "tensorviz.selectInterpreter"
    POSITIONAL = ("python", "folder")

    def check(self) -> None:
        for v in (self.python, self.folder):
            if v is not None and not isinstance(v, str):
                raise ArgumentError("python and folder must be strings")

    @classmethod
    def parse(cls, args: list[Any]) -> "SelectInterpreterArgs":
        return _parse(cls, args, cls.POSITIONAL)


@dataclass
class InstallArgs:
    """``tensorviz.installDependencies``: ``{folder?, packages?}``."""

    folder: str | None = None
    packages: list[str] | None = None

    COMMAND = "tensorviz.installDependencies"
    POSITIONAL = ("folder",)

    def check(self) -> None:
        if self.packages is not None and not (
            isinstance(self.packages, list) and all(isinstance(p, str) and p for p in self.packages)
        ):
            raise ArgumentError("packages must be a list of package names")

    @classmethod
    def parse(cls, args: list[Any]) -> "InstallArgs":
        return _parse(cls, args, cls.POSITIONAL)


@dataclass
class ShowViewerArgs:
    """``tensorviz.showViewer``: ``{profile?, folder?}`` (no profile: the last graph shown)."""

    profile: str | None = None
    folder: str | None = None

    COMMAND = "tensorviz.showViewer"
    POSITIONAL = ("profile", "folder")

    def check(self) -> None:
        for v in (self.profile, self.folder):
            if v is not None and not isinstance(v, str):
                raise ArgumentError("tensorviz.showViewer: profile and folder must be strings")

    @classmethod
    def parse(cls, args: list[Any]) -> "ShowViewerArgs":
        return _parse(cls, args, cls.POSITIONAL)
