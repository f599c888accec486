"""The shape every language-server feature has (esbonio's pattern), and every hook,
declared once with how the results of several features combine (python-lsp-server's
``pylsp/hookspecs.py``).

A feature is a class with lifecycle, document and request hooks, in a module of
``tensorviz_lsp/features/`` that declares it with ``@register`` (:mod:`tensorviz_lsp.registry`). ``tensorviz_lsp/wiring.py``
imports every module of that folder, makes each registered class once, giving its
constructor what its annotations name (the :class:`~tensorviz_lsp.host.Host`, the
``Backends``, the ``TrustStore``, other registered classes), registers each LSP method
once and fans each call out to the features that implement its hook
(:class:`~tensorviz_lsp.hooks.HookTable`); an exception in one feature is logged and the
others keep working. Hooks may be plain functions or coroutines.

The hooks are the methods of :class:`Feature` below marked ``@hookspec(...)``, and no
others. A feature implements one by overriding it, marked ``@hook``; at startup a
``@hook`` method whose name no hookspec declares, and an override of a hookspec left
unmarked, are refused, naming the feature and the method. Callers name a hook by its
declaration, never by a string: ``await self.server.call_hook(Feature.capture_landed,
record)`` (a type checker checks the arguments against the declaration).

Order: the features that implement a hook hear it after the features they were given
(their constructor's), the others by name; an implementation that must come after a
feature it was not given says so where it is written: ``@hook(after=(Lenses,))``.
Construction order plays no part.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, TypeVar, overload

from lsprotocol import types

from .host import Host
from .records import Record

CommandHandler = Callable[[list[Any]], Awaitable[Any] | Any]


class ArgumentError(ValueError):
    """A command's argument is wrong (``tensorviz_lsp.features.args``): said to the user
    as one clear line."""

F = TypeVar("F", bound=Callable[..., Any])

#: The attribute a hookspec carries its rule in, and an implementation its mark.
SPEC_MARK = "__tensorviz_hookspec__"
IMPL_MARK = "__tensorviz_hook__"


class Combine(enum.Enum):
    """How the results of the features that implement a hook combine."""

    #: Every implementation runs, in order; the call returns None.
    EVENT = "event"
    #: Every implementation's list (None adds nothing), concatenated in order.
    CONCAT = "concat"
    #: The first answer that is not None; the implementations after it are not asked.
    FIRST = "first"


def hookspec(combine: Combine) -> Callable[[F], F]:
    """Declare the method a hook (only :class:`Feature` declares hooks)."""

    def declare(fn: F) -> F:
        setattr(fn, SPEC_MARK, combine)
        return fn

    return declare


@dataclass(frozen=True)
class HookImpl:
    """How a feature's implementation of a hook is ordered: ``after`` the
    implementations of these features (they implement the same hook)."""

    after: tuple[type[Feature], ...] = ()


@overload
def hook(fn: F, /) -> F: ...


@overload
def hook(*, after: tuple[type[Feature], ...] = ()) -> Callable[[F], F]: ...


def hook(fn: Callable[..., Any] | None = None, /, *, after: tuple[type[Feature], ...] = ()) -> Any:
    """Mark a feature's method as its implementation of the hook of the same name
    (``@hook``, or ``@hook(after=(OtherFeature,))``)."""

    def mark(f: F) -> F:
        setattr(f, IMPL_MARK, HookImpl(tuple(after)))
        return f

    return mark(fn) if fn is not None else mark


class Feature:
    """Base class; override (``@hook``) only the hooks a feature needs."""

    #: Shown in logs when a hook fails; orders features that depend on nothing between them.
    name: str = "feature"

    def __init__(self, server: Host) -> None:
        self.server = server

    # -- lifecycle ------------------------------------------------------------
    @hookspec(Combine.EVENT)
    def initialized(self) -> Awaitable[None] | None:
        """The client finished initialising; settings and folders are known."""

    @hookspec(Combine.EVENT)
    def shutdown(self) -> Awaitable[None] | None:
        """Stop everything this feature started (workers, servers, timers)."""

    @hookspec(Combine.EVENT)
    def settings_changed(self) -> Awaitable[None] | None:
        """Settings were (re)loaded for some folder."""

    @hookspec(Combine.EVENT)
    def folders_changed(self, added: list[str], removed: list[str]) -> Awaitable[None] | None:
        """Workspace folders (paths) were added or removed."""

    # -- documents --------------------------------------------------------------
    @hookspec(Combine.EVENT)
    def document_opened(self, uri: str) -> Awaitable[None] | None:
        """``textDocument/didOpen``."""

    @hookspec(Combine.EVENT)
    def document_changed(self, uri: str) -> Awaitable[None] | None:
        """``textDocument/didChange``."""

    @hookspec(Combine.EVENT)
    def document_saved(self, uri: str) -> Awaitable[None] | None:
        """``textDocument/didSave``."""

    @hookspec(Combine.EVENT)
    def document_closed(self, uri: str) -> Awaitable[None] | None:
        """``textDocument/didClose``."""

    @hookspec(Combine.EVENT)
    def files_changed(self, changes: list[types.FileEvent]) -> Awaitable[None] | None:
        """``workspace/didChangeWatchedFiles`` (files changed on disk)."""

    @hookspec(Combine.EVENT)
    def cursor_notified(self, params: Any) -> Awaitable[None] | None:
        """``tensorviz/cursor {uri, line}`` (line 0-based): a client that reports the
        cursor itself (the VS Code extension, on every selection change)."""

    # -- events features raise for each other ---------------------------------------
    @hookspec(Combine.EVENT)
    def capture_landed(self, record: Record) -> Awaitable[None] | None:
        """A capture succeeded and its record is in place, its captured texts
        snapshotted (called on the loop)."""

    @hookspec(Combine.EVENT)
    def interpreter_changed(self) -> Awaitable[None] | None:
        """A folder's capture interpreter was chosen again (``tensorviz.selectInterpreter``)."""

    @hookspec(Combine.EVENT)
    def workspace_trusted(self, root: Path) -> Awaitable[None] | None:
        """The user trusted the folder ``root`` (the command, or the prompt)."""

    @hookspec(Combine.EVENT)
    def capture_failed(self, target: Any, files: set[Path]) -> Awaitable[None] | None:
        """A capture of ``target`` (a ``CaptureTarget``) failed after it ran (not a
        refusal, not a cancel); ``files``: what it depends on (a change may fix it)."""

    # -- requests -------------------------------------------------------------------
    @hookspec(Combine.CONCAT)
    def code_lens(self, params: types.CodeLensParams) -> Any:
        """Lenses on the document."""
        return None

    @hookspec(Combine.CONCAT)
    def code_action(self, params: types.CodeActionParams) -> Any:
        """Actions for the range."""
        return None

    @hookspec(Combine.FIRST)
    def hover(self, params: types.HoverParams) -> Any:
        """The hover at the position."""
        return None

    @hookspec(Combine.CONCAT)
    def document_symbol(self, params: types.DocumentSymbolParams) -> Any:
        """The document's symbols."""
        return None

    @hookspec(Combine.CONCAT)
    def document_highlight(self, params: types.DocumentHighlightParams) -> Any:
        """Highlights at the position (also: where the cursor is, for the viewer)."""
        return None

    @hookspec(Combine.CONCAT)
    def inlay_hint(self, params: types.InlayHintParams) -> Any:
        """Inlay hints of the range."""
        return None

    @hookspec(Combine.FIRST)
    def inlay_hint_resolve(self, hint: types.InlayHint) -> Any:
        """The hint, completed (None: not this feature's)."""
        return None

    # -- commands (not a hook: read once, at startup; a name twice is refused) ------------
    def commands(self) -> dict[str, CommandHandler]:
        """``workspace/executeCommand`` names this feature handles."""
        return {}


#: Every declared hook, by name, with its declaration (the function of :class:`Feature`).
HOOKSPECS: dict[str, Callable[..., Any]] = {
    name: member for name, member in vars(Feature).items() if hasattr(member, SPEC_MARK)
}


def combine_of(declaration: Callable[..., Any]) -> Combine:
    """The rule a hook's declaration carries."""
    rule = getattr(declaration, SPEC_MARK)
    assert isinstance(rule, Combine)
    return rule
