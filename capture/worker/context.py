"""What a framework capture receives: :class:`CaptureContext`.

A framework plug-in (:class:`capture.worker.plugin.FrameworkPlugin`, the contract)
receives one for its device check and its capture: the recipe, the workspace, the limits
and the deadline, and the helpers every framework shares (importing workspace code and
recording its files, building values from the recipe's descriptions, calling factories,
frames, progress).

Seeding: the n-th array leaf of the literal descriptions (``ctx.recipe.tensors()``,
init before inputs) is generated from ``capture.recipe.leaf_seed(recipe.seed, n)``;
:meth:`CaptureContext.materialize` passes each leaf with its index to ``make_tensor``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Callable

from ..graph.model import Frame
from ..recipe import (
    CallSetup,
    Recipe,
    dotted_module_problem,
    is_path_ref,
    model_ref_for,
    path_ref_file,
    path_ref_problem,
    path_ref_stem,
)
from .builder import GraphBuilder
from .errors import CaptureError, LimitExceeded
from .limits import Limits
from .protocol import DeviceDetails, MissingDependenciesDetails
from .values import MakeTensor, build_section
from .workspace_files import WorkspaceFiles, _HashingLoader

ProgressSink = Callable[[str, "float | None"], None]


class CaptureContext:
    """Everything a framework capture may use. Attributes:

    ``recipe``: the validated :class:`capture.recipe.Recipe`;
    ``workspace``: the resolved workspace root (``Path``);
    ``limits``: the :class:`Limits` in force;
    ``deadline``: ``time.monotonic()`` value after which the parent kills the worker;
    ``after_result``: set by a capture whose graph leaves statistics to measure after it
    was sent (``meta["stats_pending"]``): called once the result is sent, it returns
    ``[value id, statistics]`` rows and the count of values it could not measure
    (:class:`~capture.worker.protocol.StatisticsMessage`);
    ``graph_first``: the worker sends the graph before a JAX capture's compile finishes
    (set by the worker's request; in-process callers, tests and benchmarks, get the
    compiled record in the capture);
    ``after_compile``: set by such a capture when its compile was still running once the
    graph was converted (``Capture.compiled`` pending): called once the result is sent,
    it waits for the compile and returns ``(compiled record, meta updates)``
    (:class:`~capture.worker.protocol.CompiledMessage`).
    """

    def __init__(
        self,
        recipe: Recipe,
        workspace: str | os.PathLike[str],
        limits: Limits | None = None,
        *,
        progress_sink: ProgressSink | None = None,
        started: float | None = None,
    ) -> None:
        self.recipe = recipe
        self.files = WorkspaceFiles(workspace)
        self.workspace: Path = self.files.root
        self.limits = limits or Limits()
        self.started = time.monotonic() if started is None else started
        self.deadline = self.started + self.limits.max_seconds
        self._progress_sink = progress_sink
        # Files of modules we were asked to import: recorded even when the import
        # fails, so freshness can tell when a fix was saved.
        self.requested_sources: list[str] = []
        self.after_result: Callable[[], tuple[list[list[Any]], int]] | None = None
        self.graph_first = False
        self.after_compile: Callable[[], tuple[dict[str, Any], dict[str, Any]]] | None = None

    # ------------------------------------------------------------------ imports

    def import_object(self, ref: str) -> Any:
        """Import ``"pkg.mod:qual.name"`` relative to the workspace root, or load the
        path form ``"dir/06_file.py:qual.name"`` (see :meth:`_import_path`), and return the
        object. The module's file becomes a recorded source. Raises
        ``CaptureError("import", …)`` chained to the original exception when the module
        cannot be imported or has no such attribute; exceptions raised by the module's
        own top-level code keep their type and traceback frames."""
        module_name, _, qualname = ref.partition(":")
        if is_path_ref(ref):
            return _walk(self._import_path(ref), module_name, qualname)
        if not module_name or not qualname:
            raise CaptureError("recipe", f'{ref!r} is not "pkg.module:qualname" or "path/to/file.py:qualname"')
        return _walk(self._import_module(module_name), module_name, qualname)

    def _import_module(self, module_name: str) -> Any:
        """Import the dotted ``module_name`` from the workspace root (see :meth:`import_object`)."""
        problem = dotted_module_problem(self.workspace, module_name)
        if problem is not None:  # refused as the path form refuses the same file
            raise CaptureError("recipe", problem, {"module": module_name})
        self.ensure_workspace_on_path()
        self._note_module_file(module_name)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
                raise CaptureError(
                    "import",
                    f"cannot import {module_name!r}: no module {exc.name!r} under the workspace "
                    f"{self.workspace} or on the selected interpreter's path",
                    {"module": module_name},
                ) from exc
            raise CaptureError("import", f"importing {module_name!r} failed: {exc}",
                               {"module": module_name, **_missing_library(exc, self.workspace)}) from exc
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit, MemoryError)):
                raise
            raise CaptureError(
                "import", f"importing {module_name!r} failed: {type(exc).__name__}: {exc}", {"module": module_name}
            ) from exc
        file = getattr(module, "__file__", None)
        if file:
            self._note(file)
        return module

    def _import_path(self, ref: str) -> Any:
        """The module of a path-form ref (``"dir/06_file.py:Qualname"``), loaded the way
        ``python dir/06_file.py`` would find it: under its stem (``06_file``), registered
        in ``sys.modules`` before it runs (so a factory importing ``06_file`` gets this
        module and its classes), with its folder on ``sys.path`` (so its sibling imports
        work) after the workspace root. A module already loaded from the same file is
        reused. Its source is hashed as it is compiled, like any workspace import. A file
        that is a module of a package (``pkg/__init__.py`` beside it, all the way up) is
        imported by its dotted name instead, so that its relative imports work."""
        path, _, _ = ref.partition(":")
        problem = path_ref_problem(ref)
        if problem is not None:
            raise CaptureError("recipe", problem, {"file": path})
        file, problem = path_ref_file(self.workspace, path)
        if file is None:
            stage = "import" if problem and problem.startswith("no file") else "recipe"
            raise CaptureError(stage, problem or f"cannot open {path!r}", {"file": path})
        real = os.path.realpath(file)
        self._note(real)
        dotted = model_ref_for(self.workspace, file, "_")
        if dotted is not None and not is_path_ref(dotted):
            # A module of a package (pkg/__init__.py beside it, all the way up): imported by
            # its dotted name, so its relative imports work and every import shares it.
            return self._import_module(dotted.rpartition(":")[0])
        stem = path_ref_stem(ref)
        loaded = sys.modules.get(stem)
        if loaded is not None:
            loaded_file = getattr(loaded, "__file__", None)
            if isinstance(loaded_file, str) and os.path.realpath(loaded_file) == real:
                return loaded
            where = f"from {loaded_file}" if isinstance(loaded_file, str) else "(built in)"
            raise CaptureError(
                "import",
                f"cannot load {path!r} as module {stem!r}: a module of that name is already imported {where}; "
                "rename the file",
                {"file": path, "module": stem},
            )
        self.ensure_workspace_on_path()
        folder = os.path.dirname(real)
        if folder not in sys.path:
            sys.path.insert(sys.path.index(str(self.workspace)) + 1 if str(self.workspace) in sys.path else 0, folder)
            importlib.invalidate_caches()
        loader = _HashingLoader(stem, real, self.files)
        spec = importlib.util.spec_from_file_location(stem, real, loader=loader)
        if spec is None:  # pragma: no cover - a .py file always has a spec
            raise CaptureError("import", f"cannot load {path!r}", {"file": path})
        module = importlib.util.module_from_spec(spec)
        sys.modules[stem] = module
        try:
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        except BaseException as exc:
            if sys.modules.get(stem) is module:
                del sys.modules[stem]
            if isinstance(exc, (KeyboardInterrupt, SystemExit, MemoryError)):
                raise
            raise CaptureError(
                "import", f"loading {path!r} failed: {type(exc).__name__}: {exc}",
                {"file": path, "module": stem, **_missing_library(exc, self.workspace)},
            ) from exc
        return module

    def call_factory(self, ref: str) -> Any:
        """Import ``ref`` and call it with no arguments; its file becomes a source.
        Exceptions raised by the factory propagate unchanged (reported as ``trace``)."""
        fn = self.import_object(ref)
        if not callable(fn):
            raise CaptureError("recipe", f"factory {ref!r} is not callable (found {type(fn).__name__})")
        return fn()

    def ensure_workspace_on_path(self) -> None:
        """Put the workspace root on ``sys.path`` right after the worker's own entry, so
        workspace modules win over installed ones (as when running ``python`` there)."""
        root = str(self.workspace)
        if root not in sys.path:
            sys.path.insert(1 if sys.path else 0, root)
            importlib.invalidate_caches()

    def _note_module_file(self, module_name: str) -> None:
        import importlib.util

        try:
            spec = importlib.util.find_spec(module_name)
        except (ImportError, ValueError, AttributeError):
            return
        except Exception:  # a parent package's __init__ raised: the import will say so
            return
        if spec is not None and spec.origin and spec.has_location:
            self._note(spec.origin)

    def _note(self, path: str) -> None:
        if self.files.contains(path) and path not in self.requested_sources:
            self.requested_sources.append(path)

    # ------------------------------------------------------------------ inputs

    def materialize(self, section: str, make_tensor: MakeTensor) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The literal ``args``/``kwargs`` of ``recipe.init`` (``section="init"``) or
        ``recipe.inputs`` (``"inputs"``) as Python objects, built by
        :func:`capture.worker.values.build_section`: statics stay Python values, ``none``
        is None, containers are list/tuple/dict, each array leaf is ``make_tensor(leaf)``
        with its :class:`capture.recipe.TensorLeaf` (index for seeding, path, description), and each
        ``call`` is its target (imported by :meth:`import_object`) called with its built
        arguments. Raises ``CaptureError("recipe")`` if that section is a factory."""
        setup: CallSetup = getattr(self.recipe, section)
        if setup.factory is not None:
            raise CaptureError("recipe", f"{section} uses factory {setup.factory!r}; call ctx.call_factory for it")
        return build_section(self.recipe, section, make_tensor, self.import_object)

    def before_construction(self, make_tensor: MakeTensor) -> None:
        """Make the recipe's ``init.before`` calls (library state the model's constructor
        needs, such as model-parallel groups), in order, before anything of the init is
        built; see :func:`capture.worker.values.before_construction`."""
        from .values import before_construction

        before_construction(self.recipe, make_tensor, self.import_object)

    def after_construction(self, model: Any, make_tensor: MakeTensor) -> None:
        """Run the recipe's ``init.then`` steps on ``model`` (the object built by the
        constructor or the init factory, its checkpoint loaded), in order; see
        :func:`capture.worker.values.after_construction`."""
        from .values import after_construction

        shown = f"{type(model).__qualname__}(…)" if not inspect.isroutine(model) else getattr(
            model, "__qualname__", "the model")
        after_construction(self.recipe, model, shown, make_tensor, self.import_object)

    def inputs_call(self, make_tensor: MakeTensor) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The model's call arguments: the literal ``inputs`` materialized, or the
        ``inputs.factory`` called and normalized by :func:`normalize_inputs`."""
        if self.recipe.inputs.factory is not None:
            return normalize_inputs(self.call_factory(self.recipe.inputs.factory), self.recipe.inputs.factory)
        return self.materialize("inputs", make_tensor)

    # ------------------------------------------------------------------ frames and files

    def is_workspace_file(self, path: str | os.PathLike[str]) -> bool:
        """True for files under the workspace root that are the user's own code (not a
        virtual environment, site-packages or TensorViz's own ``capture`` package)."""
        return self.files.contains(path)

    def relative(self, path: str | os.PathLike[str]) -> str | None:
        """The workspace-relative POSIX path of a workspace file, else None."""
        return self.files.relative(path)

    def frame_for(self, filename: str, lineno: int | None, col: int | None, function: str) -> Frame | None:
        """A :class:`Frame` with a workspace-relative file, or None for a file outside
        the workspace (library code). ``col`` is kept as given (None becomes 0)."""
        rel = self.files.relative(filename)
        if rel is None:
            return None
        return Frame(file=rel, line=int(lineno or 0), column=int(col or 0), function=str(function))

    def user_frames(self, tb: TracebackType | None) -> list[Frame]:
        """The workspace frames of a traceback, outermost first."""
        return self.files.traceback_frames(tb)

    # ------------------------------------------------------------------ progress, limits

    def progress(self, message: str, fraction: float | None = None) -> None:
        """Report progress to the parent (shown in the editor); ``fraction`` in [0, 1]."""
        if self._progress_sink is not None:
            self._progress_sink(str(message), None if fraction is None else max(0.0, min(1.0, float(fraction))))

    def time_left(self) -> float:
        """Seconds until the parent's deadline (it kills the worker then; no need to poll)."""
        return self.deadline - time.monotonic()

    def new_builder(self) -> GraphBuilder:
        """A :class:`GraphBuilder` enforcing this context's limits."""
        return GraphBuilder(self.limits)

    def check_counts(self, *, ops: int = 0, values: int = 0, groups: int = 0) -> None:
        """Raise :class:`LimitExceeded` when a count is over its limit."""
        for name, reached in (("max_ops", ops), ("max_values", values), ("max_groups", groups)):
            maximum = getattr(self.limits, name)
            if reached > maximum:
                raise LimitExceeded(name, maximum, reached)


def _walk(module: Any, module_name: str, qualname: str) -> Any:
    obj: Any = module
    walked = []
    for part in qualname.split("."):
        walked.append(part)
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise CaptureError(
                "import",
                f"{module_name!r} has no attribute {'.'.join(walked)!r}",
                {"module": module_name, "qualname": qualname},
            ) from exc
    return obj


def normalize_inputs(result: Any, ref: str = "inputs factory") -> tuple[tuple[Any, ...], dict[str, Any]]:
    """An inputs factory's result as ``(args, kwargs)``.

    ``{"args": (...), "kwargs": {...}}`` (either key may be omitted) gives those; any
    other mapping with string keys is a mapping of named inputs (all keyword
    arguments). Anything else raises ``CaptureError("recipe")``."""
    if isinstance(result, Mapping):
        keys = set(result)
        if keys and keys <= {"args", "kwargs"}:
            args = result.get("args", ())
            kwargs = result.get("kwargs", {})
            if not isinstance(args, (tuple, list)):
                raise CaptureError("recipe", f"{ref} returned args of type {type(args).__name__}; expected a tuple or list")
            if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
                raise CaptureError("recipe", f"{ref} returned kwargs that are not a mapping with string keys")
            return tuple(args), dict(kwargs)
        if all(isinstance(k, str) for k in result):
            return (), dict(result)
        raise CaptureError("recipe", f"{ref} returned a mapping with non-string keys")
    raise CaptureError(
        "recipe",
        f'{ref} returned {type(result).__name__}; expected {{"args": (...), "kwargs": {{...}}}} or a mapping of named inputs',
    )


def import_framework(module: str, label: str) -> Any:
    """Import a framework (``module``, named ``label`` in messages) for a capture plug-in:
    ``CaptureError("dependencies")`` naming the selected interpreter when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise CaptureError(
            "dependencies",
            f"{label} cannot be imported in the selected interpreter {sys.executable}: {exc}",
            MissingDependenciesDetails(missing=[module], python=sys.executable),
        ) from exc


def parse_device(spec: str) -> tuple[str, int]:
    """A recipe's ``device`` as ``(platform, index)``: ``"cpu"`` is ``("cpu", 0)``,
    ``"cuda:N"`` is ``("cuda", N)``, ``"tpu"`` is ``("tpu", 0)`` and ``"tpu:N"`` is
    ``("tpu", N)``; anything else raises ``CaptureError("device")``."""
    if spec in ("cpu", "tpu"):
        return spec, 0
    for platform in ("cuda", "tpu"):
        if spec.startswith(platform + ":") and spec[len(platform) + 1:].isdigit():
            return platform, int(spec[len(platform) + 1:])
    raise CaptureError("device", f'unknown device {spec!r} (expected "cpu", "cuda:N", "tpu" or "tpu:N")',
                       DeviceDetails(device=spec))


def positional_names(fn: Any, n: int) -> list[str | None]:
    """The parameter each of ``n`` positional arguments of a call to ``fn`` binds to, by
    ``inspect.signature`` (a function, a bound method without ``self``, a
    ``functools.partial`` without its bound arguments, a module instance's ``__call__``):
    ``None`` for an argument that lands in ``*args`` or past the last parameter, and for
    all of them when ``fn`` has no signature."""
    try:
        params = inspect.signature(fn).parameters.values()
    except Exception:  # builtins, C callables; naming never fails a capture
        return [None] * n
    names: list[str | None] = []
    for p in params:
        if len(names) == n or p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        names.append(p.name)
    return names + [None] * (n - len(names))


__all__ = [
    "CaptureContext", "CaptureError", "LimitExceeded", "Limits", "MakeTensor", "import_framework",
    "normalize_inputs", "parse_device", "positional_names",
]


def _missing_library(exc: BaseException, workspace: Path) -> dict[str, str]:
    """``{"missing_module": "tiktoken"}`` when importing the model failed because a
    library it imports is not installed in this interpreter (a ``ModuleNotFoundError``
    for a top-level name the workspace does not hold): the model's dependency, which
    belongs in the capture interpreter (the parent offers the install)."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return {}
    top = exc.name.split(".")[0]
    if (workspace / top).exists() or (workspace / f"{top}.py").exists() or top in sys.stdlib_module_names:
        return {}
    return {"missing_module": top}
