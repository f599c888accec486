"""The steps every discovery of one file shares: reject cheaply, parse, find.

Both the standalone cache (:mod:`discovery.discover`) and the workspace index
(:mod:`discovery.workspace`) run a file through :func:`discover_text`; this module
depends on neither of them.
"""

from __future__ import annotations

from collections.abc import Callable

from .analysis import ModuleAnalysis
from .candidates import find_candidates
from .inheritance import Resolver
from .parsing import check_text
from .positions import Position, Range
from .prefilter import may_contain_candidates
from .results import DiscoveryError, FileResult


def discover_text(
    path: str,
    text: str | DiscoveryError,
    analysis_of: Callable[[str], ModuleAnalysis],
    resolver: Resolver,
    *,
    workspace: bool,
) -> FileResult:
    """The shared pipeline: reject cheaply, then parse (via ``analysis_of``), then find."""
    try:
        if isinstance(text, DiscoveryError):
            return FileResult(path, errors=(text,))
        if "\x00" in text:
            return FileResult(path, errors=(check_text(text),))  # type: ignore[arg-type]
        # Before the size check: a huge generated file that mentions no framework
        # is simply not a model file, not an error.
        if not may_contain_candidates(text, workspace=workspace):
            return FileResult(path)
        problem = check_text(text)
        if problem is not None:
            return FileResult(path, errors=(problem,))
        analysis = analysis_of(text)
        if analysis.error is not None:
            return FileResult(path, errors=(analysis.error,))
        return FileResult(path, tuple(find_candidates(analysis, resolver)))
    except Exception as exc:  # a discovery bug must not take the server down with it
        return FileResult(path, errors=(internal_error(exc),))


def not_text(value: object) -> DiscoveryError:
    """The error for something given as source text that is not a ``str``."""
    return DiscoveryError(
        "binary",
        f"expected source text (str), got {type(value).__name__}",
        Range.at(Position(0, 0)),
    )


def internal_error(exc: BaseException) -> DiscoveryError:
    return DiscoveryError(
        "internal_error",
        f"discovery failed: {type(exc).__name__}: {exc}",
        Range.at(Position(0, 0)),
    )
