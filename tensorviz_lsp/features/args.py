"""Command arguments: small ``attrs`` classes structured by pygls' converter.

Editors pass ``workspace/executeCommand`` arguments as a list; TensorViz commands
take one object (``[{"uri": …, "symbol": …}]``) and also accept positional strings
where that is what a person would type (``:lsp-workspace-command`` in Helix).
"""

# No ``from __future__ import annotations``: cattrs structures on the real field types.
import json
from typing import Any, Callable, ClassVar, TypeVar

import attrs
import cattrs
from attrs.validators import min_len
from pygls.protocol import default_converter


from ..feature import ArgumentError  # noqa: F401  (what wiring.py says as one line)

# Every item of a list is a non-empty string (a list of package names).
_EACH_NONEMPTY: Callable[[Any, Any, Any], Any] = attrs.validators.deep_iterable(min_len(1))


def _exactly(kind: type):
    def structure(value: Any, _type: Any) -> Any:
        # cattrs would turn 5 into "5" and "ab" into ["a", "b"]: an editor that sends
        # those made a mistake the person should hear about.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise TypeError(f"expected {kind.__name__}, got {json.dumps(value, default=str)[:80]}")
        return value

    return structure


def _converter() -> cattrs.Converter:
    """A converter made as pygls makes the server's (not a ``copy()``: lsprotocol's hooks
    close over the converter they were registered on), strict about JSON's own types."""
    converter = default_converter()
    strict = {str: _exactly(str), bool: _exactly(bool)}
    strict_list = _exactly(list)
    strict[list[str]] = lambda value, t: [converter.structure(v, str) for v in strict_list(value, t)]
    # Hooks registered later win over lsprotocol's own, which coerce (``str(5)``).
    for kind, hook in strict.items():
        if isinstance(kind, type):
            converter.register_structure_hook(kind, hook)
        else:
            converter.register_structure_hook_func(lambda t, kind=kind: t == kind, hook)
        converter.register_structure_hook_func(
            lambda t, kind=kind: t == kind | None,
            lambda value, t, kind=kind: None if value is None else converter.structure(value, kind),
        )
    return converter


CONVERTER = _converter()

#: Other names a person may use for an argument: ``{"path": …}`` for selectInterpreter.
ALIASES = {"qualname": "symbol", "profile_name": "profile", "path": "python", "interpreter": "python"}

T = TypeVar("T", bound="CommandArgs")


class CommandArgs:
    """What every command's arguments share: how a list from the editor becomes one."""

    COMMAND: ClassVar[str]
    #: The order of positional strings (Helix), also named in the usage line.
    POSITIONAL: ClassVar[tuple[str, ...]]
    #: The one line for arguments that do not structure; None: what cattrs found.
    USAGE: ClassVar[str | None] = None

    @classmethod
    def parse(cls: type[T], args: list[Any]) -> T:
        obj = {ALIASES.get(k, k): v for k, v in _obj(args, cls.POSITIONAL, cls.COMMAND).items()}
        try:
            return CONVERTER.structure(obj, cls)  # keys it does not know are left out
        except cattrs.BaseValidationError as exc:
            problems = cattrs.transform_error(exc, format_exception=lambda e, _type: str(e) or "invalid value")
            raise ArgumentError(cls.USAGE or f"{cls.COMMAND}: {'; '.join(problems)}") from None


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


@attrs.define
class OpenGraphArgs(CommandArgs):
    """``tensorviz.openGraph``: ``{uri, symbol?, profile?}``."""

    uri: str = attrs.field(validator=min_len(1))
    symbol: str | None = None
    profile: str | None = None

    COMMAND = "tensorviz.openGraph"
    POSITIONAL = ("uri", "symbol", "profile")
    USAGE = "tensorviz.openGraph needs {uri, symbol}"


@attrs.define
class CaptureProfileArgs(CommandArgs):
    """``tensorviz.captureProfile``: ``{profile, folder?}``."""

    profile: str = attrs.field(validator=min_len(1))
    folder: str | None = None

    COMMAND = "tensorviz.captureProfile"
    POSITIONAL = ("profile", "folder")
    USAGE = "tensorviz.captureProfile needs a profile name"


@attrs.define
class FolderArgs(CommandArgs):
    """Commands about one workspace folder: ``{folder?, trusted?}`` (URI or path)."""

    folder: str | None = None
    trusted: bool = True

    COMMAND = "tensorviz.trustWorkspace"
    POSITIONAL = ("folder",)


@attrs.define
class SelectInterpreterArgs(CommandArgs):
    """``tensorviz.selectInterpreter``: ``{python?, folder?}`` (no python: choose)."""

    python: str | None = None
    folder: str | None = None

    COMMAND = "tensorviz.selectInterpreter"
    POSITIONAL = ("python", "folder")


@attrs.define
class InstallArgs(CommandArgs):
    """``tensorviz.installDependencies``: ``{folder?, packages?}``."""

    folder: str | None = None
    packages: list[str] | None = attrs.field(
        default=None, validator=attrs.validators.optional(_EACH_NONEMPTY)
    )

    COMMAND = "tensorviz.installDependencies"
    POSITIONAL = ("folder",)


@attrs.define
class ShowViewerArgs(CommandArgs):
    """``tensorviz.showViewer``: ``{profile?, folder?}`` (no profile: the last graph shown)."""

    profile: str | None = None
    folder: str | None = None

    COMMAND = "tensorviz.showViewer"
    POSITIONAL = ("profile", "folder")


@attrs.define
class CancelArgs(CommandArgs):
    """``tensorviz.cancelCapture``: ``{folder?, profile?}`` (no folder: every folder's)."""

    folder: str | None = None
    profile: str | None = None

    COMMAND = "tensorviz.cancelCapture"
    POSITIONAL = ("folder", "profile")
