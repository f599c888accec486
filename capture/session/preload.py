"""Warm before the first capture: what the folder's resident worker should import while
the user reads a model file, and how it is started (:meth:`capture.session.warm.WarmPool.preload`).

:func:`preload_names` reads the model files' text (``ast``, nothing imported): the
frameworks discovery found (their packages and TensorViz's own capture modules for
them), then the libraries the files import (``import transformers``, and ``from
transformers import GPT2LMHeadModel`` as ``transformers:GPT2LMHeadModel``, which loads
the class's own module), bounded. Never a workspace module (the resident refuses those:
user code is imported fresh in each capture's child), never the standard library.

:func:`start_preload` probes the interpreter first, as a capture does (cached): the
resident process is bound to the same identity a capture computes, so the capture that
follows leases it instead of replacing it.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..frameworks import capabilities, framework_info, framework_names
from ..recipe import DEFAULT_FRAMEWORK, module_file
from .job import CaptureJob, ResolvedRecipe
from .launcher import worker_env
from .probe import path_stamp, probe_interpreter
from .warm import WarmPool, identity_for

#: At most this many library names from the model files (the frameworks come on top):
#: a file that imports forty packages still warms what a capture most likely needs,
#: the first ones it names.
MAX_LIBRARIES = 24
#: Names never preloaded: the worker's own transport, and what only tooling imports.
_NEVER = frozenset({"msgpack", "__future__", "typing_extensions", "setuptools", "pip", "pytest"})


def framework_modules(framework: str) -> list[str]:
    """What a capture of ``framework`` imports first: the packages its declaration says a
    capture imports (``torch``; ``jax``) and TensorViz's capture modules for it
    (``capture.torch.*``, which import the framework at their top). Every framework's
    worker requires Torch installed (the spec's shared worker), but only a Torch capture
    imports it."""
    if framework not in framework_names():
        return []
    info = framework_info(framework)
    names = [m for m in capabilities(framework).imports or info.requires if m not in _NEVER]
    if info.path is not None:
        return names  # a test plug-in, loaded from its file, not by name
    package = info.module.rpartition(".")[0]
    folder = Path(__file__).resolve().parent.parent / package.split(".", 1)[-1] if package.startswith("capture.") else None
    names.append(info.module)
    if folder is not None and folder.is_dir():
        names += sorted(f"{package}.{p.stem}" for p in folder.glob("*.py")
                        if p.stem not in ("__init__", "declaration") and f"{package}.{p.stem}" != info.module)
    return names


def preload_names(workspace: Path, frameworks: Iterable[str], texts: Iterable[str],
                  limit: int = MAX_LIBRARIES) -> list[str]:
    """The frameworks' modules, then up to ``limit`` libraries the ``texts`` (model files'
    source) import, in the order the files name them; workspace modules and the
    standard library left out. ``frameworks`` may also name a package a kind of symbol
    needs on top of its framework (``flax`` for a Flax module: its kind's ``requires``)."""
    out: list[str] = []
    seen: set[str] = set()

    def add(name: str) -> None:
        if name not in seen:
            seen.add(name)
            out.append(name)

    for fw in dict.fromkeys(frameworks):
        for name in framework_modules(fw) if fw in framework_names() else [fw]:
            add(name)
    libraries: list[str] = []
    for text in texts:
        for name in _imports(text):
            top = name.partition(":")[0].split(".")[0]
            if top in _NEVER or top in sys.stdlib_module_names or top in seen or name in libraries:
                continue
            if module_file(workspace, top) is not None or (workspace / top).is_dir():
                continue  # the workspace's own code: fresh in every capture
            libraries.append(name)
    for name in libraries[:limit]:
        add(name)
    return out


def _imports(text: str) -> list[str]:
    """The module-level absolute imports of a source text (also under a module-level
    ``if``/``try``/``with``; not those inside functions and classes, which a model imports
    only when that code runs), in order: ``pkg.mod`` for ``import pkg.mod``, ``pkg`` then
    ``pkg:Name`` for ``from pkg import Name``; none when the text does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    out: list[str] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if not node.level and node.module:
                out.append(node.module)
                out += [f"{node.module}:{alias.name}" for alias in node.names if alias.name != "*"]
        elif isinstance(node, (ast.If, ast.Try, ast.With)) or type(node).__name__ == "TryStar":
            inner = [*getattr(node, "body", []), *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            for handler in getattr(node, "handlers", []):
                inner += handler.body
            pending[:0] = inner
    return out


def start_preload(pool: WarmPool, workspace: Path, python: str, env: Mapping[str, str],
                  names: list[str]) -> str:
    """Have the folder's resident worker import ``names`` (:meth:`WarmPool.preload`):
    the interpreter is probed first (the capture's own probe, cached), and nothing starts
    when it cannot run. The pool's answer, or ``"interpreter: …"`` saying why not."""
    root = Path(os.path.realpath(os.path.abspath(workspace)))
    job = CaptureJob(root, ResolvedRecipe(None, None, {"name": "preload"}, DEFAULT_FRAMEWORK), python, env=dict(env))
    probe = probe_interpreter(job, ("msgpack",))
    if not isinstance(probe, dict):
        return f"interpreter: {probe.failure.message if probe.failure else 'not runnable'}"
    identity = identity_for(python, dict(env), path_stamp(probe.get("path")))
    return pool.preload(root, os.path.abspath(python), worker_env(env), identity, names)
