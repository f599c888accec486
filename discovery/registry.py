"""The frameworks' declarations, as discovery reads them: handed in, never imported.

Discovery imports only the standard library and libcst (docs/architecture.md). Which base
classes make a candidate, and which framework a candidate kind belongs to, are each
framework plug-in's own declaration (:mod:`capture.frameworks`); the front end that runs
discovery hands that registry in once, with :func:`use_frameworks` (``tensorviz_lsp``
does it when it is imported, for the CLI and the language server alike). Discovery asks
it through :func:`frameworks`; run before anything handed one in, it says so.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol


class FrameworkRegistry(Protocol):
    """What discovery asks of the frameworks' registry (``capture.frameworks`` is one)."""

    TEST_PLUGINS_ENV: str

    def framework_names(self) -> tuple[str, ...]: ...

    def candidate_kinds(self) -> Mapping[str, tuple[str, Any]]: ...

    def framework_of_kind(self, kind: str) -> str | None: ...


_registry: FrameworkRegistry | None = None


def use_frameworks(registry: FrameworkRegistry) -> None:
    """Discovery reads ``registry``'s declarations from now on."""
    global _registry
    _registry = registry


def frameworks() -> FrameworkRegistry:
    """The registry handed in (RuntimeError, naming the fix, when none was)."""
    if _registry is None:
        raise RuntimeError("discovery has no frameworks' registry: import tensorviz_lsp, or call "
                           "discovery.registry.use_frameworks(capture.frameworks) first")
    return _registry
