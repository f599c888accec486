"""Described values as Python objects, inside the worker: the one place a recipe's
literal ``init`` or ``inputs`` becomes what the model is built and called with.

A description (:mod:`capture.recipe.model`) becomes: a static value itself, ``none``
None, a list/tuple/dict of built items, a tensor leaf whatever the framework's
``make_tensor`` makes of its :class:`~capture.recipe.model.TensorLeaf`, a ``call``
the result of calling its ``target`` with its built ``args``/``kwargs``, arguments
first, depth-first, in the order written (the order tensor leaves are seeded in), and
a ``ref`` the object its ``target`` names, uncalled (a class a field takes).

A call runs user or library code, so it happens here, in the approved worker, never in
the parent. Its target is imported the way the model is
(:meth:`~capture.worker.context.CaptureContext.import_object`), so a workspace target's
file joins the capture's sources. Each failure names the key path of the description
(``profiles.p.init.kwargs.config.kwargs.n_layer``):

* a target that cannot be imported: ``import``, as for the model;
* a target that is not callable, or arguments its signature cannot bind: ``recipe``,
  before anything is called;
* an exception raised by the call: ``trace``, keeping the exception's type, its own
  message (``OSError: We couldn't connect to 'https://huggingface.co'…``) and frames.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from ..recipe import (
    CallDesc,
    CallSetup,
    DictDesc,
    ListDesc,
    NoneDesc,
    Recipe,
    RefDesc,
    StaticDesc,
    TensorDesc,
    TensorLeaf,
    TupleDesc,
    ValueDesc,
    key_segment,
)
from .errors import CaptureError

MakeTensor = Callable[[TensorLeaf], Any]
ImportObject = Callable[[str], Any]


def build_section(
    recipe: Recipe, section: str, make_tensor: MakeTensor, import_object: ImportObject
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The literal ``args``/``kwargs`` of ``recipe.init`` (``section="init"``) or
    ``recipe.inputs`` (``"inputs"``) built as Python objects."""
    setup: CallSetup = getattr(recipe, section)
    leaves = {leaf.path: leaf for leaf in recipe.tensors() if leaf.section == section}
    builder = _Builder(leaves, make_tensor, import_object)
    base = f"profiles.{recipe.name}.{section}"
    args = tuple(builder.build(d, f"{base}.args[{i}]") for i, d in enumerate(setup.args))
    kwargs = {k: builder.build(d, f"{base}.kwargs.{key_segment(k)}") for k, d in setup.kwargs}
    return args, kwargs


class _Builder:
    def __init__(self, leaves: dict[str, TensorLeaf], make_tensor: MakeTensor, import_object: ImportObject) -> None:
        self.leaves = leaves
        self.make_tensor = make_tensor
        self.import_object = import_object

    def build(self, desc: ValueDesc, path: str) -> Any:
        if isinstance(desc, TensorDesc):
            return self.make_tensor(self.leaves[path])
        if isinstance(desc, StaticDesc):
            return desc.value
        if isinstance(desc, NoneDesc):
            return None
        if isinstance(desc, ListDesc):
            return [self.build(v, f"{path}.items[{i}]") for i, v in enumerate(desc.items)]
        if isinstance(desc, TupleDesc):
            return tuple(self.build(v, f"{path}.items[{i}]") for i, v in enumerate(desc.items))
        if isinstance(desc, DictDesc):
            return {k: self.build(v, f"{path}.items.{key_segment(k)}") for k, v in desc.items}
        if isinstance(desc, CallDesc):
            return self.call(desc, path)
        if isinstance(desc, RefDesc):
            return self.named(desc.target, path)
        raise TypeError(f"unknown value description {desc!r}")

    def named(self, target: str, path: str) -> Any:
        """The object ``target`` names (a ``ref``, or a call's callee), imported as the
        model is; an import failure names the key path."""
        try:
            return self.import_object(target)
        except CaptureError as exc:
            raise CaptureError(
                exc.stage, f"{path}.target: {exc.message}", {**exc.details, "key_path": path, "target": target},
                error_type=exc.error_type,
            ) from (exc.__cause__ or exc)

    def call(self, desc: CallDesc, path: str) -> Any:
        args = tuple(self.build(v, f"{path}.args[{i}]") for i, v in enumerate(desc.args))
        kwargs = {k: self.build(v, f"{path}.kwargs.{key_segment(k)}") for k, v in desc.kwargs}
        where = {"key_path": path, "target": desc.target}
        fn = self.named(desc.target, path)
        if not callable(fn):
            raise CaptureError(
                "recipe", f"{path}.target: {desc.target} is {_describe(fn)}, which cannot be called", where
            )
        problem = _binding_problem(fn, args, kwargs)
        if problem is not None:
            raise CaptureError(
                "recipe", f"{path}: {desc.target} does not take these arguments: {problem}", where,
                error_type="TypeError",
            )
        try:
            return fn(*args, **kwargs)
        except (KeyboardInterrupt, SystemExit, MemoryError):
            raise
        except Exception as exc:
            raise CaptureError(
                "trace", f"{path}: calling {desc.target} raised {type(exc).__name__}: {exc}", where
            ) from exc


def _binding_problem(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """Why ``fn(*args, **kwargs)`` cannot bind, by its signature; None when it can or
    when ``fn`` has no signature to tell (a builtin, a C extension)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        return str(exc)
    return None


def _describe(obj: Any) -> str:
    t = type(obj)
    return f"a {t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else f"a {t.__qualname__}"
