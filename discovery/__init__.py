"""Import-free discovery (libcst) of what can be opened as a graph.

Reads source text only: never imports user code, JAX, Flax, Torch or pygls.

    result = discover_source(text, "model.py")
    index = WorkspaceIndex(root); index.discover(path)   # follows bases across files
    index = WorkspaceIndex(root, find_environment(root, python))  # …and into installed packages
"""

from .discover import discover_source
from .libraries import LibraryEnvironment, find_environment
from .positions import Position, Range
from .results import (
    CallInput,
    Candidate,
    CandidateKind,
    ConfigClass,
    DiscoveryError,
    FileResult,
    Framework,
    ParameterDefault,
    SetupField,
    TokenInput,
)
from .workspace import WorkspaceIndex

__all__ = [
    "CallInput",
    "Candidate",
    "CandidateKind",
    "ConfigClass",
    "DiscoveryError",
    "FileResult",
    "Framework",
    "LibraryEnvironment",
    "ParameterDefault",
    "Position",
    "Range",
    "SetupField",
    "TokenInput",
    "WorkspaceIndex",
    "discover_source",
    "find_environment",
]
