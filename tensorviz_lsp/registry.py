"""The registry of the language server's parts: each feature module declares its own
(``@register`` on the class), and ``tensorviz_lsp/wiring.py`` makes every registered
class once, giving its constructor what its annotations name. A part is a
:class:`~tensorviz_lsp.feature.Feature` (it implements hooks) or a class features share
(the registry of captures, :class:`~tensorviz_lsp.records.CaptureRecords`)."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T", bound=type)

_REGISTERED: dict[str, type] = {}


def register(cls: T) -> T:
    """Declare a class the language server makes once (a :class:`Feature`, or a part
    features share, such as the registry of captures): ``@register`` in its module. Its
    constructor's annotated parameters say what it is given."""
    name = part_name(cls)
    known = _REGISTERED.get(name)
    if known is not None and known is not cls:
        raise ValueError(f"two parts of the language server are named {name!r}: "
                         f"{known.__module__}.{known.__qualname__} and {cls.__module__}.{cls.__qualname__}")
    _REGISTERED[name] = cls
    return cls


def unregister(cls: type) -> None:
    """Forget a registration (a test's own feature, when the test ends)."""
    if _REGISTERED.get(part_name(cls)) is cls:
        del _REGISTERED[part_name(cls)]


def registered() -> list[type]:
    """Every registered class, by name."""
    return [_REGISTERED[name] for name in sorted(_REGISTERED)]


def part_name(cls: type) -> str:
    """A feature's ``name``, else the class's own name."""
    name = cls.__dict__.get("name") if isinstance(cls.__dict__.get("name"), str) else None
    return name or cls.__name__


