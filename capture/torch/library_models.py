"""A model built as its library builds it: a user's subclass of a ``transformers`` model
gets the model ``transformers`` itself gives, in the dtype the model says it has.

**The class-source heuristics.** ``transformers`` decides per class whether a model can
choose its experts implementation (``grouped_mm``, ``batched_mm``, or the eager loop over
the experts the routing hit) and its attention implementation by reading the source of
the module that defines the class (``PreTrainedModel._can_set_experts_implementation``
looks for ``@use_experts_implementation`` there) and caches the answer on the class. For
``class Mix(MixtralForCausalLM): pass`` in a workspace file that source is the user's
file, which never holds the decorator: the subclass falls back to the eager experts loop
(a Python loop over ``nonzero()``'s result, one iteration per expert the routing hit)
where ``MixtralForCausalLM(config)`` gets ``grouped_mm``, and the answer a class got
first is inherited by every later subclass. While a model is built, :func:`building`
answers these questions for a class outside the library as its nearest library
ancestor does (or as its own module does, when that says yes), so both give what
``transformers`` gives for its own class. What was adopted is listed in
``meta["library_model"]``.

**The model's own dtype.** ``from_pretrained`` and ``from_config`` build a model under
its config's ``dtype`` (``torch_dtype``): floating parameters are created in it (the
default dtype during the build), buffers computed in float32 stay so. A model class
called directly with that config is built in float32. Here the config's dtype is
honoured as ``from_config`` honours it: once the outermost ``PreTrainedModel.__init__``
of the build has its config, the rest of the build runs with that dtype as the default.
A recipe's ``dtype`` (``--dtype``) overrides it, for any model. ``meta["dtype"]`` says
which dtype the build ran under and where it came from.

``transformers`` is never imported here: the patches apply only when the model's code
imported it already. Torch is imported by the worker's framework module before this one.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Iterator

from ..graph.meta import CaptureMeta, LibraryModel

# The class-level questions transformers answers from a class's module source (and caches).
_CLASS_SOURCE_CHECKS = ("_can_set_experts_implementation", "_can_set_attn_implementation")
_LIBRARY = "transformers"


def _library_class(cls: type) -> type | None:
    """The nearest class of ``cls``'s MRO defined inside ``transformers``."""
    for base in cls.__mro__:
        module = getattr(base, "__module__", "") or ""
        if module == _LIBRARY or module.startswith(_LIBRARY + "."):
            return base
    return None


class LibraryBuild:
    """What one build adopted from the library (for ``meta``)."""

    def __init__(self, dtype: Any = None, dtype_source: str | None = None) -> None:
        self.dtype = dtype
        self.dtype_source = dtype_source
        self.adopted: dict[str, LibraryModel] = {}  # by the subclass's qualified name

    def meta(self) -> CaptureMeta:
        out = CaptureMeta()
        if self.dtype is not None:
            out["dtype"] = {"dtype": str(self.dtype).removeprefix("torch."), "source": self.dtype_source or "recipe"}
        if self.adopted:
            out["library_model"] = [_entry(name, entry) for name, entry in sorted(self.adopted.items())]
        return out


def _entry(name: str, adopted: LibraryModel) -> LibraryModel:
    entry: LibraryModel = {"class": name}
    entry.update(adopted)
    return entry


@contextmanager
def building(torch: Any, dtype: str | None) -> Iterator[LibraryBuild]:
    """Build a model (constructor or init factory) inside this block. ``dtype``: the
    recipe's (a floating dtype name) or ``None`` for the model's own."""
    record = LibraryBuild()
    if dtype is not None:
        record.dtype, record.dtype_source = getattr(torch, dtype), "recipe"
    default = torch.get_default_dtype()
    restore: list[tuple[Any, str, Any]] = []
    modeling = sys.modules.get(f"{_LIBRARY}.modeling_utils")
    pretrained = getattr(modeling, "PreTrainedModel", None) if modeling is not None else None
    if isinstance(pretrained, type):
        for name in _CLASS_SOURCE_CHECKS:
            original = pretrained.__dict__.get(name)
            if isinstance(original, classmethod):
                setattr(pretrained, name, classmethod(_as_library(original.__func__, name, record)))
                restore.append((pretrained, name, original))
        init = pretrained.__dict__.get("__init__")
        if callable(init) and dtype is None:
            # setattr: mypy refuses a plain assignment to a class's __init__.
            setattr(pretrained, "__init__", _config_dtype(init, torch, record))  # noqa: B010
            restore.append((pretrained, "__init__", init))
    if record.dtype is not None:
        torch.set_default_dtype(record.dtype)
    try:
        yield record
    finally:
        for owner, name, original in reversed(restore):
            setattr(owner, name, original)
        torch.set_default_dtype(default)


def _as_library(check: Any, name: str, record: LibraryBuild) -> Any:
    """``check`` (a class-source heuristic) answering for a class outside the library as
    its nearest library ancestor does, unless its own module already says yes."""

    def answer(cls: type) -> bool:
        own = check(cls)
        if own or cls.__module__.startswith(_LIBRARY + ".") or cls.__module__ == _LIBRARY:
            return own
        base = _library_class(cls)
        if base is None:
            return own
        got = bool(check(base))
        if got:
            # transformers caches on the class; the subclass now holds the library's answer
            setattr(cls, f"{name}_cached_value", True)
            entry = record.adopted.setdefault(f"{cls.__module__}.{cls.__qualname__}", {"as": base.__qualname__})
            entry.setdefault("checks", []).append(name.removeprefix("_can_set_"))
        return got

    return answer


def _config_dtype(init: Any, torch: Any, record: LibraryBuild) -> Any:
    """``PreTrainedModel.__init__`` that, for the first model of the build whose config
    names a floating ``dtype``, makes it the default dtype for the rest of the build."""

    def __init__(self: Any, config: Any, *args: Any, **kwargs: Any) -> None:
        if record.dtype is None:
            wanted = getattr(config, "dtype", None)
            if isinstance(wanted, str):
                wanted = getattr(torch, wanted, None)
            if isinstance(wanted, torch.dtype) and wanted.is_floating_point:
                record.dtype, record.dtype_source = wanted, f"{type(config).__name__}.dtype"
                torch.set_default_dtype(wanted)
        init(self, config, *args, **kwargs)

    return __init__
