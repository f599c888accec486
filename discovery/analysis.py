"""One file, parsed once: its text, trees and top-level bindings.

An analysis serves twice: to discover the file's own candidates, and to answer
other files' questions about the bases it defines or re-exports. Workspace
indexes keep them per file version.
"""

from __future__ import annotations

from dataclasses import dataclass

from .namespace import Namespace, build_namespace
from .parsing import ParsedSource, parse_source
from .results import DiscoveryError


@dataclass(slots=True)
class ModuleAnalysis:
    path: str
    text: str
    module_name: str | None  # dotted, when the file lies inside a workspace
    parsed: ParsedSource | None = None
    namespace: Namespace | None = None
    error: DiscoveryError | None = None
    # Read from an installed package (see ``libraries.py``), not from the workspace.
    library: bool = False


def analyse(
    path: str, text: str, module_name: str | None = None, is_package: bool = False
) -> ModuleAnalysis:
    parsed = parse_source(text)
    if isinstance(parsed, DiscoveryError):
        return ModuleAnalysis(path, text, module_name, error=parsed)
    namespace = build_namespace(parsed.module, module_name, is_package)
    return ModuleAnalysis(path, text, module_name, parsed, namespace)


def unparsed(path: str, text: str, module_name: str | None) -> ModuleAnalysis:
    """A file skipped before parsing: it binds nothing another file could use."""
    return ModuleAnalysis(path, text, module_name, namespace=Namespace(module_name, False))
