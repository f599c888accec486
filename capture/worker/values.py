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

Steps after construction (a call's ``then``, and ``init.then`` on the model through
:func:`after_construction`) run here too, in order, right after what they act on is built:
a ``set`` assigns an attribute, a ``call`` calls a method for its effect. An attribute
path that leads nowhere is a ``recipe`` failure naming the key path and a close name;
an exception a step raises is a ``trace`` failure keeping its type, message and frames.
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any, Callable

from ..recipe.keywords import misspelt
from ..recipe import (
    CallDesc,
    CallSetup,
    DictDesc,
    ListDesc,
    NoneDesc,
    Recipe,
    RefDesc,
    SetStep,
    StaticDesc,
    Step,
    TensorDesc,
    TensorLeaf,
    TupleDesc,
    ValueDesc,
    key_segment,
)
from .errors import CaptureError
from .plugin_helpers import describe_type

MakeTensor = Callable[[TensorLeaf], Any]
ImportObject = Callable[[str], Any]


def after_construction(
    recipe: Recipe, model: Any, shown: str, make_tensor: MakeTensor, import_object: ImportObject
) -> None:
    """Run ``recipe.init.then`` on the model built (``shown`` names it: ``Transformer(…)``)."""
    if not recipe.init.then:
        return
    leaves = {leaf.path: leaf for leaf in recipe.tensors() if leaf.section == "init"}
    _Builder(leaves, make_tensor, import_object).steps(model, recipe.init.then, f"profiles.{recipe.name}.init.then",
                                                       shown)


def before_construction(recipe: Recipe, make_tensor: MakeTensor, import_object: ImportObject) -> None:
    """Make ``recipe.init.before``'s calls, in order, for their effect (library state the
    constructor reads); what each returns is dropped. A failure names its key path."""
    if not recipe.init.before:
        return
    leaves = {leaf.path: leaf for leaf in recipe.tensors() if leaf.section == "init"}
    builder = _Builder(leaves, make_tensor, import_object)
    for i, call in enumerate(recipe.init.before):
        builder.build(call, f"profiles.{recipe.name}.init.before[{i}]")


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
        built = self._call(desc, path)
        if desc.then:
            self.steps(built, desc.then, f"{path}.then", desc.target.rpartition(":")[2] + "(…)")
        return built

    def steps(self, obj: Any, steps: tuple[Step, ...], path: str, shown: str) -> None:
        """Run steps after construction on ``obj`` (``shown`` names it in messages):
        ``set`` an attribute to a built value, ``call`` a method for its effect. A
        path that does not lead anywhere is a ``recipe`` failure naming the key path and
        what the object has; an exception the step raises is a ``trace`` failure with
        its own type, message and frames (the user's code ran)."""
        for i, step in enumerate(steps):
            here = f"{path}[{i}]"
            parts = step.path.split(".")
            holder = _follow(obj, parts[:-1], here, shown, "set" if isinstance(step, SetStep) else "call")
            name = parts[-1]
            where = {"key_path": here}
            if isinstance(step, SetStep):
                value = self.build(step.value, f"{here}.value")
                try:
                    setattr(holder, name, value)
                except (KeyboardInterrupt, SystemExit, MemoryError):
                    raise
                except Exception as exc:
                    raise CaptureError(
                        "trace", f"{here}: setting {shown}.{step.path} raised {type(exc).__name__}: {exc}", where,
                    ) from exc
                continue
            method = _attribute(holder, name, here, f"{shown}.{step.path}", "call")
            if not callable(method):
                raise CaptureError("recipe", f"{here}: {shown}.{step.path} is {describe_type(method)}, which cannot be "
                                             "called", where)
            args = tuple(self.build(v, f"{here}.args[{j}]") for j, v in enumerate(step.args))
            kwargs = {k: self.build(v, f"{here}.kwargs.{key_segment(k)}") for k, v in step.kwargs}
            problem = binding_problem(method, args, kwargs)
            if problem is not None:
                raise CaptureError("recipe", f"{here}: {shown}.{step.path} does not take these arguments: {problem}",
                                   where, error_type="TypeError")
            try:
                method(*args, **kwargs)
            except (KeyboardInterrupt, SystemExit, MemoryError):
                raise
            except Exception as exc:
                raise CaptureError(
                    "trace", f"{here}: calling {shown}.{step.path} raised {type(exc).__name__}: {exc}", where,
                ) from exc

    def _call(self, desc: CallDesc, path: str) -> Any:
        args = tuple(self.build(v, f"{path}.args[{i}]") for i, v in enumerate(desc.args))
        kwargs = {k: self.build(v, f"{path}.kwargs.{key_segment(k)}") for k, v in desc.kwargs}
        where = {"key_path": path, "target": desc.target}
        fn = self.named(desc.target, path)
        if not callable(fn):
            raise CaptureError(
                "recipe", f"{path}.target: {desc.target} is {describe_type(fn)}, which cannot be called", where
            )
        problem = binding_problem(fn, args, kwargs)
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


def _follow(obj: Any, parts: list[str], path: str, shown: str, verb: str) -> Any:
    """``obj.a.b`` for ``parts == ["a", "b"]``, each step checked (:func:`_attribute`)."""
    for k, part in enumerate(parts):
        obj = _attribute(obj, part, path, ".".join([shown, *parts[: k + 1]]), verb)
    return obj


def _attribute(obj: Any, name: str, path: str, shown: str, verb: str) -> Any:
    """``getattr(obj, name)``; a missing one is a ``recipe`` failure saying what ``obj``
    has instead (a close name first)."""
    try:
        return getattr(obj, name)
    except AttributeError as exc:
        public = sorted({n for n in dir(obj) if not n.startswith("_")})
        close = misspelt(name, public) or next(iter(difflib.get_close_matches(name, public, n=1)), None)
        hint = f"; did you mean {close}?" if close else ""
        raise CaptureError(
            "recipe", f"{path}: {shown} does not exist ({type(obj).__qualname__} has no attribute {name!r}){hint}; "
                      f"nothing to {verb}", {"key_path": path},
        ) from exc


def binding_problem(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """Why ``fn(*args, **kwargs)`` cannot bind, by its signature; None when it can or
    when ``fn`` has no signature to tell (a builtin, a C extension).

    A target whose declared signature (``__wrapped__``'s, as ``inspect`` follows it) is
    narrower than what it takes at run time (transformers' configuration classes: their
    fields, then any keyword) may be given undeclared keywords, except one that reads
    like a declared name (:func:`capture.recipe.keywords.misspelt`): ``num_hidden_layer``
    is refused with "did you mean num_hidden_layers", ``attn_implementation`` passed on."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    declared = [p.name for p in signature.parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if not any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        for key in kwargs:
            if key not in declared:
                close = misspelt(key, declared)
                if close is not None:
                    return f"got an unexpected keyword argument {key!r}; did you mean {close!r}?"
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        extra = {k: v for k, v in kwargs.items() if k not in declared}
        if extra and _takes_more_keywords(fn):
            try:
                signature.bind(*args, **{k: v for k, v in kwargs.items() if k in declared})
                return None
            except TypeError:
                pass
        return str(exc)
    return None


def _takes_more_keywords(fn: Any) -> bool:
    """Whether ``fn`` takes ``**kwargs`` at run time although its declared signature
    does not (a wrapper whose ``__wrapped__`` declares the fields)."""
    try:
        runtime = inspect.signature(fn, follow_wrapped=False)
    except (TypeError, ValueError):
        return False
    if isinstance(fn, type):
        init = getattr(fn, "__init__", None)
        if init is None or not hasattr(init, "__wrapped__"):
            return False
        try:
            runtime = inspect.signature(init, follow_wrapped=False)
        except (TypeError, ValueError):
            return False
    elif not hasattr(fn, "__wrapped__"):
        return False
    return any(p.kind is p.VAR_KEYWORD for p in runtime.parameters.values())


