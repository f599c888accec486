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
"""

from __future__ import annotations

import ast
import shlex
import sys
from pathlib import Path

from ..graph.model import Capture
from ..recipe import module_file
from .import_time import model_import_view
from .job import CaptureJob
from .probe import install_command, probe_interpreter

#: Import names whose distribution is named otherwise (pip normalises ``-``/``_``).
DISTRIBUTIONS = {
    "PIL": "Pillow", "yaml": "PyYAML", "cv2": "opencv-python", "sklearn": "scikit-learn",
    "bs4": "beautifulsoup4", "attr": "attrs", "google.protobuf": "protobuf", "skimage": "scikit-image",
    "dateutil": "python-dateutil", "Crypto": "pycryptodome", "sentencepiece": "sentencepiece",
}
#: Libraries listed at most, besides the one that failed.
MAX_OTHERS = 24


def module_level_imports(files: list[Path]) -> list[str]:
    """Top-level names of the absolute imports at the top level of ``files`` (not in a
    ``try``/``if``: an optional import), in order of first appearance."""
    out: dict[str, None] = {}
    for path in files:
        if path.suffix != ".py":
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError, RecursionError):
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


def complete(job: CaptureJob, capture: Capture, files: list[Path]) -> None:
    """Add the model's missing libraries and their install command to ``capture``'s
    import failure (see the module docstring); nothing when it is not one."""
    failure = capture.failure
    if failure is None or failure.stage != "import" or not isinstance(failure.details, dict):
        return
    first = failure.details.get("missing_module")
    if not isinstance(first, str) or not first:
        return
    # Import-time imports only (a library a package loads inside a function is not the
    # model's need), and what the workspace declares it requires (import_time.py).
    recipe_model = job.recipe.recipe.model if job.recipe is not None and job.recipe.recipe is not None else None
    files, declared = model_import_view(job.workspace, recipe_model, files)
    others = [n for n in dict.fromkeys([*module_level_imports(files), *declared])
              if n != first and n != "__future__" and n not in sys.stdlib_module_names
              and not _workspace_module(job.workspace, files, n)][:MAX_OTHERS]
    probe = probe_interpreter(job, tuple([first, *others]))
    if isinstance(probe, Capture):
        return  # the interpreter did not answer: the failure stands as it is
    modules = probe.get("modules") or {}
    absent = [first] + [n for n in others if not (modules.get(n) or {}).get("found")]
    packages = [DISTRIBUTIONS.get(n, n) for n in absent]
    recipe = job.recipe.recipe
    command = install_command(job.python, packages, modules, device=recipe.device if recipe else "cpu",
                              torch_build=probe.get("torch_build"))
    failure.details.update(missing=packages, modules=absent, install=command, python=job.python)
    also = f" (and {', '.join(absent[1:])}, imported by the model's files too)" if absent[1:] else ""
    failure.message += (f". The model's own libraries belong in the capture interpreter {job.python}: it lacks "
                        f"{first}{also}; install with: {shlex.join(command)}")
