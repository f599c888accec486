"""The model's own dependencies, missing from the capture interpreter (issue 36, item 5).

Whisper imports ``tiktoken``, ``numba`` and ``more_itertools``; Gemma ``jaxtyping``; ViT
``ml_collections``. A capture interpreter without them fails at the model's import, one
library at a time. When it does (an ``import`` failure whose ``details.missing_module``
the worker set), :func:`complete` reads the module-level imports of every workspace file
the capture would import (``ast``, nothing run), asks the interpreter which of those
libraries it lacks (the dependency probe, ``find_spec``: nothing imported), and adds to the
failure all of them and the one reviewed command that installs them into the capture
interpreter (Torch's installed build pinned, as for the capture's own dependencies). The
command line offers that command for explicit approval, the editor its install flow.

That command is the parent's own (issue 52, items 1-2): what a worker's failure says
about packages and interpreters is dropped first (:func:`disown`), the import names are
checked and mapped to distributions (:mod:`capture.worker.distributions`), and the
interpreter is the one the parent chose. A model that patches the worker's
missing-library helper changes at most which checked names are offered.
"""

from __future__ import annotations

import ast
import shlex
from pathlib import Path

import safe_read

from ..graph.model import Capture, Failure
from ..recipe import module_file
from ..worker.distributions import distribution, import_name
from .import_closure import AST_MAX_CHARS, MAX_TOTAL_CHARS, _scanned
from .import_time import model_import_view
from .job import CaptureJob
from .probe import install_command, probe_interpreter

#: Libraries listed at most, besides the one that failed.
MAX_OTHERS = 24
#: The most of one file read for its imports.
READ_MAX_BYTES = 4 << 20


def module_level_imports(files: list[Path]) -> list[str]:
    """Top-level names of the absolute imports at the top level of ``files`` (not in a
    ``try``/``if``: an optional import), in order of first appearance."""
    out: dict[str, None] = {}
    total = 0
    for path in files:
        if path.suffix != ".py" or total >= MAX_TOTAL_CHARS:
            continue
        try:  # bounded and link-safe (a 20 MiB file took the parent past 6 GB under --memory 300)
            text = safe_read.read_text(path, max_bytes=READ_MAX_BYTES, errors="replace")
        except OSError:
            continue
        total += len(text)
        if len(text) > AST_MAX_CHARS:  # too long for a tree in this process: its unindented import lines
            out.update((n.split(".")[0], None) for n in _scanned(text, [], top_level=True) if n)
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in tree.body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    out[alias.name.split(".")[0]] = None
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                out[node.module.split(".")[0]] = None
    return list(out)


def _workspace_module(workspace: Path, files: list[Path], name: str) -> bool:
    """Whether ``name`` is a module the workspace holds (at its root, or beside a file
    the capture imports: a script folder's siblings)."""
    folders = {workspace} | {p.parent for p in files}
    for folder in folders:
        if (folder / name).is_dir() or (folder / f"{name}.py").is_file():
            return True
    try:
        return module_file(workspace, name) is not None
    except (OSError, ValueError):
        return False


#: What a worker's failure may not say for the parent: the install offer is the parent's.
_PARENTS_KEYS = ("install", "pinned", "python", "missing", "modules")


def disown(job: CaptureJob, failure: Failure) -> None:
    """Remove from a *worker's* ``failure`` every package, command and interpreter it
    names for the install offer, keeping only what the parent checks again: an
    ``import`` failure's ``missing_module`` when it is a plain import name; a
    ``dependencies`` failure's ``missing`` mapped to the distributions that can be
    offered (the interpreter is the job's). :func:`complete` then builds the offer."""
    details = failure.details
    if not isinstance(details, dict) or failure.stage not in ("import", "dependencies"):
        return  # no other failure is an install offer (a checkpoint's ``missing`` keys are its own)
    claimed = details.get("missing")
    for key in _PARENTS_KEYS:
        details.pop(key, None)
    if failure.stage == "import":
        if not import_name(details.get("missing_module")):
            details.pop("missing_module", None)
    elif failure.stage == "dependencies":
        details["python"] = job.python
        packages = _distributions(claimed if isinstance(claimed, list) else [])
        if packages:
            details["missing"] = packages


def _distributions(modules: list[object]) -> list[str]:
    """The distributions that can be offered for the import names ``modules``, each once."""
    out: dict[str, None] = {}
    for name in modules:
        package = distribution(name.split(".")[0]) if isinstance(name, str) else None
        if package is not None:
            out[package] = None
    return list(out)


def complete(job: CaptureJob, capture: Capture, files: list[Path]) -> None:
    """Add the model's missing libraries and their install command to ``capture``'s
    import failure (see the module docstring), or the install command to a worker's
    ``dependencies`` failure (:func:`disown` kept its checked names); nothing for any
    other failure."""
    failure = capture.failure
    if failure is None or not isinstance(failure.details, dict):
        return
    if failure.stage == "dependencies":
        _complete_dependencies(job, failure)
        return
    if failure.stage != "import":
        return
    first = failure.details.get("missing_module")
    if not import_name(first):
        return
    assert isinstance(first, str)
    # Import-time imports only (a library a package loads inside a function is not the
    # model's need), and what the workspace declares it requires (import_time.py).
    recipe_model = job.recipe.recipe.model if job.recipe is not None and job.recipe.recipe is not None else None
    files, declared = model_import_view(job.workspace, recipe_model, files)
    others = [n for n in dict.fromkeys([*module_level_imports(files), *declared])
              if n != first and n != "__future__" and import_name(n)
              and not _workspace_module(job.workspace, files, n)][:MAX_OTHERS]
    probe = probe_interpreter(job, tuple([first, *others]))
    if isinstance(probe, Capture):
        return  # the interpreter did not answer: the failure stands as it is
    modules = probe.get("modules") or {}
    absent = [first] + [n for n in others if not (modules.get(n) or {}).get("found")]
    packages = _distributions(list(absent))
    if distribution(first) is None:
        failure.message += (f". {first} is not installed in the capture interpreter {job.python}; TensorViz "
                            "cannot tell which distribution provides it, so it offers no install")
        return
    recipe = job.recipe.recipe
    command = install_command(job.python, packages, modules, device=recipe.device if recipe else "cpu",
                              torch_build=probe.get("torch_build"))
    failure.details.update(missing=packages, modules=absent, install=command, python=job.python)
    also = f" (and {', '.join(absent[1:])}, imported by the model's files too)" if absent[1:] else ""
    failure.message += (f". The model's own libraries belong in the capture interpreter {job.python}: it lacks "
                        f"{first}{also}; install with: {shlex.join(command)}")


def _complete_dependencies(job: CaptureJob, failure: Failure) -> None:
    """A worker's ``dependencies`` failure naming packages (safetensors to read a
    checkpoint): the parent's install command for them, the Torch build pinned."""
    packages = failure.details.get("missing")
    if not isinstance(packages, list) or not packages or "install" in failure.details:
        return
    probe = probe_interpreter(job, ("torch",))
    answer = {} if isinstance(probe, Capture) else probe
    recipe = job.recipe.recipe
    failure.details["install"] = install_command(
        job.python, packages, answer.get("modules") or {}, device=recipe.device if recipe else "cpu",
        torch_build=answer.get("torch_build"))
