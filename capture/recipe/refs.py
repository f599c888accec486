"""Model and factory refs: which module and qualname a recipe names, and where it is.

A ref is ``"pkg.module:Qual.name"`` (dotted) or ``"dir/06_file.py:Qual.name"`` (a
workspace-relative path); these functions tell the two apart, check the path form, and
find the workspace file a ref names (:func:`module_file`, :func:`path_ref_file`), or the
ref to save for a symbol in a file (:func:`model_ref_for`). Part of :mod:`capture.recipe`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_DRIVE = re.compile(r"^[A-Za-z]:[/\\]")  # a Windows absolute path
_QUALNAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


# --------------------------------------------------------------------------- model refs
#
# A ref names a module and a qualname in it. The module is either dotted
# (``"pkg.module:Qual.name"``, imported with ``importlib.import_module`` from the
# workspace root) or a workspace-relative file path (``"dir/06_file.py:Qual.name"``):
# the path form opens files whose names are not dotted modules (``06_scan.py``,
# ``train-model.py``) and scripts in folders that are not packages. A file named by path
# is loaded under its stem (``06_scan``: the name ``importlib.import_module`` would use
# with its folder on ``sys.path``) and registered in ``sys.modules`` under it, so a
# factory that imports it by that name gets the same module and classes.


def is_path_ref(ref: str) -> bool:
    """Whether ``ref`` (a model or factory string) names its module by a file path:
    the part before ``:`` ends in ``.py``, holds a ``/`` or ``\\``, or is a file name no
    dotted module could have (``train-model.txt``); a dotted module name otherwise."""
    if _DRIVE.match(ref):
        return True
    module = ref.partition(":")[0]
    if module.endswith(".py") or "/" in module or "\\" in module:
        return True
    # a file name no dotted module could have, with a suffix (train-model.txt)
    return bool(re.match(r"^[\w-]*-[\w.-]*\.\w+$", module))


def split_ref(ref: str) -> tuple[str, str]:
    """``(module or path, qualname)`` of a ref (the path form has no ``:`` in its path)."""
    module, _, qualname = ref.partition(":")
    return module, qualname


def path_ref_problem(ref: str) -> str | None:
    """What is wrong with a path-form ref, as a sentence; None when it is well formed.
    Only the text is checked here: whether the file exists, and stays inside the
    workspace once symbolic links are followed, is checked against the workspace
    (:func:`module_file`; the worker says which)."""
    example = '"path/to/file.py:Qualname"'
    if _DRIVE.match(ref):
        return f"{ref!r} is absolute; name the file relative to the workspace root (expected {example})"
    path, sep, qualname = ref.partition(":")
    if not path:
        return f"missing the file path before ':' (expected {example})"
    if "\\" in path:
        return f"{path!r}: write the path with '/' between folders (expected {example})"
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path) or path.startswith("~"):
        return f"{path!r} is absolute; name the file relative to the workspace root (expected {example})"
    parts = path.split("/")
    if ".." in parts:
        return f"{path!r} leaves the workspace ('..'); name a file inside the workspace root"
    if any(p in ("", ".") for p in parts):
        return f"{path!r}: write the path without empty or '.' segments (e.g. scripts/model.py)"
    if not path.endswith(".py"):
        return f"{path!r} is not a .py file; a model or factory is a Python source file (expected {example})"
    stem = parts[-1][: -len(".py")]
    if not stem:
        return f"{path!r} has no file name before .py"
    if "." in stem:
        return (
            f"{path!r}: the file is loaded as module {stem!r}, and a module name cannot hold '.'; "
            "rename the file (e.g. with '_')"
        )
    if not sep or not qualname:
        return f"{path!r} names no object: add ':' and the qualname of the class or function (expected {example})"
    if not _QUALNAME.match(qualname):
        return f"{qualname!r} is not a Python qualname (Name or Outer.Inner) in {ref!r}"
    return None


def path_ref_stem(ref: str) -> str:
    """The module name a path-form ref's file is loaded under: its stem."""
    return split_ref(ref)[0].rsplit("/", 1)[-1][: -len(".py")]


def path_ref_file(workspace: Path, path: str) -> tuple[Path | None, str | None]:
    """``(file, None)`` for the workspace file a path-form module names, else
    ``(None, problem)``: missing, not a regular file, or outside the workspace once
    symbolic links are followed. ``file`` is under ``workspace`` as given."""
    problem = path_ref_problem(path + ":_")
    if problem is not None:
        return None, problem
    candidate = workspace / path
    problem = _outside_problem(workspace, candidate, repr(path))
    if problem is not None:
        return None, problem
    root = workspace.resolve()
    if not candidate.exists():
        return None, f"no file {path!r} in the workspace {root}"
    if not candidate.is_file():
        return None, f"{path!r} is not a file"
    return candidate, None


def module_file(workspace: Path, module: str) -> Path | None:
    """The workspace file that defines the ``module`` of a ref, None when the workspace
    has none: the dotted ``pkg.mod`` is ``pkg/mod.py`` or ``pkg/mod/__init__.py``; a path
    form (``dir/06_file.py``) is that file, when it exists inside the workspace."""
    if is_path_ref(module):
        return path_ref_file(workspace, module)[0]
    if dotted_module_problem(workspace, module) is not None:
        return None
    base = workspace.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def dotted_module_problem(workspace: Path, module: str) -> str | None:
    """Why the dotted ``module`` (``pkg.mod``) may not be imported from the workspace:
    a package folder or module file of it there (``pkg``, ``pkg.py``, ``pkg/mod.py``,
    ``pkg/mod/__init__.py``) that resolves outside the workspace, the same rule as the
    path form's (:func:`path_ref_file`). None when nothing of it leads out (a module
    the workspace does not hold is imported from the interpreter's path, as always)."""
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        base = workspace.joinpath(*parts[:i])
        for candidate in (base, base.with_suffix(".py"), base / "__init__.py"):
            if os.path.lexists(candidate):
                problem = _outside_problem(workspace, candidate, f"module {'.'.join(parts[:i])!r} ({candidate.name})")
                if problem is not None:
                    return problem
    return None


def _outside_problem(workspace: Path, candidate: Path, shown: str) -> str | None:
    """The one containment rule of both ref forms: ``candidate``, links followed, is the
    workspace or below it."""
    try:
        root = workspace.resolve()
        real = candidate.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        return f"{shown} cannot be resolved: {exc}"
    if real != root and root not in real.parents:
        return f"{shown} resolves to {real}, outside the workspace {root} (a symbolic link); name a file inside it"
    return None


def model_ref_for(workspace: Path, file: Path, qualname: str) -> str | None:
    """The ref a recipe should save for ``qualname`` in ``file``: the dotted form where
    importing it works as the file's author expects (every folder from the workspace
    root down is a package with ``__init__.py``, every name a Python identifier), else
    the path form (``scripts/06_scan.py:ScanMLP``), loaded as the script would run.
    None when ``file`` is not a ``.py`` file inside ``workspace``."""
    try:
        root = workspace.resolve()
        rel = file.resolve().relative_to(root)
    except (OSError, RuntimeError, ValueError):
        return None
    if rel.suffix != ".py" or not rel.parts:
        return None
    parts = list(rel.with_suffix("").parts)
    folders = parts[:-1]
    if parts[-1] == "__init__":
        parts.pop()
    dotted = bool(parts) and all(p.isidentifier() for p in parts)
    if dotted:
        for i in range(1, len(folders) + 1):
            if not (root.joinpath(*folders[:i]) / "__init__.py").is_file():
                dotted = False
                break
    if dotted:
        return f"{'.'.join(parts)}:{qualname}"
    ref = f"{rel.as_posix()}:{qualname}"
    return ref if path_ref_problem(ref) is None else None
